package app

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/reconcile"
	"github.com/mergegate/mergegate/webhook"
)

// The redelivery sweep. GitHub does not redeliver a webhook it could not
// hand over (mergegate down, a 503 while the disk was full, a timeout); it
// keeps each attempt for a few days and redelivers one on request. Once at
// start and on each cron pass, the sweep lists the App's recent attempts,
// newest first, and asks GitHub to redeliver every delivery (GUID) that no
// attempt handed over and that the inbox does not hold, oldest first, at
// most Budget a pass.
const (
	// RedeliveryWindow is how far back GitHub.com redelivers ("deliveries
	// from the past 3 days"; GitHub Enterprise Server keeps 7).
	RedeliveryWindow = 72 * time.Hour
	// DefaultRedeliverBudget is the default of Config.RedeliverBudget.
	DefaultRedeliverBudget = 20
	// redeliverTries bounds the requests for one GUID while this process
	// runs: a delivery mergegate refuses by design (a bad signature, a
	// repository hook) fails every redelivery the same way.
	redeliverTries = 3
	// redeliverMaxScan bounds the attempts one pass lists (100 a page).
	redeliverMaxScan = 5000
	// redeliverOverlap is how far before the newest attempt seen by the
	// last complete pass the next one reads again: GitHub lists an attempt
	// once its answer came, up to its 10 s timeout after delivered_at.
	redeliverOverlap = time.Minute
	// redeliverPassTimeout bounds one sweep within the cron's run.
	redeliverPassTimeout = time.Minute
)

// RedeliverySummary is what one sweep did.
type RedeliverySummary struct {
	Scanned   int  // attempts listed
	Failed    int  // GUIDs no attempt handed over, within the window
	Stored    int  // ... of which the inbox holds (GitHub saw a failure after the commit)
	Requested int  // redeliveries GitHub accepted (202)
	Refused   int  // redelivery requests GitHub refused or that failed
	Left      int  // candidates left for the next pass (budget)
	GaveUp    int  // candidates asked for redeliverTries times already
	Complete  bool // the listing reached the window's edge or the last pass's mark
	// Elsewhere: on SQLite, GUIDs GitHub says were handed over since this
	// process started that the database never stored: another mergegate
	// answers the App's webhooks (logged at error, every pass).
	Elsewhere int
}

// redeliverer runs the sweep for one GitHub client. Safe for concurrent
// use; passes are serialised.
type redeliverer struct {
	forge   *forge.Client
	store   *leasedo.Store
	clock   leasedo.Clock
	log     zerolog.Logger
	metrics *Metrics
	budget  int
	window  time.Duration
	by      string // the job's lease holder: "<replica>/redeliver"

	started time.Time // when this process started (its clock)

	mu   sync.Mutex
	mark time.Time            // newest attempt seen by the last complete pass
	sent map[string]guidTries // GUID -> redeliveries asked for by this process
}

type guidTries struct {
	n    int
	last time.Time // the newest attempt's delivered_at, to forget it after the window
}

// newRedeliverer returns the sweep, or nil when it is off (no GitHub, or a
// budget of 0). The window is GitHub's, shortened to the retention period:
// a delivery pruned from the inbox would otherwise look never stored.
func newRedeliverer(fc *forge.Client, store *leasedo.Store, cfg Config, log zerolog.Logger, m *Metrics) *redeliverer {
	if fc == nil || cfg.RedeliverBudget <= 0 {
		return nil
	}
	window := RedeliveryWindow
	if cfg.Retention > 0 && cfg.Retention < window {
		window = cfg.Retention
	}
	return &redeliverer{
		forge: fc, store: store, clock: cfg.Clock, log: log, metrics: m,
		budget: cfg.RedeliverBudget, window: window, sent: map[string]guidTries{}, by: cfg.Replica + "/redeliver",
		started: cfg.Clock.Now(),
	}
}

// guidState is what the listing said about one GUID.
type guidState struct {
	guid     string
	ok       bool               // some attempt was handed over
	latest   forge.HookDelivery // the newest attempt: the one to redeliver
	first    time.Time          // the oldest attempt listed: when the event happened
	attempts int
}

