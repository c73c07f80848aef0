package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/reconcile"
	"github.com/mergegate/mergegate/rules"
)

// EngineConfig wires the engine.
type EngineConfig struct {
	Store *leasedo.Store
	// Syncer moves a repository's queue on after its deliveries are
	// applied (nil: no GitHub; deliveries are applied, gates wait).
	Syncer  *reconcile.Syncer
	Options rules.Options
	Clock   leasedo.Clock
	Logger  zerolog.Logger
	// By is the holder's name in the leases the engine takes (held_by):
	// "<replica>/worker" (default "worker").
	By string
	// MaxAttempts before a delivery that keeps failing is marked failed.
	MaxAttempts int
	// Retention of processed deliveries before they are pruned.
	Retention time.Duration
	// BodyRetention of the payloads of applied deliveries, before they
	// are dropped (their rows stay for Retention); default 24 h, at most
	// Retention. Pending and failed deliveries keep theirs.
	BodyRetention time.Duration
	// PruneEvery is how often they are pruned (default 10 m, or half the
	// shorter retention when that is shorter).
	PruneEvery time.Duration
	// OnTracked is told of repositories an installation event added, so
	// they can be resynced at once (the cron's pass for one repository).
	OnTracked func(keys []leasedo.Key)
	Metrics   *Metrics // nil: none
}

// Engine drains the inbox per (tenant, repo), in arrival order, under the
// repository's lease, and then runs the repository's sync (the same the
// cron runs): read each entry from GitHub, decide, act. One goroutine per
// active repository; a repository with nothing to do has none.
type Engine struct {
	cfg    EngineConfig
	store  *leasedo.Store
	syncer *reconcile.Syncer
	clock  leasedo.Clock
	log    zerolog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	unlisten func() // the store's release callbacks, from Start to Stop

	mu      sync.Mutex
	workers map[leasedo.Key]*worker
	wg      sync.WaitGroup
	started bool
	stopped bool

	// due is each repository's nearest check_timeout deadline, as its
	// last sync reported it (Deadline); dueChanged wakes the loop that
	// keeps one timer for the soonest (deadlines).
	due        map[leasedo.Key]time.Time
	dueChanged chan struct{}
}

type worker struct {
	key  leasedo.Key
	wake chan struct{}
	busy bool // woken, in a pass, or a retry is scheduled (guarded by Engine.mu)
	// held: the last pass found the lease held by someone else, and its
	// release is to wake the worker (guarded by Engine.mu).
	held bool
}

// NewEngine returns an engine; Start runs it.
func NewEngine(cfg EngineConfig) *Engine {
	if cfg.Clock == nil {
		cfg.Clock = leasedo.SystemClock{}
	}
	if cfg.By == "" {
		cfg.By = "worker"
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 72 * time.Hour
	}
	if cfg.BodyRetention <= 0 {
		cfg.BodyRetention = 24 * time.Hour
	}
	cfg.BodyRetention = min(cfg.BodyRetention, cfg.Retention)
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = min(10*time.Minute, max(cfg.BodyRetention/2, time.Second))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Engine{
		cfg: cfg, store: cfg.Store, syncer: cfg.Syncer, clock: cfg.Clock, log: cfg.Logger,
		ctx: ctx, cancel: cancel,
		workers: map[leasedo.Key]*worker{},
		due:     map[leasedo.Key]time.Time{}, dueChanged: make(chan struct{}, 1),
	}
}

