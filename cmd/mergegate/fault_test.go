package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/loadgen"
	"github.com/mergegate/mergegate/leasedo" // registers the "sqlite" driver too
	"github.com/mergegate/mergegate/webhook"
)

// longTests turns on the long variants of the fault tests.
func longTests() bool { return os.Getenv("MERGEGATE_LONG_TESTS") == "1" }

// kill -9 at random points of a load run (GitHub's payload examples, as
// the load tool cmd/mergegate-load sends them, over several repositories), round after
// round on the same database: after each kill the database passes
// integrity_check, and in the end every delivery that got a 202 is applied,
// none twice. 3 rounds; 20 with MERGEGATE_LONG_TESTS=1.
func TestKill9AtRandomPointsLosesNothing(t *testing.T) {
	rounds := 3
	if longTests() {
		rounds = 20
	}
	db := filepath.Join(t.TempDir(), "m.db")
	gen, err := loadgen.New("", 6, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Int64
	acked := map[string]bool{}
	var ackedMu sync.Mutex
	client := &http.Client{Timeout: 10 * time.Second}
	for r := 0; r < rounds; r++ {
		s := startServer(t, db, "--lease-ttl", "1s", "--lease-dead", "3s")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					i := next.Add(1) - 1
					event, id, body := gen.Delivery(0, i)
					req, _ := http.NewRequest(http.MethodPost, s.Pub+"/webhook", bytes.NewReader(body))
					webhook.SignDelivery(req.Header, e2eSecret, event, id, body)
					res, err := client.Do(req)
					if err != nil {
						continue // killed: not acknowledged
					}
					res.Body.Close()
					if res.StatusCode == http.StatusAccepted {
						ackedMu.Lock()
						acked[id] = true
						ackedMu.Unlock()
					}
				}
			}()
		}
		// A random point: while the engine applies what came before.
		time.Sleep(time.Duration(20+rand.IntN(300)) * time.Millisecond)
		s.Kill()
		close(stop)
		wg.Wait()
		if got := integrity(t, db); got != "ok" {
			t.Fatalf("round %d: integrity_check after kill -9 = %q", r, got)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no delivery was acknowledged")
	}

	// Restart: every acknowledged delivery is applied (the dead process's
	// lease goes stale after --lease-ttl), none twice.
	s := startServer(t, db, "--lease-ttl", "1s", "--lease-dead", "3s")
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := notDone(t, db, acked)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged deliveries not applied, e.g. %s", len(missing), len(acked), strings.Join(missing[:min(5, len(missing))], ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("exit after SIGTERM = %d", code)
	}
	if dups := duplicates(t, db); dups != "" {
		t.Fatalf("applied twice: %s", dups)
	}
	if got := integrity(t, db); got != "ok" {
		t.Fatalf("integrity_check at the end = %q", got)
	}
	t.Logf("%d rounds of kill -9; %d deliveries acknowledged (of %d sent), all applied once", rounds, len(acked), next.Load())
}

// integrity runs PRAGMA integrity_check on the (closed or live) database.
func integrity(t *testing.T, path string) string {
	t.Helper()
	db, err := leasedo.Open(context.Background(), path, leasedo.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.IntegrityCheck(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func readDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// notDone lists the acknowledged deliveries not applied yet (or missing).
func notDone(t *testing.T, path string, acked map[string]bool) []string {
	t.Helper()
	db := readDB(t, path)
	defer db.Close()
	rows, err := db.Query(`SELECT delivery_id, state FROM deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	state := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		state[id] = st
	}
	var out []string
	for id := range acked {
		if st, ok := state[id]; !ok {
			out = append(out, id+" (lost)")
		} else if st != leasedo.DeliveryDone {
			out = append(out, id+" ("+st+")")
		}
	}
	return out
}

// duplicates finds a PR queued twice or joined twice in a row (without
// leaving in between) in the audit log: what applying a delivery twice does.
func duplicates(t *testing.T, path string) string {
	t.Helper()
	db := readDB(t, path)
	defer db.Close()
	var k string
	err := db.QueryRow(`SELECT tenant || ' ' || repo || '#' || pr_number FROM queue GROUP BY tenant, repo, pr_number HAVING count(*) > 1 LIMIT 1`).Scan(&k)
	if err == nil {
		return k + " queued twice"
	}
	rows, err := db.Query(`SELECT tenant, repo, pr_number, action FROM audit ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	in := map[string]bool{}
	for rows.Next() {
		var tenant, repo, action string
		var pr int
		if err := rows.Scan(&tenant, &repo, &pr, &action); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s %s#%d", tenant, repo, pr)
		switch action {
		case leasedo.AuditJoin:
			if in[key] {
				return key + " joined twice"
			}
			in[key] = true
		case leasedo.AuditLeave, leasedo.AuditMerge:
			in[key] = false
		}
	}
	return ""
}
