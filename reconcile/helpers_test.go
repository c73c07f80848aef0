package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

const tenant = "101"

// env is a real SQLite store in t.TempDir, a real forge.Client against the
// fake GitHub, and one manual clock shared by the three.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *leasedo.ManualClock
	path  string
	db    *leasedo.DB
	store *leasedo.Store
	gh    *fakegithub.Server
	fc    *forge.Client
	cfg   Config
	r     *Reconciler
	logs  *testkit.SyncBuffer

	mu      sync.Mutex
	changed []leasedo.Key
}

func newEnv(t *testing.T, tweak ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), logs: &testkit.SyncBuffer{}}
	e.clock = leasedo.NewManualClock(time.Now().UTC().Truncate(time.Second))
	e.gh = fakegithub.NewWithOptions(t, fakegithub.Options{Clock: e.clock.Now})
	fc := testkit.Forge(t, e.gh, forge.Config{Clock: e.clock.Now})
	e.fc = fc
	e.path = filepath.Join(t.TempDir(), "mergegate.db")
	e.openDB()
	e.cfg = Config{
		Forge:    fc,
		Options:  rules.DefaultOptions(),
		Logger:   zerolog.New(e.logs).Level(zerolog.DebugLevel),
		Clock:    e.clock,
		OnChange: e.onChange,
	}
	for _, f := range tweak {
		f(&e.cfg)
	}
	e.newReconciler()
	return e
}

func (e *env) onChange(k leasedo.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changed = append(e.changed, k)
}

func (e *env) openDB() {
	e.t.Helper()
	db := testkit.OpenDB(e.t, e.path, leasedo.Options{})
	e.db = db
	e.store = leasedo.NewStore(db, leasedo.Config{TTL: 30 * time.Second, Dead: 90 * time.Second, Clock: e.clock})
}

func (e *env) newReconciler() {
	e.cfg.Store = e.store
	e.r = New(e.cfg)
}

// deleteDB is "queue state loss": the database file is removed and a new,
// empty one is created in its place.
func (e *env) deleteDB() {
	e.t.Helper()
	if err := e.db.Close(); err != nil {
		e.t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(e.path + suffix); err != nil && !os.IsNotExist(err) {
			e.t.Fatal(err)
		}
	}
	e.openDB()
	e.newReconciler()
}

func (e *env) key(repo string) leasedo.Key { return leasedo.Key{Tenant: tenant, Repo: repo} }

// join queues pr the way a webhook would.
func (e *env) join(repo string, pr int, sha string) {
	e.t.Helper()
	_, err := e.store.ProcessEvent(e.ctx, leasedo.Event{EventType: "pull_request", Tenant: tenant, Repo: repo,
		Action: "labeled", Op: leasedo.OpJoin, PRNumber: pr, Details: &leasedo.Details{Sha: sha, Base: "main"}}, "worker")
	if err != nil {
		e.t.Fatal(err)
	}
}

// bounce bounces pr at sha under a lease, as a sync does after a failed gate.
func (e *env) bounce(repo string, pr int, sha string) {
	e.t.Helper()
	l, err := e.store.Acquire(e.ctx, e.key(repo), "worker")
	if err != nil {
		e.t.Fatal(err)
	}
	defer e.store.Release(e.ctx, l) //nolint:errcheck
	if err := e.store.Bounce(e.ctx, l, pr, sha, `its check "ci" concluded failure`, true,
		leasedo.CheckRunEnd{Conclusion: "failure", Title: "Out of the merge queue", Summary: "failed"}); err != nil {
		e.t.Fatal(err)
	}
}

// prs returns the queue of repo as PR numbers, in order.
func (e *env) prs(repo string) []int {
	e.t.Helper()
	items, err := e.store.Items(e.ctx, e.key(repo))
	if err != nil {
		e.t.Fatal(err)
	}
	var out []int
	for _, it := range items {
		out = append(out, it.PRNumber)
	}
	return out
}

func (e *env) items(repo string) []leasedo.Item {
	e.t.Helper()
	items, err := e.store.Items(e.ctx, e.key(repo))
	if err != nil {
		e.t.Fatal(err)
	}
	return items
}

func (e *env) audit(repo string) []leasedo.AuditEntry {
	e.t.Helper()
	a, err := e.store.Audit(e.ctx, e.key(repo))
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) runAll() Summary {
	e.t.Helper()
	sum, err := e.r.RunAll(e.ctx)
	if err != nil {
		e.t.Fatalf("RunAll: %v (summary %+v)", err, sum)
	}
	return sum
}

// fixes returns results.fixed as "fix#pr" strings, sorted.
func fixes(ans leasedo.ReconcileAnswer) []string {
	var out []string
	for _, f := range ans.Results.Fixed {
		out = append(out, f.Fix+"#"+strconv.Itoa(f.PRNumber))
	}
	slices.Sort(out)
	return out
}
