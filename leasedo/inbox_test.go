package leasedo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
)

// openTB is newStore for any testing.TB (benchmarks and fuzz targets too),
// with Options to choose the sync mode.
func openTB(tb testing.TB, opt Options) (*Store, *ManualClock) {
	tb.Helper()
	db := openDB(tb, opt)
	clk := NewManualClock(t0)
	return NewStore(db, Config{TTL: 30 * time.Second, Dead: 90 * time.Second, Clock: clk}), clk
}

func delivery(id string, k Key, body string) Delivery {
	return Delivery{ID: id, Event: "pull_request", Action: "labeled", Tenant: k.Tenant, Repo: k.Repo, Body: []byte(body), ReceivedAt: t0}
}

// blockedIn counts the goroutines parked (select, channel send or receive)
// with fn on their stack.
func blockedIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		parked := strings.Contains(header, "[select") || strings.Contains(header, "[chan send") || strings.Contains(header, "[chan receive")
		if parked && strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

// waitFor spins (no sleeping) until cond holds; it fails after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func mustEnqueue(t *testing.T, in *Inbox, d Delivery) {
	t.Helper()
	dup, err := in.Enqueue(context.Background(), d)
	if err != nil || dup {
		t.Fatalf("enqueue %s: dup=%v err=%v", d.ID, dup, err)
	}
}

// seqOf returns the inbox sequence number of delivery id.
func seqOf(t *testing.T, s *Store, id string) int64 {
	t.Helper()
	var seq int64
	if err := s.db.r.QueryRow(`SELECT seq FROM deliveries WHERE delivery_id = ?`, id).Scan(&seq); err != nil {
		t.Fatalf("seq of %s: %v", id, err)
	}
	return seq
}

// deliveryRow reads one delivery by id, whatever its state.
func deliveryRow(t *testing.T, s *Store, id string) Delivery {
	t.Helper()
	ds, err := s.deliveries(context.Background(), true, `WHERE d.delivery_id = ?`, id)
	if err != nil || len(ds) != 1 {
		t.Fatalf("delivery %s: %v %v", id, ds, err)
	}
	return ds[0]
}

func countRows(t testing.TB, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.r.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Group commit, made deterministic: while the test holds the single writer
// connection, the committer takes the first request and blocks on the
// connection; the next 100 requests pile up in the channel. Released, they
// are all answered from one transaction: the WAL grows by a handful of
// frames, not by one commit per request. Duplicates within that batch and
// across batches answer duplicate=true and are stored once.
func TestInboxGroupCommit(t *testing.T) {
	// SQLite only: it holds the one writer connection to line commits up.
	sqliteOnly(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		// No automatic checkpoint on the writer, so the WAL only grows.
		if _, err := s.db.w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
			t.Fatal(err)
		}
		in := s.NewInbox(0)
		defer in.Close()
		mustEnqueue(t, in, delivery("stored", key, "original"))

		wal := s.db.Path() + "-wal"
		st, err := os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		walBefore := st.Size()

		hold, err := s.db.w.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		type answer struct {
			id  string
			dup bool
			err error
		}
		answers := make(chan answer, 128)
		send := func(id, body string) {
			go func() {
				dup, err := in.Enqueue(ctx, delivery(id, key, body))
				answers <- answer{id, dup, err}
			}()
		}
		waits := s.db.w.Stats().WaitCount
		parked := blockedIn("leasedo.(*Inbox).Enqueue(") // other tests' leftovers, if any
		send("first", "batch 1")
		waitFor(t, "the committer to block on the held writer", func() bool { return s.db.w.Stats().WaitCount > waits })

		sent := 1
		for i := 0; i < 96; i++ {
			send(fmt.Sprintf("b-%02d", i), "batch 2")
		}
		send("b-00", "batch 2 again") // duplicate within the batch
		send("b-01", "batch 2 again") // duplicate within the batch
		send("first", "duplicate")    // duplicate of batch 1
		send("stored", "duplicate")   // duplicate of an earlier commit
		sent += 100
		waitFor(t, "101 callers to wait in Enqueue", func() bool { return blockedIn("leasedo.(*Inbox).Enqueue(")-parked == sent })
		select {
		case a := <-answers:
			t.Fatalf("%s answered while the writer was held (dup=%v err=%v)", a.id, a.dup, a.err)
		default:
		}
		if err := hold.Rollback(); err != nil {
			t.Fatal(err)
		}

		nonDup, dup := map[string]int{}, map[string]int{}
		for i := 0; i < sent; i++ {
			a := <-answers
			if a.err != nil {
				t.Fatalf("enqueue %s: %v", a.id, a.err)
			}
			if a.dup {
				dup[a.id]++
			} else {
				nonDup[a.id]++
			}
		}
		for id, n := range nonDup {
			if n != 1 {
				t.Errorf("%s stored %d times", id, n)
			}
		}
		if len(nonDup) != 97 { // first + b-00..b-95
			t.Errorf("%d ids answered as stored, want 97", len(nonDup))
		}
		if fmt.Sprint(dup) != "map[b-00:1 b-01:1 first:1 stored:1]" {
			t.Errorf("duplicates answered: %v", dup)
		}
		if n := countRows(t, s, `SELECT count(*) FROM deliveries`); n != 98 { // stored, first, b-00..b-95
			t.Errorf("%d deliveries stored, want 98", n)
		}
		for id, want := range map[string]string{"stored": "original", "first": "batch 1"} {
			if got := string(deliveryRow(t, s, id).Body); got != want {
				t.Errorf("%s body = %q, want %q (a duplicate overwrote it)", id, got, want)
			}
		}

		st, err = os.Stat(wal)
		if err != nil {
			t.Fatal(err)
		}
		frames := (st.Size() - walBefore) / (4096 + 24)
		t.Logf("101 enqueues wrote %d WAL frames", frames)
		if frames >= 60 {
			t.Fatalf("101 enqueues wrote %d WAL frames: they were not committed together", frames)
		}
	})
}

