package leasedo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two replicas drain the same repositories at once while deliveries keep
// arriving at both, and a third party takes and gives back the leases
// meanwhile (as a sync does): every delivery is applied exactly once, each
// repository's in arrival order, and none while someone holds its lease.
func TestConcurrentDrainsApplyEachOnceInOrder(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		stores := []*Store{a, b}
		inboxes := []*Inbox{a.NewInbox(0), b.NewInbox(0)}
		for _, in := range inboxes {
			t.Cleanup(in.Close)
		}
		const repos, perRepo = 6, 24
		keys := make([]Key, repos)
		for i := range keys {
			keys[i] = Key{Tenant: "42", Repo: fmt.Sprintf("octo/r%d", i)}
		}

		var applied sync.Map // delivery id → times applied
		var broken atomic.Value
		fail := func(format string, args ...any) { broken.CompareAndSwap(nil, fmt.Sprintf(format, args...)) }
		var done atomic.Bool
		var wg sync.WaitGroup

		// The deliveries: PR n of each repository joins, sent to one
		// replica or the other.
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Store(true)
			for n := 1; n <= perRepo; n++ {
				for i, k := range keys {
					ev := join(n, fmt.Sprintf("sha-%d", n))
					ev.Tenant, ev.Repo = k.Tenant, k.Repo
					body, _ := json.Marshal(ev)
					if _, err := inboxes[(n+i)%2].Enqueue(ctx, delivery(fmt.Sprintf("%s-%d", k.Repo, n), k, string(body))); err != nil {
						fail("enqueue: %v", err)
						return
					}
				}
			}
		}()
		// Two drainers per replica.
		for d := range 4 {
			s := stores[d%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					last := done.Load()
					for _, k := range keys {
						res, err := s.Drain(ctx, k, fmt.Sprintf("drainer-%d", d), 4, decodeEvent, DrainPolicy{})
						if IsLocked(err) {
							continue
						}
						if err != nil {
							fail("drain %s: %v", k, err)
							return
						}
						for _, r := range res.Done {
							if r.Err != nil {
								fail("%s: %v", r.Delivery.ID, r.Err)
							}
							n, _ := applied.LoadOrStore(r.Delivery.ID, new(atomic.Int32))
							n.(*atomic.Int32).Add(1)
						}
					}
					if last {
						pending, err := s.PendingKeys(ctx)
						if err != nil {
							fail("pending keys: %v", err)
						}
						if len(pending) == 0 {
							return
						}
					}
				}
			}()
		}
		// A syncer on each replica: while it holds a repository's lease, no
		// delivery of that repository may be applied.
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; !done.Load(); n++ {
					k := keys[(n+i)%repos]
					l, err := s.Acquire(ctx, k, fmt.Sprintf("syncer-%d", i))
					if err != nil {
						if !IsLocked(err) && !errors.Is(err, errContended) {
							fail("acquire %s: %v", k, err)
						}
						continue
					}
					before := doneCount(t, s, k)
					time.Sleep(time.Millisecond) // deliveries keep arriving meanwhile
					if after := doneCount(t, s, k); after != before {
						fail("%s: %d deliveries applied while %s held its lease", k, after-before, l.By)
					}
					if _, err := s.Release(ctx, l); err != nil {
						fail("release %s: %v", k, err)
					}
				}
			}()
		}
		wg.Wait()
		if msg := broken.Load(); msg != nil {
			t.Fatal(msg)
		}
		want := ""
		for n := 1; n <= perRepo; n++ {
			if n > 1 {
				want += ","
			}
			want += fmt.Sprint(n)
		}
		for _, k := range keys {
			for n := 1; n <= perRepo; n++ {
				id := fmt.Sprintf("%s-%d", k.Repo, n)
				v, ok := applied.Load(id)
				if !ok || v.(*atomic.Int32).Load() != 1 {
					times := int32(0)
					if ok {
						times = v.(*atomic.Int32).Load()
					}
					t.Errorf("%s applied %d times, want once", id, times)
				}
			}
			if got := queuedPRs(t, a, k); got != want {
				t.Errorf("%s: queue %s, want arrival order %s", k, got, want)
			}
		}
	})
}

// Hold asks the database only when the lease's row is older than a third
// of the TTL; a holder that slept past the TTL while another replica took
// the lease over learns it from Hold, before its next call to GitHub.
func TestHoldAfterAPausePastTheTTL(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		l, err := a.Acquire(ctx, key, "replica-a/worker")
		if err != nil {
			t.Fatal(err)
		}
		ts := func() int64 {
			t.Helper()
			cur, err := getLease(ctx, a.db.r, key)
			if err != nil || cur == nil {
				t.Fatalf("lease row: %+v %v", cur, err)
			}
			return cur.ts
		}
		acquired := ts()
		clk.Advance(5 * time.Second)
		if err := a.Hold(ctx, l); err != nil {
			t.Fatal(err)
		}
		if got := ts(); got != acquired {
			t.Fatalf("Hold 5 s after the acquire wrote the lease (ts %d → %d); want no write before a third of the TTL", acquired, got)
		}
		clk.Advance(6 * time.Second)
		if err := a.Hold(ctx, l); err != nil {
			t.Fatal(err)
		}
		if got, want := ts(), clk.Now().UnixMilli(); got != want {
			t.Fatalf("Hold 11 s after the acquire: lease ts %d, want renewed to %d", got, want)
		}
		// Paused past the TTL: the other replica takes the lease over.
		clk.Advance(31 * time.Second)
		if _, err := b.Acquire(ctx, key, "replica-b/worker"); err != nil {
			t.Fatal(err)
		}
		if err := a.Hold(ctx, l); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("Hold after the takeover: %v, want ErrLeaseLost", err)
		}
	})
}

