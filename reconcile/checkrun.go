package reconcile

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
)

const checkRunSummary = "mergegate merges one pull request at a time per base branch, the first in line, " +
	"and only at the commit whose required checks passed. This check says what it waits for; " +
	"it changes when that changes, not on every move up the queue. Its place in the queue is on mergegate's dashboard."

// publish brings k's mergegate check runs up to date, within the
// installation's write budget (forge's pacer): first what transitions
// queued to end (a bounce's comment and label, the runs of entries that
// left, merged, bounced or have a new head), then a run for every queued
// entry that has none (ClassTell), then the titles that changed
// (ClassCosmetic).
//
// A title says what its author must know: waiting for its checks, ready,
// first in line, held, blocked, frozen, in a train group, in GitHub's merge
// queue. It never says the entry's place: a place changes with every merge
// ahead, and re-titling every run behind each merge made the writes grow
// with the square of the queue. A write the budget holds back is tried at
// the next sync (the returned wait); only the newest title is ever sent,
// and one for an entry that has left is never sent.
func (s *Syncer) publish(ctx context.Context, l *leasedo.Lease) (time.Duration, error) {
	k := l.Key
	now := s.clock.Now()
	var retry time.Duration
	held := func(err error) bool {
		be, ok := forge.IsWriteBudget(err)
		if ok {
			retry = minRetry(retry, max(be.RetryAt.Sub(now), time.Second))
		}
		return ok
	}
	ends, err := s.store.CheckRunsToEnd(ctx, k)
	if err != nil {
		return 0, err
	}
	for _, c := range ends {
		if err := s.endRun(ctx, l, c); err != nil {
			if held(err) {
				return retry, nil // in order: the endings after it wait too
			}
			return retry, err
		}
	}
	items, err := s.store.Items(ctx, k)
	if err != nil {
		return retry, err
	}
	byBase := map[string][]leasedo.Item{}
	var bases []string
	for _, it := range items {
		if it.Status == leasedo.StatusBounced {
			continue
		}
		if _, ok := byBase[it.BaseRef]; !ok {
			bases = append(bases, it.BaseRef)
		}
		byBase[it.BaseRef] = append(byBase[it.BaseRef], it)
	}
	eff := s.policies.Get(k)
	groups, err := s.store.Groups(ctx, k)
	if err != nil {
		return retry, err
	}
	type write struct {
		it             leasedo.Item
		title, summary string
	}
	var creates, updates []write
	for _, base := range bases {
		live := byBase[base]
		s.placesInGitHubQueue(ctx, k, base, live) // mergequeue.go
		pol := s.policyOf(k, base)
		var train []leasedo.Group
		for _, g := range groups {
			if g.Base == base {
				train = append(train, g)
			}
		}
		for i, it := range live {
			if it.CheckRunID == leasedo.NoCheckRun {
				continue
			}
			title := checkTitle(it, i == 0, pol, eff.Problems)
			if pol.InTrain() {
				title = trainCheckTitle(it, train, pol, eff.Problems)
			}
			if title == it.CheckTitle {
				continue
			}
			w := write{it: it, title: title, summary: checkSummary(it, pol, eff)}
			if it.CheckRunID == 0 {
				creates = append(creates, w)
			} else {
				updates = append(updates, w)
			}
		}
	}
	details := s.detailsURL(k)
	for _, w := range creates {
		cr := forge.CheckRun{Status: "in_progress", Title: w.title, Summary: w.summary, DetailsURL: details}
		id, err := s.gh.CreateCheckRun(ctx, k.Tenant, k.Repo, w.it.PRSha, cr)
		if err != nil {
			if held(err) {
				return retry, nil // a run not created yet: no title is worth more
			}
			return retry, err
		}
		if err := s.store.SetCheckRun(ctx, l, w.it.PRNumber, w.it.PRSha, id, w.title); err != nil {
			return retry, err
		}
	}
	cosmetic := forge.WithWriteClass(ctx, forge.ClassCosmetic)
	for _, w := range updates {
		cr := forge.CheckRun{Status: "in_progress", Title: w.title, Summary: w.summary, DetailsURL: details}
		if err := s.gh.UpdateCheckRun(cosmetic, k.Tenant, k.Repo, w.it.CheckRunID, cr); err != nil {
			if held(err) {
				return retry, nil // the newest title goes at the next sync
			}
			if forge.IsNotFound(err) {
				continue // GitHub no longer has the run
			}
			return retry, err
		}
		if err := s.store.SetCheckRun(ctx, l, w.it.PRNumber, w.it.PRSha, w.it.CheckRunID, w.title); err != nil {
			return retry, err
		}
	}
	return retry, nil
}

