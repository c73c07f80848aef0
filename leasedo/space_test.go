package leasedo

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mergegate/mergegate/migrations"
)

// payloadLike is a body that compresses about as a real payload does
// (S2 leaves it several KB): random hex between repeated JSON.
func payloadLike(rng *rand.Rand, id string) string {
	b := make([]byte, 3000)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return `{"id":"` + id + `","noise":"` + hex.EncodeToString(b) + `","pad":"` + fmt.Sprintf("%0*d", 8000, 0) + `"}`
}

// fileSize is the database file's size once the WAL is copied back into it.
func fileSize(t *testing.T, db *DB) int64 {
	t.Helper()
	if _, err := db.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(db.path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func autoVacuum(t *testing.T, db *DB) int {
	t.Helper()
	var mode int
	if err := db.r.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// applyAll applies every pending delivery of k (no queue action).
func applyAll(t *testing.T, s *Store, k Key) int {
	t.Helper()
	n := 0
	for {
		res, err := s.Drain(context.Background(), k, "test", 200, func(Delivery) (Batch, error) { return Batch{}, nil }, DrainPolicy{})
		if err != nil {
			t.Fatal(err)
		}
		n += len(res.Done)
		if !res.More {
			return n
		}
	}
}

// freeAll runs FreePages until it has nothing more to give back.
func freeAll(t *testing.T, db *DB) int64 {
	t.Helper()
	var total int64
	for {
		n, more, err := db.FreePages(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if !more {
			return total
		}
	}
}

func TestNewDatabaseHasIncrementalAutoVacuum(t *testing.T) {
	converted := 0
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "new.db"), Options{OnConvert: func(Conversion) { converted++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if m := autoVacuum(t, db); m != autoVacuumIncremental || converted != 0 {
		t.Fatalf("a new database: auto_vacuum %d, converted %d times; want %d, none", m, converted, autoVacuumIncremental)
	}
}

// A database created without auto-vacuum (every one before this version)
// is rewritten once at open, said before and after, and keeps its rows;
// the next open leaves it alone.
func TestOlderDatabaseIsConvertedOnceAtOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	q := url.Values{}
	q.Add("_pragma", "page_size(4096)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_txlock", "immediate")
	old, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	old.SetMaxOpenConns(1)
	if _, _, err := migrations.Apply(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
		INSERT INTO deliveries (delivery_id, event, action, tenant, repo, received_at, state, processed_at)
		SELECT 'old-' || i, 'push', '', '42', 'octo/hello', 0, 'done', 1 FROM n`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`INSERT INTO delivery_bodies (seq, body) SELECT seq, randomblob(6000) FROM deliveries`); err != nil {
		t.Fatal(err)
	}
	var mode int
	if err := old.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 0 {
		t.Fatalf("the old database has auto_vacuum %d (%v), want 0", mode, err)
	}
	old.Close()

	var reports []Conversion
	// The before and after reports (a slow machine's rewrite may report
	// its progress between them too).
	db, err := Open(ctx, path, Options{OnConvert: func(c Conversion) {
		if !c.Running {
			reports = append(reports, c)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if m := autoVacuum(t, db); m != autoVacuumIncremental {
		t.Fatalf("after open: auto_vacuum %d", m)
	}
	if len(reports) != 2 || reports[0].Done || !reports[1].Done || reports[1].Err != nil || reports[0].Bytes < 500*6000 || reports[1].BytesAfter <= 0 {
		t.Fatalf("conversion reports %+v: want one before (with the size) and one after", reports)
	}
	s := NewStore(db, Config{})
	if n := countRows(t, s, `SELECT count(*) FROM deliveries d JOIN delivery_bodies b USING (seq)`); n != 500 {
		t.Fatalf("%d deliveries with their bodies after the conversion, want 500", n)
	}
	if ok, err := db.IntegrityCheck(ctx); ok != "ok" || err != nil {
		t.Fatalf("integrity after the conversion: %q %v", ok, err)
	}
	db.Close()

	reports = nil
	db, err = Open(ctx, path, Options{OnConvert: func(c Conversion) { reports = append(reports, c) }})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(reports) != 0 {
		t.Fatalf("converted again on the second open: %+v", reports)
	}
}

// The file stops growing: deliveries arrive and are applied at a steady
// rate, and every minute (of the test's clock) the retention's prune, the
// bodies' drop and FreePages run as the engine's housekeeping runs them.
// Past the retention the file's size stays where it was; once deliveries
// stop, the pruned space is given back to the filesystem.
func TestFileStopsGrowingPastTheRetention(t *testing.T) {
	ctx := context.Background()
	s, clk := openTB(t, Options{})
	in := s.NewInbox(0)
	defer in.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const (
		perMinute     = 40
		retention     = 10 * time.Minute
		bodyRetention = 4 * time.Minute
		minutes       = 40
	)
	housekeeping := func() {
		now := clk.Now()
		if _, err := s.Prune(ctx, now.Add(-retention)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DropBodies(ctx, now.Add(-bodyRetention)); err != nil {
			t.Fatal(err)
		}
		freeAll(t, s.db)
	}
	sizes := make([]int64, 0, minutes)
	n := 0
	for m := range minutes {
		for range perMinute {
			n++
			id := fmt.Sprintf("d-%d", n)
			d := delivery(id, key, payloadLike(rng, id))
			d.ReceivedAt = clk.Now()
			mustEnqueue(t, in, d)
		}
		if got := applyAll(t, s, key); got != perMinute {
			t.Fatalf("minute %d: applied %d, want %d", m, got, perMinute)
		}
		clk.Advance(time.Minute)
		housekeeping()
		sizes = append(sizes, fileSize(t, s.db))
	}
	// The retention is 10 minutes: from minute 12 on, as much is pruned
	// each minute as arrives.
	settled := sizes[12]
	var peak int64
	for _, sz := range sizes[12:] {
		peak = max(peak, sz)
	}
	if peak > settled+settled/8 {
		t.Fatalf("the file grew past the retention: %d bytes at minute 12, %d at most after (sizes %v)", settled, peak, sizes)
	}
	if sizes[3] >= settled {
		t.Fatalf("the file did not grow while the retention filled: %v", sizes)
	}
	// Bodies are kept 4 minutes, rows 10: only the last minutes' bodies
	// are there.
	if bodies := countRows(t, s, `SELECT count(*) FROM delivery_bodies`); bodies > 5*perMinute {
		t.Fatalf("%d bodies kept, want those of the last 4 minutes at most (%d)", bodies, 4*perMinute)
	}
	if rows := countRows(t, s, `SELECT count(*) FROM deliveries`); rows < 9*perMinute {
		t.Fatalf("%d delivery rows kept, want those of the last 10 minutes", rows)
	}

	// Deliveries stop: past the retention everything is pruned and the
	// space goes back to the filesystem.
	clk.Advance(retention + time.Minute)
	housekeeping()
	if end := fileSize(t, s.db); end > settled/4 {
		t.Fatalf("with every delivery pruned the file is %d bytes, from %d: the space did not come back", end, settled)
	}
	total, free, err := s.db.Pages(ctx)
	if err != nil || free > total/freeSlack+1 {
		t.Fatalf("after FreePages %d of %d pages are free (%v), want at most 1/%d", free, total, err, freeSlack)
	}
	if ok, err := s.db.IntegrityCheck(ctx); ok != "ok" || err != nil {
		t.Fatalf("integrity: %q %v", ok, err)
	}
}

// What of each kind of delivery DropBodies keeps: an applied one loses its
// body once it is older than the cutoff and keeps its row and its events;
// a failed or a pending one keeps its body, until it is applied (a retry)
// and is, in turn, older than the cutoff.
func TestDropBodiesKeepsWhatIsStillToBeApplied(t *testing.T) {
	ctx := context.Background()
	s, clk := openTB(t, Options{})
	in := s.NewInbox(0)
	defer in.Close()
	mustEnqueue(t, in, delivery("applied", key, `{"kind":"applied"}`))
	mustEnqueue(t, in, delivery("failed", key, `{"kind":"failed"}`))
	if n := applyAllButFail(t, s, "failed"); n != 2 {
		t.Fatalf("drained %d, want 2", n)
	}
	other := Key{Tenant: key.Tenant, Repo: "octo/other"} // not drained yet
	mustEnqueue(t, in, delivery("pending", other, `{"kind":"pending"}`))
	clk.Advance(2 * time.Hour)
	mustEnqueue(t, in, delivery("recent", key, `{"kind":"recent"}`))
	if n := applyAll(t, s, key); n != 1 {
		t.Fatalf("applied %d, want the recent one", n)
	}
	hasBody := func(id string) bool {
		return countRows(t, s, `SELECT count(*) FROM delivery_bodies b JOIN deliveries d USING (seq) WHERE d.delivery_id = ?`, id) == 1
	}
	n, err := s.DropBodies(ctx, clk.Now().Add(-time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("DropBodies = %d, %v; want the applied one's body only", n, err)
	}
	for id, want := range map[string]bool{"applied": false, "failed": true, "pending": true, "recent": true} {
		if hasBody(id) != want {
			t.Errorf("%s: body kept %v, want %v", id, !want, want)
		}
	}
	if rows := countRows(t, s, `SELECT count(*) FROM deliveries`); rows != 4 {
		t.Fatalf("%d delivery rows, want all 4 (only bodies go)", rows)
	}
	if d := deliveryRow(t, s, "applied"); d.State != DeliveryDone || len(d.Body) != 0 {
		t.Fatalf("applied after its body went: %+v", d)
	}

	// The failed one is retried and applied, and so is the pending one;
	// they lose their bodies once applied longer ago than the cutoff.
	if _, err := s.RetryFailed(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := applyAll(t, s, key) + applyAll(t, s, other); n != 2 {
		t.Fatalf("applied %d after the retry, want 2", n)
	}
	if n, err := s.DropBodies(ctx, clk.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("DropBodies just after they were applied = %d, %v; want 0", n, err)
	}
	clk.Advance(2 * time.Hour)
	if n, err := s.DropBodies(ctx, clk.Now().Add(-time.Hour)); err != nil || n != 3 {
		t.Fatalf("DropBodies 2 h later = %d, %v; want 3 (failed, pending, recent)", n, err)
	}
	if n := countRows(t, s, `SELECT count(*) FROM delivery_bodies`); n != 0 {
		t.Fatalf("%d bodies left", n)
	}
}

// applyAllButFail drains key, marking failed the delivery named fail.
func applyAllButFail(t *testing.T, s *Store, fail string) int {
	t.Helper()
	res, err := s.Drain(context.Background(), key, "test", 100, func(d Delivery) (Batch, error) {
		if d.ID == fail {
			return Batch{}, fmt.Errorf("%s: malformed", d.ID)
		}
		return Batch{}, nil
	}, DrainPolicy{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Done)
}

// KeptDeliveries (what `mergegate export` writes): one repository's
// deliveries with their bodies, in arrival order, whatever their state,
// from since on; not another repository's, not one whose body went.
func TestKeptDeliveriesInArrivalOrderSince(t *testing.T) {
	ctx := context.Background()
	s, clk := openTB(t, Options{})
	in := s.NewInbox(0)
	defer in.Close()
	other := Key{Tenant: key.Tenant, Repo: "octo/other"}
	at := func(id string, k Key) {
		d := delivery(id, k, `{"id":"`+id+`"}`)
		d.ReceivedAt = clk.Now()
		mustEnqueue(t, in, d)
		clk.Advance(time.Minute)
	}
	at("old-applied", key)
	applyAll(t, s, key)
	at("a", key)
	at("elsewhere", other)
	at("b", key)
	clk.Advance(2 * time.Hour)
	if _, err := s.DropBodies(ctx, clk.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	list := func(since time.Time) string {
		var ids []string
		if err := s.KeptDeliveries(ctx, key, since, func(d Delivery) error {
			if string(d.Body) != `{"id":"`+d.ID+`"}` {
				t.Errorf("%s: body %q", d.ID, d.Body)
			}
			ids = append(ids, d.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(ids)
	}
	if got := list(time.Time{}); got != "[a b]" {
		t.Fatalf("kept: %s, want [a b] (old-applied's body went)", got)
	}
	if got := list(t0.Add(3 * time.Minute)); got != "[b]" {
		t.Fatalf("kept since b arrived: %s, want [b]", got)
	}
}