// Free-running concurrent Enqueue: every call is answered, every id is
// stored once, and exactly one call per id reports it stored.
func TestInboxConcurrentEnqueue(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(16) // small batches: many transactions overlap with callers
		defer in.Close()
		const ids, copies = 120, 3
		var mu sync.Mutex
		stored := map[string]int{}
		var wg sync.WaitGroup
		for c := 0; c < copies; c++ {
			for i := 0; i < ids; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("d-%03d", i)
					dup, err := in.Enqueue(ctx, delivery(id, key, id))
					if err != nil {
						t.Errorf("enqueue %s: %v", id, err)
						return
					}
					mu.Lock()
					if !dup {
						stored[id]++
					}
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		if len(stored) != ids {
			t.Fatalf("%d ids reported stored, want %d", len(stored), ids)
		}
		for id, n := range stored {
			if n != 1 {
				t.Errorf("%s reported stored %d times", id, n)
			}
		}
		if n := countRows(t, s, `SELECT count(DISTINCT delivery_id) FROM deliveries WHERE state = 'pending'`); n != ids {
			t.Fatalf("%d deliveries stored, want %d", n, ids)
		}
		if p, _ := s.Pending(ctx, key, 1000); len(p) != ids {
			t.Fatalf("pending = %d, want %d", len(p), ids)
		}
	})
}

func TestInboxEnqueueValidation(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		for _, d := range []Delivery{{Event: "push"}, {ID: "x"}} {
			if _, err := in.Enqueue(ctx, d); err == nil {
				t.Errorf("enqueue %+v: want an error", d)
			}
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		// A cancelled caller either gets ctx.Err() (not handed over) or its
		// committed answer; never a hang, never a half state.
		if dup, err := in.Enqueue(cancelled, delivery("c", key, "")); dup || (err != nil && !errors.Is(err, context.Canceled)) {
			t.Fatalf("cancelled enqueue: dup=%v err=%v", dup, err)
		}
		// An empty body (nil) is stored as an empty body, not refused by the
		// NOT NULL constraint, which would fail the whole group-commit batch.
		if dup, err := in.Enqueue(ctx, Delivery{ID: "nil-body", Event: "ping"}); err != nil || dup {
			t.Fatalf("enqueue with a nil body: dup=%v err=%v", dup, err)
		}
	})
}

// enqueueOrHang runs Enqueue and fails the test if it does not return.
func enqueueOrHang(t *testing.T, in *Inbox, d Delivery) (bool, error) {
	t.Helper()
	type answer struct {
		dup bool
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		dup, err := in.Enqueue(context.Background(), d)
		ch <- answer{dup, err}
	}()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case a := <-ch:
		return a.dup, a.err
	case <-timeout.C:
		t.Fatalf("Enqueue(%s) never returned: the request was handed to a stopped committer", d.ID)
		return false, nil
	}
}