// endRun sends one outbox row: its comment and labels first (once: the
// row remembers they went), then the run's ending.
func (s *Syncer) endRun(ctx context.Context, l *leasedo.Lease, c leasedo.CheckRunToEnd) error {
	k := l.Key
	if c.Comment != "" || len(c.Unlabel) > 0 {
		log := s.prLog(k, c.PRNumber, c.Sha)
		if c.Comment != "" {
			if err := s.gh.Comment(ctx, k.Tenant, k.Repo, c.PRNumber, c.Comment); err != nil && !forge.IsNotFound(err) {
				if retryLater(err) {
					return err // the row stays: the next sync posts it
				}
				log.Error().Err(err).Msg("could not comment on the bounce")
			}
			if err := s.store.OutboxCommented(ctx, l, c.ID, false); err != nil {
				return err
			}
		}
		for _, label := range c.Unlabel { // whichever it carries; one it lacks is a 404, not an error
			if err := s.gh.RemoveLabel(ctx, k.Tenant, k.Repo, c.PRNumber, label); err != nil {
				if retryLater(err) {
					return err // the comment went, and is not posted again
				}
				log.Error().Err(err).Str("label", label).Msg("could not remove the trigger label")
			}
		}
		if err := s.store.OutboxCommented(ctx, l, c.ID, true); err != nil {
			return err
		}
	}
	cr := forge.CheckRun{Status: "completed", Conclusion: c.Conclusion, Title: c.Title, Summary: c.Summary, DetailsURL: s.detailsURL(k)}
	var err error
	if c.CheckRunID > 0 {
		err = s.gh.UpdateCheckRun(ctx, k.Tenant, k.Repo, c.CheckRunID, cr)
	} else {
		_, err = s.gh.CreateCheckRun(ctx, k.Tenant, k.Repo, c.Sha, cr)
	}
	if err != nil && !forge.IsNotFound(err) { // a run GitHub no longer has needs no ending
		return err
	}
	return s.store.CheckRunEnded(ctx, l, c.ID)
}

// retryLater: err will pass (the write budget, a rate limit, an outage),
// so what failed is tried again at the next sync rather than given up.
func retryLater(err error) bool {
	_, budget := forge.IsWriteBudget(err)
	_, limited := forge.IsRateLimited(err)
	return budget || limited || forge.IsTransient(err)
}

// detailsURL is the check run's link to the repository's page on the
// dashboard (SyncConfig.DashboardURL), where its place in the queue is.
func (s *Syncer) detailsURL(k leasedo.Key) string {
	if s.cfg.DashboardURL == "" {
		return ""
	}
	return strings.TrimRight(s.cfg.DashboardURL, "/") + "/repos/" + url.PathEscape(k.Tenant) + "/" + k.Repo
}

// checkSummary is what a check run says below its title: how the queue
// works, what the entry waits for in detail, what the policy says.
func checkSummary(it leasedo.Item, pol rules.Policy, eff policy.Effective) string {
	summary := checkRunSummary
	if _, ok := gitHubQueueTitle(it); ok {
		summary = gitHubQueueSummary
	}
	if it.GateReason != "" && it.Status != leasedo.StatusBlocked {
		summary = "Now: " + it.GateReason + ".\n\n" + summary
	}
	if it.Status == leasedo.StatusBlocked && !strings.HasPrefix(it.GateReason, rules.HeldPrefix) {
		summary = "mergegate cannot merge this pull request until the repository's administrators change something: " +
			it.GateReason + ". It keeps its place in the queue and is tried again every few minutes."
	}
	if pol.Frozen {
		summary = "This queue is " + pol.FrozenReason() + ". mergegate keeps its place and reads its checks, but merges nothing until it is thawed.\n\n" + summary
	}
	if len(eff.Problems) > 0 {
		summary += "\n\n" + problemsText(eff)
	}
	return summary
}

// checkTitle says what a serial queue's entry waits for (head: it is the
// first in line of its base), with its priority, frozen first and a
// policy file's problem last. It changes when what its author must know
// changes, never with its place.
func checkTitle(it leasedo.Item, head bool, pol rules.Policy, problems policy.Problems) string {
	t := stageTitle(it, head)
	if p := it.PriorityName; p != "" {
		t = strings.Replace(t, " for "+baseName(it), " for "+baseName(it)+" (priority "+p+")", 1)
	}
	return withPolicy(t, pol, problems)
}

// trainCheckTitle says what an entry of a merge train's base waits for.
// It is one title from when it is queued until it lands, whether its own
// checks run, it waits for room in a group, or is in one being built,
// tested or landed: each of those moves was a write per member, which
// made a train cost more per merged pull request than a serial queue.
// Only what its author must act on or know changes it (a review, a
// hold, a block). Its stage, group and the group's state are on the
// dashboard; a pull request taken out reads why on its run.
func trainCheckTitle(it leasedo.Item, train []leasedo.Group, pol rules.Policy, problems policy.Problems) string {
	base := baseName(it)
	grouped := false
	for _, g := range train {
		for _, m := range g.PRs {
			grouped = grouped || (m.Number == it.PRNumber && m.SHA == it.PRSha)
		}
	}
	t := stageTitle(it, false)
	if grouped || (it.Status == leasedo.StatusGatePassed && it.GateReason == rules.ReadyReason) || t == stageTitle(leasedo.Item{BaseRef: it.BaseRef}, false) {
		t = fmt.Sprintf("In the merge train for %s: lands once its checks and its group's pass", base)
	} else {
		t = strings.Replace(t, "the merge queue for", "the merge train queue for", 1)
	}
	return withPolicy(t, pol, problems)
}

