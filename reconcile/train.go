package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// The merge train of a base branch (docs/trains.md): rules.DecideTrain
// names the next action, trainStep carries it out. Every group's move is
// stored (leasedo.SaveGroup) before the GitHub call that depends on it,
// and a restart reads it back: a group found building is built again from
// scratch, a group found landing is landed again after reading the base.

// readLag is how long after mergegate moved a base a read that says
// otherwise is taken for GitHub's replicas lagging the write.
const readLag = 10 * time.Second

// wroteBranch remembers that mergegate set branch to sha ("": deleted it,
// or read that there is none), for readLag (the Syncer's caches: keep).
func (s *Syncer) wroteBranch(k leasedo.Key, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep(s.wrote, k.String()+"@"+branch, cached[string]{v: sha, at: s.clock.Now()}, readLag)
}

// ownTip is a train branch's tip (ErrNotFound: none), as mergegate wrote
// or read it less than readLag ago, without a request (a read may still
// show the branch as it was before mergegate's write), else as GitHub
// reads it. Only where a tip someone else pushed would be found anyway: a
// merge onto it has it as its first parent (buildGroup checks every
// merge's parents), a forced reset replaces it, and a branch taken to be
// missing is created, or reset when it is there (setBranch).
func (s *Syncer) ownTip(ctx context.Context, k leasedo.Key, branch string) (string, error) {
	s.mu.Lock()
	sha, ok := fresh(s.wrote, k.String()+"@"+branch, s.clock.Now(), readLag)
	s.mu.Unlock()
	switch {
	case ok && sha == "":
		return "", fmt.Errorf("%s: %s: %w (as mergegate left it a moment ago)", k, branch, forge.ErrNotFound)
	case ok:
		return sha, nil
	}
	tip, err := s.gh.BranchHead(ctx, k.Tenant, k.Repo, branch)
	if errors.Is(err, forge.ErrNotFound) {
		s.wroteBranch(k, branch, "")
	}
	return tip, err
}

// landedWithin reports whether mergegate's last landing on a base (l) was
// less than d ago.
func (s *Syncer) landedWithin(l leasedo.Landed, d time.Duration) bool {
	if l.Tip == "" || len(l.Recent) == 0 {
		return false
	}
	age := s.clock.Now().Sub(time.UnixMilli(l.Recent[len(l.Recent)-1].At))
	return age >= 0 && age < d // a replica whose clock is ahead does not hold the train
}

