package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
)

// carry does what a decides for f's entry. A refused merge or branch
// update reads the pull request again and decides once more, with the
// refusal (depth 1); a second refusal in a row waits for the next pass.
func (s *Syncer) carry(ctx context.Context, l *leasedo.Lease, f rules.Facts, a rules.Action, handled map[int]bool, depth int) (bool, time.Duration, error) {
	k, it := l.Key, f.Entry
	log := s.prLog(k, it.PRNumber, it.PRSha)
	switch {
	case a.Kind == rules.Merge || a.Kind == rules.UpdateBranch || a.Kind == rules.Enqueue:
		// A pause in a row is counted until the call succeeds: a refusal
		// GitHub keeps giving is the author's after rules.MaxRetries.
	case a.Kind != rules.Wait || !a.Retry:
		s.resetRetry(k, it.PRNumber)
	}
	switch a.Kind {
	case rules.Wait:
		changed, err := s.store.Wait(ctx, l, it.PRNumber, it.PRSha, a.Status, a.Reason)
		if err != nil {
			return false, 0, err
		}
		if changed {
			log.Debug().Str("state", a.Status).Func(strIf("reason", a.Reason)).Msg("waits")
		}
		if a.Retry {
			handled[it.PRNumber] = true
			return false, s.nextRetry(k, it.PRNumber), nil
		}
		return changed, 0, nil

	case rules.Regate:
		sha := a.Sha
		if sha == "" {
			sha = it.PRSha
		}
		log.Info().Str("reason", a.Reason).Func(strIf("new_sha", a.Sha)).Func(strIf("base", a.Base)).Msg("gated again")
		_, err := s.store.Reevaluate(ctx, l, it.PRNumber, sha, a.Base, a.Reason)
		return true, 0, err

	case rules.Leave:
		log.Info().Str("reason", a.Reason).Msg("left the queue")
		return true, 0, s.store.Leave(ctx, l, it.PRNumber, a.Reason)

	case rules.Bounce:
		return true, 0, s.bounce(ctx, l, it, a)

	case rules.Block:
		changed, err := s.store.Block(ctx, l, it.PRNumber, it.PRSha, a.Reason)
		if err != nil {
			return false, 0, err
		}
		if changed && a.Problem == rules.ProblemConsent {
			log.Info().Str("reason", strings.TrimPrefix(a.Reason, rules.HeldPrefix)).Msg("held: no writer consented to its head; it keeps its place and the queue behind it goes on")
		} else if changed && a.Problem == "held" {
			log.Info().Str("reason", strings.TrimPrefix(a.Reason, rules.HeldPrefix)).Msg("held back by the repository's policy; it keeps its place and the queue behind it goes on")
		} else if changed {
			// Once per change: each cron pass tries a blocked entry again.
			log.Warn().Str("problem", a.Problem).Str("reason", a.Reason).Msg("blocked: the operator must act; nobody is bounced")
			if s.cfg.Observer != nil {
				s.cfg.Observer.Blocked(k, a.Problem)
			}
		}
		return changed, 0, nil

	case rules.UpdateBranch:
		if depth > 0 && f.Refusal != nil && f.Refusal.Op == "update-branch" {
			handled[it.PRNumber] = true
			return false, s.nextRetry(k, it.PRNumber), nil
		}
		method := s.policyOf(k, it.BaseRef).UpdateMethod
		var err error
		if method == policy.UpdateRebase {
			// GraphQL: the REST update-branch only merges. The rebase
			// rewrites the head's commits; their checks run again on the
			// new head, which is gated like any push.
			nodeID := ""
			if f.PR != nil {
				nodeID = f.PR.NodeID
			}
			_, err = s.gh.RebaseBranch(ctx, k.Tenant, k.Repo, it.PRNumber, nodeID, it.PRSha)
		} else {
			method = policy.UpdateMerge
			err = s.gh.UpdateBranch(ctx, k.Tenant, k.Repo, it.PRNumber, it.PRSha)
		}
		if err == nil {
			s.resetRetry(k, it.PRNumber)
			if it.BranchUpdatedSha == it.PRSha {
				log.Warn().Str("base", it.BaseRef).Str("update_method", method).Dur("waited", rules.UpdatePatience).
					Msg("GitHub has not updated the branch it was asked to update: asked again")
			} else {
				log.Info().Str("base", it.BaseRef).Str("update_method", method).Msg("branch behind its base: asked GitHub to update it")
			}
			if s.cfg.Observer != nil {
				s.cfg.Observer.BranchUpdated(k)
			}
			if err := s.store.MarkBranchUpdated(ctx, l, it.PRNumber, it.PRSha, ""); err != nil {
				return false, 0, err
			}
			_, err := s.store.Wait(ctx, l, it.PRNumber, it.PRSha, leasedo.StatusGatePassed, rules.UpdatingPrefix+it.BaseRef)
			return true, 0, err
		}
		return s.refused(ctx, l, f, "update-branch", "", err, handled, depth)

	case rules.Enqueue:
		return s.enqueue(ctx, l, f, handled, depth) // mergequeue.go

	case rules.Merge:
		if depth > 0 && f.Refusal != nil && f.Refusal.Op == "merge" {
			handled[it.PRNumber] = true
			return false, s.nextRetry(k, it.PRNumber), nil
		}
		return s.merge(ctx, l, f, a, handled, depth)
	}
	return false, 0, fmt.Errorf("%s: #%d: unknown action %v", k, it.PRNumber, a.Kind)
}

