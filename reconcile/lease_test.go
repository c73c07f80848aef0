package reconcile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// Leases found at 10 s, 45 s and 120 s (TTL 30 s, dead 90 s): active
// (skip), stale (acquired over, not reported) and dead (force-released, in
// staleLeases).
func TestLeaseAges(t *testing.T) {
	e := newEnv(t)
	for _, r := range []string{"octo/active", "octo/stale", "octo/dead"} {
		e.gh.AddRepo(tenant, r, "main")
	}
	acquire := func(repo string) {
		if _, err := e.store.Acquire(e.ctx, e.key(repo), "worker"); err != nil {
			t.Fatal(err)
		}
	}
	acquire("octo/dead")
	e.clock.Advance(75 * time.Second)
	acquire("octo/stale")
	e.clock.Advance(35 * time.Second)
	acquire("octo/active")
	e.clock.Advance(10 * time.Second) // ages now 120 s, 45 s, 10 s

	// One repository now, as POST /reconcile: the active lease is a 409.
	_, err := e.r.Pass(e.ctx, e.key("octo/active"))
	var locked *leasedo.LockedError
	if !errors.As(err, &locked) || locked.HeldBy != "worker" {
		t.Fatalf("Pass on a 10 s lease = %v, want *leasedo.LockedError held by worker", err)
	}
	if !strings.Contains(e.logs.String(), "lease held by worker, skipping; next pass reconciles") {
		t.Errorf("skip not logged:\n%s", e.logs)
	}

	stale, err := e.r.Pass(e.ctx, e.key("octo/stale"))
	if err != nil {
		t.Fatalf("Pass on a 45 s lease: %v", err)
	}
	if len(stale.Results.StaleLeases) != 0 {
		t.Errorf("45 s lease reported in staleLeases: %+v", stale.Results.StaleLeases)
	}
	dead, err := e.r.Pass(e.ctx, e.key("octo/dead"))
	if err != nil {
		t.Fatalf("Pass on a 120 s lease: %v", err)
	}
	if sl := dead.Results.StaleLeases; len(sl) != 1 || sl[0].HeldBy != "worker" || sl[0].AgeMS != 120000 {
		t.Errorf("staleLeases = %+v, want worker at 120000 ms", sl)
	}
	for _, r := range []string{"octo/stale", "octo/dead"} {
		if st, _ := e.store.Check(e.ctx, e.key(r)); st.Locked || st.HeldBy != "" {
			t.Errorf("%s: lease after the pass = %+v, want none", r, st)
		}
	}
	if st, _ := e.store.Check(e.ctx, e.key("octo/active")); !st.Locked || st.HeldBy != "worker" {
		t.Errorf("active lease was touched: %+v", st)
	}
}

// The same three cases through RunAll: counted as skipped, reconciled and
// stale.
func TestLeaseAgesRunAll(t *testing.T) {
	e := newEnv(t)
	for _, r := range []string{"octo/active", "octo/stale", "octo/dead"} {
		e.gh.AddRepo(tenant, r, "main")
	}
	if err := e.store.Track(e.ctx, e.key("octo/active"), e.key("octo/stale"), e.key("octo/dead")); err != nil {
		t.Fatal(err)
	}
	e.store.Acquire(e.ctx, e.key("octo/dead"), "worker")
	e.clock.Advance(75 * time.Second)
	e.store.Acquire(e.ctx, e.key("octo/stale"), "worker")
	e.clock.Advance(35 * time.Second)
	e.store.Acquire(e.ctx, e.key("octo/active"), "worker")
	e.clock.Advance(10 * time.Second)

	sum := e.runAll()
	if sum.Repos != 3 || sum.Skipped != 1 || sum.Reconciled != 2 || sum.StaleLeases != 1 {
		t.Errorf("summary = %+v, want 3 repos: 1 skipped, 2 reconciled, 1 stale lease", sum)
	}
	// The dead lease's release kicks the worker; nothing else changed.
	if len(e.changed) != 1 || e.changed[0].Repo != "octo/dead" {
		t.Errorf("OnChange calls = %v, want octo/dead only", e.changed)
	}
}

// Without GitHub (no Forge) only the integrity pass runs.
func TestPassWithoutForge(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Forge = nil })
	e.join("octo/app", 1, "a")
	e.join("octo/app", 2, "b")
	e.bounce("octo/app", 2, "b")
	ans, err := e.r.Pass(e.ctx, e.key("octo/app"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixes(ans); len(got) != 1 || got[0] != "bounced_removed#2" {
		t.Errorf("fixed = %v, want the bounced #2", got)
	}
	if ans.QueueLength != 1 {
		t.Errorf("queueLength = %d, want 1", ans.QueueLength)
	}
	if len(e.gh.Calls()) != 0 {
		t.Errorf("GitHub was called without a Forge: %v", e.gh.Calls())
	}
}
