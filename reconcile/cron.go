package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"
)

// Cron runs Reconciler.RunAll once at Start and then every period, with
// robfig/cron. A run never overlaps the previous one (SkipIfStillRunning),
// a panic is recovered and logged (Recover), and each run's context ends at
// a deadline shorter than the period, or when Stop is called.
type Cron struct {
	every    time.Duration
	deadline time.Duration
	log      zerolog.Logger
	cron     *cron.Cron
	job      cron.Job // the wrapped run: shared by the start run and the schedule

	// run is one pass (r.RunAll); tests replace it.
	run func(ctx context.Context) (Summary, error)
	// alone reports whether no other replica is alive on the database
	// (the start-up run's claims then always win); first: the start-up
	// run is still to come.
	alone func(ctx context.Context) bool
	first bool

	base   context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	stopped  bool
	started  bool
	running  sync.WaitGroup
	lastOK   time.Time
	lastDur  time.Duration
	lastSum  Summary
	lastErr  error
	runCount int
}

// NewCron schedules r.RunAll "@every <every>", claimed for the period
// across the replicas on the database (ClaimPeriod). The run's deadline is the
// Reconciler's Deadline, cut to four fifths of the period when it is not
// shorter than the period.
func NewCron(r *Reconciler, every time.Duration, logger zerolog.Logger) (*Cron, error) {
	if every < time.Second {
		return nil, fmt.Errorf("reconcile period %s: must be at least 1s", every)
	}
	deadline := r.deadline
	if deadline >= every {
		deadline = every * 4 / 5
	}
	c := &Cron{every: every, deadline: deadline, log: logger, run: r.RunAll, first: true,
		alone: func(ctx context.Context) bool {
			if r.store == nil || !r.store.DB().Postgres() {
				return true // one process to a SQLite file
			}
			n, err := r.store.LiveReplicas(ctx)
			return err != nil || n <= 1
		}}
	c.base, c.cancel = context.WithCancel(context.Background())
	cl := cronLogger{logger}
	// Order matters: robfig's SkipIfStillRunning (v3.0.1) gives its token
	// back only when the job returns normally, so Recover must be inside
	// it, or one panic would make every later run skip.
	c.job = cron.NewChain(cron.SkipIfStillRunning(cl), cron.Recover(cl)).Then(cron.FuncJob(c.tick))
	c.cron = cron.New(cron.WithLogger(cl))
	if _, err := c.cron.AddJob("@every "+every.String(), c.job); err != nil {
		return nil, fmt.Errorf("reconcile period %s: %w", every, err)
	}
	return c, nil
}

// Deadline is the bound of one run.
func (c *Cron) Deadline() time.Duration { return c.deadline }

// Start runs one pass now (in the background) and starts the schedule.
// Calling it again, or after Stop, does nothing.
func (c *Cron) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.stopped {
		return
	}
	c.started = true
	c.cron.Start()
	go c.job.Run()
}

// Stop stops the schedule, cancels a running pass and waits for it to
// return (its lease is released on the way out), or for ctx to end.
func (c *Cron) Stop(ctx context.Context) error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	cronDone := c.cron.Stop()
	done := make(chan struct{})
	go func() {
		c.running.Wait()
		<-cronDone.Done()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("reconcile cron stop: %w", ctx.Err())
	}
}

// tick is one scheduled (or start) run, inside the cron's wrappers.
func (c *Cron) tick() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.running.Add(1)
	c.mu.Unlock()
	defer c.running.Done()

	ctx, cancel := context.WithTimeoutCause(c.base, c.deadline, errors.New("reconcile run deadline"))
	defer cancel()
	// The run's singleton work is claimed for the period across the
	// replicas on the database, except at start with no other replica
	// alive: a process that was down catches up at once, as it always did
	// (its claims, recorded, still keep a replica starting beside it from
	// doing the same work again).
	period := c.every
	c.mu.Lock()
	first := c.first
	c.first = false
	c.mu.Unlock()
	if first && c.alone != nil && c.alone(ctx) {
		period = 0
	}
	ctx = context.WithValue(ctx, claimKey{}, period)
	start := time.Now()
	sum, err := c.run(ctx)
	took := time.Since(start)

	c.mu.Lock()
	c.runCount++
	c.lastDur, c.lastSum, c.lastErr = took, sum, err
	if err == nil {
		c.lastOK = start.Add(took)
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Warn().Err(err).Int64("took_ms", took.Milliseconds()).Msg("reconcile run incomplete")
	}
}

// LastSuccess is when the last run that ended without error ended (zero
// before the first).
func (c *Cron) LastSuccess() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastOK
}

// LastDuration is how long the last run took, successful or not.
func (c *Cron) LastDuration() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastDur
}

// LastSummary returns the last run's summary and error.
func (c *Cron) LastSummary() (Summary, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSum, c.lastErr
}

// Runs is how many runs have ended (panicked ones excluded).
func (c *Cron) Runs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runCount
}

// cronLogger adapts zerolog to robfig's Logger. robfig's routine messages
// (schedule, wake, run) go to debug; a skipped run is info; errors (panics
// with their stack) are errors.
type cronLogger struct{ l zerolog.Logger }

func (c cronLogger) Info(msg string, kv ...any) {
	ev := c.l.Debug()
	if msg == "skip" {
		ev = c.l.Info()
		msg = "reconcile run skipped: the previous one is still running"
	}
	ev.Fields(kv).Msg(msg)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	if msg == "panic" {
		msg = "reconcile run panicked (recovered)"
	}
	c.l.Error().Err(err).Fields(kv).Msg(msg)
}

type claimKey struct{}

// ClaimPeriod is the period for which a Cron's run claims its work across
// the replicas on one database (each repository's pass, discovery, the
// redelivery sweep): a claim wins when the last was made at least 4/5 of
// it ago; 0: it always wins (the start-up run of a replica alone). ok is
// false outside a Cron's run: nothing is claimed.
func ClaimPeriod(ctx context.Context) (every time.Duration, ok bool) {
	every, ok = ctx.Value(claimKey{}).(time.Duration)
	return every, ok
}
