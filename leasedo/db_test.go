package leasedo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// walFrames reads how many frames the WAL holds (a PASSIVE checkpoint's
// second column; it copies what it can, which changes nothing here).
func walFrames(t *testing.T, db *DB) int64 {
	t.Helper()
	var busy, frames, copied int64
	if err := db.ckpt.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		t.Fatal(err)
	}
	return frames
}

// Under steady writes a PASSIVE checkpoint alone never starts the WAL over
// (it grew by gigabytes): a commit always lands between its copy and the
// next write. The checkpointer does, past its bound.
func TestCheckpointBoundsTheWAL(t *testing.T) {
	s, _ := openTB(t, Options{})
	db := s.db
	db.walLimit = 1 << 20 // 1 MiB instead of 64
	in := s.NewInbox(0)
	defer in.Close()
	body := strings.Repeat("x", 20<<10)
	var written atomic.Int64
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	go func() { // steady load: a commit whenever the writer is free
		defer close(writerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := in.Enqueue(context.Background(), delivery(fmt.Sprintf("d%d", i), key, body)); err != nil {
				t.Error(err)
				return
			}
			written.Add(1)
		}
	}()
	var maxFrames int64
	for written.Load() < 4000 { // ~200 MB of WAL traffic
		for start := written.Load(); written.Load() < start+20; {
			runtime.Gosched()
		}
		db.checkpoint(true)
		maxFrames = max(maxFrames, walFrames(t, db))
	}
	close(stop)
	<-writerDone
	// Unbounded, the WAL held ~200 MB by now. Bounded, it holds the bound
	// plus what piled up while one checkpoint ran (a few MB when the
	// machine is busy).
	if maxFrames*db.pageSize > 32<<20 {
		t.Fatalf("WAL held %d frames (%d MiB) after %d writes: it is not bounded", maxFrames, maxFrames*db.pageSize>>20, written.Load())
	}
	t.Logf("WAL at most %d frames (%d KiB) over %d writes", maxFrames, maxFrames*db.pageSize>>10, written.Load())
}

// A reader that holds a snapshot (a backup, a slow dashboard) must not
// make the checkpointer hold the writer: commits go on while it waits,
// and the WAL starts over once the reader is done.
func TestCheckpointNeverHoldsWritesForAReader(t *testing.T) {
	ctx := context.Background()
	s, _ := openTB(t, Options{})
	db := s.db
	db.walLimit = 256 << 10
	in := s.NewInbox(0)
	defer in.Close()
	body := strings.Repeat("y", 100<<10)
	for i := 0; i < 10; i++ {
		mustEnqueue(t, in, delivery(fmt.Sprintf("a%d", i), key, body))
	}
	rtx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRow(`SELECT count(*) FROM deliveries`).Scan(&n); err != nil || n != 10 { // the snapshot is taken
		t.Fatalf("reader: %d %v", n, err)
	}
	for i := 0; i < 10; i++ {
		mustEnqueue(t, in, delivery(fmt.Sprintf("b%d", i), key, body))
	}
	done := make(chan struct{})
	go func() { db.checkpoint(true); close(done) }()
	// Commits still go through while the reader holds its snapshot.
	for i := 0; i < 5; i++ {
		mustEnqueue(t, in, delivery(fmt.Sprintf("c%d", i), key, body))
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second): // liveness, not speed: SQLite's busy timeout is 10 s
		t.Fatal("the checkpointer waited for the reader")
	}
	if err := rtx.Rollback(); err != nil {
		t.Fatal(err)
	}
	before := walFrames(t, db)
	db.checkpoint(true)
	mustEnqueue(t, in, delivery("after", key, "{}")) // this commit starts the WAL over
	if after := walFrames(t, db); after >= before || after*db.pageSize > 64<<10 {
		t.Fatalf("WAL frames %d → %d after the reader finished: it did not start over", before, after)
	}
}

// What runs on every metrics scrape and dashboard view reads an index
// range, never every delivery kept.
func TestHotQueriesUseAnIndex(t *testing.T) {
	s, _ := openTB(t, Options{})
	for name, q := range map[string]string{
		"DeliveryCounts": deliveryCountsSQL,
		"PendingKeys":    `SELECT DISTINCT tenant, repo FROM deliveries WHERE state = 'pending'`,
	} {
		rows, err := s.db.r.Query(`EXPLAIN QUERY PLAN ` + q)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if p := strings.Join(plan, "; "); !strings.Contains(p, "SEARCH deliveries USING") || strings.Contains(p, "SCAN") {
			t.Errorf("%s reads every row: plan %q", name, p)
		}
	}
}

// The checkpointer visits the database only while commits come in, yet
// the last commit before a quiet spell still reaches the database file
// (not only the WAL), with no write after it to prompt a pass.
func TestCheckpointerCopiesTheLastCommitBack(t *testing.T) {
	s, _ := openTB(t, Options{})
	in := s.NewInbox(0)
	defer in.Close()
	const n = 20
	for i := 0; i < n; i++ {
		mustEnqueue(t, in, delivery(fmt.Sprintf("q%d", i), key, strings.Repeat("z", 8<<10)))
	}
	// The database file alone, copied without its WAL, holds what was
	// checkpointed and nothing else.
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	var got int
	deadline := time.Now().Add(10 * time.Second) // liveness: a pass is due within 10 ms
	for {
		b, err := os.ReadFile(s.db.path)
		if err == nil {
			err = os.WriteFile(copyPath, b, 0o600)
		}
		if err == nil {
			got, err = countInFile(copyPath)
		}
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file holds %d of %d deliveries (%v): the last commits stayed in the WAL", got, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countInFile(path string) (int, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	err = db.QueryRow(`SELECT count(*) FROM deliveries`).Scan(&n)
	return n, err
}