// merge merges the head at exactly its tested sha.
func (s *Syncer) merge(ctx context.Context, l *leasedo.Lease, f rules.Facts, a rules.Action, handled map[int]bool, depth int) (bool, time.Duration, error) {
	k, it := l.Key, f.Entry
	log := s.prLog(k, it.PRNumber, it.PRSha)
	pol := s.policyOf(k, it.BaseRef)
	mergeSHA, err := s.gh.MergeWith(ctx, k.Tenant, k.Repo, it.PRNumber, it.PRSha, a.Method, s.commitMessage(ctx, k, pol, f.PR))
	if err == nil {
		s.resetRetry(k, it.PRNumber)
		log.Info().Str("method", a.Method).Str("merge_sha", mergeSHA).Func(strIf("method_note", a.MethodNote)).Msg("merged")
		s.mu.Lock()
		s.moved[k.String()+"@"+it.BaseRef] = s.clock.Now()
		s.mu.Unlock()
		if err := s.merged(ctx, l, it, a); err != nil {
			return true, 0, err
		}
		if pol.DeleteBranch {
			s.deleteBranch(ctx, k, f.PR, it.PRSha)
		}
		return true, 0, nil
	}
	if forge.IsTransient(err) {
		// The merge may have happened: read the PR before anything else.
		fresh, gerr := s.gh.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
		if gerr == nil && fresh.Merged && fresh.HeadSHA == it.PRSha {
			log.Info().Str("method", a.Method).Msg("merged (confirmed after an error answer)")
			return true, 0, s.merged(ctx, l, it, a)
		}
		return false, 0, err
	}
	return s.refused(ctx, l, f, "merge", a.Method, err, handled, depth)
}

func (s *Syncer) merged(ctx context.Context, l *leasedo.Lease, it leasedo.Item, a rules.Action) error {
	// One sentence that names the method once: "with squash", "with
	// squash, not merge (--merge-method): ...", "with rebase (the method
	// chosen with auto-merge)".
	with := a.Method
	switch {
	case strings.HasPrefix(a.MethodNote, a.Method+","):
		with = a.MethodNote
	case a.MethodNote != "":
		with = a.Method + " (" + a.MethodNote + ")"
	}
	summary := fmt.Sprintf("Merged at %s, the commit whose checks passed, with %s.", forge.ShortSHA(it.PRSha), with)
	if err := s.store.MarkMerged(ctx, l, it.PRNumber, it.PRSha, a.Method,
		leasedo.CheckRunEnd{Conclusion: "success", Title: "Merged", Summary: summary}); err != nil {
		return err
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Merged(l.Key, time.Duration(s.clock.Now().UnixMilli()-it.QueuedAt)*time.Millisecond)
	}
	return nil
}

