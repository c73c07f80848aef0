package fakegithub

import (
	"encoding/json"
	"maps"
	"math/rand"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The CI simulator: a CI system (GitHub Actions' App, CIAppID) that runs
// one check on every commit pushed to the branches it watches, taking
// Duration on the fake's clock, and fails the commits that hold bad code.
// Runs complete when the clock says so: reading check runs (or anything)
// after the due time sees them completed; CompleteDueChecks also sends
// their check_run and check_suite completed deliveries to the webhook
// (SetWebhook). No goroutine, no timer: a test advances its clock
// (SetClock) to NextCIDue and asks.

// CI configures SimulateCI.
type CI struct {
	// Name is the check run's name (default "ci"): make it required with
	// SetRequired or SetRulesetRequired (SetRequiredApp with CIAppID to
	// bind it to this CI).
	Name string
	// Duration is how long a run takes on the fake's clock (0: it is due
	// at once, still in progress until read or CompleteDueChecks).
	Duration time.Duration
	// Bad are the pull requests whose code fails CI: every commit that
	// holds one of them fails.
	Bad []int
	// Breaking are pairs of pull requests that fail only together.
	Breaking [][2]int
	// Branches are the branches CI runs on, as patterns (path.Match, and
	// a trailing "/**" for everything under a prefix; "**" for all);
	// matched against a pull request's head branch too. Default: every
	// pull request's head and "mergegate/**".
	Branches []string
	// Slow gives some runs their own duration instead of Duration: those
	// on branches matching a pattern (as Branches), or, for a pattern
	// "#N", the run of the merge of pull request N's head (its step of a
	// merge train's build): a group's CI that takes longer.
	Slow map[string]time.Duration
	// Flaky are patterns (as Slow's) whose first run fails whatever it
	// holds, once per pattern: a flaky test.
	Flaky []string
	// Jitter makes each run take Duration (or its Slow duration) plus or
	// minus up to Jitter, drawn from Seed; the deliveries of runs that
	// complete in one CompleteDueChecks then go out in an order drawn from
	// it too: results arrive late, early and out of order, as from a real
	// CI, and the same Seed plays the same drain again.
	Jitter time.Duration
	Seed   int64
	// CancelSuperseded cancels a run still in progress on a branch when
	// the branch moves to another commit, as GitHub Actions does with
	// `concurrency: {group: ${{ github.ref }}, cancel-in-progress: true}`:
	// the run concludes cancelled, and the commit gets a new run when it
	// is pushed again (each push is a workflow run).
	CancelSuperseded bool
	// GroupPerBranch runs a branch's runs one at a time, as GitHub
	// Actions does with `concurrency: {group: ${{ github.ref }}}` (and
	// no cancel-in-progress): a run pushed while another runs on the
	// branch waits, queued; a newer push cancels the waiting one (it
	// concludes cancelled, and its commit may be run again); the waiting
	// run starts when the running one completes.
	GroupPerBranch bool
}

// ciState is a repository's simulated CI. Guarded by Server.mu.
type ciState struct {
	cfg  CI
	rng  *rand.Rand      // Jitter's draws, from Seed
	shot map[string]bool // Flaky patterns that failed their run
	runs []*ciRun
	last map[string]string // branch -> the commit of its latest run
}

// ciRun is one simulated run.
type ciRun struct {
	repo       *repo
	run        *checkRun
	branch     string // where it was pushed
	due        time.Time
	conclusion string
	waiting    bool // queued behind the run on its branch (CI.GroupPerBranch): no due yet
	done       bool // completed (by a read or CompleteDueChecks)
	notified   bool // its deliveries went out (CompleteDueChecks)
}

// SimulateCI runs the CI cfg on fullName from now on: every commit pushed
// afterwards to a branch it watches (a branch created or updated through
// the API, a merge into a branch, a pull request's new head, SetBaseHead)
// gets a check run cfg.Name, in_progress from the fake's clock, completed
// cfg.Duration later: failure when the commit holds a Bad pull request or
// both of a Breaking pair, else success. Each push is a run, as each
// push event is a workflow run on GitHub Actions: a commit pushed to two
// branches, or to a branch again after the branch held another, runs
// twice (its check runs then list the latest, filter=latest). Calling it
// again replaces cfg (runs already started keep their outcome).
func (s *Server) SimulateCI(fullName string, cfg CI) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if cfg.Name == "" {
		cfg.Name = "ci"
	}
	cfg.Bad = slices.Clone(cfg.Bad)
	cfg.Breaking = slices.Clone(cfg.Breaking)
	cfg.Branches = slices.Clone(cfg.Branches)
	if rp.ci == nil {
		rp.ci = &ciState{last: map[string]string{}}
	}
	cfg.Slow = maps.Clone(cfg.Slow)
	cfg.Flaky = slices.Clone(cfg.Flaky)
	rp.ci.cfg = cfg
	rp.ci.rng, rp.ci.shot = rand.New(rand.NewSource(cfg.Seed)), map[string]bool{}
}

// matchBranch: branch matches one of patterns (as CI.Branches).
func matchBranch(patterns []string, branch string) bool {
	for _, p := range patterns {
		if p == "**" {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "/**"); ok && strings.HasPrefix(branch, prefix+"/") {
			return true
		}
		if ok, _ := path.Match(p, branch); ok {
			return true
		}
	}
	return false
}

// matchRun: a run of sha pushed to branch matches pattern, as CI.Slow's.
func (rp *repo) matchRun(pattern, branch, sha string) bool {
	n, ok := strings.CutPrefix(pattern, "#")
	if !ok {
		return matchBranch([]string{pattern}, branch)
	}
	c := rp.git.commits[sha]
	if c == nil || len(c.parents) != 2 {
		return false
	}
	for num, pr := range rp.prs {
		if strconv.Itoa(num) == n && pr.HeadSHA == c.parents[1] {
			return true
		}
	}
	return false
}

// ciDuration is how long a run of sha on branch takes.
func (rp *repo) ciDuration(branch, sha string) time.Duration {
	ci := rp.ci
	d := ci.cfg.Duration
	for _, p := range slices.Sorted(maps.Keys(ci.cfg.Slow)) {
		if rp.matchRun(p, branch, sha) {
			d = ci.cfg.Slow[p]
			break
		}
	}
	if j := ci.cfg.Jitter; j > 0 {
		d += time.Duration(ci.rng.Int63n(int64(2*j)+1)) - j
	}
	return max(d, 0)
}

// watches: CI runs on branch (prHead: it is a pull request's head).
func (c CI) watches(branch string, prHead bool) bool {
	if c.Branches == nil {
		return prHead || strings.HasPrefix(branch, "mergegate/")
	}
	return matchBranch(c.Branches, branch)
}

// fails: a commit holding prs fails this CI.
func (c CI) fails(prs map[int]bool) bool {
	for _, n := range c.Bad {
		if prs[n] {
			return true
		}
	}
	for _, pair := range c.Breaking {
		if prs[pair[0]] && prs[pair[1]] {
			return true
		}
	}
	return false
}

// startCI starts a run on sha, pushed to branch (pr: the pull request
// whose head it is, or nil), when CI watches the branch and sha has no
// run yet. Called with s.mu held.
func (s *Server) startCI(rp *repo, branch, sha string, pr *PR) {
	ci := rp.ci
	if ci == nil || !ci.cfg.watches(branch, pr != nil) {
		return
	}
	if ci.cfg.CancelSuperseded {
		s.cancelSuperseded(rp, branch, sha)
	}
	if ci.last[branch] == sha { // the branch did not move: no push
		return
	}
	busy := false // another run is in progress on branch (CI.GroupPerBranch)
	if ci.cfg.GroupPerBranch {
		now := s.clock().UTC()
		for _, r := range s.ciPending {
			switch {
			case r.repo != rp || r.branch != branch:
			case r.waiting:
				// Replaced by the newer push: concluded cancelled now.
				r.waiting, r.due, r.conclusion = false, now, "cancelled"
			case now.Before(r.due):
				busy = true
			}
		}
	}
	ci.last[branch] = sha
	conclusion := "success"
	if ci.cfg.fails(rp.git.prsOf(sha)) {
		conclusion = "failure"
	}
	for _, p := range ci.cfg.Flaky {
		if !ci.shot[p] && rp.matchRun(p, branch, sha) {
			ci.shot[p], conclusion = true, "failure"
			break
		}
	}
	now := s.clock().UTC()
	cr := &checkRun{ID: s.newID(), HeadSHA: sha, Name: ci.cfg.Name, Status: "in_progress",
		AppID: CIAppID, AppSlug: "github-actions", StartedAt: s.now()}
	rp.checkRuns = append(rp.checkRuns, cr)
	r := &ciRun{repo: rp, run: cr, branch: branch, conclusion: conclusion}
	if busy {
		cr.Status, r.waiting = "queued", true
	} else {
		r.due = now.Add(rp.ciDuration(branch, sha))
	}
	ci.runs = append(ci.runs, r)
	s.ciPending = append(s.ciPending, r)
}

// cancelSuperseded cancels the runs in progress on branch for a commit
// other than sha (CI.CancelSuperseded): each completes now, cancelled,
// and its commit may be run again. Called with s.mu held.
func (s *Server) cancelSuperseded(rp *repo, branch, sha string) {
	now := s.clock().UTC()
	for _, r := range s.ciPending {
		if r.branch == branch && r.run.HeadSHA != sha && (r.waiting || now.Before(r.due)) && r.repo == rp {
			r.waiting, r.due, r.conclusion = false, now, "cancelled"
		}
	}
}

// settleCI completes every run that is due. Called with s.mu held, on
// every request: it looks at the runs in progress only.
func (s *Server) settleCI() {
	now := s.clock().UTC()
	for {
		// The earliest run due: completing it may start the one waiting
		// behind it on its branch, which may be due by now too.
		i := -1
		for j, r := range s.ciPending {
			if !r.waiting && !now.Before(r.due) && (i < 0 || r.due.Before(s.ciPending[i].due)) {
				i = j
			}
		}
		if i < 0 {
			return
		}
		r := s.ciPending[i]
		s.ciPending = slices.Delete(s.ciPending, i, i+1)
		ran := r.run.Status == "in_progress" // not one cancelled while it waited
		r.done = true
		r.run.Status, r.run.Conclusion, r.run.CompletedAt = "completed", r.conclusion, r.due.Truncate(time.Second)
		for _, w := range s.ciPending {
			if !ran {
				break
			}
			if w.waiting && w.repo == r.repo && w.branch == r.branch {
				w.waiting, w.due = false, r.due.Add(r.repo.ciDuration(w.branch, w.run.HeadSHA))
				w.run.Status, w.run.StartedAt = "in_progress", r.due.UTC().Truncate(time.Second)
				break
			}
		}
	}
}

// CompleteDueChecks completes every simulated run that is due on the
// fake's clock and, when a webhook is set (SetWebhook), sends a check_run
// completed delivery for each run completed since the last call (by it or
// by a read) and a check_suite completed one for its suite, in GitHub's
// shapes; a run on a branch's commit lists no pull_requests. It returns
// how many runs it reported.
func (s *Server) CompleteDueChecks() int {
	s.mu.Lock()
	s.settleCI()
	s.settleUpdates()
	type delivery struct {
		event   string
		payload []byte
	}
	var out []delivery
	n := 0
	for _, fullName := range slices.Sorted(maps.Keys(s.repos)) {
		rp := s.repos[fullName]
		if rp.ci == nil {
			continue
		}
		for _, r := range rp.ci.runs {
			if !r.done || r.notified {
				continue
			}
			r.notified = true
			n++
			run, suite := s.ciPayloads(rp, r.run)
			out = append(out, delivery{"check_run", run})
			if suite != nil { // GitHub completes a suite when its last run does
				out = append(out, delivery{"check_suite", suite})
			}
		}
	}
	for _, fullName := range slices.Sorted(maps.Keys(s.repos)) {
		if ci := s.repos[fullName].ci; ci != nil && ci.cfg.Jitter > 0 {
			ci.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			break
		}
	}
	hookURL := s.hooks.hookURL
	s.mu.Unlock()
	if hookURL != "" {
		for _, d := range out {
			s.SendWebhook(d.event, "", d.payload)
		}
	}
	return n
}

// NextCIDue returns when the next simulated run is due (false when none
// is in progress): where a test or benchmark advances its clock to.
func (s *Server) NextCIDue() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, r := range s.ciPending {
		if !r.waiting && (next.IsZero() || r.due.Before(next)) {
			next = r.due
		}
	}
	for _, u := range s.updatesDue {
		if next.IsZero() || u.due.Before(next) {
			next = u.due
		}
	}
	return next, !next.IsZero()
}

