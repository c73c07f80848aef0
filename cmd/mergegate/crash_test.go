package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// kill -9 in the middle of a stream of deliveries, then restart: every
// delivery that got a 202 is applied exactly once.
func TestKill9LosesNoAcknowledgedDelivery(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	s := startServer(t, db)
	const repos, perRepo, senders = 4, 60, 8
	var acked sync.Map // delivery id -> "repo#pr"
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < senders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := int(sent.Add(1))
				if n > repos*perRepo {
					return
				}
				repo := fmt.Sprintf("octo/r%d", n%repos)
				pr := n
				id := fmt.Sprintf("kill9-%d", n)
				code, err := deliver(s.pub+"/webhook", id, repo, pr)
				if err == nil && code == 202 {
					acked.Store(id, fmt.Sprintf("%s#%d", repo, pr))
				}
			}
		}()
	}
	// Let part of the stream through, then kill -9 while it runs.
	deadline := time.Now().Add(10 * time.Second)
	for sent.Load() < repos*perRepo/2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck
	<-s.done
	close(stop)
	wg.Wait()

	want := map[string]bool{}
	acked.Range(func(_, v any) bool { want[v.(string)] = true; return true })
	if len(want) == 0 {
		t.Fatal("no delivery was acknowledged before the kill")
	}
	// A lease the killed process held stays until its TTL passes (the
	// seed's rule: a stale lease is taken over); a short TTL keeps the test short.
	s2 := startServer(t, db, "--lease-ttl", "1s", "--lease-dead", "3s")
	deadline = time.Now().Add(20 * time.Second)
	for {
		got, dup := map[string]bool{}, ""
		for r := 0; r < repos; r++ {
			repo := fmt.Sprintf("octo/r%d", r)
			res := call(t, "GET", fmt.Sprintf("%s/queue?tenant=5&repo=%s", s2.admin, repo), "", nil)
			q, _ := res.body["queue"].([]any)
			for _, e := range q {
				k := fmt.Sprintf("%s#%d", repo, int(e.(map[string]any)["prNumber"].(float64)))
				if got[k] {
					dup = k
				}
				got[k] = true
			}
			audit, _ := res.body["audit"].([]any)
			joins := map[float64]int{}
			for _, a := range audit {
				am := a.(map[string]any)
				if am["action"] == "join" {
					joins[am["prNumber"].(float64)]++
					if joins[am["prNumber"].(float64)] > 1 {
						dup = fmt.Sprintf("%s#%v joined twice", repo, am["prNumber"])
					}
				}
			}
		}
		if dup != "" {
			t.Fatalf("applied twice: %s", dup)
		}
		missing := []string{}
		for k := range want {
			if !got[k] {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			t.Logf("%d deliveries acknowledged before kill -9, all applied once after restart (%d applied in all)", len(want), len(got))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acknowledged deliveries never applied: %s", len(missing), strings.Join(missing[:min(5, len(missing))], ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := s2.stop(); code != 0 {
		t.Fatalf("exit after SIGTERM = %d", code)
	}
}
