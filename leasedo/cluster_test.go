package leasedo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// race runs fn n times at once, alternating between the stores, and waits.
func race(n int, stores []*Store, fn func(i int, s *Store)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		s := stores[i%len(stores)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i, s)
		}()
	}
	close(start)
	wg.Wait()
}

// until polls cond (work on other goroutines, not time, is awaited).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Replicas racing for a repository's cron pass: exactly one wins a
// period; a claim is due again 4/5 of a period after the last.
func TestClaimReconcileOncePerPeriod(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		if err := a.Track(ctx, key); err != nil {
			t.Fatal(err)
		}
		const every = 5 * time.Minute
		claim := func() (wins []string) {
			var mu sync.Mutex
			race(8, []*Store{a, b}, func(i int, s *Store) {
				won, err := s.ClaimReconcile(ctx, key, fmt.Sprintf("replica-%d", i), every)
				if err != nil {
					t.Error(err)
				}
				if won {
					mu.Lock()
					wins = append(wins, fmt.Sprint(i))
					mu.Unlock()
				}
			})
			return wins
		}
		if w := claim(); len(w) != 1 {
			t.Fatalf("first period: winners %v, want exactly one", w)
		}
		clk.Advance(3 * time.Minute)
		if w := claim(); len(w) != 0 {
			t.Fatalf("3 minutes into the period: winners %v, want none", w)
		}
		clk.Advance(time.Minute + time.Second) // 4m01s: past 4/5 of the period
		if w := claim(); len(w) != 1 {
			t.Fatalf("next period: winners %v, want exactly one", w)
		}
		// No period (RunAll called directly): always claims.
		for range 2 {
			if won, err := a.ClaimReconcile(ctx, key, "one", 0); !won || err != nil {
				t.Fatalf("ClaimReconcile without a period = %v %v, want a win", won, err)
			}
		}
		if won, err := a.ClaimReconcile(ctx, Key{Tenant: "42", Repo: "octo/untracked"}, "one", every); won || err != nil {
			t.Fatalf("ClaimReconcile of an untracked repository = %v %v, want false", won, err)
		}
	})
}

