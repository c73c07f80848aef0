package fakegithub

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// PR is a pull request of the fake. AddPR fills the zero fields: BaseRef =
// the repository's default branch, HeadRef = "feature-<n>", Author =
// "octocat", State = "open", Title, CreatedAt = now, HeadSHA derived from
// the repository and number.
type PR struct {
	Number    int
	Title     string
	Body      string
	HeadSHA   string
	HeadRef   string
	BaseRef   string
	Author    string
	Labels    []string
	Draft     bool
	AutoMerge bool
	State     string // "open" or "closed"
	Merged    bool
	// MergeCommitSHA is set when the PR is merged.
	MergeCommitSHA string
	// Unmergeable makes GitHub report mergeable=false (conflicts): merge
	// answers 405 and mergeable_state is "dirty".
	Unmergeable bool
	// Behind means the base branch has commits the head lacks. It is
	// reported as mergeable_state "behind" only when the base requires
	// branches to be up to date. Merging another PR into the same base sets
	// it on every other open PR of that base.
	Behind bool
	// MergeableState, when set, overrides the computed mergeable_state.
	MergeableState string
	// Fork: the head branch lives in the author's fork ("<author>/<name>").
	// MaintainerCanModify: its author allows edits from maintainers;
	// without it update-branch answers 403.
	Fork                bool
	MaintainerCanModify bool
	// TouchesWorkflows: the change touches .github/workflows; merge and
	// update-branch answer 403 unless the App has the workflows
	// permission (Options.WorkflowsPermission, SetWorkflowsPermission).
	TouchesWorkflows bool
	// AutoMergeMethod is auto_merge.merge_method when AutoMerge is on
	// (default "merge").
	AutoMergeMethod string
	// LabeledAt is when AddPR's Labels were added, and AutoMergeAt when
	// AddPR's AutoMerge was enabled, as the issue events report them
	// (default CreatedAt). Later changes through SetLabels, SetAutoMerge,
	// UpdatePR or the API are recorded at the server's now.
	LabeledAt   time.Time
	AutoMergeAt time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ClosedAt    time.Time
	MergedAt    time.Time

	// LabeledBy is who the issue events say added its labels and enabled
	// auto-merge (default Author).
	LabeledBy string

	// Commits are the pull request's commits (default: one by its
	// author, at its head).
	Commits []Commit
	// Files are the pull request's changes (path → content), committed
	// on its base's tip as its head commit in the git model (default: a
	// file of its own, pr/<n>.txt, so that pull requests conflict only
	// when a test makes them touch the same path; TouchesWorkflows adds
	// the workflow it changes).
	Files map[string]string

	// unknownReads is how many more GET /pulls/{n} answer mergeable null
	// (GitHub recomputing mergeability after the base or the head moved).
	unknownReads int
	// staleHeadReads is how many more GET /pulls/{n} show staleHead as
	// the head (SetStaleHeadReads).
	staleHeadReads int
	staleHead      string
}

// Commit is one commit of a pull request.
type Commit struct {
	SHA, Message            string
	AuthorLogin, AuthorName string
	AuthorEmail             string
}

type repo struct {
	id            int64
	tenant        string
	fullName      string
	defaultBranch string
	branches      map[string]string // branch -> head sha
	prs           map[int]*PR
	checkRuns     []*checkRun             // all, in creation order
	statuses      []*status               // all, in creation order
	protection    map[string]*branchRules // classic branch protection per branch
	rulesets      map[string]*branchRules // one repository ruleset per branch
	issueEvents   map[int][]*issueEvent   // per PR number, oldest first
	methods       MergeMethods
	reviews       map[int][]*review // per PR number, oldest first
	suites        []*checkSuite     // suites with no runs (AddCheckSuite)
	suiteIDs      map[string]int64  // "sha app" -> suite id
	suiteAt       map[int64]time.Time
	files         map[string]string     // path -> content, on the default branch
	declaredSize  map[string]int        // path -> the size the contents API says (DeclareFileSize)
	roles         map[string]customRole // login (lower case) -> role
	comments      map[int64]int         // comment id -> PR number (AddComment)
	reactions     map[reactionKey]reactionRec
	private       bool                // SetPrivate
	git           *gitRepo            // the git model (git.go)
	stale         map[string]staleRef // branch -> what its next reads see (Options.StaleRefReads)
	staleChecks   map[string]int      // sha -> listings of its check runs that show them all in progress (SetStaleCheckReads)
	staleReviews  map[int]int         // PR number -> listings of its reviews without the last one (SetStaleReviewReads)
	ci            *ciState            // SimulateCI (ci.go); nil: no simulated CI
}