// withPolicy puts what the policy says on a title: frozen first, a
// policy file's problem last.
func withPolicy(t string, pol rules.Policy, problems policy.Problems) string {
	if pol.Frozen {
		// Frozen first; a head that waits for the thaw says it once.
		t = pol.FrozenReason() + " · " + strings.Replace(t, ": "+pol.FrozenReason(), "", 1)
	}
	if len(problems) > 0 {
		p := problems[0]
		at := p.File[strings.Index(p.File, ":")+1:]
		if p.Line > 0 {
			at += fmt.Sprintf(":%d", p.Line)
		}
		t += " · " + at + " has a problem"
	}
	return t
}

// maxProblemsShown is how many of a policy file's problems a check run
// lists; the rest are counted.
const maxProblemsShown = 20

// problemsText is what a check run says of a bad policy file.
func problemsText(e policy.Effective) string {
	var b strings.Builder
	b.WriteString("**The repository's policy file has problems**; mergegate runs the queue on ")
	if e.File == "" {
		b.WriteString("the defaults")
	} else {
		b.WriteString("the last good policy (" + e.File + " at " + forge.ShortSHA(e.SHA) + ")")
	}
	b.WriteString(" until it is fixed:\n")
	listed := e.Problems.Listed()
	shown := min(len(listed), maxProblemsShown)
	for _, p := range listed[:shown] {
		b.WriteString("\n- `" + p.String() + "`")
	}
	if more := e.Problems.Total() - shown; more > 0 {
		fmt.Fprintf(&b, "\n- and %d more", more)
	}
	return b.String()
}

func baseName(it leasedo.Item) string {
	if it.BaseRef == "" {
		return "its base"
	}
	return it.BaseRef
}

// stageTitle is the title of each stage of a serial queue's entry:
//
//	In the merge queue for main: waiting for its checks
//	First in line for main: waiting for its checks
//	Checks passed: waits its turn in the merge queue for main   (the head too, as it merges)
//	First in line for main: waiting for an approving review     (what the head waits for, if not its turn)
//	Waits, held by the label "do-not-merge"    (a policy's hold)
//	Blocked until an administrator acts: ...   (the operator's to fix)
//	In GitHub's merge queue for main
//
// A reason of a moment (GitHub computing mergeability, a retry) does not
// change it: the stage is read from the gate's result, not from the last
// wait's words.
func stageTitle(it leasedo.Item, head bool) string {
	if t, ok := gitHubQueueTitle(it); ok {
		return t
	}
	base := baseName(it)
	passed := it.GateResult == forge.GateSuccess || it.Status == leasedo.StatusGatePassed
	switch {
	case it.Status == leasedo.StatusBlocked && strings.HasPrefix(it.GateReason, rules.HeldPrefix):
		return "Waits, " + strings.TrimPrefix(it.GateReason, rules.HeldPrefix)
	case it.Status == leasedo.StatusBlocked:
		return "Blocked until an administrator acts: " + it.GateReason
	case passed && head && it.Status == leasedo.StatusGatePassed && it.GateReason != "" && it.GateReason != rules.ReadyReason &&
		!strings.HasPrefix(it.GateReason, rules.UpdatingPrefix):
		// A wait of the head's own; its merge and its branch's update
		// (which the pull request's page shows) are no news worth a write.
		return fmt.Sprintf("First in line for %s: %s", base, it.GateReason)
	case passed:
		return fmt.Sprintf("Checks passed: waits its turn in the merge queue for %s", base)
	case head:
		return fmt.Sprintf("First in line for %s: waiting for its checks", base)
	}
	return fmt.Sprintf("In the merge queue for %s: waiting for its checks", base)
}

const gitHubQueueSummary = "This base uses GitHub's merge queue. mergegate added this pull request to it at the commit whose checks passed; " +
	"GitHub tests it together with the pull requests ahead of it and merges it. This check shows where it stands in GitHub's queue."

// gitHubQueueTitle is the title of an entry mergegate added to GitHub's
// merge queue. Its place there (in the entry's reason, as GitHub reported
// it) is said in the summary and on the dashboard: it moves with every
// merge ahead.
func gitHubQueueTitle(it leasedo.Item) (string, bool) {
	if it.Status == leasedo.StatusBlocked || !rules.InGitHubQueue(it) {
		return "", false
	}
	return fmt.Sprintf("In GitHub's merge queue for %s", baseName(it)), true
}
