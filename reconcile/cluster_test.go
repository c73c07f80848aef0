package reconcile

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
)

// Three replicas' crons on one database (issue 22): each repository is
// reconciled once a period across them, installation discovery runs on
// one of them (the others use its findings, a repository GitHub no longer
// lists included), and an operator's POST /reconcile (Pass) is not
// claimed. A replica alone reconciles everything every period, as before.
func TestCronPassesOncePerRepositoryAcrossReplicas(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) { cronAcrossReplicas(t, backend) })
	}
}

func cronAcrossReplicas(t *testing.T, backend string) {
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "cluster.db")
	if backend == "postgres" {
		path = pgtest.URL(t)
	}
	const every = 5 * time.Minute
	var repos []leasedo.Key
	for i := range 6 {
		name := fmt.Sprintf("octo/r%d", i)
		e.gh.AddRepo(tenant, name, "main")
		repos = append(repos, e.key(name))
	}
	removed := e.key("octo/removed") // tracked, no longer on GitHub
	var replicas []*Reconciler
	var logs []*testkit.SyncBuffer
	var store *leasedo.Store
	for i := range 3 {
		db := testkit.OpenDB(t, path, leasedo.Options{})
		s := leasedo.NewStore(db, leasedo.Config{TTL: 30 * time.Second, Dead: 90 * time.Second, Clock: e.clock})
		if i == 0 {
			store = s
			if err := s.Track(e.ctx, append(repos, removed)...); err != nil {
				t.Fatal(err)
			}
		}
		cfg := e.cfg
		cfg.Store, cfg.Syncer, cfg.By = s, nil, fmt.Sprintf("replica-%d/cron", i)
		buf := &testkit.SyncBuffer{}
		cfg.Logger = cfg.Logger.Output(buf)
		logs = append(logs, buf)
		replicas = append(replicas, New(cfg))
	}
	listings := func() int64 { return e.fc.EndpointStats()["apps.list-installations"].Requests }
	run := func(r *Reconciler) Summary {
		sum, err := r.RunAll(context.WithValue(e.ctx, claimKey{}, every)) // as the Cron runs it
		if err != nil {
			t.Fatalf("%s: %v (%+v)", r.by, err, sum)
		}
		return sum
	}

	// Period 1: the first replica alone, as one process on SQLite: it
	// discovers and reconciles every repository.
	sum := run(replicas[0])
	if sum.Discovery != DiscoveryRan || sum.Discovered != 6 || sum.Repos != 7 || sum.Reconciled != 7 || sum.Others != 0 || sum.Gone != 1 {
		t.Fatalf("the first replica, first: %+v; want discovery run, 7 reconciled (1 gone)", sum)
	}
	// The others, later in the period: nothing left to them, and they
	// know from the first one's findings which repository is gone.
	for _, r := range replicas[1:] {
		sum := run(r)
		if sum.Discovery != DiscoveryElsewhere || sum.Discovered != 0 || sum.Reconciled != 0 || sum.Others != 7 || sum.Gone != 1 {
			t.Fatalf("%s, later in the period: %+v; want all 7 left to the other replica, 1 gone", r.by, sum)
		}
	}
	if n := listings(); n != 1 {
		t.Fatalf("installations listed %d times in one period, want once", n)
	}
	// The operator's request is not claimed.
	if _, err := replicas[2].Pass(e.ctx, repos[0]); err != nil {
		t.Fatalf("Pass within a claimed period: %v", err)
	}

	// Periods 2 and 3: all three at once (the clock a little short of a
	// whole period: a pass starting early still gets its period).
	for period := 2; period <= 3; period++ {
		e.clock.Advance(every - 30*time.Second)
		sums := make([]Summary, len(replicas))
		var wg sync.WaitGroup
		for i, r := range replicas {
			wg.Go(func() { sums[i] = run(r) })
		}
		wg.Wait()
		var reconciled, others, ran int
		for _, s := range sums {
			reconciled += s.Reconciled
			others += s.Others
			if s.Discovery == DiscoveryRan {
				ran++
			}
			if s.Repos != 7 || s.Gone != 1 || s.Failed != 0 {
				t.Errorf("period %d: %+v", period, s)
			}
		}
		if reconciled != 7 || others != 14 || ran != 1 {
			t.Fatalf("period %d: %d reconciled, %d left to others, discovery ran %d times (%+v); want 7, 14, once", period, reconciled, others, ran, sums)
		}
		if n := listings(); n != int64(period) {
			t.Fatalf("period %d: installations listed %d times in all, want once a period", period, n)
		}
	}
	// The log says how many were left to the others.
	for _, buf := range logs {
		if !strings.Contains(buf.String(), `"others":`) || !strings.Contains(buf.String(), `"discovery":`) {
			t.Fatalf("the reconcile run's line says nothing of the other replicas:\n%s", buf.String())
		}
	}
	// Who claimed each repository last is the store's record.
	for _, k := range repos {
		if won, err := store.ClaimReconcile(e.ctx, k, "late", every); won || err != nil {
			t.Fatalf("%s: a claim within the period won (%v %v)", k, won, err)
		}
	}
}

// The Cron's start-up run: a replica alone on its database (a restart of
// the one process on SQLite) catches up at once, though it reconciled
// every repository minutes ago; with another replica alive it leaves
// what was reconciled this period to the claims. Later runs are claimed.
func TestCronStartupRunClaimsUnlessAlone(t *testing.T) {
	for _, c := range []struct {
		backend string
		others  bool
		want    int // reconciled by the start-up run
	}{
		{"postgres", false, 2},
		{"postgres", true, 0},
		{"sqlite", true, 2}, // one process to a SQLite file: always alone
	} {
		others := c.others
		t.Run(fmt.Sprintf("%s/others_alive=%v", c.backend, others), func(t *testing.T) {
			e := newEnv(t)
			if c.backend == "postgres" {
				e.path = pgtest.URL(t)
				e.openDB()
				e.newReconciler()
			}
			const every = 5 * time.Minute
			e.gh.AddRepo(tenant, "octo/a", "main")
			e.gh.AddRepo(tenant, "octo/b", "main")
			if err := e.store.Track(e.ctx, e.key("octo/a"), e.key("octo/b")); err != nil {
				t.Fatal(err)
			}
			for _, k := range []leasedo.Key{e.key("octo/a"), e.key("octo/b")} { // the last process, 2 minutes ago
				if won, err := e.store.ClaimReconcile(e.ctx, k, "before-the-restart", every); !won || err != nil {
					t.Fatal(won, err)
				}
			}
			e.clock.Advance(2 * time.Minute)
			if _, err := e.store.Heartbeat(e.ctx, "me"); err != nil {
				t.Fatal(err)
			}
			if others {
				if _, err := e.store.Heartbeat(e.ctx, "another"); err != nil {
					t.Fatal(err)
				}
			}
			cron, err := NewCron(e.r, every, e.cfg.Logger)
			if err != nil {
				t.Fatal(err)
			}
			cron.tick() // the start-up run
			sum, err := cron.LastSummary()
			if err != nil {
				t.Fatal(err)
			}
			if want := c.want; sum.Reconciled != want || sum.Others != 2-want {
				t.Fatalf("start-up run: %+v; want %d reconciled", sum, want)
			}
			cron.tick() // a scheduled run within the period
			if sum, _ := cron.LastSummary(); sum.Reconciled != 0 || sum.Others != 2 {
				t.Fatalf("the next run within the period: %+v; want both left to the claims", sum)
			}
		})
	}
}