// refused sorts an error of a merge or an update: GitHub's refusal is
// decided on with the pull request read again; anything else (rate limits,
// outages, permissions of the App itself) goes back to the caller.
func (s *Syncer) refused(ctx context.Context, l *leasedo.Lease, f rules.Facts, op, method string, err error, handled map[int]bool, depth int) (bool, time.Duration, error) {
	kind, msg, ok := forge.RefusalOf(err)
	if !ok {
		return false, 0, err
	}
	k, it := l.Key, f.Entry
	s.prLog(k, it.PRNumber, it.PRSha).Info().Str("op", op).Str("github_message", msg).Msg("GitHub refused; sorting its answer")
	// The refusal may come from settings that changed since they were
	// read: read them again (the methods now, the rules next time).
	s.mu.Lock()
	delete(s.methods, k.String())
	delete(s.rules, k.String()+"@"+it.BaseRef)
	s.mu.Unlock()
	s.gh.ForgetRules(k.Tenant, k.Repo, it.BaseRef)
	if depth > 0 {
		handled[it.PRNumber] = true
		return false, s.nextRetry(k, it.PRNumber), nil
	}
	f.Refusal = &rules.Refusal{Kind: kind, Op: op, Method: method, Message: msg}
	if err := s.readPR(ctx, k, &f); err != nil {
		return false, 0, err
	}
	f.Now = s.clock.Now()
	return s.carry(ctx, l, f, rules.Decide(f, s.policyOf(k, it.BaseRef)), handled, depth+1)
}

// bounce takes the entry out of the queue and tells its author why, in one
// sentence (rules.BounceMessage): a comment, the check run, and the trigger
// label removed so that it does not rejoin by itself. The three wait in the
// outbox with the bounce, and go out through the write budget (publish):
// none is lost to a budget, an outage or a restart.
func (s *Syncer) bounce(ctx context.Context, l *leasedo.Lease, it leasedo.Item, a rules.Action) error {
	k := l.Key
	log := s.prLog(k, it.PRNumber, it.PRSha)
	labels := s.policyOf(k, it.BaseRef).Triggers.Labels()
	label := ""
	if len(labels) > 0 {
		label = labels[0]
	}
	msg := rules.BounceMessage(a.Bounced, it.PRSha, label)
	log.Info().Str("problem", a.Problem).Str("reason", a.Bounced.Because()).Msg("bounced")
	if err := s.store.Bounce(ctx, l, it.PRNumber, it.PRSha, a.Bounced.Because(), a.Bounced.Kind == rules.BounceGateFailure,
		leasedo.CheckRunEnd{Conclusion: "failure", Title: "Out of the merge queue", Summary: msg, Comment: msg, Unlabel: labels}); err != nil {
		return err
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Bounced(k, a.Problem)
	}
	return nil
}

// nextRetry is the pause before reading an entry again that GitHub is
// settling: retryBase, doubling with each pause in a row, up to 30 s.
func (s *Syncer) nextRetry(k leasedo.Key, pr int) time.Duration {
	key := k.String() + "#" + strconv.Itoa(pr)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.retries[key]
	s.retries[key] = n + 1
	d := retryBase << min(n, 8)
	return min(d, maxRetryWait)
}

func (s *Syncer) retryCount(k leasedo.Key, pr int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retries[k.String()+"#"+strconv.Itoa(pr)]
}

func (s *Syncer) resetRetry(k leasedo.Key, pr int) {
	key := k.String() + "#" + strconv.Itoa(pr)
	s.mu.Lock()
	delete(s.retries, key)
	s.mu.Unlock()
}
