package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/webhook"
)

// Bounds of one pass, so that one busy repository cannot starve the rest
// nor spend the rate limit in a burst.
const (
	maxActionsPerPass = 20
	maxEvalsPerPass   = 5
	publishDepth      = 20 // queued PRs whose check run shows their position
	requiredCacheTTL  = time.Minute
)

// advance moves k's queue forward, Tide-style: read the state, take the
// next action, repeat until nothing is left to do now. It returns when to
// come back (a rate limit, an outage), 0 when it waits for the next event.
func (e *Engine) advance(ctx context.Context, l *leasedo.Lease) time.Duration {
	if e.forge == nil {
		return 0 // no GitHub: gates wait (said once at start)
	}
	k := l.Key
	if paused, err := e.store.Suspended(ctx, k.Tenant); err != nil || paused {
		return 0
	}
	for i := 0; i < maxActionsPerPass; i++ {
		if ctx.Err() != nil {
			return 0
		}
		items, err := e.store.Items(ctx, k)
		if err != nil {
			e.log.Error().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("read queue")
			return time.Second
		}
		progressed, err := e.step(ctx, l, items)
		if err != nil {
			return e.retryAfter(k, err)
		}
		if !progressed {
			if err := e.publish(ctx, l); err != nil {
				return e.retryAfter(k, err)
			}
			e.cfg.Metrics.queue(k, items, e.clock.Now())
			return 0
		}
	}
	return 10 * time.Millisecond // more to do: come back at once, after other repos
}

// step takes one action on the queue: the head first (evaluate its gate,
// update its branch, merge it), then the gates of entries behind it. It
// reports whether anything changed.
func (e *Engine) step(ctx context.Context, l *leasedo.Lease, items []leasedo.Item) (bool, error) {
	var head *leasedo.Item
	for i := range items {
		if items[i].Status != leasedo.StatusBounced {
			head = &items[i]
			break
		}
	}
	if head == nil {
		return false, nil
	}
	if needsEval(*head) {
		return e.evaluate(ctx, l, *head)
	}
	if head.Status == leasedo.StatusGatePassed {
		progressed, err := e.mergeHead(ctx, l, *head)
		if progressed || err != nil {
			return progressed, err
		}
	}
	evals := 0
	for _, it := range items {
		if it.PRNumber == head.PRNumber || !needsEval(it) || evals >= maxEvalsPerPass {
			continue
		}
		evals++
		changed, err := e.evaluate(ctx, l, it)
		if changed || err != nil {
			return changed, err
		}
	}
	return false, nil
}

// needsEval: a new or reevaluated entry, or one a check event touched. An
// evaluated entry that waits keeps its reason until the next check event.
func needsEval(it leasedo.Item) bool {
	return it.Status == leasedo.StatusQueued || (it.Status == leasedo.StatusEvaluating && it.GateReason == "")
}

// evaluate reads the gate of one entry from GitHub (never from a payload)
// and records it. A failure bounces the PR and tells its author why.
func (e *Engine) evaluate(ctx context.Context, l *leasedo.Lease, it leasedo.Item) (bool, error) {
	k := l.Key
	base := it.BaseRef
	if base == "" {
		pr, err := e.forge.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
		if err != nil {
			return false, err
		}
		base = pr.BaseRef
		if err := e.store.SetBase(ctx, l, it.PRNumber, base); err != nil {
			return false, err
		}
	}
	req, err := e.requiredChecks(ctx, k, base)
	if err != nil {
		return false, err
	}
	results, err := e.forge.CheckResults(ctx, k.Tenant, k.Repo, it.PRSha)
	if err != nil {
		return false, err
	}
	start := time.Now()
	v := forge.EvaluateGate(req, results, nil)
	e.cfg.Metrics.gate(v.Result, time.Since(start))
	log := e.prLog(k, it.PRNumber, it.PRSha)
	switch v.Result {
	case forge.GateSuccess:
		log.Info().Msg("gate passed")
		return true, e.store.RecordGate(ctx, l, it.PRNumber, it.PRSha, leasedo.GateSuccess, "")
	case forge.GateFailure:
		log.Info().Str("reason", v.Reason).Msg("gate failed: bouncing")
		if err := e.store.RecordGate(ctx, l, it.PRNumber, it.PRSha, leasedo.GateFailure, v.Reason); err != nil {
			return false, err
		}
		e.tellAuthor(ctx, l, it, v.Reason, "gate_failure")
		return true, nil
	}
	reason := v.Reason
	if reason == "" {
		reason = "waiting for checks"
	}
	if it.Status == leasedo.StatusEvaluating && it.GateReason == reason {
		return false, nil
	}
	log.Debug().Str("reason", reason).Msg("gate pending")
	// Recording the reason marks the entry evaluated: not a change that
	// needs another action now.
	return false, e.store.RecordGate(ctx, l, it.PRNumber, it.PRSha, "", reason)
}

