package fakegithub

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
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
}

type repo struct {
	id            int64
	tenant        string
	fullName      string
	defaultBranch string
	branches      map[string]string // branch -> head sha
	prs           map[int]*PR
	checkRuns     []*checkRun // all, in creation order
	statuses      []*status   // all, in creation order
	protection    map[string]*requiredChecks
	rulesets      map[string]*requiredChecks
	issueEvents   map[int][]*issueEvent // per PR number, oldest first
}

type requiredChecks struct {
	id       int64
	contexts []string
	strict   bool
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
	s.repos[fullName] = &repo{
		id:            s.newID(),
		tenant:        tenant,
		fullName:      fullName,
		defaultBranch: defaultBranch,
		branches:      map[string]string{defaultBranch: DeriveSHA(fullName, defaultBranch)},
		prs:           map[int]*PR{},
		protection:    map[string]*requiredChecks{},
		rulesets:      map[string]*requiredChecks{},
		issueEvents:   map[int][]*issueEvent{},
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
		rp.branches[pr.BaseRef] = DeriveSHA(fullName, pr.BaseRef)
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
	p := pr
	rp.prs[pr.Number] = &p
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
	s.recordTriggerChanges(rp, before, pr)
}

// SetHead gives the PR a new head sha (a push: pull_request synchronize).
func (s *Server) SetHead(fullName string, number int, sha string) {
	s.UpdatePR(fullName, number, func(pr *PR) { pr.HeadSHA = sha })
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
func (s *Server) SetCheckRun(fullName, sha, name, status, conclusion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	now := s.now()
	var completed time.Time
	if status == "completed" {
		completed = now
	}
	for _, cr := range rp.checkRuns {
		if cr.HeadSHA == sha && cr.Name == name && cr.AppID == CIAppID {
			cr.Status, cr.Conclusion, cr.CompletedAt = status, conclusion, completed
			return
		}
	}
	rp.checkRuns = append(rp.checkRuns, &checkRun{
		ID: s.newID(), HeadSHA: sha, Name: name, Status: status, Conclusion: conclusion,
		AppID: CIAppID, AppSlug: "github-actions", StartedAt: now, CompletedAt: completed,
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

// SetRequired sets branch protection on branch with required status checks
// contexts, and strict = "require branches to be up to date".
func (s *Server) SetRequired(fullName, branch string, contexts []string, strict bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo(fullName).protection[branch] = &requiredChecks{id: s.newID(), contexts: slices.Clone(contexts), strict: strict}
}

// RemoveProtection removes branch protection from branch (404 afterwards).
func (s *Server) RemoveProtection(fullName, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mustRepo(fullName).protection, branch)
}

// SetRulesetRequired adds a repository ruleset whose required_status_checks
// rule applies to branch.
func (s *Server) SetRulesetRequired(fullName, branch string, contexts []string, strict bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo(fullName).rulesets[branch] = &requiredChecks{id: s.newID(), contexts: slices.Clone(contexts), strict: strict}
}

// RemoveRuleset removes the ruleset of branch.
func (s *Server) RemoveRuleset(fullName, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mustRepo(fullName).rulesets, branch)
}

// required returns the union of protection and ruleset requirements of
// branch. Called with s.mu held.
func (rp *repo) required(branch string) (contexts []string, strict, configured bool) {
	for _, rc := range []*requiredChecks{rp.protection[branch], rp.rulesets[branch]} {
		if rc == nil {
			continue
		}
		configured = true
		strict = strict || rc.strict
		for _, c := range rc.contexts {
			if !slices.Contains(contexts, c) {
				contexts = append(contexts, c)
			}
		}
	}
	return contexts, strict, configured
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

// requiredProblem returns GitHub's 405 message when the PR's head does not
// satisfy its base's required checks, or "". Neutral and skipped count as
// success, as on GitHub.
func (rp *repo) requiredProblem(pr *PR) string {
	contexts, _, _ := rp.required(pr.BaseRef)
	runs := rp.latestRuns(pr.HeadSHA)
	statuses := rp.latestStatuses(pr.HeadSHA)
	for _, c := range contexts {
		found, ok := false, true
		for _, cr := range runs {
			if cr.Name == c {
				found = true
				ok = ok && cr.Status == "completed" && (cr.Conclusion == "success" || cr.Conclusion == "neutral" || cr.Conclusion == "skipped")
			}
		}
		for _, st := range statuses {
			if st.Context == c {
				found = true
				ok = ok && st.State == "success"
			}
		}
		if !found {
			return fmt.Sprintf("Required status check %q is expected.", c)
		}
		if !ok {
			return fmt.Sprintf("Required status check %q is failing or has not completed.", c)
		}
	}
	return ""
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
	case pr.Unmergeable:
		return "dirty"
	case pr.Behind && strict:
		return "behind"
	case rp.requiredProblem(pr) != "":
		return "blocked"
	default:
		return "clean"
	}
}