// A released lease is told to the callbacks of OnRelease: on SQLite those
// of the releasing process, on PostgreSQL every replica's, through the
// database's notifications, and again after the listening connection was
// cut and came back.
func TestReleaseWakesReplicas(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		listener := a // SQLite: the releasing process itself
		if a.db.pg {
			listener = secondReplica(t, a, clk)
		}
		got := make(chan Key, 16)
		listening := make(chan struct{}, 16)
		unregister := listener.db.OnRelease(func(k Key) { got <- k }, func() { listening <- struct{}{} })
		defer unregister()
		if a.db.pg {
			waitSignal(t, listening, "the listener to connect")
		}
		release := func(k Key) {
			t.Helper()
			l, err := a.Acquire(ctx, k, "worker")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			select {
			case g := <-got:
				if g != k {
					t.Fatalf("told of %s, want %s", g, k)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("release of %s: no callback within 10 s", k)
			}
		}
		release(key)
		release(Key{Tenant: "42", Repo: ""}) // an installation's own key
		if !a.db.pg {
			return
		}
		// Cut every other connection of the database: the listener's too.
		if _, err := a.db.w.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'`); err != nil {
			t.Fatal(err)
		}
		waitSignal(t, listening, "the listener to reconnect")
		release(Key{Tenant: "42", Repo: "octo/after"})
	})
}

// doneCount is how many of k's deliveries are applied.
func doneCount(t *testing.T, s *Store, k Key) int {
	var n int
	if err := s.db.r.QueryRow(`SELECT count(*) FROM deliveries WHERE tenant = ? AND repo = ? AND state = 'done'`, k.Tenant, k.Repo).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		t.Fatalf("waited 15 s for %s", what)
	}
}

// A replica stopped inside a transaction (SIGSTOP) holds its locks: the
// repository's claim and its lease row. The other replicas are answered
// locked within lock_timeout instead of waiting for it, deliveries still
// commit meanwhile, and the stopped session is ended by the server once
// idle in its transaction for idle_in_transaction_session_timeout.
func TestReplicaStoppedInATransactionHoldsNobodyUp(t *testing.T) {
	// PostgreSQL's alone: on SQLite one writer holds the file's lock, and
	// a process stopped holding it stops every other (its busy timeout).
	t.Run("postgres", func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		for name, want := range map[string]string{"lock_timeout": pgLockTimeout, "idle_in_transaction_session_timeout": pgIdleInTransaction} {
			var got string
			if err := b.db.r.QueryRowContext(ctx, "SHOW "+name).Scan(&got); err != nil || got != want {
				t.Fatalf("%s = %q %v, want %s", name, got, err, want)
			}
		}
		l, err := a.Acquire(ctx, key, "replica-a/worker")
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(31 * time.Second) // a's lease is stale: b may take it over
		// Replica a stopped in the middle of a write under its lease:
		// the repository claimed, the lease row locked, never committed.
		stuck, err := a.db.w.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer stuck.Rollback() //nolint:errcheck
		if _, err := stuck.ExecContext(ctx, rebind(`SELECT pg_advisory_xact_lock(?)`), claimID(key)); err != nil {
			t.Fatal(err)
		}
		if _, err := stuck.ExecContext(ctx, rebind(`UPDATE leases SET ts = ts WHERE tenant = ? AND repo = ? AND token = ?`), key.Tenant, key.Repo, l.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, key, "replica-b/worker"); !IsLocked(err) {
			t.Fatalf("acquire while a stopped replica holds the claim: %v, want locked", err)
		}
		in := b.NewInbox(0)
		defer in.Close()
		enqueueJoins(t, in, key, 1)
		if _, err := b.Drain(ctx, key, "replica-b/worker", 4, decodeEvent, DrainPolicy{}); !IsLocked(err) {
			t.Fatalf("drain while a stopped replica holds the claim: %v, want locked", err)
		}
		// Without the claim, the lease row alone: b's takeover waits
		// lock_timeout, then is answered locked; its writer is free again.
		if _, err := stuck.ExecContext(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
			t.Fatal(err)
		}
		stuck2, err := a.db.w.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer stuck2.Rollback() //nolint:errcheck
		stuck.Rollback()        //nolint:errcheck
		if _, err := stuck2.ExecContext(ctx, rebind(`UPDATE leases SET ts = ts WHERE tenant = ? AND repo = ? AND token = ?`), key.Tenant, key.Repo, l.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, key, "replica-b/worker"); !IsLocked(err) {
			t.Fatalf("takeover of a lease row locked by a stopped replica: %v, want locked after lock_timeout", err)
		}
		enqueueJoins(t, in, key, 2) // webhooks still commit
		stuck2.Rollback()           //nolint:errcheck
		if _, err := b.Acquire(ctx, key, "replica-b/worker"); err != nil {
			t.Fatalf("takeover once the stopped transaction ended: %v", err)
		}
	})
}