func TestInboxEnqueueAfterClose(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		mustEnqueue(t, in, delivery("before", key, ""))
		in.Close()
		in.Close() // idempotent
		// Enqueue's select sees both a free channel slot and the closed quit
		// channel: it must pick ErrInboxClosed every time, not 1 time in 2.
		for i := 0; i < 64; i++ {
			dup, err := enqueueOrHang(t, in, delivery(fmt.Sprintf("after-%d", i), key, ""))
			if !errors.Is(err, ErrInboxClosed) || dup {
				t.Fatalf("enqueue %d after close: dup=%v err=%v, want ErrInboxClosed", i, dup, err)
			}
		}
		if n := countRows(t, s, `SELECT count(*) FROM deliveries`); n != 1 {
			t.Fatalf("%d deliveries stored, want only the one before Close", n)
		}
	})
}

// Enqueue racing Close: every call returns; those answered stored are
// stored, those answered ErrInboxClosed are not.
func TestInboxCloseWhileEnqueueing(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		for round := 0; round < 5; round++ {
			s, _ := openTB(t, Options{})
			in := s.NewInbox(8)
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok := map[string]bool{}
			for i := 0; i < 40; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("r%d-%d", round, i)
					dup, err := in.Enqueue(context.Background(), delivery(id, key, ""))
					switch {
					case err == nil && !dup:
						mu.Lock()
						ok[id] = true
						mu.Unlock()
					case errors.Is(err, ErrInboxClosed):
					default:
						t.Errorf("enqueue %s: dup=%v err=%v", id, dup, err)
					}
				}()
			}
			in.Close()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			timeout := time.NewTimer(10 * time.Second)
			select {
			case <-done:
			case <-timeout.C:
				t.Fatalf("round %d: an Enqueue racing Close never returned", round)
			}
			timeout.Stop()
			if n := countRows(t, s, `SELECT count(*) FROM deliveries`); n != len(ok) {
				t.Fatalf("round %d: %d stored, %d answered stored", round, n, len(ok))
			}
		}
	})
}

func TestPendingOrderAndKeys(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		a := Key{Tenant: "42", Repo: "octo/a"}
		b := Key{Tenant: "42", Repo: "octo/b"}
		c := Key{Tenant: "7", Repo: "octo/a"}
		// Arrival order interleaves keys; received_at is deliberately not in
		// arrival order: Pending follows arrival (seq), not GitHub's timestamps.
		for i, k := range []Key{a, b, a, c, a, b} {
			d := delivery(fmt.Sprintf("d%d", i), k, "")
			d.ReceivedAt = t0.Add(-time.Duration(i) * time.Minute)
			mustEnqueue(t, in, d)
		}
		ids := func(ds []Delivery) string {
			var out []string
			for _, d := range ds {
				out = append(out, d.ID)
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			k     Key
			limit int
			want  string
		}{
			{a, 10, "d0,d2,d4"},
			{a, 2, "d0,d2"},
			{b, 10, "d1,d5"},
			{c, 10, "d3"},
			{Key{Tenant: "42", Repo: "octo/none"}, 10, ""},
		} {
			p, err := s.Pending(ctx, tc.k, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p); got != tc.want {
				t.Errorf("Pending(%s, %d) = %s, want %s", tc.k, tc.limit, got, tc.want)
			}
			for i := 1; i < len(p); i++ {
				if p[i].Seq <= p[i-1].Seq {
					t.Errorf("Pending(%s) not in seq order: %d after %d", tc.k, p[i].Seq, p[i-1].Seq)
				}
			}
		}
		p, _ := s.Pending(ctx, a, 1)
		if d := p[0]; d.Event != "pull_request" || d.Action != "labeled" || d.State != DeliveryPending || !d.ReceivedAt.Equal(t0) || d.Attempts != 0 {
			t.Errorf("pending delivery fields: %+v", d)
		}

		keysOf := func() string {
			ks, err := s.PendingKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, k := range ks {
				out = append(out, k.String())
			}
			sort.Strings(out)
			return strings.Join(out, " ")
		}
		if got := keysOf(); got != "42:octo/a 42:octo/b 7:octo/a" {
			t.Fatalf("PendingKeys = %s", got)
		}
		// Once c's only delivery is done and b's are failed, only a remains.
		l, err := s.Acquire(ctx, c, "worker")
		if err != nil {
			t.Fatal(err)
		}
		if _, applied, err := s.ApplyDelivery(ctx, l, seqOf(t, s, "d3"), Batch{}); err != nil || !applied {
			t.Fatalf("apply d3: %v %v", applied, err)
		}
		failAll(t, s, b, "d1", "d5")
		if got := keysOf(); got != "42:octo/a" {
			t.Fatalf("PendingKeys = %s, want only 42:octo/a", got)
		}
		counts, err := s.DeliveryCounts(ctx)
		if err != nil || fmt.Sprint(counts) != "map[failed:2 pending:3]" { // done ones are not counted
			t.Fatalf("DeliveryCounts = %v %v", counts, err)
		}
	})
}