type checkRun struct {
	ID          int64
	HeadSHA     string
	Name        string
	Status      string
	Conclusion  string
	Title       string
	Summary     string
	AppID       int64
	AppSlug     string
	StartedAt   time.Time
	CompletedAt time.Time
}

type status struct {
	ID        int64
	SHA       string
	Context   string
	State     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CIAppID is the App id of check runs added with SetCheckRun (a CI system
// other than mergegate).
const CIAppID = 15368 // GitHub Actions' App id on github.com

// DeriveSHA returns a deterministic 40-hex sha for parts (used for new
// heads and merge commits).
func DeriveSHA(parts ...string) string {
	h := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

func (s *Server) fatalf(format string, args ...any) {
	if s.tb != nil {
		s.tb.Helper()
		s.tb.Fatalf(format, args...)
		return
	}
	panic(fmt.Sprintf("fakegithub: "+format, args...))
}

// mustRepo returns the repository or fails the test. Called with s.mu held.
func (s *Server) mustRepo(fullName string) *repo {
	rp := s.repos[fullName]
	if rp == nil {
		s.fatalf("fakegithub: unknown repository %q (AddRepo first)", fullName)
	}
	return rp
}

func (s *Server) mustPR(fullName string, number int) (*repo, *PR) {
	rp := s.mustRepo(fullName)
	pr := rp.prs[number]
	if pr == nil {
		s.fatalf("fakegithub: unknown pull request %s#%d", fullName, number)
	}
	return rp, pr
}

// AddRepo adds repository "owner/name" to installation tenant, with its
// default branch (default "main").
func (s *Server) AddRepo(tenant, fullName, defaultBranch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if owner, name, ok := strings.Cut(fullName, "/"); !ok || owner == "" || name == "" {
		s.fatalf("fakegithub: repository %q is not owner/name", fullName)
	}
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	s.installations[tenant] = true
	root := DeriveSHA(fullName, defaultBranch)
	s.repos[fullName] = &repo{
		id:            s.newID(),
		tenant:        tenant,
		fullName:      fullName,
		defaultBranch: defaultBranch,
		branches:      map[string]string{defaultBranch: root},
		git:           newGitRepo(root, nil, s.now()),
		prs:           map[int]*PR{},
		protection:    map[string]*branchRules{},
		rulesets:      map[string]*branchRules{},
		issueEvents:   map[int][]*issueEvent{},
		methods:       MergeMethods{Merge: true, Squash: true, Rebase: true},
		reviews:       map[int][]*review{},
		suiteIDs:      map[string]int64{},
		suiteAt:       map[int64]time.Time{},
	}
	s.repos[fullName].git.history[defaultBranch] = []string{root}
	if t := s.tenants[tenant]; t != nil && s.rateByRepos {
		t.limit = s.installationLimit(tenant)
	}
}

// AddPR adds (or replaces) a pull request; see PR for defaults. It returns
// the stored PR.
func (s *Server) AddPR(fullName string, pr PR) PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if pr.Number <= 0 {
		s.fatalf("fakegithub: PR number must be positive")
	}
	if pr.BaseRef == "" {
		pr.BaseRef = rp.defaultBranch
	}
	if _, ok := rp.branches[pr.BaseRef]; !ok {
		s.setRef(rp, pr.BaseRef, DeriveSHA(fullName, pr.BaseRef))
	}
	if pr.HeadRef == "" {
		pr.HeadRef = fmt.Sprintf("feature-%d", pr.Number)
	}
	if pr.HeadSHA == "" {
		pr.HeadSHA = DeriveSHA(fullName, "pr", fmt.Sprint(pr.Number))
	}
	if pr.Author == "" {
		pr.Author = "octocat"
	}
	if pr.State == "" {
		pr.State = "open"
	}
	if pr.Title == "" {
		pr.Title = fmt.Sprintf("Pull request %d", pr.Number)
	}
	if pr.AutoMergeMethod == "" {
		pr.AutoMergeMethod = "merge"
	}
	pr.unknownReads = 0
	if pr.CreatedAt.IsZero() {
		pr.CreatedAt = s.now()
	}
	if pr.UpdatedAt.IsZero() {
		pr.UpdatedAt = pr.CreatedAt
	}
	if pr.LabeledAt.IsZero() {
		pr.LabeledAt = pr.CreatedAt
	}
	if pr.AutoMergeAt.IsZero() {
		pr.AutoMergeAt = pr.CreatedAt
	}
	pr.Labels = slices.Clone(pr.Labels)
	if pr.Files == nil {
		pr.Files = map[string]string{fmt.Sprintf("pr/%d.txt", pr.Number): fmt.Sprintf("pull request %d\n", pr.Number)}
		if pr.TouchesWorkflows {
			// The same change in every such pull request: they do not
			// conflict unless a test says so.
			pr.Files[workflowFile] = "# changed by a pull request\n"
		}
	}
	pr.Files = maps.Clone(pr.Files)
	p := pr
	rp.prs[pr.Number] = &p
	s.commitPRHead(rp, &p, "")
	rp.issueEvents[pr.Number] = nil
	for _, l := range p.Labels {
		s.addIssueEvent(rp, p.Number, "labeled", l, p.LabeledAt)
	}
	if p.AutoMerge {
		s.addIssueEvent(rp, p.Number, "auto_merge_enabled", "", p.AutoMergeAt)
	}
	return clonePR(&p)
}

// PR returns a copy of pull request number of repo.
func (s *Server) PR(fullName string, number int) (PR, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repos[fullName]
	if rp == nil || rp.prs[number] == nil {
		return PR{}, false
	}
	return clonePR(rp.prs[number]), true
}

func clonePR(p *PR) PR {
	c := *p
	c.Labels = slices.Clone(p.Labels)
	c.Files = maps.Clone(p.Files)
	return c
}

// UpdatePR applies fn to the stored pull request (for changes no other
// mutator covers).
func (s *Server) UpdatePR(fullName string, number int, fn func(*PR)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, pr := s.mustPR(fullName, number)
	before := clonePR(pr)
	fn(pr)
	pr.UpdatedAt = s.now()
	if pr.HeadSHA != before.HeadSHA || pr.BaseRef != before.BaseRef {
		pr.unknownReads = s.unknownReads
	}
	if pr.HeadSHA != before.HeadSHA {
		s.commitPRHead(rp, pr, before.HeadSHA) // a push to the head branch
	}
	s.recordTriggerChanges(rp, before, pr)
}

// BranchHead returns branch's head sha.
func (s *Server) BranchHead(fullName, branch string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha, ok := s.mustRepo(fullName).branches[branch]
	return sha, ok
}

// SetBaseHead moves branch to sha (a push to the base): every open PR of
// that base is behind, and GitHub recomputes its mergeability
// (Options.MergeableUnknownReads).
func (s *Server) SetBaseHead(fullName, branch, sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moveBase(s.mustRepo(fullName), branch, sha, nil)
}

// moveBase moves branch to sha and marks the open PRs of that base (but
// except) behind and of unknown mergeability, or merged when sha holds
// their head (moveBranch). Called with s.mu held.
func (s *Server) moveBase(rp *repo, branch, sha string, except *PR) {
	s.moveBranch(rp, branch, sha, except)
}

// SetHead gives the PR a new head sha (a push: pull_request synchronize).
func (s *Server) SetHead(fullName string, number int, sha string) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.HeadSHA = sha })
}

