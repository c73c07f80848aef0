package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

func newCron(t *testing.T, e *env, every time.Duration) *Cron {
	t.Helper()
	c, err := NewCron(e.r, every, e.cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	return c
}

func TestNewCronScheduleAndDeadline(t *testing.T) {
	e := newEnv(t)
	c := newCron(t, e, 5*time.Minute)
	if c.Deadline() != DefaultDeadline {
		t.Errorf("deadline for 5m = %s, want %s", c.Deadline(), DefaultDeadline)
	}
	entries := c.cron.Entries()
	if len(entries) != 1 || entries[0].Schedule != cron.Every(5*time.Minute) {
		t.Errorf("schedule = %+v, want @every 5m", entries)
	}
	if short := newCron(t, e, time.Minute); short.Deadline() != 48*time.Second {
		t.Errorf("deadline for 1m = %s, want 48s (shorter than the period)", short.Deadline())
	}
	if _, err := NewCron(e.r, 0, e.cfg.Logger); err == nil {
		t.Error("NewCron accepted a zero period")
	}
}

// Start runs a real pass at once: the queue is rebuilt from GitHub without
// waiting for the period.
func TestCronStartRunsOnePass(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	e.gh.AddPR(app, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	c := newCron(t, e, time.Hour)
	c.Start()
	testkit.Eventually(t, "the start pass", func() bool { return c.Runs() == 1 })
	if c.LastSuccess().IsZero() || c.LastDuration() <= 0 {
		t.Errorf("last success %v, duration %s", c.LastSuccess(), c.LastDuration())
	}
	if sum, err := c.LastSummary(); err != nil || sum.Fixed != 1 {
		t.Errorf("last summary %+v, %v", sum, err)
	}
	if got := e.prs(app); !slices.Equal(got, []int{1}) {
		t.Errorf("queue = %v", got)
	}
	if err := c.Stop(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// Stop cancels a pass stuck on GitHub and returns; the pass releases its
// lease on the way out.
func TestCronStopCancelsRunningPass(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	e.gh.Fail(fakegithub.RouteListPulls, 1, fakegithub.FaultTimeout())
	c := newCron(t, e, time.Hour)
	c.Start()
	testkit.Eventually(t, "the listing to hang under the cron's lease", func() bool {
		st, _ := e.store.Check(e.ctx, e.key(app))
		return st.Locked && st.HeldBy == DefaultBy && e.gh.InFlight() == 1
	})
	stopCtx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Stop took %s", took)
	}
	if st, _ := e.store.Check(e.ctx, e.key(app)); st.Locked || st.HeldBy != "" {
		t.Errorf("lease after Stop = %+v, want released", st)
	}
	if _, err := c.LastSummary(); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("last run error = %v, want cancelled", err)
	}
	c.Start() // after Stop: nothing
	if c.Runs() != 1 {
		t.Errorf("runs = %d", c.Runs())
	}
}

// A panic in a run is recovered and logged, and does not make the next run
// skip (robfig's SkipIfStillRunning must wrap Recover, not the reverse).
func TestCronRecoversPanic(t *testing.T) {
	e := newEnv(t)
	c := newCron(t, e, time.Hour)
	var calls atomic.Int32
	c.run = func(ctx context.Context) (Summary, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return Summary{}, nil
	}
	c.job.Run() // panics inside, recovered
	c.job.Run()
	if calls.Load() != 2 || c.Runs() != 1 || c.LastSuccess().IsZero() {
		t.Errorf("calls %d, runs %d: the run after a panic did not happen", calls.Load(), c.Runs())
	}
	if logs := e.logs.String(); !strings.Contains(logs, "reconcile run panicked (recovered)") || !strings.Contains(logs, "boom") {
		t.Errorf("panic not logged:\n%s", logs)
	}
}

// A panic in one repository's pass (on a worker goroutine, beyond the
// cron's recover) fails that repository only.
func TestRunAllRecoversRepositoryPanic(t *testing.T) {
	e := newEnv(t)
	for _, r := range []string{"octo/a", "octo/b", "octo/c"} {
		e.gh.AddRepo(tenant, r, "main")
	}
	e.r.beforeRepo = func(k leasedo.Key) {
		if k.Repo == "octo/b" {
			panic("repository boom")
		}
	}
	sum, err := e.r.RunAll(e.ctx)
	if err == nil || !strings.Contains(err.Error(), "repository boom") {
		t.Errorf("RunAll error = %v, want the panic reported", err)
	}
	if sum.Failed != 1 || sum.Reconciled != 2 {
		t.Errorf("summary = %+v, want 1 failed, 2 reconciled", sum)
	}
}

// A run still going when the next is due is skipped, not overlapped.
func TestCronSkipsWhileRunning(t *testing.T) {
	e := newEnv(t)
	c := newCron(t, e, time.Hour)
	var active, maxActive, calls atomic.Int32
	release := make(chan struct{})
	c.run = func(ctx context.Context) (Summary, error) {
		calls.Add(1)
		if n := active.Add(1); n > maxActive.Load() {
			maxActive.Store(n)
		}
		defer active.Add(-1)
		<-release
		return Summary{}, nil
	}
	done := make(chan struct{})
	go func() { c.job.Run(); close(done) }()
	testkit.Eventually(t, "the slow run", func() bool { return active.Load() == 1 })
	c.job.Run() // due while the first is running: returns at once
	c.job.Run()
	close(release)
	<-done
	if calls.Load() != 1 || maxActive.Load() != 1 {
		t.Errorf("calls %d, max concurrent %d; want the overlapping runs skipped", calls.Load(), maxActive.Load())
	}
	if !strings.Contains(e.logs.String(), "reconcile run skipped") {
		t.Error("skip not logged")
	}
	c.job.Run() // free again
	if calls.Load() != 2 {
		t.Errorf("run after the slow one: calls %d", calls.Load())
	}
}

// The run's context carries the deadline.
func TestCronRunHasDeadline(t *testing.T) {
	e := newEnv(t)
	c := newCron(t, e, time.Minute)
	var left time.Duration
	c.run = func(ctx context.Context) (Summary, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return Summary{}, errors.New("no deadline")
		}
		left = time.Until(dl)
		return Summary{}, nil
	}
	c.job.Run()
	if left <= 0 || left > 48*time.Second {
		t.Errorf("deadline in %s, want within 48s", left)
	}
}