// Sweep is one pass. Errors listing are returned (the next pass tries
// again); a refused redelivery is logged and counted.
func (r *redeliverer) Sweep(ctx context.Context) (RedeliverySummary, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, redeliverPassTimeout)
	defer cancel()

	var sum RedeliverySummary
	now := r.clock.Now()
	edge := now.Add(-r.window)
	stop := edge
	if !r.mark.IsZero() && r.mark.Add(-redeliverOverlap).After(stop) {
		stop = r.mark.Add(-redeliverOverlap)
	}
	var newest time.Time
	guids := map[string]*guidState{}
	ended := true // the listing ended by itself, or at stop
	err := r.forge.ListHookDeliveries(ctx, func(d forge.HookDelivery) bool {
		if d.DeliveredAt.Before(stop) {
			return false
		}
		if sum.Scanned >= redeliverMaxScan {
			ended = false
			return false
		}
		sum.Scanned++
		if d.DeliveredAt.After(newest) {
			newest = d.DeliveredAt
		}
		if d.GUID == "" {
			return true
		}
		g := guids[d.GUID]
		if g == nil {
			g = &guidState{guid: d.GUID, latest: d, first: d.DeliveredAt}
			guids[d.GUID] = g
		}
		g.attempts++
		g.ok = g.ok || d.OK()
		if d.DeliveredAt.Before(g.first) {
			g.first = d.DeliveredAt
		}
		if d.DeliveredAt.After(g.latest.DeliveredAt) || (d.DeliveredAt.Equal(g.latest.DeliveredAt) && d.ID > g.latest.ID) {
			g.latest = d
		}
		return true
	})
	if err != nil {
		return sum, err
	}
	sum.Complete = ended

	var failed []*guidState
	var ids []string
	for _, g := range guids {
		if !g.ok {
			failed = append(failed, g)
			ids = append(ids, g.guid)
		}
	}
	sum.Failed = len(failed)
	known, err := r.store.KnownDeliveries(ctx, ids)
	if err != nil {
		return sum, err
	}
	if err := r.answeredElsewhere(ctx, guids, &sum); err != nil {
		return sum, err
	}
	var todo []*guidState
	for _, g := range failed {
		switch {
		case known[g.guid]:
			sum.Stored++
		case r.sent[g.guid].n >= redeliverTries:
			sum.GaveUp++
		default:
			todo = append(todo, g)
		}
	}
	// Oldest event first: the queue applies deliveries in arrival order.
	sort.Slice(todo, func(i, j int) bool {
		a, b := todo[i], todo[j]
		if !a.first.Equal(b.first) {
			return a.first.Before(b.first)
		}
		return a.latest.ID < b.latest.ID
	})
	if len(todo) > r.budget {
		sum.Left += len(todo) - r.budget
		todo = todo[:r.budget]
	}
	for _, g := range todo {
		d := g.latest
		log := withNonEmpty(r.log.With().Str("delivery", d.GUID).Str("event", d.Event),
			"action", d.Action, "tenant", d.Tenant).Int("status_code", d.StatusCode).Logger()
		tries := r.sent[d.GUID]
		tries.n++
		tries.last = d.DeliveredAt
		r.sent[d.GUID] = tries
		err := r.forge.RedeliverHookDelivery(ctx, d.ID)
		if err != nil {
			sum.Refused++
			r.metrics.redelivery("failed")
			log.Warn().Err(err).Msg("redelivery request failed")
			var ae *forge.APIError
			if errors.As(err, &ae) && ae.Status == 422 {
				// GitHub will not redeliver it (too old): do not ask again.
				tries.n = redeliverTries
				r.sent[d.GUID] = tries
			}
			if _, limited := forge.IsRateLimited(err); limited || ctx.Err() != nil {
				sum.Left += len(todo) - sum.Requested - sum.Refused
				break
			}
			continue
		}
		sum.Requested++
		r.metrics.redelivery("accepted")
		log.Info().Int("attempts", g.attempts).Time("delivered_at", d.DeliveredAt).
			Msg("asked GitHub to redeliver a delivery it could not hand over")
	}
	// The mark moves only when every candidate of the pass was dealt with:
	// otherwise the next pass reads the whole window again for those left.
	if sum.Complete && sum.Left == 0 && sum.Refused == 0 && !newest.IsZero() {
		r.mark = newest
	}
	for guid, t := range r.sent {
		if t.last.Before(edge) {
			delete(r.sent, guid)
		}
	}
	ev := r.log.Debug()
	if sum.Requested > 0 || sum.Refused > 0 || sum.Left > 0 {
		ev = r.log.Info()
	}
	ev.Int("scanned", sum.Scanned).Int("failed", sum.Failed).Int("stored", sum.Stored).
		Int("requested", sum.Requested).Int("refused", sum.Refused).Int("left", sum.Left).
		Int("gave_up", sum.GaveUp).Bool("complete", sum.Complete).Msg("redelivery sweep")
	return sum, nil
}

// run is the sweep as the cron calls it: errors are logged, not returned
// (the reconcile pass runs regardless). Within the cron's run it is the
// replicas' singleton job, claimed for the run's period
// (reconcile.ClaimPeriod): one replica sweeps a period, so GitHub is
// asked once for each lost delivery.
func (r *redeliverer) run(ctx context.Context) {
	sweep := func(ctx context.Context, _ *leasedo.Lease) error {
		_, err := r.Sweep(ctx)
		return err
	}
	var err error
	if every, ok := reconcile.ClaimPeriod(ctx); ok {
		_, err = r.store.RunJob(ctx, leasedo.JobRedeliver, r.by, every, sweep)
	} else {
		err = sweep(ctx, nil)
	}
	if err != nil {
		r.log.Warn().Err(err).Msg("redelivery sweep: listing the App's webhook deliveries failed; the next pass tries again")
	}
}

// redelivery counts one redelivery request by result.
func (m *Metrics) redelivery(result string) {
	if m == nil {
		return
	}
	m.redeliveries.WithLabelValues(result).Inc()
}

// answeredElsewhere: on SQLite, one process is the App's only receiver, so
// every delivery GitHub handed over since this process started is in its
// database. Those that are not were acknowledged by another mergegate
// with a database of its own (several replicas each given a SQLite file):
// two queues merge in the same repositories. Said loudly, each pass.
func (r *redeliverer) answeredElsewhere(ctx context.Context, guids map[string]*guidState, sum *RedeliverySummary) error {
	if r.store.DB().Postgres() {
		return nil // shared by the replicas: any of them stored it
	}
	var ids []string
	for _, g := range guids {
		if g.ok && !g.first.Before(r.started) && webhook.Subscribed(g.latest.Event) && g.latest.Event != "ping" {
			ids = append(ids, g.guid)
		}
	}
	known, err := r.store.KnownDeliveries(ctx, ids)
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range ids {
		if !known[id] {
			missing = append(missing, id)
		}
	}
	sum.Elsewhere = len(missing)
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	r.log.Error().Int("deliveries", len(missing)).Str("delivery", missing[0]).Str("db", r.store.DB().Describe()).
		Msg("another mergegate answers this App's webhooks: GitHub says it handed over deliveries since this process started that this SQLite database never stored. " +
			"Two processes with databases of their own merge in the same repositories: stop the other one, or run every replica on one PostgreSQL database (docs/operations.md, \"Running several replicas\")")
	return nil
}