// Start resumes every repository with pending deliveries (what a crash or
// restart left) and starts the housekeeping loop.
func (e *Engine) Start() error {
	keys, err := e.store.PendingKeys(e.ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.started = true
	e.mu.Unlock()
	// A lease given back (by this process, or on PostgreSQL by any
	// replica) wakes the worker that found it held, instead of its retry;
	// when the database's notifications may have been missed (its
	// listening connection came back), the sweep runs at once.
	e.unlisten = e.store.DB().OnRelease(e.wake, func() { go e.sweep(e.ctx) })
	for _, k := range keys {
		e.Kick(k)
	}
	if len(keys) > 0 {
		e.log.Info().Int("repos", len(keys)).Msg("resuming pending deliveries")
	}
	e.wg.Add(2)
	go e.housekeeping()
	go e.deadlines()
	return nil
}

// Stop stops the workers and waits for them. Each releases the leases it
// holds (and only those) on its way out.
func (e *Engine) Stop() {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	if e.unlisten != nil {
		e.unlisten()
	}
	e.cancel()
	e.wg.Wait()
}

// Kick wakes k's worker, starting one if none runs. Before Start (a
// one-shot command) and after Stop it does nothing.
func (e *Engine) Kick(k leasedo.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started || e.stopped {
		return
	}
	w := e.workers[k]
	if w == nil {
		w = &worker{key: k, wake: make(chan struct{}, 1)}
		e.workers[k] = w
		e.wg.Add(1)
		go e.run(w)
	}
	// Busy from the wake-up on, under the lock that Busy reads: the worker
	// takes the wake-up before it runs the pass, and Busy must not see the
	// moment in between as idle.
	w.busy = true
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wake wakes k's worker if it waits for k's lease, which was just given
// back (by someone else: a worker's own release wakes nothing).
func (e *Engine) wake(k leasedo.Key) {
	e.mu.Lock()
	w := e.workers[k]
	waiting := w != nil && w.held
	e.mu.Unlock()
	if waiting {
		e.Kick(k)
	}
}

// heldBy notes that k's lease was found held by someone else: its
// release wakes k's worker.
func (e *Engine) heldBy(k leasedo.Key) {
	e.mu.Lock()
	if w := e.workers[k]; w != nil {
		w.held = true
	}
	e.mu.Unlock()
}

// kickIdle starts a worker for k unless one runs: a running worker has a
// wake-up or a retry of its own, and a sweep must not cut its pause short.
func (e *Engine) kickIdle(k leasedo.Key) {
	e.mu.Lock()
	running := e.workers[k] != nil
	e.mu.Unlock()
	if !running {
		e.Kick(k)
	}
}

// Busy counts repositories with work under way or due: a pass running, a
// wake-up pending or a retry scheduled. Tests and replay wait for 0.
func (e *Engine) Busy() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, w := range e.workers {
		if w.busy || len(w.wake) > 0 {
			n++
		}
	}
	return n
}

// Deadline records k's nearest check_timeout deadline (zero: none), as a
// sync reports it (reconcile.SyncConfig.OnDeadline): k's sync runs again
// then, and the bounce happens within moments of the deadline rather than
// at the next event or cron pass. It is not work under way (Busy): a
// deadline an hour away is no reason to wait.
func (e *Engine) Deadline(k leasedo.Key, at time.Time) {
	e.mu.Lock()
	if at.IsZero() {
		delete(e.due, k)
	} else {
		e.due[k] = at
	}
	e.mu.Unlock()
	select {
	case e.dueChanged <- struct{}{}:
	default:
	}
}

// deadlines keeps one timer, on the injected clock, for the soonest
// deadline of all repositories, and kicks every repository whose deadline
// came.
func (e *Engine) deadlines() {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		var next time.Time
		for _, at := range e.due {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		e.mu.Unlock()
		var timer leasedo.Timer
		var fired <-chan time.Time
		if !next.IsZero() {
			timer = e.clock.NewTimer(next.Sub(e.clock.Now()))
			fired = timer.C()
		}
		select {
		case <-e.ctx.Done():
		case <-e.dueChanged:
		case <-fired:
			now := e.clock.Now()
			var keys []leasedo.Key
			e.mu.Lock()
			for k, at := range e.due {
				if !at.After(now) {
					keys = append(keys, k)
					delete(e.due, k)
				}
			}
			e.mu.Unlock()
			for _, k := range keys {
				e.Kick(k)
			}
		}
		if timer != nil {
			timer.Stop()
		}
		if e.ctx.Err() != nil {
			return
		}
	}
}

// idleExit is how long a worker with nothing to do waits before exiting.
const idleExit = 2 * time.Second

// run is k's worker: a pass on each wake-up or due retry. The retry waits
// on the injected clock (tests and replay move it); the idle exit is on
// the wall clock, since a worker's exit changes no state and a stopped
// test clock must not keep workers alive forever or move time for them.
func (e *Engine) run(w *worker) {
	defer e.wg.Done()
	var retry leasedo.Timer // nil: none scheduled
	var retryC <-chan time.Time
	stopRetry := func() {
		if retry != nil {
			retry.Stop()
			retry, retryC = nil, nil
		}
	}
	defer stopRetry()
	idle := time.NewTimer(idleExit)
	defer idle.Stop()
	for {
		select {
		case <-e.ctx.Done():
			e.removeWorker(w)
			return
		case <-w.wake:
		case <-retryC:
		case <-idle.C:
			e.mu.Lock()
			if len(w.wake) == 0 && retry == nil {
				delete(e.workers, w.key)
				e.mu.Unlock()
				return
			}
			e.mu.Unlock()
			idle.Reset(idleExit)
			continue
		}
		stopRetry() // a wake-up runs the pass the retry was for
		e.mu.Lock()
		w.held = false
		e.mu.Unlock()
		d := e.sync(w.key)
		if d > 0 {
			retry = e.clock.NewTimer(d)
			retryC = retry.C()
		}
		e.mu.Lock()
		w.busy = d > 0 || len(w.wake) > 0 // a wake-up that came during the pass is work
		e.mu.Unlock()
		idle.Reset(idleExit)
	}
}

func (e *Engine) removeWorker(w *worker) {
	e.mu.Lock()
	if e.workers[w.key] == w {
		delete(e.workers, w.key)
	}
	e.mu.Unlock()
}

// sweepEvery is how often housekeeping looks for repositories with work no
// worker has: pending deliveries whose backoff ended, and what a process
// beside the server (mergegate reconcile on the database) left to do.
const sweepEvery = 5 * time.Second

// housekeeping prunes processed deliveries and sweeps for due work, so that
// nothing waits on a wake-up that never comes. Its tickers are on the wall
// clock, like a worker's idle exit: they are a safety net whose timing
// changes no decision (the prune's cutoff and every retry are on the
// injected clock), and a timer that is always due within seconds would
// make a test clock that moves to the next due timer move all the time.
func (e *Engine) housekeeping() {
	defer e.wg.Done()
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	prune := time.NewTicker(e.cfg.PruneEvery)
	defer prune.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-sweep.C:
			e.sweep(e.ctx)
		case <-prune.C:
			e.pruneOnce(e.ctx) // one replica at a time (cluster.go)
		}
	}
}