// mergeHead merges the head, whose gate passed, at exactly its tested sha.
func (e *Engine) mergeHead(ctx context.Context, l *leasedo.Lease, it leasedo.Item) (bool, error) {
	k := l.Key
	log := e.prLog(k, it.PRNumber, it.PRSha)
	pr, err := e.forge.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
	if err != nil {
		return false, err
	}
	if changed, err := e.reconcileHead(ctx, l, it, pr); changed || err != nil {
		return changed, err
	}
	req, err := e.requiredChecks(ctx, k, pr.BaseRef)
	if err != nil {
		return false, err
	}
	if pr.MergeableState == "behind" && req.Strict {
		if it.BranchUpdatedSha == it.PRSha {
			return false, nil // asked once; the new head arrives as a synchronize
		}
		if err := e.forge.UpdateBranch(ctx, k.Tenant, k.Repo, it.PRNumber, it.PRSha); err != nil {
			if msg, forAuthor := forge.AuthorMessage(err); forAuthor {
				return true, e.bounce(ctx, l, it, "its branch could not be updated from "+pr.BaseRef+": "+msg, "update_branch")
			}
			return false, err
		}
		log.Info().Str("base", pr.BaseRef).Msg("branch behind its base: asked GitHub to update it")
		e.cfg.Metrics.branchUpdate(k)
		return false, e.store.MarkBranchUpdated(ctx, l, it.PRNumber, it.PRSha, pr.BaseRef)
	}
	merged, err := e.forge.Merge(ctx, k.Tenant, k.Repo, it.PRNumber, it.PRSha, e.cfg.MergeMethod)
	switch {
	case err == nil:
		if err := e.store.MarkMerged(ctx, l, it.PRNumber, it.PRSha, e.cfg.MergeMethod); err != nil {
			return false, err
		}
		log.Info().Str("method", e.cfg.MergeMethod).Str("merge_sha", merged).Msg("merged")
		e.cfg.Metrics.merged(k, time.Duration(e.clock.Now().UnixMilli()-it.QueuedAt)*time.Millisecond)
		e.finishCheckRun(ctx, k, it, "success", "Merged", fmt.Sprintf("Merged at %s, the commit whose checks passed.", short(it.PRSha)))
		return true, nil
	case forge.IsNotMergeable(err):
		msg, _ := forge.AuthorMessage(err)
		return true, e.bounce(ctx, l, it, "GitHub refused the merge: "+msg, "not_mergeable")
	case forge.IsHeadModified(err):
		// The head moved after the gate: never merge an untested sha.
		fresh, gerr := e.forge.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
		if gerr != nil {
			return false, gerr
		}
		if fresh.HeadSHA != it.PRSha {
			return true, e.reevaluate(ctx, l, it.PRNumber, fresh.HeadSHA, "head moved before the merge")
		}
		return true, e.store.RecordGate(ctx, l, it.PRNumber, it.PRSha, "", "")
	case forge.IsTransient(err):
		// The merge may have happened: read the PR before any retry.
		fresh, gerr := e.forge.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
		if gerr == nil && fresh.Merged {
			if err := e.store.MarkMerged(ctx, l, it.PRNumber, it.PRSha, e.cfg.MergeMethod); err != nil {
				return false, err
			}
			log.Info().Msg("merged (confirmed after an error answer)")
			e.cfg.Metrics.merged(k, time.Duration(e.clock.Now().UnixMilli()-it.QueuedAt)*time.Millisecond)
			e.finishCheckRun(ctx, k, it, "success", "Merged", fmt.Sprintf("Merged at %s.", short(it.PRSha)))
			return true, nil
		}
		return false, err
	}
	if msg, forAuthor := forge.AuthorMessage(err); forAuthor {
		return true, e.bounce(ctx, l, it, msg, "merge_refused")
	}
	return false, err
}

// reconcileHead compares the head with GitHub before merging: merged or
// closed elsewhere, no longer eligible, a new head, a new base.
func (e *Engine) reconcileHead(ctx context.Context, l *leasedo.Lease, it leasedo.Item, pr forge.PR) (bool, error) {
	k := l.Key
	leave := func(action, reason string) (bool, error) {
		e.prLog(k, it.PRNumber, it.PRSha).Info().Str("reason", reason).Msg("left the queue")
		_, err := e.store.Apply(ctx, l, leasedo.Event{EventType: "pull_request", Action: action, Tenant: k.Tenant, Repo: k.Repo,
			PRNumber: it.PRNumber, Details: &leasedo.Details{Sha: it.PRSha, Reason: reason}})
		return true, err
	}
	switch {
	case pr.Merged:
		return leave("closed", "merged outside mergegate")
	case pr.State != "open":
		return leave("closed", "closed on GitHub")
	}
	if why := webhook.Ineligibility(eligibility(pr), e.cfg.Options); why != "" {
		return leave("unlabeled", "no longer eligible: "+why)
	}
	if pr.HeadSHA != it.PRSha {
		return true, e.reevaluate(ctx, l, it.PRNumber, pr.HeadSHA, "new head on GitHub")
	}
	if it.BaseRef != "" && pr.BaseRef != it.BaseRef {
		if err := e.store.SetBase(ctx, l, it.PRNumber, pr.BaseRef); err != nil {
			return false, err
		}
		return true, e.store.RecordGate(ctx, l, it.PRNumber, it.PRSha, "", "")
	}
	return false, nil
}

