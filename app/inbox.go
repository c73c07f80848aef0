package app

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/webhook"
)

// applyBatch is how many of one repository's deliveries a transaction
// applies at most: a backlog is applied in group commits, while a
// transaction stays short enough not to hold up the webhook's commits
// (which go first) for long.
const applyBatch = 16

// drain applies k's pending deliveries in arrival order, applyBatch per
// transaction; each transaction takes and gives back k's lease itself
// (leasedo.Store.Drain), so a pass costs one commit per batch and no
// separate lease writes. A delivery's events are applied in the
// transaction that marks it done: it is applied exactly once. drain
// returns when a retry is due (the lease held by someone else, a delivery
// in backoff), 0 when the inbox is empty.
func (e *Engine) drain(ctx context.Context, k leasedo.Key) time.Duration {
	policy := leasedo.DrainPolicy{MaxAttempts: e.cfg.MaxAttempts} // backoff 1 s, 2 s, 4 s, ...
	for ctx.Err() == nil {
		preps := map[int64]prepared{}
		res, err := e.store.Drain(ctx, k, e.cfg.By, applyBatch, func(d leasedo.Delivery) (leasedo.Batch, error) {
			p, err := e.prepare(d)
			preps[d.Seq] = p
			return p.b, err
		}, policy)
		var le *leasedo.LockedError
		switch {
		case errors.As(err, &le):
			// Held by the cron, an operator or another process: the
			// deliveries stay pending and are retried, never dropped.
			e.log.Debug().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("held_by", le.HeldBy).Msg("lease held; will retry")
			e.heldBy(k)
			return heldRetry(le)
		case err != nil:
			if ctx.Err() == nil {
				e.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("deliveries left pending; will retry")
			}
			return time.Second
		}
		for _, r := range res.Done {
			p := preps[r.Delivery.Seq]
			p.d = r.Delivery
			switch {
			case r.Err == nil:
				e.applied(p, r.Results)
			case r.Failed:
				e.cfg.Metrics.delivery(p.d.Event, "failed", p.d.ReceivedAt, e.clock.Now())
				p.log.Error().Err(r.Err).Int("attempts", p.d.Attempts+1).Msg("delivery failed; kept for the operator (GET /queue, dashboard)")
			default:
				p.log.Warn().Err(r.Err).Int("attempts", p.d.Attempts+1).Time("retry_at", res.RetryAt).Msg("delivery failed; will retry")
			}
		}
		if !res.RetryAt.IsZero() {
			return clamp(res.RetryAt.Sub(e.clock.Now()), 10*time.Millisecond, time.Minute)
		}
		if !res.More {
			return 0
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
	log     zerolog.Logger
}

// prepare translates one delivery. An error means it cannot be translated
// (malformed): retrying cannot fix it, and it is marked failed at once.
func (e *Engine) prepare(d leasedo.Delivery) (prepared, error) {
	p := prepared{d: d}
	p.d.Body = nil // not kept: up to applyBatch are prepared before they are applied
	p.log = withNonEmpty(e.log.With().Str("delivery", d.ID).Str("event", d.Event),
		"action", d.Action, "tenant", d.Tenant, "repo", d.Repo).Logger()
	t, err := webhook.Translate(d, e.cfg.Options)
	if err != nil {
		return p, err
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
			// record, as every event is (docs/lease-protocol.md).
			p.b.Log = []leasedo.Event{{EventType: d.Event, Action: d.Action, Tenant: d.Tenant, Repo: d.Repo,
				Details: &leasedo.Details{Sha: t.Push.After, Base: t.Push.Ref, Reason: "push to " + t.Push.Ref}}}
		}
	}
	if ic := t.Install; ic != nil {
		p.tracked = installBatch(&p.b, d.Tenant, ic)
	}
	return p, nil
}

// applied records, logs and follows up one applied delivery. At info a
// delivery that changed a queue (or an installation) is one line with the
// keys an operator looks it up by; one that changed nothing (already
// queued, a check result recorded, ignored) is at debug, where every
// line also carries its event, action and the queue's length.
func (e *Engine) applied(p prepared, results []leasedo.Result) {
	d, t := p.d, p.t
	for _, ev := range t.Events {
		// A check the delivery says concluded (on an entry's head or a
		// train group's), or an approval: the sync that follows should
		// read it so (rules.ReadLag).
		if e.syncer == nil || ev.Details == nil {
			continue
		}
		if ev.Details.Check != "" {
			e.syncer.Concluded(ev.Key(), ev.Details.Sha, ev.Details.Check)
		}
		if ev.Details.Approved {
			e.syncer.Approved(ev.Key(), ev.PRNumber)
		}
	}
	outcome := outcomeOf(t, results)
	e.cfg.Metrics.delivery(d.Event, outcome, d.ReceivedAt, e.clock.Now())
	level := zerolog.DebugLevel
	if changesQueue(outcome) {
		level = zerolog.InfoLevel
	}
	if ev := e.log.WithLevel(level); ev.Enabled() {
		ev = ev.Str("delivery", d.ID)
		for _, kv := range [...][2]string{{"tenant", d.Tenant}, {"repo", d.Repo}} {
			if kv[1] != "" {
				ev = ev.Str(kv[0], kv[1])
			}
		}
		if len(t.Events) > 0 {
			ev = ev.Int("pr", t.Events[0].PRNumber).Str("sha", t.Events[0].Details.Sha)
		}
		ev = ev.Str("result", outcome)
		if t.Ignored != "" {
			ev = ev.Str("reason", t.Ignored)
		}
		if level == zerolog.DebugLevel {
			ev = ev.Str("event", d.Event)
			if d.Action != "" {
				ev = ev.Str("action", d.Action)
			}
			if len(results) > 0 {
				ev = ev.Int("queue_length", results[0].QueueLength)
			}
		}
		ev.Msg("delivery applied")
	}
	if len(p.tracked) > 0 && e.cfg.OnTracked != nil {
		e.cfg.OnTracked(p.tracked)
	}
	for _, ev := range t.Events {
		if ev.Op == leasedo.OpPolicy && strings.HasSuffix(d.Repo, "/.github") {
			e.kickOwner(d.Tenant, strings.TrimSuffix(d.Repo, ".github"))
			break
		}
	}
}

// kickOwner wakes the worker of every repository of owner ("owner/") in
// tenant: a push to the organisation's .github repository that touched
// its policy file marked their policies to be read again (their
// fallback), and their syncs read it now rather than at the cron's pass.
func (e *Engine) kickOwner(tenant, owner string) {
	tracked, err := e.store.Tracked(e.ctx)
	if err != nil {
		if e.ctx.Err() == nil {
			e.log.Warn().Err(err).Str("tenant", tenant).Msg("the organisation's policy changed; its repositories read it at the next cron pass")
		}
		return
	}
	for _, t := range tracked {
		if t.Key.Tenant == tenant && strings.HasPrefix(t.Key.Repo, owner) && !strings.HasSuffix(t.Key.Repo, "/.github") {
			e.Kick(t.Key)
		}
	}
}

// changesQueue: an outcome that changed a queue or what is tracked, said
// at info; the others (nothing to do, a check result recorded for the next
// sync, which logs what it decides) at debug.
func changesQueue(outcome string) bool {
	switch outcome {
	case leasedo.ResultAlreadyQueued, leasedo.ResultGateRecorded, leasedo.ResultIgnored, "applied":
		return false
	}
	return true
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

// withNonEmpty adds each key and value pair of kv whose value is not empty:
// a log line leaves out what it does not know (a ping's action) rather than
// carry an empty key.
func withNonEmpty(c zerolog.Context, kv ...string) zerolog.Context {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			c = c.Str(kv[i], kv[i+1])
		}
	}
	return c
}