// sweep starts a worker for each repository with due work and none: on
// PostgreSQL that is also work other replicas left (a dead one's) or
// whose wake-up was lost.
func (e *Engine) sweep(ctx context.Context) {
	keys, err := e.store.DueKeys(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error().Err(err).Msg("sweep for due work")
		}
		return
	}
	for _, k := range keys {
		e.kickIdle(k)
	}
}

// Prune deletes processed deliveries older than the retention period and
// the bodies of those older than the body retention, then gives the space
// they leave back to the filesystem, a step at a time: each step is one
// short write on the writer's turn, and the webhooks' commits go first.
func (e *Engine) Prune(ctx context.Context) {
	start := time.Now()
	now := e.clock.Now()
	n, err := e.store.Prune(ctx, now.Add(-e.cfg.Retention))
	if err != nil {
		e.log.Error().Err(err).Msg("pruning processed deliveries failed; the next pass tries again")
		return
	}
	bodies, err := e.store.DropBodies(ctx, now.Add(-e.cfg.BodyRetention))
	if err != nil {
		e.log.Error().Err(err).Msg("drop delivery bodies")
		return
	}
	var freed int64
	for ctx.Err() == nil {
		pages, more, err := e.store.DB().FreePages(ctx)
		if err != nil {
			e.log.Error().Err(err).Msg("give free pages back")
			return
		}
		freed += pages
		if !more {
			break
		}
	}
	if n > 0 || bodies > 0 || freed > 0 {
		e.log.Info().Int64("deleted", n).Int64("bodies_dropped", bodies).Int64("freed_bytes", freed*e.store.DB().PageSize()).
			Int64("took_ms", time.Since(start).Milliseconds()).Msg("pruned processed deliveries")
	}
}

