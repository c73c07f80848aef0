package reconcile

import (
	"context"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// A base that uses GitHub's own merge queue: the sync reads where each
// entry whose checks passed stands in it (mergeQueueFacts) and carries out
// rules.Enqueue (enqueue). GitHub then tests and merges it; its pull_request
// and merge_group deliveries make the entry be read again, and its check
// run says its place in GitHub's queue (checkrun.go).

// readsGitHubQueue: f's entry is decided on its place in GitHub's merge
// queue (its checks passed, and its base uses the queue or mergegate put
// it there).
func readsGitHubQueue(f rules.Facts) bool {
	return f.Gate.Result == forge.GateSuccess && (f.Rules.MergeQueue || rules.InGitHubQueue(f.Entry))
}

// mergeQueueFacts reads the entry's place in GitHub's merge queue; out of
// it, what the decision to enqueue needs: the pull request when the policy
// reads it, GitHub removed it, or it left the queue mergegate put it in
// (merged or closed since is rule 1, not a failed group: GitHub's queue
// merges without a removal event, and an enqueue would only be refused,
// "Pull request is closed", a mutation spent), and the reviews the base
// requires.
func (s *Syncer) mergeQueueFacts(ctx context.Context, k leasedo.Key, f *rules.Facts) error {
	e, in, err := s.gh.QueuePosition(ctx, k.Tenant, k.Repo, f.Entry.PRNumber)
	if err != nil {
		return err
	}
	f.Queue, f.InQueue = &e, in
	if in {
		return nil
	}
	if e.Removed != "" || rules.InGitHubQueue(f.Entry) || s.policyOf(k, f.Entry.BaseRef).NeedsPR() {
		return s.readPR(ctx, k, f)
	}
	return s.readReviews(ctx, k, f)
}

// enqueue adds the entry to its base's merge queue on GitHub, at the head
// whose checks passed (expectedHeadOid): GitHub refuses it if the head
// moved. A refusal is sorted as a refused merge is: the pull request read
// again, decided once more.
func (s *Syncer) enqueue(ctx context.Context, l *leasedo.Lease, f rules.Facts, handled map[int]bool, depth int) (bool, time.Duration, error) {
	k, it := l.Key, f.Entry
	if depth > 0 && f.Refusal != nil && f.Refusal.Op == "enqueue" {
		handled[it.PRNumber] = true
		return false, s.nextRetry(k, it.PRNumber), nil
	}
	nodeID := ""
	if f.PR != nil {
		nodeID = f.PR.NodeID
	}
	e, err := s.gh.EnqueuePR(ctx, k.Tenant, k.Repo, it.PRNumber, nodeID, it.PRSha)
	if err != nil {
		return s.refused(ctx, l, f, "enqueue", "", err, handled, depth)
	}
	s.resetRetry(k, it.PRNumber)
	s.prLog(k, it.PRNumber, it.PRSha).Info().Str("base", it.BaseRef).Int("position", e.Position).Int("queue_size", e.Size).
		Msg("added to GitHub's merge queue")
	// One transition: the gate passed (audited, if it is news) and the
	// entry waits in GitHub's queue. Until the enqueue succeeds the entry
	// stays to be read: an outage meanwhile is retried by the engine.
	_, err = s.store.Wait(ctx, l, it.PRNumber, it.PRSha, leasedo.StatusGatePassed, rules.QueueReason(e))
	return true, 0, err
}

// placesInGitHubQueue brings the places that live's entries in GitHub's
// merge queue show on their check runs up to date: entries ahead of them
// merge or leave without a delivery for them. One query for the base,
// made only when one of its entries is in GitHub's queue; live is changed
// in place (the titles), the store is not. A failed read keeps the places
// last recorded: check runs are not worth failing the sync for.
func (s *Syncer) placesInGitHubQueue(ctx context.Context, k leasedo.Key, base string, live []leasedo.Item) {
	queued := false
	for _, it := range live {
		queued = queued || (rules.InGitHubQueue(it) && it.Status != leasedo.StatusBlocked)
	}
	if !queued {
		return
	}
	entries, err := s.gh.MergeQueueEntries(ctx, k.Tenant, k.Repo, base)
	if err != nil {
		s.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Str("base", base).
			Msg("could not read GitHub's merge queue; check runs keep the places last read")
		return
	}
	for i, it := range live {
		if e, ok := entries[it.PRNumber]; ok && rules.InGitHubQueue(it) && it.Status != leasedo.StatusBlocked {
			live[i].GateReason = rules.QueueReason(e)
		}
	}
}
