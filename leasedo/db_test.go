package leasedo

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
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
		db.checkpoint()
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
	go func() { db.checkpoint(); close(done) }()
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
	db.checkpoint()
	mustEnqueue(t, in, delivery("after", key, "{}")) // this commit starts the WAL over
	if after := walFrames(t, db); after >= before || after*db.pageSize > 64<<10 {
		t.Fatalf("WAL frames %d → %d after the reader finished: it did not start over", before, after)
	}
}

// What runs on every metrics scrape, dashboard view, restart and prune
// reads an index range, never every delivery kept (the indexes on
// deliveries are partial: a query must name their state literally).
func TestHotQueriesUseAnIndex(t *testing.T) {
	s, _ := openTB(t, Options{})
	pending, _ := deliveriesWhere(key, DeliveryPending, 10)
	failed, _ := deliveriesWhere(key, DeliveryFailed, 10)
	for name, q := range map[string]string{
		"DeliveryCounts":      deliveryCountsSQL,
		"PendingKeys":         pendingKeysSQL,
		"Prune":               pruneBatchSQL,
		"DropBodies":          dropBodiesBatchSQL,
		"Deliveries(pending)": `SELECT d.seq FROM deliveries d ` + pending,
		"Deliveries(failed)":  `SELECT d.seq FROM deliveries d ` + failed,
	} {
		rows, err := s.db.r.Query(`EXPLAIN QUERY PLAN `+q, make([]any, strings.Count(q, "?"))...)
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
		if p := strings.Join(plan, "; "); !strings.Contains(p, "INDEX deliveries_") || strings.Contains(p, "SCAN") {
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
	deadline := time.Now().Add(10 * time.Second) // liveness: a pass is due within a second
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

// stopCheckpointer stops db's background checkpoints, so that the WAL only
// grows (nothing copies it back, so nothing starts it over); Close still works.
func stopCheckpointer(t *testing.T, db *DB) {
	t.Helper()
	close(db.stop)
	<-db.done
	db.stop, db.done = make(chan struct{}), make(chan struct{})
	close(db.done)
}

// walLength counts the frames written to the WAL since it started, from its
// size: valid while nothing checkpoints (stopCheckpointer).
func walLength(t *testing.T, db *DB) int64 {
	t.Helper()
	fi, err := os.Stat(db.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return (fi.Size() - 32) / (db.pageSize + 24)
}

// Storing and applying a delivery writes the pages its rows and their
// index entries live in, and no others: no sqlite_sequence page (no
// AUTOINCREMENT) and no index entry under a state no query reads (the
// partial indexes on deliveries). A commit writes each page it touched to
// the WAL whole, and a checkpoint copies it again: under load those
// writes are most of what the disk does (migration 0004). With incremental
// auto-vacuum a commit that takes a page (from the file's end or the
// freelist) also writes the pointer-map page that records its parent:
// about one page more to store a delivery alone (fewer per delivery in a
// group commit).
func TestCommitsWriteFewPages(t *testing.T) {
	ctx := context.Background()
	s, _ := openTB(t, Options{})
	stopCheckpointer(t, s.db)
	in := s.NewInbox(0)
	defer in.Close()
	keys := benchKeys(50)
	rnd := rand.New(rand.NewPCG(1, 2))
	pad := make([]byte, 1600)
	round := 0
	enqueueRound := func() { // one delivery per repository, one commit each
		round++
		for _, k := range keys {
			ev := join(1+round%20, fmt.Sprintf("sha-%d", round))
			ev.Tenant, ev.Repo = k.Tenant, k.Repo
			for i := range pad {
				pad[i] = byte(rnd.UintN(256))
			}
			body, _ := json.Marshal(struct {
				Event
				Pad string `json:"pad"`
			}{ev, fmt.Sprintf("%x", pad)})
			mustEnqueue(t, in, delivery(fmt.Sprintf("%s-%d", k.Repo, round), k, string(body)))
		}
	}
	drainRound := func() { // one repository per transaction
		for _, k := range keys {
			if res, err := s.Drain(ctx, k, "worker", 16, decodeEvent, DrainPolicy{}); err != nil || len(res.Done) != 1 || res.Done[0].Err != nil {
				t.Fatalf("drain %s: %+v %v", k, res, err)
			}
		}
	}
	for i := 0; i < 20; i++ { // the tables and indexes at a steady size
		enqueueRound()
		drainRound()
	}
	const rounds = 5
	var storing, applying int64
	for i := 0; i < rounds; i++ {
		f0 := walLength(t, s.db)
		enqueueRound()
		f1 := walLength(t, s.db)
		drainRound()
		storing, applying = storing+f1-f0, applying+walLength(t, s.db)-f1
	}
	stored := float64(storing) / float64(rounds*len(keys))
	applied := float64(applying) / float64(rounds*len(keys))
	t.Logf("pages written per delivery: %.1f to store it, %.1f to apply it", stored, applied)
	if stored > 8 || applied > 6.5 {
		t.Errorf("pages written per delivery: %.1f to store (want at most 8), %.1f to apply (want at most 6.5)", stored, applied)
	}
}

// Size is the file and its WAL, and grows as deliveries are stored.
func TestSizeCountsTheFileAndItsWAL(t *testing.T) {
	s, _ := openTB(t, Options{})
	stopCheckpointer(t, s.db) // the two files hold still between Size and Stat
	in := s.NewInbox(0)
	defer in.Close()
	before, err := s.db.Size()
	if err != nil || before <= 0 {
		t.Fatalf("Size = %d, %v", before, err)
	}
	for i := 0; i < 20; i++ {
		mustEnqueue(t, in, delivery(fmt.Sprintf("s%d", i), key, strings.Repeat("w", 20<<10)))
	}
	after, err := s.db.Size()
	main, _ := os.Stat(s.db.path)
	wal, _ := os.Stat(s.db.path + "-wal")
	if err != nil || after <= before || after != main.Size()+wal.Size() {
		t.Fatalf("Size %d -> %d (%v), want it to grow and be the file (%d) and the WAL (%d)", before, after, err, main.Size(), wal.Size())
	}
}

// A webhook's commit that waits for the writer goes before the ordinary
// writes already waiting (the engine's), so a 202 waits for at most the
// transaction that holds the writer.
func TestAWaitingCommitGoesFirst(t *testing.T) {
	s, _ := openTB(t, Options{})
	in := s.NewInbox(0)
	defer in.Close()
	ctx := context.Background()
	release := make(chan struct{})
	holding := make(chan struct{})
	go s.db.write(ctx, func(tx *wtx) error { //nolint:errcheck
		close(holding)
		<-release
		return nil
	})
	<-holding
	var wg sync.WaitGroup
	var sawIt atomic.Int64 // engine writes that found the delivery already committed
	waiters := func() int {
		s.db.turns.mu.Lock()
		defer s.db.turns.mu.Unlock()
		return len(s.db.turns.first) + len(s.db.turns.rest)
	}
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.db.write(ctx, func(tx *wtx) error { //nolint:errcheck
				var n int64
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE delivery_id = 'first'`).Scan(&n); err != nil {
					t.Error(err)
				}
				sawIt.Add(n)
				return nil
			})
		}()
		for waiters() != i+1 {
			runtime.Gosched()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := in.Enqueue(ctx, delivery("first", key, "{}")); err != nil {
			t.Error(err)
		}
	}()
	for !s.db.turns.firstWaiting() {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if n := sawIt.Load(); n != 3 {
		t.Fatalf("%d of the 3 engine writes waiting before it ran after the webhook's commit, want all", n)
	}
}

// firstWaiting reports whether a "first" request (a webhook's commit)
// waits for the writer.
func (g *writerTurns) firstWaiting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.first) > 0
}

// A database in a folder whose name holds '#', '?' or '%' is that file,
// not another one cut at the character (SQLite's file: URI).
func TestOpenPathWithURICharacters(t *testing.T) {
	for _, dir := range []string{"a#b", "why?", "50%25"} {
		d := filepath.Join(t.TempDir(), dir)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(d, "mergegate.db")
		db, err := Open(context.Background(), path, Options{})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		db.Close()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: the database is not at %s: %v", dir, path, err)
		}
	}
}
