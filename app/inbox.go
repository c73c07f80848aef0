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

// drain applies k's pending deliveries in arrival order under l. Each
// delivery's events are applied in the same transaction that marks it done,
// so it is applied exactly once. It returns when a retry is due (a delivery
// in backoff), 0 when the inbox is empty.
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
		for _, d := range ds {
			if wait := d.NextTryAt.Sub(e.clock.Now()); wait > 0 {
				// Arrival order: nothing after d goes before it.
				return clamp(wait, 10*time.Millisecond, time.Minute)
			}
			// Each apply renews the lease inside its own transaction.
			if err := e.applyDelivery(ctx, l, d); err != nil {
				if errors.Is(err, leasedo.ErrLeaseLost) || ctx.Err() != nil {
					return 100 * time.Millisecond
				}
			}
		}
	}
	return 0
}

// applyDelivery translates and applies one delivery. A delivery that cannot
// be translated (malformed) is marked failed at once: retrying cannot fix
// it. One whose apply fails is retried with backoff, then marked failed;
// either way it is kept, with its error, for the operator.
func (e *Engine) applyDelivery(ctx context.Context, l *leasedo.Lease, d leasedo.Delivery) error {
	start := time.Now()
	log := e.log.With().Str("delivery", d.ID).Str("event", d.Event).Str("action", d.Action).
		Str("tenant", d.Tenant).Str("repo", d.Repo).Logger()
	t, err := webhook.Translate(d, e.cfg.Options)
	if err != nil {
		e.fail(ctx, log, d, err, true)
		return err
	}
	b := leasedo.Batch{Events: t.Events}
	if d.Repo != "" {
		b.Track = []leasedo.Key{{Tenant: d.Tenant, Repo: d.Repo}}
		switch {
		case t.Ignored != "":
			meta, _ := webhook.Parse(d.Event, d.Body)
			b.Log = []leasedo.Event{{EventType: d.Event, Action: d.Action, Tenant: d.Tenant, Repo: d.Repo,
				PRNumber: meta.PRNumber, Details: &leasedo.Details{Sha: meta.Sha, Reason: t.Ignored}}}
		case t.Push != nil:
			// No queue action of its own: the engine's next step reads the
			// head's state (behind its base?) from GitHub. Logged for the
			// record, as SPEC §4 asks of every event.
			b.Log = []leasedo.Event{{EventType: d.Event, Action: d.Action, Tenant: d.Tenant, Repo: d.Repo,
				Details: &leasedo.Details{Sha: t.Push.After, Base: t.Push.Ref, Reason: "push to " + t.Push.Ref}}}
		}
	}
	var tracked []leasedo.Key
	if ic := t.Install; ic != nil {
		tracked = installBatch(&b, d.Tenant, ic)
	}
	results, applied, err := e.store.ApplyDelivery(ctx, l, d.Seq, b)
	if err != nil {
		if errors.Is(err, leasedo.ErrLeaseLost) || ctx.Err() != nil {
			log.Warn().Err(err).Msg("delivery left pending")
			return err
		}
		e.fail(ctx, log, d, err, false)
		return err
	}
	if !applied {
		return nil
	}
	e.cfg.Metrics.delivery(d.Event, outcomeOf(t, results), time.Since(start), d.ReceivedAt, e.clock.Now())
	ev := log.Info()
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
	if len(tracked) > 0 && e.cfg.OnTracked != nil {
		e.cfg.OnTracked(tracked)
	}
	return nil
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
