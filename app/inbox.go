package app

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/webhook"
)

// drainBatch is how many deliveries one read of the inbox takes.
const drainBatch = 100

// applyBatch is how many deliveries one transaction applies at most: a
// backlog is applied in group commits, while a transaction stays short
// enough not to hold up the webhook's commits (which go first) for long.
const applyBatch = 16

// drain applies k's pending deliveries in arrival order under l. Each
// delivery's events are applied in the same transaction that marks it done,
// so it is applied exactly once; consecutive deliveries share a
// transaction (applyBatch). It returns when a retry is due (a delivery in
// backoff), 0 when the inbox is empty.
func (e *Engine) drain(ctx context.Context, l *leasedo.Lease) time.Duration {
	k := l.Key
	for ctx.Err() == nil {
		ds, err := e.store.Pending(ctx, k, drainBatch)
		if err != nil {
			e.log.Error().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("read pending deliveries")
			return time.Second
		}
		if len(ds) == 0 {
			return 0
		}
		var group []prepared
		flush := func() error {
			err := e.applyGroup(ctx, l, group)
			group = group[:0]
			return err
		}
		for _, d := range ds {
			if wait := d.NextTryAt.Sub(e.clock.Now()); wait > 0 {
				// Arrival order: nothing after d goes before it.
				if err := flush(); err != nil {
					return 100 * time.Millisecond
				}
				return clamp(wait, 10*time.Millisecond, time.Minute)
			}
			p, ok := e.prepare(ctx, d)
			if !ok {
				continue // malformed: marked failed, kept for the operator
			}
			group = append(group, p)
			if len(group) == applyBatch {
				if err := flush(); err != nil {
					return 100 * time.Millisecond
				}
			}
		}
		if err := flush(); err != nil {
			return 100 * time.Millisecond
		}
	}
	return 0
}

// prepared is a delivery translated and ready to apply.
type prepared struct {
	d       leasedo.Delivery
	t       webhook.Translation
	b       leasedo.Batch
	tracked []leasedo.Key
	start   time.Time
	log     zerolog.Logger
}

// prepare translates one delivery. One that cannot be translated
// (malformed) is marked failed at once (ok=false): retrying cannot fix it.
func (e *Engine) prepare(ctx context.Context, d leasedo.Delivery) (prepared, bool) {
	p := prepared{d: d, start: time.Now()}
	p.log = e.log.With().Str("delivery", d.ID).Str("event", d.Event).Str("action", d.Action).
		Str("tenant", d.Tenant).Str("repo", d.Repo).Logger()
	t, err := webhook.Translate(d, e.cfg.Options)
	if err != nil {
		e.fail(ctx, p.log, d, err, true)
		return p, false
	}
	p.t = t
	p.b = leasedo.Batch{Events: t.Events}
	if d.Repo != "" {
		p.b.Track = []leasedo.Key{{Tenant: d.Tenant, Repo: d.Repo}}
		switch {
		case t.Ignored != "":
			meta, _ := webhook.Parse(d.Event, d.Body)
			p.b.Log = []leasedo.Event{{EventType: d.Event, Action: d.Action, Tenant: d.Tenant, Repo: d.Repo,
				PRNumber: meta.PRNumber, Details: &leasedo.Details{Sha: meta.Sha, Reason: t.Ignored}}}
		case t.Push != nil:
			// No queue action of its own: the engine's next step reads the
			// head's state (behind its base?) from GitHub. Logged for the
			// record, as SPEC §4 asks of every event.
			p.b.Log = []leasedo.Event{{EventType: d.Event, Action: d.Action, Tenant: d.Tenant, Repo: d.Repo,
				Details: &leasedo.Details{Sha: t.Push.After, Base: t.Push.Ref, Reason: "push to " + t.Push.Ref}}}
		}
	}
	if ic := t.Install; ic != nil {
		p.tracked = installBatch(&p.b, d.Tenant, ic)
	}
	return p, true
}