func eligibility(pr forge.PR) webhook.Eligibility {
	return webhook.Eligibility{State: pr.State, Draft: pr.Draft, Labels: pr.Labels, AutoMerge: pr.AutoMerge}
}

func (e *Engine) reevaluate(ctx context.Context, l *leasedo.Lease, pr int, sha, reason string) error {
	k := l.Key
	e.prLog(k, pr, sha).Info().Str("reason", reason).Msg("reevaluate")
	_, err := e.store.Apply(ctx, l, leasedo.Event{EventType: "pull_request", Action: "synchronize", Tenant: k.Tenant, Repo: k.Repo,
		PRNumber: pr, Details: &leasedo.Details{Sha: sha, Reason: reason}})
	return err
}

// bounce takes the PR out of the queue (status bounced, audit bounce) and
// tells its author why.
func (e *Engine) bounce(ctx context.Context, l *leasedo.Lease, it leasedo.Item, reason, kind string) error {
	e.prLog(l.Key, it.PRNumber, it.PRSha).Info().Str("reason", reason).Msg("bounced")
	if err := e.store.Bounce(ctx, l, it.PRNumber, it.PRSha, reason); err != nil {
		return err
	}
	e.tellAuthor(ctx, l, it, reason, kind)
	return nil
}

// tellAuthor says why in one sentence (a comment and the check run) and
// removes the trigger label so that the PR does not rejoin by itself.
// GitHub errors here are the operator's to see in the log; the bounce
// itself is already recorded.
func (e *Engine) tellAuthor(ctx context.Context, l *leasedo.Lease, it leasedo.Item, reason, kind string) {
	k := l.Key
	log := e.prLog(k, it.PRNumber, it.PRSha)
	e.cfg.Metrics.bounced(k, kind)
	again := "Once that is fixed, ask again"
	if lbl := e.cfg.Options.TriggerLabel; lbl != "" {
		again = fmt.Sprintf("Once that is fixed, add the `%s` label again", lbl)
	}
	body := fmt.Sprintf("mergegate took this pull request out of the merge queue at %s: %s. %s.", short(it.PRSha), reason, again)
	if err := e.forge.Comment(ctx, k.Tenant, k.Repo, it.PRNumber, body); err != nil {
		log.Error().Err(err).Msg("could not comment on the bounce")
	}
	if lbl := e.cfg.Options.TriggerLabel; lbl != "" {
		if err := e.forge.RemoveLabel(ctx, k.Tenant, k.Repo, it.PRNumber, lbl); err != nil {
			log.Error().Err(err).Msg("could not remove the trigger label")
		}
	}
	e.finishCheckRun(ctx, k, it, "failure", "Out of the merge queue", reason)
}

// requiredChecks reads a branch's required checks, kept for a minute: they
// change rarely and every evaluation needs them.
func (e *Engine) requiredChecks(ctx context.Context, k leasedo.Key, branch string) (forge.Required, error) {
	key := k.String() + "@" + branch
	now := e.clock.Now()
	e.reqMu.Lock()
	c, ok := e.required[key]
	e.reqMu.Unlock()
	if ok && now.Sub(c.at) < requiredCacheTTL && now.Sub(c.at) >= 0 {
		return c.req, nil
	}
	req, err := e.forge.RequiredChecks(ctx, k.Tenant, k.Repo, branch)
	if err != nil {
		return forge.Required{}, err
	}
	e.reqMu.Lock()
	e.required[key] = cachedRequired{req: req, at: now}
	e.reqMu.Unlock()
	return req, nil
}

// retryAfter sorts an error of a pass: the operator's to see in the log,
// and when to come back.
func (e *Engine) retryAfter(k leasedo.Key, err error) time.Duration {
	log := e.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Logger()
	if rl, ok := forge.IsRateLimited(err); ok {
		wait := rl.RetryAt.Sub(e.clock.Now())
		log.Warn().Time("retry_at", rl.RetryAt).Bool("secondary", rl.Secondary).Msg("GitHub rate limit: the queue waits")
		return clamp(wait, time.Second, 15*time.Minute)
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
	log.Error().Err(err).Msg("queue step failed; retrying in a minute (operator: check the App's permissions and installation)")
	return time.Minute
}

func (e *Engine) prLog(k leasedo.Key, pr int, sha string) *zerolog.Logger {
	l := e.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", pr).Str("sha", sha).Logger()
	return &l
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