// SetStaleHeadReads makes the next reads of the pull request (GET
// /pulls/{n}) show sha as its head, as a replica behind a push does:
// GitHub sends synchronize for the new head, and a read a moment later
// may still show the one before (rocq-prover/bot#1; JasonEtco/todo#169
// waits a second before each read for it).
func (s *Server) SetStaleHeadReads(fullName string, number int, sha string, reads int) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.staleHead, pr.staleHeadReads = sha, reads })
}

// SetStaleCheckReads makes the next reads (listings) of sha's check runs
// show every run in progress, as a replica behind their completion does:
// GitHub sends check_run completed, and a read a moment later may still
// show the run running (fountainhead/action-wait-for-check#32).
func (s *Server) SetStaleCheckReads(fullName, sha string, reads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if rp.staleChecks == nil {
		rp.staleChecks = map[string]int{}
	}
	rp.staleChecks[sha] = reads
}

// SetStaleReviewReads makes the next reads (listings) of the pull
// request's reviews lack its last review, as a replica behind it does:
// GitHub sends pull_request_review submitted, and a read a moment later
// may not show the review yet.
func (s *Server) SetStaleReviewReads(fullName string, number, reads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if rp.staleReviews == nil {
		rp.staleReviews = map[int]int{}
	}
	rp.staleReviews[number] = reads
}

// SetBehind marks the PR's head as behind (or not) its base.
func (s *Server) SetBehind(fullName string, number int, behind bool) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.Behind = behind })
}

// SetMergeable sets whether GitHub considers the PR mergeable (false =
// conflicts).
func (s *Server) SetMergeable(fullName string, number int, mergeable bool) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.Unmergeable = !mergeable })
}

// SetLabels replaces the PR's labels.
func (s *Server) SetLabels(fullName string, number int, labels ...string) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.Labels = slices.Clone(labels) })
}

// SetDraft sets the PR's draft flag.
func (s *Server) SetDraft(fullName string, number int, draft bool) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.Draft = draft })
}

