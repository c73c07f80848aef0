package leasedo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The lease's contract between replicas (issue 22): two Stores on one
// database, each with its own connections, as two processes have. On
// SQLite they are two writers of one file; on PostgreSQL two pools.

// Racing acquires of one lease, from both replicas at once: exactly one
// wins, the others are answered locked, naming the winner's holder.
func TestAcquireRaceOneWinner(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		for round := range 6 {
			k := Key{Tenant: "42", Repo: fmt.Sprintf("octo/race-%d", round)}
			if round%2 == 1 { // a stale lease to take over, this time
				if _, err := a.Acquire(ctx, k, "dead"); err != nil {
					t.Fatal(err)
				}
				clk.Advance(31 * time.Second)
			}
			const racers = 8
			var wg sync.WaitGroup
			start := make(chan struct{})
			wins := make(chan *Lease, racers)
			errs := make(chan error, racers)
			for i := range racers {
				s := a
				if i%2 == 1 {
					s = b
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					l, err := s.Acquire(ctx, k, fmt.Sprintf("replica-%d", i))
					if err != nil {
						errs <- err
						return
					}
					wins <- l
				}()
			}
			close(start)
			wg.Wait()
			close(wins)
			close(errs)
			var won []*Lease
			for l := range wins {
				won = append(won, l)
			}
			if len(won) != 1 {
				t.Fatalf("round %d: %d winners, want exactly 1", round, len(won))
			}
			for err := range errs {
				var le *LockedError
				if !errors.As(err, &le) && !errors.Is(err, errContended) {
					t.Fatalf("round %d: a loser got %v, want locked", round, err)
				}
				// Locked by the winner, or (the claim still held by the
				// winner's transaction after a few tries) by "another replica".
				if le != nil && le.HeldBy != won[0].By && le.HeldBy != busy(k).HeldBy {
					t.Errorf("round %d: locked by %q, want the winner %q", round, le.HeldBy, won[0].By)
				}
			}
			st, err := b.Check(ctx, k)
			if err != nil || !st.Locked || st.HeldBy != won[0].By {
				t.Fatalf("round %d: lease %+v %v, want held by the winner %s", round, st, err, won[0].By)
			}
		}
	})
}

// A lease past its TTL is taken over by the other replica, with a larger
// fencing token; from then on its old holder writes nothing: neither a
// queue change, nor a renewal, nor a release of the new holder's lease.
func TestStaleTakeoverRefusesTheOldHolder(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		old, err := a.Acquire(ctx, key, "replica-a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Acquire(ctx, key, "replica-b"); !IsLocked(err) {
			t.Fatalf("acquire of an active lease: %v, want locked", err)
		}
		clk.Advance(30 * time.Second) // stale: the TTL has passed
		cur, err := b.Acquire(ctx, key, "replica-b")
		if err != nil {
			t.Fatalf("takeover of a stale lease: %v", err)
		}
		if cur.Fence <= old.Fence {
			t.Errorf("fence after takeover %d, want more than the old holder's %d", cur.Fence, old.Fence)
		}
		if _, err := a.Apply(ctx, old, join(7, "aaa")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("old holder's write after the takeover: %v, want ErrLeaseLost", err)
		}
		if err := a.Renew(ctx, old); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("old holder's renewal: %v, want ErrLeaseLost", err)
		}
		if released, err := a.Release(ctx, old); err != nil || released {
			t.Fatalf("old holder's release = %v %v, want false: the lease is the new holder's", released, err)
		}
		q, err := b.Queue(ctx, key)
		if err != nil || len(q) != 0 {
			t.Fatalf("queue after the refused write: %v %v, want empty", q, err)
		}
		if r, err := b.Apply(ctx, cur, join(7, "aaa")); err != nil || r.Result != ResultJoined {
			t.Fatalf("new holder's write: %+v %v", r, err)
		}
		st, err := a.Check(ctx, key)
		if err != nil || !st.Locked || st.HeldBy != "replica-b" {
			t.Fatalf("lease %+v %v, want held by replica-b", st, err)
		}
	})
}

// The fencing token never repeats and only grows, across replicas and
// after a repository is forgotten (its lease row deleted) and tracked
// again: a holder from before the forgetting can never match its
// successor's token.
func TestFenceGrowsAfterForgetAndTrack(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		if err := a.Track(ctx, key); err != nil {
			t.Fatal(err)
		}
		var last int64
		seen := map[string]bool{}
		for i := range 4 {
			s := a
			if i%2 == 1 {
				s = b
			}
			l, err := s.Acquire(ctx, key, "worker")
			if err != nil {
				t.Fatal(err)
			}
			if l.Fence <= last || seen[l.Token] {
				t.Fatalf("acquire %d: fence %d (token %q), want more than %d and new", i, l.Fence, l.Token, last)
			}
			last, seen[l.Token] = l.Fence, true
			// Forget the repository (an uninstall), lease row and all,
			// then track it again.
			if err := s.db.write(ctx, func(tx *wtx) error {
				return forget(ctx, tx, s.now().UnixMilli(), []Key{key})
			}); err != nil {
				t.Fatal(err)
			}
			if st, err := s.Check(ctx, key); err != nil || st.HeldBy != "" {
				t.Fatalf("lease after forget: %+v %v, want none", st, err)
			}
			if err := s.Track(ctx, key); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Apply(ctx, l, join(1, "abc")); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("write under a lease from before the forgetting: %v, want ErrLeaseLost", err)
			}
		}
	})
}

// On PostgreSQL a Store given no clock (or the system clock, as serve
// does) judges leases on the database server's clock: the offset to it
// is measured, and a wrong one is put right by the next measurement.
func TestLeaseJudgedOnTheDatabasesClock(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		db := openDB(t, Options{})
		s := NewStore(db, Config{Clock: SystemClock{}})
		c, ok := s.clock.(*dbClock)
		if !db.pg {
			if ok || db.clock != nil {
				t.Fatalf("SQLite store on a database clock: %T", s.clock)
			}
			return
		}
		if !ok {
			t.Fatalf("PostgreSQL store's clock is %T, want the server's", s.clock)
		}
		c.offset.Store(int64(time.Hour)) // as if this replica's clock were an hour behind the server's
		if d := time.Until(s.now()); d < 59*time.Minute {
			t.Fatalf("clock with an offset of 1h reads %s from the system clock", d)
		}
		if err := c.measure(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		var serverUS int64
		if err := db.r.QueryRow(`SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&serverUS); err != nil {
			t.Fatal(err)
		}
		if d := s.now().Sub(time.UnixMicro(serverUS)); d < -time.Second || d > time.Second {
			t.Fatalf("after measuring, the store's clock is %s from the server's", d)
		}
		l, err := s.Acquire(context.Background(), key, "worker")
		if err != nil {
			t.Fatal(err)
		}
		if age := time.UnixMicro(serverUS).Sub(l.Acquired); age < -time.Second || age > time.Second {
			t.Fatalf("lease taken at %s, %s from the server's clock", l.Acquired, age)
		}
	})
}