// sync is one pass over k: drain its inbox, then advance its queue. It
// returns how long to wait before the next pass when work remains (a held
// lease, a backoff, a rate limit), 0 when it is done until the next kick.
func (e *Engine) sync(k leasedo.Key) time.Duration {
	ctx := e.ctx
	retry := e.drain(ctx, k) // takes and gives back the lease per batch
	if k.Repo == "" || e.syncer == nil || ctx.Err() != nil {
		return retry // no GitHub: gates wait (said once at start)
	}
	l, err := e.store.Acquire(ctx, k, e.cfg.By)
	if err != nil {
		var le *leasedo.LockedError
		if errors.As(err, &le) {
			e.log.Debug().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("held_by", le.HeldBy).Msg("lease held; will retry")
			e.heldBy(k)
			return minRetry(retry, heldRetry(le))
		}
		if ctx.Err() == nil {
			e.log.Error().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("taking the repository's lease failed; the repository is synced again in a second")
		}
		return minRetry(retry, time.Second)
	}
	defer func() {
		if _, err := e.store.Release(context.WithoutCancel(ctx), l); err != nil {
			e.log.Error().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("giving the repository's lease back failed; it lapses after --lease-ttl")
		}
	}()
	wait, err := e.syncer.Sync(ctx, l)
	if err != nil {
		wait = minRetry(wait, e.retryAfter(k, err))
	}
	return minRetry(retry, wait)
}

// retryAfter sorts an error of a sync for the operator, in the log, and
// says when to come back.
func (e *Engine) retryAfter(k leasedo.Key, err error) time.Duration {
	log := e.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Logger()
	if rl, ok := forge.IsRateLimited(err); ok {
		wait := rl.RetryAt.Sub(e.clock.Now())
		log.Warn().Time("retry_at", rl.RetryAt).Bool("secondary", rl.Secondary).Bool("graphql", rl.GraphQL).Msg("GitHub rate limit: the queue waits")
		return clamp(wait, time.Second, 15*time.Minute)
	}
	if be, ok := forge.IsWriteBudget(err); ok {
		// Said once per change by forge; the queue goes on when it may.
		log.Debug().Str("class", be.Class.String()).Time("retry_at", be.RetryAt).Msg("write held back by the write budget")
		return clamp(be.RetryAt.Sub(e.clock.Now()), time.Second, 15*time.Minute)
	}
	switch {
	case errors.Is(err, leasedo.ErrLeaseLost):
		log.Warn().Msg("lease taken over during a pass; retrying")
		return 100 * time.Millisecond
	case forge.IsTransient(err):
		log.Warn().Err(err).Msg("GitHub unavailable: the queue waits")
		return 5 * time.Second
	case e.ctx.Err() != nil:
		return 0
	}
	if needs, ok := forge.MissingPermission(err); ok {
		ev := log.Error().Err(err)
		if needs != "" {
			ev = ev.Str("needs", needs)
		}
		ev.Msg("GitHub refused a request the App's permissions on this installation do not cover; the queue retries in a minute (operator: give the App what app.yml asks for, and accept it on the installation; needs is what GitHub says the request needs)")
		return time.Minute
	}
	log.Error().Err(err).Msg("queue step failed; retrying in a minute (operator: check the App's permissions and installation)")
	return time.Minute
}

// heldRetry is when to try again a repository whose lease someone else
// holds: when it expires, at the latest in 5 s, at the earliest in 50 ms
// (another replica's claim, held for one transaction, has no expiry). Its
// release wakes the worker sooner (Engine.wake).
func heldRetry(le *leasedo.LockedError) time.Duration {
	return clamp(le.ExpiresIn, 50*time.Millisecond, 5*time.Second)
}

// minRetry is the sooner of two retry delays, where 0 means none.
func minRetry(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return max(lo, min(d, hi))
}