// A delivery is applied exactly once: the second ApplyDelivery of the same
// seq answers applied=false and writes nothing.
func TestApplyDeliveryOnce(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		mustEnqueue(t, in, delivery("d1", key, ""))
		seq := seqOf(t, s, "d1")
		gate := Event{EventType: "check_run", Tenant: key.Tenant, Repo: key.Repo, Action: "completed", Op: OpRecheck, Details: &Details{Sha: "a", GateResult: forge.GateSuccess}}
		b := Batch{Events: []Event{join(1, "a"), gate}, Track: []Key{key}}

		for i, want := range []bool{true, false, false} {
			l, err := s.Acquire(ctx, key, "worker")
			if err != nil {
				t.Fatal(err)
			}
			res, applied, err := s.ApplyDelivery(ctx, l, seq, b)
			if err != nil || applied != want {
				t.Fatalf("apply #%d: applied=%v err=%v, want applied=%v", i+1, applied, err, want)
			}
			if want && (len(res) != 2 || res[0].Result != ResultJoined || res[1].Result != ResultGateRecorded || res[1].QueueLength != 1) {
				t.Fatalf("apply #%d results: %+v", i+1, res)
			}
			if !want && len(res) != 0 {
				t.Fatalf("apply #%d of an applied delivery returned results %+v", i+1, res)
			}
			if ok, err := s.Release(ctx, l); !ok || err != nil {
				t.Fatalf("release: %v %v", ok, err)
			}
		}
		if ev, _ := s.Events(ctx, key); len(ev) != 2 {
			t.Fatalf("events = %d, want 2 (no double apply)", len(ev))
		}
		if au, _ := s.Audit(ctx, key); len(au) != 1 {
			t.Fatalf("audit = %+v, want join once (a recheck is not audited)", au)
		}
		d := deliveryRow(t, s, "d1")
		if d.State != DeliveryDone || d.Attempts != 1 {
			t.Fatalf("delivery after apply: state=%s attempts=%d", d.State, d.Attempts)
		}
		if _, _, err := s.ApplyDelivery(ctx, nil, seq, b); err == nil {
			t.Fatal("ApplyDelivery without a lease: want an error")
		}
		l, _ := s.Acquire(ctx, key, "worker")
		if _, _, err := s.ApplyDelivery(ctx, l, 999999, Batch{}); err == nil {
			t.Fatal("ApplyDelivery of an unknown seq: want an error")
		}
	})
}

// A batch is one transaction: an event that fails (another key's, invalid,
// or failing inside its handler) rolls back the events before it, and the
// delivery stays pending.
func TestApplyDeliveryAtomic(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		mustEnqueue(t, in, delivery("d1", key, ""))
		seq := seqOf(t, s, "d1")
		other := Event{EventType: "pull_request", Tenant: "7", Repo: key.Repo, Action: "opened", Op: OpJoin, PRNumber: 2, Details: &Details{Sha: "b"}}
		noSha := Event{EventType: "pull_request", Tenant: key.Tenant, Repo: key.Repo, Action: "opened", Op: OpJoin, PRNumber: 3}
		bad := Event{EventType: "status", Tenant: key.Tenant, Repo: key.Repo, Details: &Details{Sha: "a", GateResult: "green"}}
		yes := true
		l, err := s.Acquire(ctx, key, "worker")
		if err != nil {
			t.Fatal(err)
		}
		for name, second := range map[string]Event{"other key": other, "handler error": noSha, "invalid": bad} {
			_, applied, err := s.ApplyDelivery(ctx, l, seq, Batch{Events: []Event{join(1, "a"), second}, Track: []Key{key}, Suspend: &yes})
			if err == nil || applied {
				t.Fatalf("%s: applied=%v err=%v, want an error", name, applied, err)
			}
			if ev, _ := s.Events(ctx, key); len(ev) != 0 {
				t.Fatalf("%s: %d events written by a failed batch", name, len(ev))
			}
			if q, _ := s.Queue(ctx, key); len(q) != 0 {
				t.Fatalf("%s: queue %+v written by a failed batch", name, q)
			}
			if tr, _ := s.Tracked(ctx); len(tr) != 0 {
				t.Fatalf("%s: tracked %+v by a failed batch", name, tr)
			}
			if sus, _ := s.Suspended(ctx, key.Tenant); sus {
				t.Fatalf("%s: suspended by a failed batch", name)
			}
			if d := deliveryRow(t, s, "d1"); d.State != DeliveryPending || d.Attempts != 0 {
				t.Fatalf("%s: delivery %s/%d after a failed batch", name, d.State, d.Attempts)
			}
		}
	})
}