// trainBases lists the bases of k that run a train now, or still have
// groups (to be disbanded), sorted.
func (s *Syncer) trainBases(k leasedo.Key, items []leasedo.Item, groups []leasedo.Group) []string {
	var out []string
	for _, it := range items {
		if it.BaseRef != "" && s.policyOf(k, it.BaseRef).InTrain() {
			out = append(out, it.BaseRef)
		}
	}
	for _, g := range groups {
		out = append(out, g.Base)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// trainStep takes the next action on base's train. It reports whether
// anything changed and when to come back.
func (s *Syncer) trainStep(ctx context.Context, l *leasedo.Lease, base string, items []leasedo.Item, all []leasedo.Group, handled map[int]bool) (bool, time.Duration, error) {
	k := l.Key
	pol := s.policyOf(k, base)
	f := rules.TrainFacts{Base: base, Entries: map[int]leasedo.Item{}, Now: s.clock.Now()}
	for _, g := range all {
		if g.Base == base {
			f.Groups = append(f.Groups, g)
		}
	}
	for _, it := range items {
		if it.BaseRef == base {
			f.Entries[it.PRNumber] = it
		}
	}
	f.Ready, f.Pending = waitingEntries(base, items, f.Groups, pol.Train.Speculate)
	if len(f.Groups) == 0 && len(f.Ready) == 0 {
		return false, 0, nil
	}
	if pol.InTrain() {
		req, err := s.rulesOf(ctx, k, base)
		if err != nil {
			return false, 0, err
		}
		if req.MergeQueue {
			// GitHub's own merge queue runs this base.
			pol.Mode = rules.ModeSerial
		}
	}
	var err error
	if f.Tip, err = s.gh.BranchHead(ctx, k.Tenant, k.Repo, base); err != nil {
		return false, 0, err
	}
	if f.Landed, err = s.store.LandedOn(ctx, k, base); err != nil {
		return false, 0, err
	}
	if f.Tip != f.Landed.Tip && s.landedWithin(f.Landed, readLag) {
		// GitHub's reads lag its writes: the base, just moved by
		// mergegate, may still read as it was. Built on that, the train
		// would test a base that is behind; read it again in a moment.
		s.log.Debug().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("base", base).Str("sha", f.Tip).Str("landed_sha", f.Landed.Tip).
			Msg("the base does not read as what mergegate landed a moment ago; reading it again shortly")
		return false, time.Second, nil
	}
	f.Gates = make([]forge.Verdict, len(f.Groups))
	for i, g := range f.Groups {
		if g.State != leasedo.GroupTesting {
			continue
		}
		var cancelled bool
		if f.Gates[i], cancelled, err = s.groupGate(ctx, k, base, g.Head); err != nil {
			return false, 0, err
		}
		if cancelled && !g.Own {
			// CI cancelled the head's run when the next group's merge
			// moved the train branch on: pushed to a branch of its own,
			// the head is run again (once).
			if f.Groups[i], err = s.pushOwn(ctx, l, g, "its run on "+g.TrainBranch()+" was cancelled"); err != nil {
				return false, 0, err
			}
		}
	}
	again := s.groupChecksLag(k, f)
	a := rules.DecideTrain(f, pol)
	log := s.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("base", base).Logger()
	if a.Group.ID != 0 {
		log = log.With().Int64("group", a.Group.ID).Logger()
	}
	switch a.Kind {
	case rules.TrainWait:
		if n := pol.Train.WithDefaults().BatchSize - len(f.Ready); n > 0 && len(f.Pending) > 0 && len(f.Ready) > 0 {
			// A group short of batch_size waits for entries still
			// running their own checks: read as many as would fill it
			// now (checks finish about together, their deliveries one by
			// one).
			changed, err := s.readWaiting(ctx, l, base, items, handled, n)
			return changed, again, err
		}
		return false, again, nil

	case rules.TrainDisband:
		log.Info().Str("reason", a.Reason).Msg("merge train disbanded")
		for _, g := range f.Groups {
			if err := s.dropGroup(ctx, l, g); err != nil {
				return false, 0, err
			}
		}
		s.emptied(ctx, k, f, len(f.Groups))
		return true, 0, nil

	case rules.TrainDrop:
		log.Info().Str("reason", a.Reason).Msg("members left their group; it is built again")
		g := a.Group
		g.PRs = slices.DeleteFunc(slices.Clone(g.PRs), func(m leasedo.GroupPR) bool { return slices.Contains(a.PRs, m) })
		if len(g.PRs) == 0 {
			if err := s.dropGroup(ctx, l, g); err != nil {
				return false, 0, err
			}
			s.emptied(ctx, k, f, 1)
		} else if err := s.replan(ctx, l, g, a.Reason); err != nil {
			return false, 0, err
		}
		return true, 0, s.replanBehind(ctx, l, f.Groups, a.Group.ID, a.Reason)

	case rules.TrainRebase:
		log.Info().Str("reason", a.Reason).Str("sha", f.Tip).Msg("base moved: the merge train is built again on it")
		for _, g := range f.Groups {
			if g.Built() && g.State != leasedo.GroupLanding {
				if err := s.replan(ctx, l, g, a.Reason); err != nil {
					return false, 0, err
				}
			}
		}
		return true, 0, nil

	case rules.TrainPlan:
		if len(a.PRs) < pol.Train.WithDefaults().BatchSize {
			// Checks finish about together, their deliveries one by one:
			// read the entries next in line whose checks were still
			// running, so that the group takes whatever is ready now.
			if changed, err := s.readWaiting(ctx, l, base, items, handled, pol.Train.WithDefaults().BatchSize-len(a.PRs)); changed || err != nil {
				return changed, 0, err
			}
		}
		prs, changed, err := s.clearForks(ctx, l, pol, f.Entries, a.PRs)
		if err != nil || len(prs) == 0 {
			return changed, 0, err
		}
		gs, err := s.store.PlanGroups(ctx, l, base, -1, [][]leasedo.GroupPR{prs}, false)
		if err == nil {
			log.Info().Int64("group", gs[0].ID).Ints("prs", gs[0].Numbers()).Msg("merge train group planned")
		}
		return true, 0, err

	case rules.TrainBuild:
		return s.buildGroup(ctx, l, f, a.Group, a.Parent, log)

	case rules.TrainPass:
		g := a.Group
		g.State = leasedo.GroupPassed
		log.Info().Ints("prs", g.Numbers()).Str("sha", g.Head).Msg("merge train group passed")
		return true, 0, s.store.SaveGroup(ctx, l, g)

	case rules.TrainLand:
		return s.landGroup(ctx, l, f, pol, a.Group, a.Through, a.Landing, log)

	case rules.TrainRetry:
		g := a.Group
		g.Attempt++
		// Made again: a retry runs CI on new merge commits, not on the
		// ones whose run failed.
		g.PRs = slices.Clone(g.PRs)
		for i := range g.PRs {
			g.PRs[i].Onto, g.PRs[i].Merged = "", ""
		}
		log.Info().Ints("prs", g.Numbers()).Int("attempt", g.Attempt).Str("reason", a.Reason).Msg("merge train group failed; running it again")
		if err := s.replan(ctx, l, g, a.Reason); err != nil {
			return false, 0, err
		}
		return true, 0, s.replanBehind(ctx, l, f.Groups, g.ID, "the group ahead is run again")

	case rules.TrainSplit:
		g := a.Group
		log.Info().Ints("prs", g.Numbers()).Str("reason", a.Reason).Msg("merge train group failed; each of its pull requests is tested at its step to find the cause")
		last := g.PRs[len(g.PRs)-1]
		if last.Merged != g.Head || last.Onto == "" {
			// Built before its steps were recorded: every piece is built.
			if err := s.replan(ctx, l, g, a.Reason); err != nil {
				return false, 0, err
			}
			g.State, g.Parent, g.Head, g.BuiltAt = leasedo.GroupPlanned, "", "", 0
		}
		if _, err := s.store.SplitGroup(ctx, l, g); err != nil {
			return false, 0, err
		}
		return true, 0, s.replanBehind(ctx, l, f.Groups, g.ID, "the group ahead failed")

	case rules.TrainBounce:
		g := a.Group
		it, ok := f.Entries[a.Culprit.Number]
		if ok && it.PRSha == a.Culprit.SHA {
			if err := s.bounce(ctx, l, it, rules.Action{Kind: rules.Bounce, Bounced: a.Bounced, Problem: string(a.Bounced.Kind)}); err != nil {
				return false, 0, err
			}
		}
		if err := s.dropGroup(ctx, l, g); err != nil {
			return false, 0, err
		}
		s.emptied(ctx, k, f, 1)
		return true, 0, s.replanBehind(ctx, l, f.Groups, g.ID, fmt.Sprintf("#%d failed in the group ahead", a.Culprit.Number))
	}
	return false, 0, fmt.Errorf("%s: train of %s: unknown action %v", k, base, a.Kind)
}

// readWaiting reads again up to n entries of base whose checks had not
// concluded (once per sync each) and reports whether one changed.
func (s *Syncer) readWaiting(ctx context.Context, l *leasedo.Lease, base string, items []leasedo.Item, handled map[int]bool, n int) (bool, error) {
	for _, it := range items {
		if n == 0 {
			break
		}
		if it.BaseRef != base || it.Status != leasedo.StatusEvaluating || handled[it.PRNumber] {
			continue
		}
		n--
		handled[it.PRNumber] = true
		changed, _, err := s.advance(ctx, l, it, false, handled)
		if changed || err != nil {
			return changed, err
		}
	}
	return false, nil
}

// groupChecksLag is a second when a testing group's checks read as still
// running one that a delivery said concluded on its head (rules.ReadLag):
// a read that lags, made again then rather than at the cron's pass. 0
// otherwise.
func (s *Syncer) groupChecksLag(k leasedo.Key, f rules.TrainFacts) time.Duration {
	for i, g := range f.Groups {
		if g.State != leasedo.GroupTesting || f.Gates[i].Result != forge.GatePending {
			continue
		}
		done := s.concludedOn(k, g.Head)
		for _, name := range f.Gates[i].Waiting {
			if slices.Contains(done, name) {
				s.log.Debug().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("base", g.Base).Int64("group", g.ID).Str("sha", g.Head).Str("check", name).
					Msg("a merge train group's check reads as running after its delivery said it concluded; reading it again shortly")
				return time.Second
			}
		}
	}
	return 0
}

// groupGate is the base's required checks on a group's head commit. A
// cancelled run is no result: a CI that cancels the run a newer push to
// the branch supersedes cancels the steps of the train branch behind its
// tip. cancelled reports that every run on sha was cancelled: CI has
// nothing to say of it unless it is pushed again.
func (s *Syncer) groupGate(ctx context.Context, k leasedo.Key, base, sha string) (v forge.Verdict, cancelled bool, err error) {
	req, err := s.rulesOf(ctx, k, base)
	if err != nil {
		return forge.Verdict{}, false, err
	}
	all, err := s.gh.CheckResults(ctx, k.Tenant, k.Repo, sha)
	if err != nil {
		return forge.Verdict{}, false, err
	}
	results := uncancelled(all)
	var suites []forge.CheckSuite
	if !req.Configured || len(req.Contexts) == 0 {
		if suites, err = s.gh.CheckSuites(ctx, k.Tenant, k.Repo, sha); err != nil {
			return forge.Verdict{}, false, err
		}
	}
	return forge.EvaluateGate(req, results, suites), len(all) > 0 && len(results) == 0, nil
}

// pushOwn pushes g's head to its own branch (why: what CI lacks on the
// train branch) and returns g, stored with its branch before the push:
// CI runs on the head again, and check_timeout counts from now.
func (s *Syncer) pushOwn(ctx context.Context, l *leasedo.Lease, g leasedo.Group, why string) (leasedo.Group, error) {
	g.Own, g.BuiltAt = true, s.clock.Now().UnixMilli()
	if err := s.store.SaveGroup(ctx, l, g); err != nil {
		return g, err
	}
	s.log.Info().Str("tenant", l.Key.Tenant).Str("repo", l.Key.Repo).Str("base", g.Base).Int64("group", g.ID).Ints("prs", g.Numbers()).
		Str("branch", g.OwnBranch()).Str("sha", g.Head).Str("reason", why).Msg("merge train group pushed to a branch of its own, for CI to run on its head")
	return g, s.resetBranch(ctx, l.Key, g.OwnBranch(), g.Head)
}

// clearForks keeps the members that may run in the repository's CI: a
// pull request from a fork only when someone with write permission queued
// it (the trigger label added by a writer, or GitHub's auto-merge, which
// only writers may enable). The others wait, saying why.
func (s *Syncer) clearForks(ctx context.Context, l *leasedo.Lease, pol rules.Policy, entries map[int]leasedo.Item, prs []leasedo.GroupPR) ([]leasedo.GroupPR, bool, error) {
	k := l.Key
	var out []leasedo.GroupPR
	changed := false
	for _, m := range prs {
		pr, err := s.gh.GetPR(ctx, k.Tenant, k.Repo, m.Number)
		if err != nil {
			return nil, changed, err
		}
		if !pr.Fork || pr.AutoMerge {
			out = append(out, m)
			continue
		}
		writer := ""
		for _, label := range pol.Triggers.Labels() {
			if !slices.Contains(pr.Labels, label) {
				continue
			}
			tt, err := s.gh.TriggerTimes(ctx, k.Tenant, k.Repo, m.Number, label)
			if err != nil {
				return nil, changed, err
			}
			if tt.LabeledBy == "" {
				continue
			}
			perm, err := s.permission(ctx, k, tt.LabeledBy)
			if err != nil {
				return nil, changed, err
			}
			if perm.CanWrite() {
				writer = tt.LabeledBy
				break
			}
		}
		if writer != "" {
			out = append(out, m)
			continue
		}
		it := entries[m.Number]
		reason := "from a fork: it joins the merge train once someone with write permission queues it (adds the trigger label)"
		s.prLog(k, m.Number, m.SHA).Info().Msg("a fork's pull request waits for a writer to queue it before it runs in the repository's CI")
		if _, err := s.store.Wait(ctx, l, it.PRNumber, it.PRSha, leasedo.StatusGatePassed, reason); err != nil {
			return nil, changed, err
		}
		changed = true
	}
	return out, changed, nil
}

// buildGroup merges g's members' heads onto parent, in order, on the
// base's train branch. When the train branch ends at parent (the head of
// the group ahead, or the commit the last group landed), the merges are
// made on it: each is one push to a branch CI watches, and costs that
// write only. Otherwise the first merge is made on the base's build
// branch, where CI does not run, and the train branch set to its commit:
// no run is spent on the commit the group is built on. CI runs on every
// member's step, so a group whose head fails has the results that name
// the culprit already (its pieces, rules.TrainSplit). A member that
// conflicts is bounced and the group is planned again without it. A
// member whose merge onto the same commit was made before (a split
// group's pieces) is taken as it was: a head made of such merges is
// pushed again, to the group's own branch, only when CI has nothing to
// say of it.
func (s *Syncer) buildGroup(ctx context.Context, l *leasedo.Lease, f rules.TrainFacts, g leasedo.Group, parent string, log zerolog.Logger) (bool, time.Duration, error) {
	k := l.Key
	g.State, g.Parent, g.Head, g.BuiltAt = leasedo.GroupBuilding, parent, "", 0
	if err := s.store.SaveGroup(ctx, l, g); err != nil {
		return false, 0, err
	}
	tmp, train := g.BuildBranch(), g.TrainBranch()
	on := ""           // where the merges are made: train, or tmp then train
	trainMade := false // the train branch exists (read by buildOn)
	unseen := ""       // a branch this build created that no read has shown yet
	head := parent
	prs := slices.Clone(g.PRs)
	for i, m := range prs {
		if m.Onto == head && m.Merged != "" {
			head = m.Merged
			continue
		}
		if on == "" {
			var created bool
			var err error
			if on, trainMade, created, err = s.buildOn(ctx, k, tmp, train, head); err != nil {
				return false, 0, err
			}
			if created {
				unseen = on
			}
		}
		if unseen == on {
			// GitHub's merge into a branch created a moment before may
			// not find it (its reads lag its writes): a read, not a
			// refused write, tells whether it is there yet.
			if _, err := s.gh.BranchHead(ctx, k.Tenant, k.Repo, on); errors.Is(err, forge.ErrNotFound) {
				return s.buildLater(ctx, l, g, prs, m.Number, on, log)
			} else if err != nil {
				return false, 0, err
			}
			unseen = ""
		}
		// The branches hold what mergegate wrote, and only that: each
		// merge's parents are the tip mergegate left and the pull
		// request's head (a merge onto a commit someone else pushed has
		// that commit as its first parent, so no read of the branch
		// before each merge is needed), and the branch is read once after
		// the last. A foreign commit would be tested, then landed (a
		// fast-forward with the App's bypass skips required reviews).
		res, err := s.gh.MergeBranch(ctx, k.Tenant, k.Repo, on, m.SHA,
			fmt.Sprintf("Merge #%d into %s (mergegate train group %d)", m.Number, f.Base, g.ID))
		if err == nil && !res.UpToDate && !slices.Equal(res.Parents, []string{head, m.SHA}) {
			return true, 0, s.abandonBuild(ctx, l, f, g, on, fmt.Sprintf("merging #%d into %s made %s on %s, not on %s (the tip mergegate left) and %s (its head)",
				m.Number, on, forge.ShortSHA(res.SHA), shortSHAs(res.Parents), forge.ShortSHA(head), forge.ShortSHA(m.SHA)), res.SHA, log)
		}
		switch {
		case errors.Is(err, forge.ErrBaseMissing):
			// The branch mergegate created or moved a moment ago is not
			// there for GitHub's merge yet.
			return s.buildLater(ctx, l, g, prs, m.Number, on, log)
		case errors.Is(err, forge.ErrMergeConflict):
			ahead := append(rules.Ahead(f.Groups, g.ID), g.Numbers()[:i]...)
			b := rules.Bounced{Kind: rules.BounceTrainConflict, Base: f.Base, At: head, Ahead: ahead}
			if it, ok := f.Entries[m.Number]; ok && it.PRSha == m.SHA {
				if err := s.bounce(ctx, l, it, rules.Action{Kind: rules.Bounce, Bounced: b, Problem: string(b.Kind)}); err != nil {
					return false, 0, err
				}
			}
			g.PRs = slices.Delete(prs, i, i+1)
			if len(g.PRs) == 0 {
				if err := s.dropGroup(ctx, l, g); err != nil {
					return false, 0, err
				}
				s.emptied(ctx, k, f, 1)
				return true, 0, nil
			}
			return true, 0, s.replan(ctx, l, g, fmt.Sprintf("#%d conflicts with the pull requests ahead of it", m.Number))
		case err != nil:
			return false, 0, err
		}
		s.resetRetry(k, m.Number)
		prs[i].Onto = head
		if !res.UpToDate {
			head = res.SHA
			s.wroteBranch(k, on, head)
		}
		prs[i].Merged = head
		if on == tmp && !res.UpToDate && i < len(prs)-1 {
			// The merge's parents are checked: what is on tmp now does not
			// matter, the train branch goes on from the merge mergegate
			// made.
			created, err := s.setBranch(ctx, k, train, head, trainMade)
			if err != nil {
				return false, 0, err
			}
			if on = train; created {
				unseen = train
			}
		}
	}
	push := ""
	switch {
	case on != "":
		// Also what a merge GitHub answered 204 (nothing to merge) left.
		if foreign, err := s.foreignTip(ctx, k, on, head, parent, prs); err != nil || foreign != "" {
			if err != nil {
				return false, 0, err
			}
			return true, 0, s.abandonBuild(ctx, l, f, g, on, fmt.Sprintf("%s points to %s after its merges, not to %s, which mergegate left there",
				on, forge.ShortSHA(foreign), forge.ShortSHA(head)), foreign, log)
		}
		if on == tmp {
			push = train
		}
	default:
		// Its steps were pushed when the group it comes from was built.
		// It is pushed again only when CI has nothing to say of its head
		// (its run cancelled by the next merge's push, or a build from
		// before CI ran on every step).
		ran, err := s.stepRan(ctx, k, head)
		if err != nil {
			return false, 0, err
		}
		if !ran {
			g.Own, push = true, g.OwnBranch()
		}
	}
	g.PRs, g.Head = prs, head
	if push != "" {
		if err := s.store.SaveGroup(ctx, l, g); err != nil { // its branch, before the push
			return false, 0, err
		}
		if _, err := s.setBranch(ctx, k, push, head, push == train && trainMade); err != nil {
			return false, 0, err
		}
	}
	g.State, g.BuiltAt = leasedo.GroupTesting, s.clock.Now().UnixMilli()
	if err := s.store.SaveGroup(ctx, l, g); err != nil {
		return false, 0, err
	}
	log.Info().Ints("prs", g.Numbers()).Str("branch", g.Branch()).Str("sha", head).Str("parent_sha", parent).Bool("merged", on != "").Bool("pushed", push != "" || on == train).Msg("merge train group built; its CI runs")
	return true, 0, nil
}

// buildLater keeps the merges a build made (prs) and has it go on from
// there at the next sync, a moment later: GitHub does not show the branch
// mergegate wrote a moment ago (on) yet.
func (s *Syncer) buildLater(ctx context.Context, l *leasedo.Lease, g leasedo.Group, prs []leasedo.GroupPR, number int, on string, log zerolog.Logger) (bool, time.Duration, error) {
	g.PRs = prs
	if err := s.store.SaveGroup(ctx, l, g); err != nil {
		return false, 0, err
	}
	log.Info().Int("pr", number).Str("branch", on).
		Msg("GitHub does not show the branch mergegate just wrote yet; the group's build goes on in a moment")
	return false, s.nextRetry(l.Key, number), nil
}

// buildOn is where a build on head makes its first merge: the train
// branch when it ends at head, else the build branch, set to head. made
// reports whether the train branch exists, created whether on was
// created just now.
func (s *Syncer) buildOn(ctx context.Context, k leasedo.Key, tmp, train, head string) (on string, made, created bool, err error) {
	tip, err := s.ownTip(ctx, k, train)
	switch {
	case err == nil && tip == head:
		return train, true, false, nil
	case err != nil && !errors.Is(err, forge.ErrNotFound):
		return "", false, false, err
	}
	made = err == nil
	created, err = s.resetBuildBranch(ctx, k, tmp, head)
	return tmp, made, created, err
}

// stepRan reports whether CI reported on sha, a step of a group's build,
// with a run that was not cancelled (a workflow that cancels the runs a
// newer push to the branch supersedes cancels the steps before a group's
// head).
func (s *Syncer) stepRan(ctx context.Context, k leasedo.Key, sha string) (bool, error) {
	results, err := s.gh.CheckResults(ctx, k.Tenant, k.Repo, sha)
	if err != nil {
		return false, err
	}
	return len(uncancelled(results)) > 0, nil
}

// uncancelled is results without the cancelled check runs: a step's run
// cancelled because its branch moved on says nothing of its commit.
func uncancelled(results []forge.CheckResult) []forge.CheckResult {
	return slices.DeleteFunc(slices.Clone(results), func(r forge.CheckResult) bool {
		return r.Source != forge.SourceStatus && r.Status == "completed" && r.Conclusion == "cancelled"
	})
}

// foreignTip reads branch, where mergegate just made the merges of prs on
// parent, and returns its tip when it is a commit mergegate did not make
// there ("" when it is want, or one of mergegate's own). GitHub's reads
// lag its writes: a read a moment after the last merge may still show
// an earlier step, the parent, or no branch at all, never a commit
// someone else pushed.
func (s *Syncer) foreignTip(ctx context.Context, k leasedo.Key, branch, want, parent string, prs []leasedo.GroupPR) (string, error) {
	tip, err := s.gh.BranchHead(ctx, k.Tenant, k.Repo, branch)
	switch {
	case errors.Is(err, forge.ErrNotFound):
		return "", nil // the merges' answers said it is there
	case err != nil || tip == want || tip == parent:
		return "", err
	}
	for _, m := range prs {
		if m.Merged == tip {
			return "", nil
		}
	}
	return tip, nil
}

// abandonBuild gives up g's build: branch, where it was being built,
// holds a commit mergegate did not make (why, sha). The group goes, and
// its members are planned again in a new group, built again from its
// parent (the train branch is reset then); nothing of the old one is
// tested or landed. The operator is told to protect mergegate's branches.
func (s *Syncer) abandonBuild(ctx context.Context, l *leasedo.Lease, f rules.TrainFacts, g leasedo.Group, branch, why, sha string, log zerolog.Logger) error {
	log.Error().Ints("prs", g.Numbers()).Str("branch", branch).Str("sha", sha).Str("reason", why).
		Msg("merge train group abandoned: its build branch holds a commit mergegate did not make; its pull requests are built again in a new group " +
			"(operator: let only the App push to mergegate*/** with a ruleset, docs/trains.md)")
	if err := s.dropGroup(ctx, l, g); err != nil {
		return err
	}
	s.emptied(ctx, l.Key, f, 1)
	return s.replanBehind(ctx, l, f.Groups, g.ID, "the group ahead was abandoned")
}

// shortSHAs is shas, short, for a sentence.
func shortSHAs(shas []string) string {
	out := make([]string, len(shas))
	for i, sha := range shas {
		out[i] = forge.ShortSHA(sha)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// landGroup lands the first group, which passed, exactly at its tested
// commit; or, with through (the groups ahead of g, which g's commit holds:
// its checks passed on them), every one of them at g's commit. Only g is
// marked landing: what is ahead of a landing group lands with it
// (rules.DecideTrain), after a restart too.
func (s *Syncer) landGroup(ctx context.Context, l *leasedo.Lease, f rules.TrainFacts, pol rules.Policy, g leasedo.Group, through []leasedo.Group, landing string, log zerolog.Logger) (bool, time.Duration, error) {
	k := l.Key
	resumed := g.State == leasedo.GroupLanding
	if !resumed {
		g.State = leasedo.GroupLanding
		if err := s.store.SaveGroup(ctx, l, g); err != nil {
			return false, 0, err
		}
	}
	all := append(slices.Clone(through), g)
	if len(through) > 0 {
		ahead := make([]int64, len(through))
		for i, t := range through {
			ahead[i] = t.ID
		}
		log.Info().Ints("prs", g.Numbers()).Ints64("ahead_groups", ahead).Ints("ahead_prs", rules.Ahead(f.Groups, g.ID)).Str("sha", g.Head).
			Msg("merge train group passed on the groups ahead of it: they land with it, without waiting for their own checks")
	}
	if landing == rules.LandReplay {
		return s.replayGroup(ctx, l, f, pol, g, through, log)
	}
	landedAll := func() error {
		for _, t := range all {
			tlog := log
			if t.ID != g.ID {
				tlog = s.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("base", f.Base).Int64("group", t.ID).Logger()
			}
			if err := s.landed(ctx, l, f, t, g.Head, g.Head, landing, tlog); err != nil {
				return err
			}
		}
		s.emptied(ctx, k, f, len(all))
		return nil
	}
	if resumed && f.Tip == g.Head {
		return true, 0, landedAll()
	}
	err := s.gh.SetBranch(ctx, k.Tenant, k.Repo, f.Base, g.Head, false)
	switch {
	case err == nil:
		return true, 0, landedAll()
	case errors.Is(err, forge.ErrNotFastForward):
		// Landed before a restart, then the base moved on? Its pull
		// requests say.
		pr, perr := s.gh.GetPR(ctx, k.Tenant, k.Repo, g.PRs[0].Number)
		if perr != nil {
			return false, 0, perr
		}
		if pr.Merged {
			return true, 0, landedAll()
		}
		log.Info().Str("sha", f.Tip).Msg("the base moved before the group could land; the train is built again on it")
		for _, t := range all {
			if err := s.replan(ctx, l, t, "the base moved before it landed"); err != nil {
				return false, 0, err
			}
		}
		return true, 0, s.replanBehind(ctx, l, f.Groups, g.ID, "the base moved")
	case errors.Is(err, forge.ErrProtectedBranch):
		why := err.Error()
		var pe *forge.ProtectedBranchError
		if errors.As(err, &pe) {
			why = pe.Message
		}
		msg := fmt.Sprintf("mergegate may not push to %s (GitHub: %q): let the App bypass the branch's protection, or set landing: replay", f.Base, why)
		return true, 0, s.stopTrain(ctx, l, g, msg, log)
	}
	return false, 0, err
}

// replayGroup lands g by merging each member through the merge API, its
// sha guarded, then compares the base's tree with the tested tree.
// The groups through, ahead of g, are merged first (a group landing
// through them, found after a restart with landing changed to replay).
func (s *Syncer) replayGroup(ctx context.Context, l *leasedo.Lease, f rules.TrainFacts, pol rules.Policy, g leasedo.Group, through []leasedo.Group, log zerolog.Logger) (bool, time.Duration, error) {
	k := l.Key
	req, err := s.rulesOf(ctx, k, f.Base)
	if err != nil {
		return false, 0, err
	}
	methods, err := s.methodsOf(ctx, k)
	if err != nil {
		return false, 0, err
	}
	method, _, ok := rules.TrainMethod(methods, req, pol)
	if !ok {
		return true, 0, s.stopTrain(ctx, l, g, "the repository allows no merge method mergegate can land a group with", log)
	}
	var members []leasedo.GroupPR
	for _, t := range through {
		members = append(members, t.PRs...)
	}
	tip := "" // the last merge's commit: the base once it is made
	for _, m := range append(members, g.PRs...) {
		pr, err := s.gh.GetPR(ctx, k.Tenant, k.Repo, m.Number)
		if err != nil {
			return false, 0, err
		}
		if pr.Merged {
			tip = ""
			continue // before a restart
		}
		tip, err = s.gh.MergeWith(ctx, k.Tenant, k.Repo, m.Number, m.SHA, method, s.commitMessage(ctx, k, pol, &pr))
		if err != nil {
			if _, msg, refused := forge.RefusalOf(err); refused {
				return true, 0, s.stopTrain(ctx, l, g, fmt.Sprintf("GitHub refused to merge #%d while landing group %d by replay (%s)", m.Number, g.ID, msg), log)
			}
			return false, 0, err
		}
	}
	if tip == "" {
		// Every merge was made before a restart: the base says where
		// they left it. (A read just after a merge may still show the
		// base before it, so the merge's own answer is used otherwise.)
		if tip, err = s.gh.BranchHead(ctx, k.Tenant, k.Repo, f.Base); err != nil {
			return false, 0, err
		}
	}
	landedTree, err := s.gh.CommitTree(ctx, k.Tenant, k.Repo, tip)
	if err != nil {
		return false, 0, err
	}
	testedTree, err := s.gh.CommitTree(ctx, k.Tenant, k.Repo, g.Head)
	if err != nil {
		return false, 0, err
	}
	if landedTree != testedTree {
		// The pull requests are merged: record it, and stop the train.
		for _, t := range append(slices.Clone(through), g) {
			if err := s.landed(ctx, l, f, t, tip, tip, rules.LandReplay, log); err != nil {
				return true, 0, err
			}
		}
		msg := fmt.Sprintf("after landing group %d by replay, %s at %s does not have the tree that was tested (%s): check the base, then thaw the queue",
			g.ID, f.Base, forge.ShortSHA(tip), forge.ShortSHA(g.Head))
		_, err := s.policies.Freeze(ctx, k, f.Base, true, msg, "mergegate")
		log.Error().Str("sha", tip).Str("tested_sha", g.Head).Msg("the landed tree differs from the tested tree; the queue is frozen until an operator thaws it")
		return true, 0, err
	}
	for _, t := range append(slices.Clone(through), g) {
		if err := s.landed(ctx, l, f, t, tip, g.Head, rules.LandReplay, log); err != nil {
			return true, 0, err
		}
	}
	s.emptied(ctx, k, f, len(through)+1)
	return true, 0, nil
}

// landed records that g landed (tip: the base now; tested: the commit
// whose tree it has), and deletes its branch.
func (s *Syncer) landed(ctx context.Context, l *leasedo.Lease, f rules.TrainFacts, g leasedo.Group, tip, tested, how string, log zerolog.Logger) error {
	k := l.Key
	others := func(n int) string {
		var out []string
		for _, m := range g.PRs {
			if m.Number != n {
				out = append(out, fmt.Sprintf("#%d", m.Number))
			}
		}
		if len(out) == 0 {
			return ""
		}
		return " with " + strings.Join(out, ", ")
	}
	end := func(m leasedo.GroupPR) leasedo.CheckRunEnd {
		return leasedo.CheckRunEnd{Conclusion: "success", Title: "Merged", Summary: fmt.Sprintf(
			"Landed on %s in merge train group %d%s (%s), at %s: the commit whose checks passed with this pull request at %s merged into it.",
			g.Base, g.ID, others(m.Number), how, forge.ShortSHA(tip), forge.ShortSHA(m.SHA))}
	}
	if err := s.store.LandGroup(ctx, l, g, leasedo.Landed{Tip: tip, Tested: tested}, how, end); err != nil {
		return err
	}
	now := s.clock.Now().UnixMilli()
	for _, m := range g.PRs {
		s.prLog(k, m.Number, m.SHA).Info().Int64("group", g.ID).Str("landing", how).Str("merge_sha", tip).Msg("merged")
		if it, ok := f.Entries[m.Number]; ok && s.cfg.Observer != nil {
			s.cfg.Observer.Merged(k, time.Duration(now-it.QueuedAt)*time.Millisecond)
		}
	}
	log.Info().Ints("prs", g.Numbers()).Str("sha", tip).Str("landing", how).Msg("merge train group landed")
	return s.deleteGroupBranch(ctx, k, g)
}

// stopTrain freezes the base's queue for the operator (msg: what to
// change); g waits, passed, for the thaw.
func (s *Syncer) stopTrain(ctx context.Context, l *leasedo.Lease, g leasedo.Group, msg string, log zerolog.Logger) error {
	g.State, g.Reason = leasedo.GroupPassed, msg
	if err := s.store.SaveGroup(ctx, l, g); err != nil {
		return err
	}
	log.Error().Str("reason", msg).Msg("merge train stopped: the queue is frozen until an operator acts and thaws it")
	_, err := s.policies.Freeze(ctx, l.Key, g.Base, true, msg, "mergegate")
	return err
}

// replan sends a built group back to planned (its own branch deleted):
// it is built again, on what is ahead of it then.
func (s *Syncer) replan(ctx context.Context, l *leasedo.Lease, g leasedo.Group, reason string) error {
	if g.Built() {
		if err := s.deleteGroupBranch(ctx, l.Key, g); err != nil {
			return err
		}
	}
	g.State, g.Parent, g.Head, g.BuiltAt, g.Reason, g.Own = leasedo.GroupPlanned, "", "", 0, reason, false
	return s.store.SaveGroup(ctx, l, g)
}

// replanBehind sends every built group behind group id back to planned:
// each was built on the one ahead of it.
func (s *Syncer) replanBehind(ctx context.Context, l *leasedo.Lease, groups []leasedo.Group, id int64, reason string) error {
	behind := false
	for _, g := range groups {
		if behind && g.Built() {
			if err := s.replan(ctx, l, g, reason); err != nil {
				return err
			}
		}
		behind = behind || g.ID == id
	}
	return nil
}

// dropGroup removes g and its branch.
func (s *Syncer) dropGroup(ctx context.Context, l *leasedo.Lease, g leasedo.Group) error {
	if g.Built() {
		if err := s.deleteGroupBranch(ctx, l.Key, g); err != nil {
			return err
		}
	}
	return s.store.DeleteGroup(ctx, l, g.ID)
}

// resetBuildBranch points the base's build branch at sha. It is read
// first: a group built on the one ahead of it finds the branch where that
// one's build left it, and costs no write; otherwise it is a forced
// update (one write), or created when there is none (created).
func (s *Syncer) resetBuildBranch(ctx context.Context, k leasedo.Key, branch, sha string) (created bool, err error) {
	tip, err := s.ownTip(ctx, k, branch)
	switch {
	case err == nil && tip == sha:
		return false, nil
	case err != nil && !errors.Is(err, forge.ErrNotFound):
		return false, err
	}
	// A read may lag: setBranch falls back to the other write.
	return s.setBranch(ctx, k, branch, sha, err == nil)
}

// resetBranch points branch at sha, creating it; one left by a build a
// restart interrupted is mergegate's own to reset.
func (s *Syncer) resetBranch(ctx context.Context, k leasedo.Key, branch, sha string) error {
	_, err := s.setBranch(ctx, k, branch, sha, false)
	return err
}

// setBranch points branch at sha: a forced update when it exists (made,
// as read), else created (created); either falls back to the other when
// the branch is not as read.
func (s *Syncer) setBranch(ctx context.Context, k leasedo.Key, branch, sha string, made bool) (created bool, err error) {
	// A build, not a landing: the reset's PATCH is the class of the
	// build's other writes, not the base's fast-forward.
	ctx = forge.WithWriteClass(ctx, forge.ClassUnblock)
	if made {
		err = s.gh.SetBranch(ctx, k.Tenant, k.Repo, branch, sha, true)
	}
	if !made || errors.Is(err, forge.ErrRefMissing) {
		err = s.gh.CreateBranch(ctx, k.Tenant, k.Repo, branch, sha)
		created = err == nil
		if errors.Is(err, forge.ErrRefExists) {
			err = s.gh.SetBranch(ctx, k.Tenant, k.Repo, branch, sha, true)
		}
	}
	if err != nil {
		return false, err
	}
	s.wroteBranch(k, branch, sha)
	return created, nil
}

// deleteGroupBranch deletes g's own branch, when it has one; one already
// gone is not an error, nor is a refusal (a leftover branch is reset when
// its name is used again), which is logged. The train branch and the
// build branch are the train's: deleted when it is empty (emptied).
func (s *Syncer) deleteGroupBranch(ctx context.Context, k leasedo.Key, g leasedo.Group) error {
	if !g.Own {
		return nil
	}
	return s.deleteTrainBranch(ctx, k, g.OwnBranch())
}

func (s *Syncer) deleteTrainBranch(ctx context.Context, k leasedo.Key, branch string) error {
	if !strings.HasPrefix(branch, leasedo.BranchPrefix) && !strings.HasPrefix(branch, leasedo.BuildBranchPrefix) {
		// Only mergegate's own branches are deleted here, whatever a
		// stored group says.
		s.log.Error().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("branch", branch).Msg("not deleting a branch outside mergegate/** and mergegate-build/**")
		return nil
	}
	err := s.gh.DeleteBranch(ctx, k.Tenant, k.Repo, branch)
	switch {
	case err == nil, errors.Is(err, forge.ErrNotFound):
		s.wroteBranch(k, branch, "")
		return nil
	case forge.IsRetryable(err):
		return err
	}
	s.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Str("branch", branch).Msg("could not delete a merge train branch (the App needs contents: write)")
	return nil
}

// emptied deletes the base's branches when the action that removed gone
// groups left its train with none and no pull request waits to join it:
// the train and build branches, and any group's own branch that a refused
// deletion or an earlier mergegate left behind. One read lists them; the
// next build creates what it needs. While pull requests wait, the next
// group is built on the train branch where the last one left it: no
// branch is deleted and created again (two writes each, and GitHub's merge
// into a branch created a moment before may not find it yet).
func (s *Syncer) emptied(ctx context.Context, k leasedo.Key, f rules.TrainFacts, gone int) {
	if len(f.Groups) > gone || len(f.Ready)+len(f.Pending) > 0 {
		return
	}
	branches, err := s.gh.Branches(ctx, k.Tenant, k.Repo, "mergegate")
	if err != nil {
		s.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Str("base", f.Base).
			Msg("could not list the merge train's branches; they are deleted when the train is next empty")
		return
	}
	g := leasedo.Group{Base: f.Base}
	left, waiting := 0, 0 // branches of groups left over: deleted, and kept for next time
	for _, b := range branches {
		switch {
		case b == g.TrainBranch(), b == g.BuildBranch():
		case !trainBranchOf(b, f.Base):
			continue
		case left == sweepMax:
			// Whoever can create branches can make this list long: the
			// rest wait for the next time the train is empty.
			waiting++
			continue
		default:
			left++
		}
		s.deleteBranchQuietly(ctx, k, b)
	}
	if waiting > 0 {
		s.log.Warn().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("base", f.Base).Int("deleted", left).Int("left", waiting).
			Msg("more merge train branches are left over than one emptying deletes; the rest go when the train is next empty")
	}
}

// sweepMax is how many left-over branches of groups one emptying of a
// train deletes at most (a write each), besides its train and build
// branches.
const sweepMax = 20

// trainBranchOf reports whether branch is one mergegate makes for base's
// train: <prefix><base>/train or <prefix><base>/<group id>, under
// mergegate/ or mergegate-build/ (where earlier builds made a branch per
// group); never another base's, whose name may start with base's.
func trainBranchOf(branch, base string) bool {
	for _, p := range []string{leasedo.BranchPrefix, leasedo.BuildBranchPrefix} {
		if rest, ok := strings.CutPrefix(branch, p+base+"/"); ok {
			if rest == "train" {
				return true
			}
			_, err := strconv.ParseInt(rest, 10, 64)
			return err == nil && !strings.HasPrefix(rest, "+") && !strings.HasPrefix(rest, "-")
		}
	}
	return false
}

// deleteBranchQuietly deletes a branch whose deletion nothing waits for;
// a failure is logged (a leftover is reset when its name is used again).
func (s *Syncer) deleteBranchQuietly(ctx context.Context, k leasedo.Key, branch string) {
	if err := s.deleteTrainBranch(ctx, k, branch); err != nil {
		s.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Str("branch", branch).Msg("could not delete a merge train branch; it is reset when used again")
	}
}