// CIRuns returns how many simulated runs started on fullName.
func (s *Server) CIRuns(fullName string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ci := s.mustRepo(fullName).ci; ci != nil {
		return len(ci.runs)
	}
	return 0
}

// ciPayloads are the check_run and check_suite completed deliveries of
// run (octokit/webhooks' check_run/completed and check_suite/completed
// examples, with the installation an App's deliveries carry); suite is nil
// while another run of the suite is not completed. Called with s.mu held.
func (s *Server) ciPayloads(rp *repo, cr *checkRun) (run, suite []byte) {
	prs := []obj{}
	for _, n := range slices.Sorted(maps.Keys(rp.prs)) {
		if pr := rp.prs[n]; pr.State == "open" && pr.HeadSHA == cr.HeadSHA {
			prs = append(prs, s.prRefJSON(rp, pr))
		}
	}
	var sv suiteView
	for _, v := range s.suitesOf(rp, cr.HeadSHA) {
		if v.appID == cr.AppID {
			sv = v
		}
	}
	st := s.checkSuiteJSON(rp, sv)
	st["pull_requests"] = prs
	delete(st, "repository")
	inst, _ := strconv.ParseInt(rp.tenant, 10, 64)
	installation := obj{"id": inst, "node_id": nodeID("I", inst)}
	sender := s.userJSON("github-actions[bot]")
	sender["type"] = "Bot"

	ro := s.checkRunJSON(rp, cr)
	ro["pull_requests"] = prs
	inSuite := obj{}
	for k, v := range st {
		if k != "latest_check_runs_count" && k != "check_runs_url" {
			inSuite[k] = v
		}
	}
	ro["check_suite"] = inSuite
	run, _ = json.Marshal(obj{"action": "completed", "check_run": ro, "repository": s.repoJSON(rp, false),
		"sender": sender, "installation": installation})
	if sv.status == "completed" {
		suite, _ = json.Marshal(obj{"action": "completed", "check_suite": st, "repository": s.repoJSON(rp, false),
			"sender": sender, "installation": installation})
	}
	return run, suite
}

// prRefJSON is a pull request as check runs and suites list it.
func (s *Server) prRefJSON(rp *repo, pr *PR) obj {
	_, name, _ := strings.Cut(rp.fullName, "/")
	repoRef := obj{"id": rp.id, "url": s.apiURL("repos/%s", rp.fullName), "name": name}
	return obj{
		"url":    s.apiURL("repos/%s/pulls/%d", rp.fullName, pr.Number),
		"id":     rp.id*100000 + int64(pr.Number),
		"number": pr.Number,
		"head":   obj{"ref": pr.HeadRef, "sha": pr.HeadSHA, "repo": repoRef},
		"base":   obj{"ref": pr.BaseRef, "sha": rp.branches[pr.BaseRef], "repo": repoRef},
	}
}