func TestApplyDeliveryLostLease(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		otherKey := Key{Tenant: key.Tenant, Repo: "octo/other"}
		mustProcess(t, s, Event{EventType: "pull_request", Tenant: otherKey.Tenant, Repo: otherKey.Repo, Action: "opened", Op: OpJoin, PRNumber: 9, Details: &Details{Sha: "z"}})
		mustEnqueue(t, in, delivery("d1", key, ""))
		seq := seqOf(t, s, "d1")

		l1, err := s.Acquire(ctx, key, "worker-1")
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(31 * time.Second) // l1 goes stale while worker-1 talks to GitHub
		l2, err := s.Acquire(ctx, key, "worker-2")
		if err != nil {
			t.Fatal(err)
		}
		yes := true
		b := Batch{Events: []Event{join(1, "a")}, Track: []Key{key}, Forget: []Key{otherKey}, Suspend: &yes}
		res, applied, err := s.ApplyDelivery(ctx, l1, seq, b)
		if !errors.Is(err, ErrLeaseLost) || applied || res != nil {
			t.Fatalf("apply under a lost lease: res=%v applied=%v err=%v, want ErrLeaseLost", res, applied, err)
		}
		if ev, _ := s.Events(ctx, key); len(ev) != 0 {
			t.Fatalf("events written under a lost lease: %+v", ev)
		}
		if q, _ := s.Queue(ctx, otherKey); len(q) != 1 {
			t.Fatalf("forget ran under a lost lease: other queue %+v", q)
		}
		if tr, _ := s.Tracked(ctx); len(tr) != 0 {
			t.Fatalf("track ran under a lost lease: %+v", tr)
		}
		if sus, _ := s.Suspended(ctx, key.Tenant); sus {
			t.Fatal("suspend ran under a lost lease")
		}
		if d := deliveryRow(t, s, "d1"); d.State != DeliveryPending || d.Attempts != 0 {
			t.Fatalf("delivery after a lost-lease apply: %s/%d", d.State, d.Attempts)
		}
		if st, _ := s.Check(ctx, key); !st.Locked || st.HeldBy != "worker-2" {
			t.Fatalf("the new holder's lease: %+v", st)
		}
		// The new holder applies it, once.
		if _, applied, err := s.ApplyDelivery(ctx, l2, seq, b); err != nil || !applied {
			t.Fatalf("apply by the new holder: %v %v", applied, err)
		}
		if q, _ := s.Queue(ctx, key); len(q) != 1 {
			t.Fatalf("queue after the new holder applied: %+v", q)
		}
	})
}

func TestPrune(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		for _, id := range []string{"old", "new", "failed", "pending"} {
			mustEnqueue(t, in, delivery(id, key, ""))
		}
		apply := func(id string) {
			l, err := s.Acquire(ctx, key, "worker")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(ctx, l) //nolint:errcheck
			if _, applied, err := s.ApplyDelivery(ctx, l, seqOf(t, s, id), Batch{}); err != nil || !applied {
				t.Fatalf("apply %s: %v %v", id, applied, err)
			}
		}
		apply("old") // processed at t0
		clk.Advance(2 * time.Hour)
		apply("new") // processed at t0+2h
		failAll(t, s, key, "failed")
		left := func() string {
			var ids []string
			rows, err := s.db.r.Query(`SELECT delivery_id FROM deliveries ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				rows.Scan(&id) //nolint:errcheck
				ids = append(ids, id)
			}
			return strings.Join(ids, ",")
		}
		for _, tc := range []struct {
			before time.Time
			n      int64
			left   string
		}{
			{t0, 0, "old,new,failed,pending"}, // strictly older than the cutoff
			{t0.Add(time.Hour), 1, "new,failed,pending"},
			{t0.Add(2*time.Hour + time.Millisecond), 1, "failed,pending"},
			{t0.Add(1000 * time.Hour), 0, "failed,pending"}, // never failed or pending ones
		} {
			n, err := s.Prune(ctx, tc.before)
			if err != nil || n != tc.n || left() != tc.left {
				t.Fatalf("Prune(%v) = %d %v, left %s; want %d, left %s", tc.before, n, err, left(), tc.n, tc.left)
			}
		}
		// More than one internal batch of 1000.
		if _, err := s.db.w.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2345)
		INSERT INTO deliveries (delivery_id, event, action, tenant, repo, received_at, state, processed_at)
		SELECT 'bulk-' || i, 'push', '', '42', 'octo/hello', 0, 'done', 1 FROM n`); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Prune(ctx, t0); n != 2345 || err != nil || left() != "failed,pending" {
			t.Fatalf("bulk prune: %d %v, left %s", n, err, left())
		}
	})
}

