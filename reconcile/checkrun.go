package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
)

// publishDepth is how many entries of each base's queue have a check run
// that shows their place.
const publishDepth = 20

const checkRunSummary = "mergegate merges one pull request at a time per base branch, the first in line, " +
	"and only at the commit whose required checks passed. This check shows where this pull request stands."

// publish brings k's mergegate check runs up to date: first it ends the
// runs that transitions queued to end (leaving, merging, bouncing, a new
// head), then it gives every queued entry (the first publishDepth of each
// base) a run whose title says its place and what it waits for. A run is
// written only when its title changes: GitHub allows about 80
// content-creating requests a minute.
func (s *Syncer) publish(ctx context.Context, l *leasedo.Lease) error {
	k := l.Key
	ends, err := s.store.CheckRunsToEnd(ctx, k)
	if err != nil {
		return err
	}
	for _, c := range ends {
		cr := forge.CheckRun{Status: "completed", Conclusion: c.Conclusion, Title: c.Title, Summary: c.Summary}
		if c.CheckRunID != 0 {
			err = s.gh.UpdateCheckRun(ctx, k.Tenant, k.Repo, c.CheckRunID, cr)
		} else {
			_, err = s.gh.CreateCheckRun(ctx, k.Tenant, k.Repo, c.Sha, cr)
		}
		if err != nil && !forge.IsNotFound(err) { // a run GitHub no longer has needs no ending
			return err
		}
		if err := s.store.CheckRunEnded(ctx, l, c.ID); err != nil {
			return err
		}
	}
	items, err := s.store.Items(ctx, k)
	if err != nil {
		return err
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
		return err
	}
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
			if i >= publishDepth {
				break
			}
			title := checkTitle(i, live, pol, eff.Problems)
			if pol.InTrain() {
				title = trainCheckTitle(it, train, pol, eff.Problems)
			}
			if title == it.CheckTitle {
				continue
			}
			summary := checkRunSummary
			if _, ok := gitHubQueueTitle(it); ok {
				summary = gitHubQueueSummary
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
			cr := forge.CheckRun{Status: "in_progress", Title: title, Summary: summary}
			id := it.CheckRunID
			if id == 0 {
				id, err = s.gh.CreateCheckRun(ctx, k.Tenant, k.Repo, it.PRSha, cr)
			} else {
				err = s.gh.UpdateCheckRun(ctx, k.Tenant, k.Repo, id, cr)
			}
			if err != nil {
				return err
			}
			if err := s.store.SetCheckRun(ctx, l, it.PRNumber, it.PRSha, id, title); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTitle says where live[i] stands in its base's queue and what it
// waits for: frozen first, its priority, and a policy file's problem.
func checkTitle(i int, live []leasedo.Item, pol rules.Policy, problems policy.Problems) string {
	t := placeTitle(i, live)
	if p := live[i].PriorityName; p != "" {
		t = strings.Replace(t, " for "+baseName(live[i])+":", " for "+baseName(live[i])+" (priority "+p+"):", 1)
	}
	return withPolicy(t, pol, problems)
}

// trainCheckTitle says where it stands in its base's merge train: its
// group (by position, with the others in it) and what the group is doing,
// or what it waits for before it joins one.
func trainCheckTitle(it leasedo.Item, train []leasedo.Group, pol rules.Policy, problems policy.Problems) string {
	base := baseName(it)
	t := ""
	for pos, g := range train {
		var others []string
		in := false
		for _, m := range g.PRs {
			if m.Number == it.PRNumber && m.SHA == it.PRSha {
				in = true
			} else {
				others = append(others, fmt.Sprintf("#%d", m.Number))
			}
		}
		if !in {
			continue
		}
		with := ""
		if len(others) > 0 {
			with = " with " + strings.Join(others, ", ")
		}
		n := pos + 1
		switch g.State {
		case leasedo.GroupPlanned:
			t = fmt.Sprintf("in merge train group %d for %s%s: to be built", n, base, with)
		case leasedo.GroupBuilding:
			t = fmt.Sprintf("in merge train group %d for %s%s: being built", n, base, with)
		case leasedo.GroupTesting:
			t = fmt.Sprintf("testing in group %d for %s%s", n, base, with)
			if g.Attempt > 0 {
				t += fmt.Sprintf(" (run %d)", g.Attempt+1)
			}
		case leasedo.GroupPassed:
			t = fmt.Sprintf("group %d for %s%s passed: lands after group %d", n, base, with, n-1)
			if pos == 0 {
				t = fmt.Sprintf("group 1 for %s%s passed: landing", base, with)
			}
		case leasedo.GroupLanding:
			t = fmt.Sprintf("group %d%s landing on %s", n, with, base)
		}
		break
	}
	if t == "" {
		switch {
		case it.Status == leasedo.StatusGatePassed && it.GateReason == rules.ReadyReason:
			t = fmt.Sprintf("ready for the merge train for %s: waiting for room in a group", base)
		default:
			one := []leasedo.Item{it}
			t = strings.Replace(placeTitle(0, one), "1st in the merge queue for", "in the merge train queue for", 1)
		}
	}
	return withPolicy(t, pol, problems)
}

// withPolicy puts what the policy says on a title: frozen first, a
// policy file's problem last.
func withPolicy(t string, pol rules.Policy, problems policy.Problems) string {
	if pol.Frozen && !strings.Contains(t, pol.FrozenReason()) {
		t = pol.FrozenReason() + " · " + t
	}
	if len(problems) > 0 {
		p := problems[0]
		t += fmt.Sprintf(" · %s:%d has a problem", p.File[strings.Index(p.File, ":")+1:], p.Line)
	}
	return t
}

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
	for _, p := range e.Problems {
		b.WriteString("\n- `" + p.String() + "`")
	}
	return b.String()
}

func baseName(it leasedo.Item) string {
	if it.BaseRef == "" {
		return "its base"
	}
	return it.BaseRef
}

func placeTitle(i int, live []leasedo.Item) string {
	it := live[i]
	if t, ok := gitHubQueueTitle(it); ok {
		return t
	}
	waits := it.GateReason
	switch {
	case it.Status == leasedo.StatusBlocked && strings.HasPrefix(it.GateReason, rules.HeldPrefix):
		waits = "waits, " + strings.TrimPrefix(it.GateReason, rules.HeldPrefix)
	case it.Status == leasedo.StatusBlocked:
		waits = "blocked until an administrator acts: " + it.GateReason
	case it.Status == leasedo.StatusGatePassed && waits == "" && i == 0:
		waits = "checks passed, merging"
	case it.Status == leasedo.StatusGatePassed && waits == "":
		waits = "checks passed"
	case waits == "":
		waits = "checks being read"
	}
	base := it.BaseRef
	if base == "" {
		base = "its base"
	}
	if i == 0 {
		return fmt.Sprintf("1st in the merge queue for %s: %s", base, waits)
	}
	return fmt.Sprintf("%s of %d in the merge queue for %s, after #%d: %s", ordinal(i+1), len(live), base, live[0].PRNumber, waits)
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

const gitHubQueueSummary = "This base uses GitHub's merge queue. mergegate added this pull request to it at the commit whose checks passed; " +
	"GitHub tests it together with the pull requests ahead of it and merges it. This check shows where it stands in GitHub's queue."

// gitHubQueueTitle is the title of an entry mergegate added to GitHub's
// merge queue: its place there, as GitHub reported it ("In GitHub's merge
// queue for main: position 2 of 3").
func gitHubQueueTitle(it leasedo.Item) (string, bool) {
	if it.Status == leasedo.StatusBlocked || !rules.InGitHubQueue(it) {
		return "", false
	}
	place := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(it.GateReason, rules.InGitHubQueuePrefix), " ("), ")")
	if place == "" {
		place = "added"
	}
	return fmt.Sprintf("In GitHub's merge queue for %s: %s", baseName(it), place), true
}