// Racing replicas run a singleton job once: exactly one runs it, and
// none again within the period; a run in progress holds the others off
// whatever the period.
func TestRunJobOnceAcrossReplicas(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		const every = 10 * time.Minute
		var runs atomic.Int32
		round := func() (ran int) {
			var n atomic.Int32
			race(8, []*Store{a, b}, func(i int, s *Store) {
				ok, err := s.RunJob(ctx, JobPrune, fmt.Sprintf("replica-%d", i), every, func(ctx context.Context, l *Lease) error {
					runs.Add(1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
				if ok {
					n.Add(1)
				}
			})
			return int(n.Load())
		}
		if n := round(); n != 1 || runs.Load() != 1 {
			t.Fatalf("first round: %d reported running, %d ran; want exactly one", n, runs.Load())
		}
		clk.Advance(5 * time.Minute)
		if n := round(); n != 0 || runs.Load() != 1 {
			t.Fatalf("half a period later: %d ran, want none", n)
		}
		clk.Advance(3*time.Minute + time.Second) // 8m01s: due
		if n := round(); n != 1 || runs.Load() != 2 {
			t.Fatalf("next period: %d reported, %d runs in all; want one more", n, runs.Load())
		}
		run, ok, err := b.LastJobRun(ctx, JobPrune)
		if err != nil || !ok || !run.RanAt.Equal(clk.Now()) || run.RanBy == "" {
			t.Fatalf("LastJobRun = %+v %v %v, want a run now", run, ok, err)
		}

		// While one runs, the other does not start it, even with no period.
		inside, release := make(chan struct{}), make(chan struct{})
		done := make(chan bool)
		go func() {
			ok, err := a.RunJob(ctx, JobDiscovery, "a", 0, func(ctx context.Context, l *Lease) error {
				close(inside)
				<-release
				return a.SetJobState(ctx, l, JobDiscovery, `{"listed":true}`)
			})
			if err != nil {
				t.Error(err)
			}
			done <- ok
		}()
		<-inside
		if ok, err := b.RunJob(ctx, JobDiscovery, "b", 0, func(context.Context, *Lease) error { return errors.New("must not run") }); ok || err != nil {
			t.Fatalf("RunJob while another replica runs it = %v %v, want false", ok, err)
		}
		close(release)
		if !<-done {
			t.Fatal("the first RunJob did not report running")
		}
		if run, ok, err := b.LastJobRun(ctx, JobDiscovery); err != nil || !ok || run.RanBy != "a" || run.State != `{"listed":true}` {
			t.Fatalf("LastJobRun = %+v %v %v, want a's run and its state", run, ok, err)
		}
		// Given back: with no period, the other replica runs it now.
		if ok, err := b.RunJob(ctx, JobDiscovery, "b", 0, func(context.Context, *Lease) error { return nil }); !ok || err != nil {
			t.Fatalf("RunJob after the first ended = %v %v, want it to run", ok, err)
		}

		// The job rows are not repositories.
		if tr, err := a.Tracked(ctx); err != nil || len(tr) != 0 {
			t.Fatalf("Tracked = %v %v, want none", tr, err)
		}
		if g, err := a.Gauges(ctx); err != nil || len(g) != 0 {
			t.Fatalf("Gauges = %v %v, want none", g, err)
		}
	})
}

// A job longer than the lease's TTL keeps its lease: it is renewed every
// third of the TTL, so the other replica finds it held throughout. A
// lease taken over meanwhile ends the job's context with ErrLeaseLost.
func TestRunJobRenewsItsLease(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		a.renewClock = clk // renewals on the test's clock, not the wall's
		b := secondReplica(t, a, clk)
		jk := JobKey(JobRedeliver)
		renewed := func() bool { // renewed now, and the next renewal's timer set
			st, err := b.Check(ctx, jk)
			next, pending := clk.NextTimer()
			return err == nil && st.Locked && st.ExpiresIn != nil && *st.ExpiresIn == a.TTL().Milliseconds() && pending && next.After(clk.Now())
		}
		ok, err := a.RunJob(ctx, JobRedeliver, "a", time.Minute, func(ctx context.Context, l *Lease) error {
			until(t, "the first renewal timer", func() bool { _, p := clk.NextTimer(); return p })
			for i := range 4 { // 44 s in all, past the 30 s TTL
				clk.Advance(11 * time.Second)
				until(t, fmt.Sprintf("renewal %d", i+1), renewed)
				if ok, err := b.RunJob(ctx, JobRedeliver, "b", 0, func(context.Context, *Lease) error { return nil }); ok || err != nil {
					return fmt.Errorf("after %d renewals the other replica ran the job (%v %v)", i+1, ok, err)
				}
			}
			return ctx.Err()
		})
		if !ok || err != nil {
			t.Fatalf("a long job: %v %v", ok, err)
		}

		ok, err = a.RunJob(ctx, JobRedeliver, "a", 0, func(ctx context.Context, l *Lease) error {
			until(t, "the first renewal timer", func() bool { _, p := clk.NextTimer(); return p })
			if err := b.ReleaseAny(ctx, jk); err != nil { // the operator, say
				return err
			}
			if _, err := b.Acquire(ctx, jk, "b"); err != nil {
				return err
			}
			clk.Advance(11 * time.Second)
			<-ctx.Done()
			return context.Cause(ctx)
		})
		if !ok || !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("a job whose lease was taken over: %v %v, want ErrLeaseLost", ok, err)
		}
		if st, err := b.Check(ctx, jk); err != nil || !st.Locked || st.HeldBy != "b" {
			t.Fatalf("after the lost job: lease %+v %v, want b's, untouched", st, err)
		}
	})
}

// The replica registry: each heartbeat counts the replicas seen within
// ReplicaLive; a clean stop leaves at once; a long-dead one is deleted.
func TestHeartbeatCountsLiveReplicas(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		a, clk := newStore(t)
		b := secondReplica(t, a, clk)
		beat := func(s *Store, name string, want int) {
			t.Helper()
			if n, err := s.Heartbeat(ctx, name); n != want || err != nil {
				t.Fatalf("Heartbeat(%s) = %d %v, want %d", name, n, err, want)
			}
		}
		if n, err := b.LiveReplicas(ctx); n != 0 || err != nil {
			t.Fatalf("LiveReplicas before any heartbeat = %d %v, want 0", n, err)
		}
		beat(a, "r1", 1)
		beat(b, "r2", 2)
		beat(b, "r3", 3)
		if n, err := a.LiveReplicas(ctx); n != 3 || err != nil {
			t.Fatalf("LiveReplicas = %d %v, want 3", n, err)
		}
		clk.Advance(ReplicaBeat)
		beat(a, "r1", 3)
		beat(b, "r2", 3)
		clk.Advance(ReplicaLive - ReplicaBeat + time.Second) // r3 silent for 31 s
		beat(a, "r1", 2)
		if err := b.LeaveCluster(ctx, "r2"); err != nil {
			t.Fatal(err)
		}
		beat(a, "r1", 1)
		clk.Advance(ReplicaForget)
		beat(a, "r1", 1)
		var rows int
		if err := a.db.r.QueryRowContext(ctx, `SELECT count(*) FROM replicas`).Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("replicas rows = %d %v, want r1's alone (r3 forgotten)", rows, err)
		}
	})
}