// Track, Suspend, Forget and ForgetTenant as installation deliveries apply
// them: only the named repositories (or tenant) lose their rows.
func TestBatchTrackForgetSuspend(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		a := Key{Tenant: "42", Repo: "octo/a"}
		b := Key{Tenant: "42", Repo: "octo/b"}
		c := Key{Tenant: "7", Repo: "octo/a"} // same repo name, other tenant
		inst42 := Key{Tenant: "42"}
		inst7 := Key{Tenant: "7"}

		n := 0
		applyInst := func(k Key, bt Batch) {
			t.Helper()
			n++
			id := fmt.Sprintf("inst-%d", n)
			mustEnqueue(t, in, Delivery{ID: id, Event: "installation", Tenant: k.Tenant, Body: []byte("{}")})
			l, err := s.Acquire(ctx, k, "worker")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(ctx, l) //nolint:errcheck
			if _, applied, err := s.ApplyDelivery(ctx, l, seqOf(t, s, id), bt); err != nil || !applied {
				t.Fatalf("apply %s: %v %v", id, applied, err)
			}
		}
		tracked := func() string {
			tr, err := s.Tracked(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, x := range tr {
				out = append(out, fmt.Sprintf("%s/%v", x.Key, x.Suspended))
			}
			return strings.Join(out, " ")
		}

		applyInst(inst42, Batch{Track: []Key{a, b, {Tenant: "42"}}}) // the empty repo is skipped
		applyInst(inst42, Batch{Track: []Key{a}})                    // idempotent
		applyInst(inst7, Batch{Track: []Key{c}})
		if got := tracked(); got != "42:octo/a/false 42:octo/b/false 7:octo/a/false" {
			t.Fatalf("tracked = %s", got)
		}
		for i, k := range []Key{a, b, c} {
			mustProcess(t, s, Event{EventType: "pull_request", Tenant: k.Tenant, Repo: k.Repo, Action: "opened", Op: OpJoin, PRNumber: 1, Details: &Details{Sha: "s"}})
			mustEnqueue(t, in, delivery(fmt.Sprintf("pending-%d", i), k, ""))
		}
		if _, err := s.Acquire(ctx, a, "worker"); err != nil { // a lease held on a when it is forgotten
			t.Fatal(err)
		}

		yes, no := true, false
		applyInst(inst42, Batch{Suspend: &yes})
		if sus, _ := s.Suspended(ctx, "42"); !sus {
			t.Fatal("tenant 42 not suspended")
		}
		if sus, _ := s.Suspended(ctx, "7"); sus {
			t.Fatal("tenant 7 suspended by tenant 42's delivery")
		}
		if got := tracked(); got != "42:octo/a/true 42:octo/b/true 7:octo/a/false" {
			t.Fatalf("tracked after suspend = %s", got)
		}
		applyInst(inst42, Batch{Suspend: &no})
		if sus, _ := s.Suspended(ctx, "42"); sus {
			t.Fatal("tenant 42 still suspended after resume")
		}
		applyInst(inst42, Batch{Suspend: &yes})

		intact := func(k Key) {
			t.Helper()
			q, _ := s.Queue(ctx, k)
			ev, _ := s.Events(ctx, k)
			au, _ := s.Audit(ctx, k)
			p, _ := s.Pending(ctx, k, 10)
			if len(q) != 1 || len(ev) != 1 || len(au) != 1 || len(p) != 1 {
				t.Fatalf("%s touched: queue=%d events=%d audit=%d pending=%d", k, len(q), len(ev), len(au), len(p))
			}
		}
		forgotten := func(k Key, pendingID string) {
			t.Helper()
			q, _ := s.Queue(ctx, k)
			ev, _ := s.Events(ctx, k)
			au, _ := s.Audit(ctx, k)
			p, _ := s.Pending(ctx, k, 10)
			if len(q)+len(ev)+len(au)+len(p) != 0 {
				t.Fatalf("%s not forgotten: queue=%d events=%d audit=%d pending=%d", k, len(q), len(ev), len(au), len(p))
			}
			if st, _ := s.Check(ctx, k); st.Locked || st.HeldBy != "" {
				t.Fatalf("%s lease survived forget: %+v", k, st)
			}
			if d := deliveryRow(t, s, pendingID); d.State != DeliveryDone || d.LastError != "repository forgotten" {
				t.Fatalf("%s pending delivery after forget: %s %q", k, d.State, d.LastError)
			}
		}

		applyInst(inst42, Batch{Forget: []Key{a}})
		forgotten(a, "pending-0")
		intact(b)
		intact(c)
		if got := tracked(); got != "42:octo/b/true 7:octo/a/false" {
			t.Fatalf("tracked after forget = %s", got)
		}

		applyInst(inst42, Batch{ForgetTenant: true})
		forgotten(b, "pending-1")
		intact(c)
		if got := tracked(); got != "7:octo/a/false" {
			t.Fatalf("tracked after forgetting tenant 42 = %s", got)
		}
		if sus, _ := s.Suspended(ctx, "42"); sus {
			t.Fatal("tenant 42's installation row survived ForgetTenant")
		}
		if n := countRows(t, s, `SELECT count(*) FROM installations WHERE tenant = '42'`); n != 0 {
			t.Fatalf("tenant 42 installation rows = %d", n)
		}
	})
}

