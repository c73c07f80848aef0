package app

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/migrations"
)

// Two replicas on one PostgreSQL database: each counts both alive and
// sends each installation half the requests at once (the gauge says 2);
// when one stops, the other's next heartbeat takes the whole bound back.
// The prune runs on one replica a period.
func TestReplicasShareRequestLimitsAndJobs(t *testing.T) {
	dsn := pgtest.URL(t)
	h1 := newHarness(t, func(c *Config) { c.DB, c.Replica = dsn, "r1" })
	h2 := newHarness(t, func(c *Config) { c.DB, c.Replica = dsn, "r2" })
	ctx := context.Background()
	h1.app.cluster.beat(ctx) // the next heartbeat, without waiting 10 s for it
	if n := h1.app.cluster.replicas(); n != 2 {
		t.Fatalf("r1 counts %d replicas, want 2", n)
	}
	if got := h1.app.Forge.InstallationLimit(); got != forge.DefaultInstallationConcurrency/2 {
		t.Fatalf("r1's bound per installation = %d, want %d", got, forge.DefaultInstallationConcurrency/2)
	}
	if text := scrape(t, h1); !strings.Contains(text, "\nmergegate_replicas 2\n") {
		t.Fatalf("/metrics lacks mergegate_replicas 2:\n%s", text)
	}

	// The prune: r1 runs it; r2, within the period, does not.
	h1.app.Engine.pruneOnce(ctx)
	h2.app.Engine.pruneOnce(ctx)
	run, ok, err := h2.app.Store.LastJobRun(ctx, leasedo.JobPrune)
	if err != nil || !ok || run.RanBy != h1.app.Engine.cfg.By {
		t.Fatalf("the prune's last run = %+v %v %v, want r1's (its engine's holder)", run, ok, err)
	}
	if !run.RanAt.Equal(h1.clock.Now()) {
		t.Fatalf("the prune ran at %v, want r1's run at %v, not again", run.RanAt, h1.clock.Now())
	}

	h2.stop()
	h1.app.cluster.beat(ctx)
	if n := h1.app.cluster.replicas(); n != 1 {
		t.Fatalf("after r2 stopped, r1 counts %d replicas, want 1", n)
	}
	if got := h1.app.Forge.InstallationLimit(); got != forge.DefaultInstallationConcurrency {
		t.Fatalf("after r2 stopped, r1's bound = %d, want all %d", got, forge.DefaultInstallationConcurrency)
	}
	if !strings.Contains(h1.logBuf.String(), `"replicas":1`) {
		t.Fatalf("r1's log does not say the replicas changed:\n%s", h1.logBuf.String())
	}
}

// A rolling upgrade, the old binary's side: a newer mergegate applied a
// compatible step; this one starts on the database, says so, and works.
func TestOlderReplicaWarnsOfCompatibleSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mergegate.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	next, err := migrations.Parse(fmt.Sprintf("%04d_future.sql", len(all)+1), "-- compatible: adds a table\nCREATE TABLE future (id INTEGER PRIMARY KEY);\n")
	if err != nil {
		t.Fatal(err)
	}
	old := migrations.Binary
	migrations.Binary = "v9.9.9"
	_, _, err = migrations.ApplySet(context.Background(), db, append(all, next))
	migrations.Binary = old
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	h := newHarness(t, func(c *Config) { c.DB = path })
	log := h.logBuf.String()
	if !strings.Contains(log, "the database's schema is newer than this binary knows; the newer versions are compatible") ||
		!strings.Contains(log, fmt.Sprintf("%d %04d_future.sql (compatible, applied by v9.9.9)", len(all)+1, len(all)+1)) {
		t.Fatalf("no warning naming the newer version:\n%s", log)
	}
	h.label(7, shaA)
	h.settle()
	if q := h.queue(); len(q) != 1 {
		t.Fatalf("queue on the newer schema = %+v, want #7", q)
	}
}

// Issue 30, hole 7: replicas started together went over the bound in the
// first seconds (5 in flight for 4): the first counted itself alone and
// kept the whole bound until its next heartbeat, 10 s later. A replica
// starting beside others sends its first request only once they have
// counted it (and it them): when the second's Start returns, both bound
// themselves to half.
func TestReplicasStartedTogetherShareFromTheFirstRequest(t *testing.T) {
	dsn := pgtest.URL(t)
	wall := func(name string) harnessOpt {
		return func(c *Config) { c.DB, c.Replica, c.Clock = dsn, name, leasedo.SystemClock{} }
	}
	h1 := newHarness(t, wall("r1"))
	h2 := newHarness(t, wall("r2"))
	half := forge.DefaultInstallationConcurrency / 2
	if got1, got2 := h1.app.Forge.InstallationLimit(), h2.app.Forge.InstallationLimit(); got1 != half || got2 != half {
		t.Fatalf("bounds once r2 started = r1 %d, r2 %d; want %d each", got1, got2, half)
	}
}