// SetAutoMerge enables or disables GitHub auto-merge on the PR.
func (s *Server) SetAutoMerge(fullName string, number int, on bool) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.AutoMerge = on })
}

// ClosePR closes the PR without merging it.
func (s *Server) ClosePR(fullName string, number int) {
	s.UpdatePR(fullName, number, func(pr *PR) {
		pr.State = "closed"
		pr.ClosedAt = s.now()
	})
}

// SetCheckRun reports a check run named name on sha from the CI App
// (CIAppID), replacing that App's previous run of the same name. status is
// queued, in_progress or completed; conclusion is required when completed.
// Unlike the API, it accepts every conclusion GitHub itself sets, stale
// included (GitHub marks a run stale after 14 days incomplete).
func (s *Server) SetCheckRun(fullName, sha, name, status, conclusion string) {
	s.SetCheckRunFromApp(fullName, sha, name, status, conclusion, CIAppID, "github-actions")
}

// SetCheckRunFromApp is SetCheckRun for the App appID (slug): another CI
// system, or a second App reporting a check of the same name.
func (s *Server) SetCheckRunFromApp(fullName, sha, name, status, conclusion string, appID int64, slug string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	now := s.now()
	var completed time.Time
	if status == "completed" {
		completed = now
	}
	for i := len(rp.checkRuns) - 1; i >= 0; i-- {
		if cr := rp.checkRuns[i]; cr.HeadSHA == sha && cr.Name == name && cr.AppID == appID {
			cr.Status, cr.Conclusion, cr.CompletedAt = status, conclusion, completed
			return
		}
	}
	rp.checkRuns = append(rp.checkRuns, &checkRun{
		ID: s.newID(), HeadSHA: sha, Name: name, Status: status, Conclusion: conclusion,
		AppID: appID, AppSlug: slug, StartedAt: now, CompletedAt: completed,
	})
}

// AddCheckRun adds a new run of name on sha from the CI App, keeping the
// earlier ones (a re-run). The list endpoint's filter=latest returns only
// the newest.
func (s *Server) AddCheckRun(fullName, sha, name, status, conclusion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	now := s.now()
	cr := &checkRun{ID: s.newID(), HeadSHA: sha, Name: name, Status: status, Conclusion: conclusion,
		AppID: CIAppID, AppSlug: "github-actions", StartedAt: now}
	if status == "completed" {
		cr.CompletedAt = now
	}
	rp.checkRuns = append(rp.checkRuns, cr)
}

// SetStatus reports a commit status: state is pending, success, failure or
// error.
func (s *Server) SetStatus(fullName, sha, context, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addStatus(s.mustRepo(fullName), sha, context, state)
}

func (s *Server) addStatus(rp *repo, sha, context, state string) *status {
	now := s.now()
	st := &status{ID: s.newID(), SHA: sha, Context: context, State: state, CreatedAt: now, UpdatedAt: now}
	rp.statuses = append(rp.statuses, st)
	return st
}

// latestRuns returns the newest check run per (name, app) on sha, newest
// first.
func (rp *repo) latestRuns(sha string) []*checkRun {
	type key struct {
		name string
		app  int64
	}
	seen := map[key]bool{}
	var out []*checkRun
	for i := len(rp.checkRuns) - 1; i >= 0; i-- {
		cr := rp.checkRuns[i]
		k := key{cr.Name, cr.AppID}
		if cr.HeadSHA != sha || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, cr)
	}
	return out
}

// latestStatuses returns the newest status per context on sha, sorted by
// context.
func (rp *repo) latestStatuses(sha string) []*status {
	byCtx := map[string]*status{}
	for _, st := range rp.statuses {
		if st.SHA == sha {
			byCtx[st.Context] = st
		}
	}
	out := make([]*status, 0, len(byCtx))
	for _, st := range byCtx {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Context < out[j].Context })
	return out
}

// resolveRef maps a branch name to its head sha; anything else is a sha.
func (rp *repo) resolveRef(ref string) string {
	if sha, ok := rp.branches[ref]; ok {
		return sha
	}
	return ref
}

// mergeableState computes GitHub's mergeable_state for pr.
func (rp *repo) mergeableState(pr *PR) string {
	_, strict, _ := rp.required(pr.BaseRef)
	switch {
	case pr.MergeableState != "":
		return pr.MergeableState
	case pr.State != "open":
		return "unknown"
	case pr.Draft:
		return "draft"
	case pr.Unmergeable, rp.conflicted(pr):
		return "dirty"
	case pr.Behind && strict:
		return "behind"
	case rp.requiredProblem(pr) != "", rp.reviewProblem(pr) != "", rp.rulesOf(pr.BaseRef).mergeQueue:
		return "blocked"
	default:
		return "clean"
	}
}