// The lease protocol's "cron skips a held lease" at the store level, with the inbox:
// while "admin" holds the lease 100 deliveries arrive; every worker pass is
// answered locked and consumes nothing; after the release one pass drains
// them: all 100 applied, in arrival order, none lost, none applied twice.
func TestHeldLeaseDeliveriesDrainAfterRelease(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()

		admin, err := s.Acquire(ctx, key, "admin")
		if err != nil {
			t.Fatal(err)
		}
		// workerPass is what the worker does for each key with pending
		// deliveries: acquire, drain in pages, release. It returns how many it
		// applied and the lock error, if any.
		workerPass := func(by string) (applied int, locked *LockedError) {
			keys, err := s.PendingKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				l, err := s.Acquire(ctx, k, by)
				if errors.As(err, &locked) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				for {
					page, err := s.Pending(ctx, k, 7)
					if err != nil {
						t.Fatal(err)
					}
					if len(page) == 0 {
						break
					}
					for _, d := range page {
						var ev Event
						if err := json.Unmarshal(d.Body, &ev); err != nil {
							t.Fatalf("delivery %s: %v", d.ID, err)
						}
						ev.Op = opFor(ev.Action)
						_, ok, err := s.ApplyDelivery(ctx, l, d.Seq, Batch{Events: []Event{ev}})
						if err != nil {
							t.Fatalf("apply %s: %v", d.ID, err)
						}
						if ok {
							applied++
						}
					}
				}
				if ok, err := s.Release(ctx, l); !ok || err != nil {
					t.Fatalf("worker release: %v %v", ok, err)
				}
			}
			return applied, locked
		}

		// 100 deliveries arrive concurrently, in 10 waves; a worker pass and a
		// renewal by admin run after every wave.
		for wave := 0; wave < 10; wave++ {
			var wg sync.WaitGroup
			for i := 0; i < 10; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					pr := wave*10 + i + 1
					body, _ := json.Marshal(join(pr, fmt.Sprintf("sha-%d", pr)))
					d := delivery(fmt.Sprintf("gh-%03d", pr), key, string(body))
					if dup, err := in.Enqueue(ctx, d); err != nil || dup {
						t.Errorf("enqueue %s: %v %v", d.ID, dup, err)
					}
				}()
			}
			wg.Wait()
			n, locked := workerPass("worker")
			if n != 0 || locked == nil || locked.HeldBy != "admin" {
				t.Fatalf("wave %d: worker applied %d (locked: %v) while admin held the lease", wave, n, locked)
			}
			clk.Advance(5 * time.Second)
			if err := s.Renew(ctx, admin); err != nil { // admin keeps its lease alive
				t.Fatal(err)
			}
		}
		if p, _ := s.Pending(ctx, key, 1000); len(p) != 100 {
			t.Fatalf("pending while held = %d, want 100", len(p))
		}
		if ev, _ := s.Events(ctx, key); len(ev) != 0 {
			t.Fatalf("%d events applied while admin held the lease", len(ev))
		}

		if ok, err := s.Release(ctx, admin); !ok || err != nil {
			t.Fatalf("admin release: %v %v", ok, err)
		}
		if n, locked := workerPass("worker"); n != 100 || locked != nil {
			t.Fatalf("after release the worker applied %d (locked: %v), want 100", n, locked)
		}
		// A second worker replaying the same deliveries applies nothing.
		for _, d := range mustDeliveries(t, s, DeliveryDone) {
			l, err := s.Acquire(ctx, key, "replayer")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := s.ApplyDelivery(ctx, l, d.Seq, Batch{Events: []Event{join(999, "x")}}); ok || err != nil {
				t.Fatalf("replay of %s: applied=%v err=%v", d.ID, ok, err)
			}
			s.Release(ctx, l) //nolint:errcheck
		}

		// Arrival order is the inbox's seq order (deliveries of one wave arrive
		// concurrently, in no set order).
		done := mustDeliveries(t, s, DeliveryDone) // newest first
		if len(done) != 100 {
			t.Fatalf("%d deliveries done, want 100", len(done))
		}
		var arrival []int
		seen := map[int]bool{}
		for i := len(done) - 1; i >= 0; i-- {
			var ev Event
			json.Unmarshal(done[i].Body, &ev) //nolint:errcheck // decoded above
			arrival = append(arrival, ev.PRNumber)
			seen[ev.PRNumber] = true
		}
		if len(seen) != 100 || !seen[1] || !seen[100] {
			t.Fatalf("deliveries stored: %v", arrival)
		}
		// Exactly 100 events, in arrival order, each once (the event log keeps
		// the last 100: a double apply would push a duplicate to the end).
		events, _ := s.Events(ctx, key)
		if len(events) != 100 {
			t.Fatalf("%d events, want 100", len(events))
		}
		for i, e := range events {
			if e.PRNumber != arrival[i] || e.Action != "labeled" {
				t.Fatalf("event %d = #%d %s, want #%d: not in arrival order", i, e.PRNumber, e.Action, arrival[i])
			}
		}
		audit, _ := s.Audit(ctx, key)
		q, _ := s.Queue(ctx, key)
		if len(audit) != 100 || len(q) != 100 {
			t.Fatalf("audit=%d queue=%d, want 100 joins", len(audit), len(q))
		}
		for i := range q {
			if q[i].PRNumber != arrival[i] || audit[i].Action != AuditJoin || audit[i].PRNumber != arrival[i] {
				t.Fatalf("position %d: queue #%d audit %s#%d, want #%d", i, q[i].PRNumber, audit[i].Action, audit[i].PRNumber, arrival[i])
			}
		}
		counts, _ := s.DeliveryCounts(ctx)
		if fmt.Sprint(counts) != "map[]" { // none pending, none failed
			t.Fatalf("delivery counts = %v", counts)
		}
		if st, _ := s.Check(ctx, key); st.Locked {
			t.Fatalf("lease left held: %+v", st)
		}
	})
}

