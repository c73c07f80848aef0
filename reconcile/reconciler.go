package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// Defaults of Config.
const (
	DefaultConcurrency      = 16
	DefaultMinRateRemaining = 100
	DefaultDeadline         = 4 * time.Minute
	DefaultGrace            = 30 * time.Second
	DefaultBy               = "reconcile"
)

// Config configures a Reconciler.
type Config struct {
	Store *leasedo.Store
	// Forge is GitHub. nil: no credentials, only the integrity pass
	// (stale leases, duplicates, bounced entries) runs.
	Forge *forge.Client
	// Options are the eligibility triggers (docs/queue.md).
	Options rules.Options
	// Syncer moves a queue on after its resync: the engine's, so that both
	// decide the same way (default: one of the Reconciler's own, on Forge,
	// with Options and the default policy).
	Syncer *Syncer
	// Logger gets one line per repository pass; keys tenant, repo, pr, sha.
	Logger zerolog.Logger
	// OnChange, when set, is called after a pass that changed k's queue or
	// released its dead lease (the app kicks its worker to merge).
	OnChange func(k leasedo.Key)
	// Concurrency is how many repositories are reconciled at once
	// (default 8). Their GitHub requests are further bounded per
	// installation by forge (forge.DefaultInstallationConcurrency, 4), so
	// one RunAll has at most 32 in flight in all, far
	// below GitHub's 100 concurrent requests; RunAll interleaves the
	// installations so that the repositories at once belong to different
	// ones.
	Concurrency int
	// EventReads is how many issue-event reads one repository's resync
	// has in flight when it rebuilds a queue (default 4, forge's
	// per-installation bound: more would only wait on its slots). The
	// per-installation bound on requests is forge's
	// (forge.Config.InstallationConcurrency), which holds every request,
	// the engine's and the cron's alike.
	EventReads int
	// MinRateRemaining: below this many rate-limit points left, a tenant's
	// remaining repositories wait for the next pass (default 100; negative
	// turns the check off).
	MinRateRemaining int
	// Deadline bounds one RunAll started by the Cron (default 4 m; the Cron
	// keeps it shorter than its period).
	Deadline time.Duration
	// Grace protects entries joined or reevaluated this recently from being
	// removed or reevaluated by a listing: GitHub's API can lag behind the
	// webhooks that put them there (default 30 s; negative: none).
	Grace time.Duration
	// Clock is the time source for the grace and rate-limit decisions
	// (default the wall clock). Use the Store's clock.
	Clock leasedo.Clock
	// By names the cron's lease holder (default "reconcile").
	By string
}

// Reconciler runs the cron's passes. It is safe for concurrent use.
type Reconciler struct {
	store      *leasedo.Store
	forge      *forge.Client
	opts       rules.Options
	syncer     *Syncer
	log        zerolog.Logger
	onChange   func(leasedo.Key)
	conc       int
	eventReads int
	minRate    int
	deadline   time.Duration
	grace      time.Duration
	clock      leasedo.Clock
	by         string

	// beforeRepo, when set (tests), runs at the start of each repository's
	// pass inside RunAll.
	beforeRepo func(leasedo.Key)
}

// New returns a Reconciler; zero fields of cfg take their defaults.
func New(cfg Config) *Reconciler {
	r := &Reconciler{
		store: cfg.Store, forge: cfg.Forge, opts: cfg.Options, log: cfg.Logger, onChange: cfg.OnChange,
		conc: cfg.Concurrency, minRate: cfg.MinRateRemaining, deadline: cfg.Deadline,
		grace: cfg.Grace, clock: cfg.Clock, by: cfg.By,
	}
	if r.conc <= 0 {
		r.conc = DefaultConcurrency
	}
	r.eventReads = cfg.EventReads
	if r.eventReads <= 0 {
		r.eventReads = forge.DefaultInstallationConcurrency
	}
	if r.minRate == 0 {
		r.minRate = DefaultMinRateRemaining
	}
	if r.deadline <= 0 {
		r.deadline = DefaultDeadline
	}
	if r.grace == 0 {
		r.grace = DefaultGrace
	}
	if r.clock == nil {
		r.clock = leasedo.SystemClock{}
	}
	if r.by == "" {
		r.by = DefaultBy
	}
	r.syncer = cfg.Syncer
	if r.syncer == nil {
		r.syncer = NewSyncer(SyncConfig{Store: cfg.Store, Forge: cfg.Forge, Clock: r.clock, Logger: cfg.Logger,
			Policy: rules.Policy{Triggers: cfg.Options, CheckTimeout: DefaultCheckTimeout}})
	}
	return r
}

// Pass runs reconcile (docs/lease-protocol.md) for k now, followed by the resync from
// GitHub unless there is no Forge or k's installation is suspended, and
// returns POST /reconcile's answer. A lease held by someone else answers
// *leasedo.LockedError (the caller answers 409); a resync error is returned
// with the answer of what was already fixed.
func (r *Reconciler) Pass(ctx context.Context, k leasedo.Key) (leasedo.ReconcileAnswer, error) {
	resync := r.forge != nil
	if resync {
		suspended, err := r.store.Suspended(ctx, k.Tenant)
		if err != nil {
			return leasedo.ReconcileAnswer{}, err
		}
		resync = !suspended
	}
	return r.pass(ctx, k, resync)
}

// pass is Pass with the resync decided by the caller.
func (r *Reconciler) pass(ctx context.Context, k leasedo.Key, resync bool) (leasedo.ReconcileAnswer, error) {
	var fn leasedo.ResyncFunc
	if resync {
		fn = r.resync
	}
	start := time.Now()
	ans, err := r.store.Reconcile(ctx, k, r.by, fn)
	log := r.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Logger()

	var locked *leasedo.LockedError
	if errors.As(err, &locked) {
		log.Info().Str("held_by", locked.HeldBy).Int64("expires_in_ms", locked.ExpiresIn.Milliseconds()).
			Msgf("lease held by %s, skipping; next pass reconciles", locked.HeldBy)
		return ans, err
	}
	for _, sl := range ans.Results.StaleLeases {
		log.Warn().Str("held_by", sl.HeldBy).Int64("age_ms", sl.AgeMS).Msg("dead lease force-released")
	}
	for _, f := range ans.Results.Fixed {
		log.Info().Int("pr", f.PRNumber).Str("sha", f.PRSha).Str("fix", f.Fix).Func(strIf("detail", f.Detail)).Msg("reconcile fixed")
	}
	changed := len(ans.Results.Fixed) > 0 || len(ans.Results.StaleLeases) > 0
	ev := log.Debug()
	if changed {
		ev = log.Info()
	}
	if err != nil {
		ev = log.Warn().Err(err)
	}
	ev.Int("fixed", len(ans.Results.Fixed)).Int("stale_leases", len(ans.Results.StaleLeases)).
		Int("queue_length", ans.QueueLength).Bool("resync", resync).Int64("took_ms", time.Since(start).Milliseconds()).
		Msg("reconcile pass")
	if changed && r.onChange != nil {
		r.onChange(k)
	}
	return ans, err
}