// applyGroup applies prepared deliveries in one transaction; if that
// fails for another reason than a lost lease, each is applied on its own,
// so that only the one at fault is retried and, in the end, marked failed.
// It returns an error when the pass must stop (lease lost, shutting down).
func (e *Engine) applyGroup(ctx context.Context, l *leasedo.Lease, group []prepared) error {
	switch len(group) {
	case 0:
		return nil
	case 1:
		return e.applyOne(ctx, l, group[0])
	}
	items := make([]leasedo.Applying, len(group))
	for i, p := range group {
		items[i] = leasedo.Applying{Seq: p.d.Seq, Batch: p.b}
	}
	if _, err := e.store.ApplyDeliveries(ctx, l, items); err != nil {
		if errors.Is(err, leasedo.ErrLeaseLost) || ctx.Err() != nil {
			e.log.Warn().Err(err).Str("tenant", l.Key.Tenant).Str("repo", l.Key.Repo).Int("deliveries", len(group)).Msg("deliveries left pending")
			return err
		}
		for _, p := range group {
			if err := e.applyOne(ctx, l, p); err != nil && (errors.Is(err, leasedo.ErrLeaseLost) || ctx.Err() != nil) {
				return err
			}
		}
		return nil
	}
	for i, p := range group {
		if items[i].Applied {
			e.applied(p, items[i].Results)
		}
	}
	return nil
}

// applyOne applies one prepared delivery in its own transaction. One whose
// apply fails is retried with backoff, then marked failed; either way it is
// kept, with its error, for the operator. The error is returned only when
// the pass must stop.
func (e *Engine) applyOne(ctx context.Context, l *leasedo.Lease, p prepared) error {
	results, applied, err := e.store.ApplyDelivery(ctx, l, p.d.Seq, p.b)
	if err != nil {
		if errors.Is(err, leasedo.ErrLeaseLost) || ctx.Err() != nil {
			p.log.Warn().Err(err).Msg("delivery left pending")
			return err
		}
		e.fail(ctx, p.log, p.d, err, false)
		return nil
	}
	if applied {
		e.applied(p, results)
	}
	return nil
}

// applied records, logs and follows up one applied delivery.
func (e *Engine) applied(p prepared, results []leasedo.Result) {
	d, t := p.d, p.t
	e.cfg.Metrics.delivery(d.Event, outcomeOf(t, results), time.Since(p.start), d.ReceivedAt, e.clock.Now())
	ev := p.log.Info()
	if len(t.Events) > 0 {
		ev = ev.Int("pr", t.Events[0].PRNumber).Str("sha", t.Events[0].Details.Sha)
	}
	for _, r := range results {
		ev = ev.Str("result", r.Result).Int("queue_length", r.QueueLength)
	}
	if t.Ignored != "" {
		ev = ev.Str("result", leasedo.ResultIgnored).Str("reason", t.Ignored)
	}
	ev.Msg("delivery applied")
	if len(p.tracked) > 0 && e.cfg.OnTracked != nil {
		e.cfg.OnTracked(p.tracked)
	}
}

// installBatch turns an installation change into tracking changes and
// returns the repositories newly tracked.
func installBatch(b *leasedo.Batch, tenant string, ic *webhook.InstallChange) []leasedo.Key {
	keys := func(names []string) []leasedo.Key {
		var out []leasedo.Key
		for _, n := range names {
			out = append(out, leasedo.Key{Tenant: tenant, Repo: n})
		}
		return out
	}
	no, yes := false, true
	switch ic.Action {
	case "deleted":
		b.ForgetTenant = true
		return nil
	case "suspend":
		b.Suspend = &yes
		return nil
	case "unsuspend":
		b.Suspend = &no
	case "created":
		b.Suspend = &no
	}
	b.Track = append(b.Track, keys(ic.Added)...)
	b.Forget = append(b.Forget, keys(ic.Removed)...)
	return keys(ic.Added)
}

func (e *Engine) fail(ctx context.Context, log zerolog.Logger, d leasedo.Delivery, cause error, permanent bool) {
	max := e.cfg.MaxAttempts
	if permanent {
		max = 1
	}
	backoff := time.Duration(1<<min(d.Attempts, 8)) * time.Second
	failed, err := e.store.FailDelivery(ctx, d.Seq, cause, backoff, max)
	if err != nil {
		log.Error().Err(err).AnErr("cause", cause).Msg("could not record the delivery's failure; it stays pending")
		return
	}
	if failed {
		e.cfg.Metrics.delivery(d.Event, "failed", 0, d.ReceivedAt, e.clock.Now())
		log.Error().Err(cause).Int("attempts", d.Attempts+1).Msg("delivery failed; kept for the operator (GET /queue, dashboard)")
		return
	}
	log.Warn().Err(cause).Int("attempts", d.Attempts+1).Dur("retry_in", backoff).Msg("delivery failed; will retry")
}

func outcomeOf(t webhook.Translation, results []leasedo.Result) string {
	if t.Ignored != "" {
		return "ignored"
	}
	if len(results) > 0 {
		return results[0].Result
	}
	if t.Install != nil {
		return "installation"
	}
	return "applied"
}