// mustDeliveries reads key's deliveries in state, newest first, with their
// bodies (Deliveries, the listing, leaves bodies out).
func mustDeliveries(t *testing.T, s *Store, state string) []Delivery {
	t.Helper()
	ds, err := s.deliveries(context.Background(), true, `WHERE d.state = ? AND d.tenant = ? AND d.repo = ? ORDER BY d.seq DESC LIMIT 1000`, state, key.Tenant, key.Repo)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// An uninstalled tenant leaves nothing to act on: a repository whose only
// trace is a pending delivery (uninstalled before the worker reached it), an
// audit row or a lease is forgotten too, or the worker later applies its
// deliveries for a tenant that is gone.
func TestForgetTenantLeavesNothingPending(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		onlyPending := Key{Tenant: "42", Repo: "octo/only-pending"}
		onlyLease := Key{Tenant: "42", Repo: "octo/only-lease"}
		mustEnqueue(t, in, delivery("p1", onlyPending, "{}"))
		if _, err := s.Acquire(ctx, onlyLease, "worker"); err != nil {
			t.Fatal(err)
		}
		mustEnqueue(t, in, Delivery{ID: "uninstall", Event: "installation", Action: "deleted", Tenant: "42", Body: []byte("{}")})
		l, err := s.Acquire(ctx, Key{Tenant: "42"}, "worker")
		if err != nil {
			t.Fatal(err)
		}
		if _, applied, err := s.ApplyDelivery(ctx, l, seqOf(t, s, "uninstall"), Batch{ForgetTenant: true}); err != nil || !applied {
			t.Fatalf("uninstall: %v %v", applied, err)
		}
		if keys, _ := s.PendingKeys(ctx); len(keys) != 0 {
			t.Errorf("after the tenant was forgotten, pending deliveries remain for %v", keys)
		}
		if st, _ := s.Check(ctx, onlyLease); st.HeldBy != "" {
			t.Errorf("after the tenant was forgotten, a lease remains on %s: %+v", onlyLease, st)
		}
	})
}
