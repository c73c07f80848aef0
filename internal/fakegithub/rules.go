package fakegithub

import (
	"fmt"
	"slices"
	"time"
)

// What a branch requires before a merge, as classic branch protection
// (GET .../branches/{b}/protection) and as a repository ruleset (GET
// .../rules/branches/{b}) declare it, and the pull request reviews those
// rules count.

// branchRules is one branch's protection, or one ruleset that applies to
// it.
type branchRules struct {
	id     int64
	checks *statusChecks // nil: no required status checks
	// reviews: required_approving_review_count; reviewsOn says a review
	// rule exists (with a count of 0, only code owners or nothing).
	reviewsOn      bool
	reviews        int
	codeOwners     bool
	conversations  bool // not enforced: the fake has no review threads
	linear         bool
	pushRestricted bool // protection only: restrictions, the App not listed
	mergeQueue     bool // ruleset only: the merge_queue rule
}

type statusChecks struct {
	contexts []string
	appIDs   map[string]int64 // context -> the App that must report it
	strict   bool
}

// MergeMethods are the merge methods a repository allows
// (allow_merge_commit, allow_squash_merge, allow_rebase_merge). AddRepo
// allows all three.
type MergeMethods struct {
	Merge, Squash, Rebase bool
}

// review is one pull request review.
type review struct {
	id        int64
	login     string
	state     string // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	commitID  string
	submitted time.Time
}

// protectionOf returns branch's protection, creating an empty one. Called
// with s.mu held.
func (s *Server) protectionOf(rp *repo, branch string) *branchRules {
	if rp.protection[branch] == nil {
		rp.protection[branch] = &branchRules{id: s.newID()}
	}
	return rp.protection[branch]
}

func (s *Server) rulesetOf(rp *repo, branch string) *branchRules {
	if rp.rulesets[branch] == nil {
		rp.rulesets[branch] = &branchRules{id: s.newID()}
	}
	return rp.rulesets[branch]
}

func (s *Server) protect(fullName, branch string, fn func(*branchRules)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.protectionOf(s.mustRepo(fullName), branch))
}

func (s *Server) ruleset(fullName, branch string, fn func(*branchRules)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.rulesetOf(s.mustRepo(fullName), branch))
}

// SetRequired sets the required status checks of branch's protection
// (creating the protection): contexts, and strict = "require branches to
// be up to date". It replaces earlier checks and their App bindings.
func (s *Server) SetRequired(fullName, branch string, contexts []string, strict bool) {
	s.protect(fullName, branch, func(b *branchRules) {
		b.checks = &statusChecks{contexts: slices.Clone(contexts), strict: strict}
	})
}

// SetRequiredApp binds the required check context of branch's protection
// to the App appID (protection's checks[].app_id): only that App's check
// run satisfies it. The context is added to the required checks if
// missing.
func (s *Server) SetRequiredApp(fullName, branch, context string, appID int64) {
	s.protect(fullName, branch, func(b *branchRules) { b.bindApp(context, appID) })
}

// bindApp requires context from the App appID only (adding it if missing).
func (b *branchRules) bindApp(context string, appID int64) {
	if b.checks == nil {
		b.checks = &statusChecks{}
	}
	if !slices.Contains(b.checks.contexts, context) {
		b.checks.contexts = append(b.checks.contexts, context)
	}
	if b.checks.appIDs == nil {
		b.checks.appIDs = map[string]int64{}
	}
	b.checks.appIDs[context] = appID
}

// SetRequiredReviews makes branch's protection require count approving
// reviews, and a code owner's when codeOwners (the fake has no CODEOWNERS
// file: any approval counts as the owner's, and at least one is needed).
// Count 0 without code owners removes the review rule.
func (s *Server) SetRequiredReviews(fullName, branch string, count int, codeOwners bool) {
	s.protect(fullName, branch, func(b *branchRules) {
		b.reviewsOn, b.reviews, b.codeOwners = count > 0 || codeOwners, count, codeOwners
	})
}

// SetConversationResolution sets branch protection's "require
// conversation resolution" (reported only: the fake has no threads).
func (s *Server) SetConversationResolution(fullName, branch string, on bool) {
	s.protect(fullName, branch, func(b *branchRules) { b.conversations = on })
}

// SetLinearHistory sets branch protection's "require linear history":
// merge commits are refused.
func (s *Server) SetLinearHistory(fullName, branch string, on bool) {
	s.protect(fullName, branch, func(b *branchRules) { b.linear = on })
}

// SetPushRestricted restricts who can push to branch, without the App:
// merges answer 405 MsgNotAuthorized.
func (s *Server) SetPushRestricted(fullName, branch string, on bool) {
	s.protect(fullName, branch, func(b *branchRules) { b.pushRestricted = on })
}

// RemoveProtection removes branch protection from branch (404 afterwards).
func (s *Server) RemoveProtection(fullName, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mustRepo(fullName).protection, branch)
}

// SetRulesetRequired sets the required_status_checks rule of the
// repository ruleset that applies to branch (creating the ruleset).
func (s *Server) SetRulesetRequired(fullName, branch string, contexts []string, strict bool) {
	s.ruleset(fullName, branch, func(b *branchRules) {
		b.checks = &statusChecks{contexts: slices.Clone(contexts), strict: strict}
	})
}

// SetRulesetRequiredApp binds a required check of branch's ruleset to an
// App (the rule's integration_id).
func (s *Server) SetRulesetRequiredApp(fullName, branch, context string, appID int64) {
	s.ruleset(fullName, branch, func(b *branchRules) { b.bindApp(context, appID) })
}

// SetRulesetReviews sets the pull_request rule of branch's ruleset
// (required_approving_review_count, require_code_owner_review); see
// SetRequiredReviews.
func (s *Server) SetRulesetReviews(fullName, branch string, count int, codeOwners bool) {
	s.ruleset(fullName, branch, func(b *branchRules) {
		b.reviewsOn, b.reviews, b.codeOwners = true, count, codeOwners
	})
}

// SetRulesetLinearHistory adds (or removes) the required_linear_history
// rule of branch's ruleset.
func (s *Server) SetRulesetLinearHistory(fullName, branch string, on bool) {
	s.ruleset(fullName, branch, func(b *branchRules) { b.linear = on })
}

// SetMergeQueue adds (or removes) the merge_queue rule of branch's
// ruleset: the merge API then answers 405 MsgMergeQueue.
func (s *Server) SetMergeQueue(fullName, branch string, on bool) {
	s.ruleset(fullName, branch, func(b *branchRules) { b.mergeQueue = on })
}

// RemoveRuleset removes the ruleset of branch.
func (s *Server) RemoveRuleset(fullName, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mustRepo(fullName).rulesets, branch)
}

// SetMergeMethods sets the merge methods repo allows.
func (s *Server) SetMergeMethods(fullName string, m MergeMethods) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo(fullName).methods = m
}

// SetWorkflowsPermission gives (or takes) the App the workflows permission:
// without it, merging or updating a PR that touches .github/workflows
// answers 403.
func (s *Server) SetWorkflowsPermission(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workflows = on
}

// SetMergeableUnknownReads sets how many GET /pulls/{n} answer mergeable
// null after a PR's base or head moved (0: none).
func (s *Server) SetMergeableUnknownReads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unknownReads = max(n, 0)
}

// SetStaleRefReads sets how many reads of a branch after an API write to
// it see the branch as it was before (Options.StaleRefReads; 0: none).
func (s *Server) SetStaleRefReads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.staleReads = max(n, 0)
	for _, rp := range s.repos {
		rp.stale = nil
	}
}

// AddReview submits a review by login on PR number: state APPROVED,
// CHANGES_REQUESTED or COMMENTED; DISMISSED dismisses login's latest
// APPROVED or CHANGES_REQUESTED review, whose state becomes DISMISSED as
// on GitHub. Like GitHub's, a review changes mergeable_state; unlike a
// real one it sends no webhook (tests deliver pull_request_review).
func (s *Server) AddReview(fullName string, number int, login, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, pr := s.mustPR(fullName, number)
	switch state {
	case "APPROVED", "CHANGES_REQUESTED", "COMMENTED":
		rp.reviews[number] = append(rp.reviews[number], &review{id: s.newID(), login: login, state: state, commitID: pr.HeadSHA, submitted: s.now()})
	case "DISMISSED":
		for i := len(rp.reviews[number]) - 1; i >= 0; i-- {
			if r := rp.reviews[number][i]; r.login == login && (r.state == "APPROVED" || r.state == "CHANGES_REQUESTED") {
				r.state = "DISMISSED"
				return
			}
		}
		s.fatalf("fakegithub: AddReview: %s has no review on %s#%d to dismiss", login, fullName, number)
	default:
		s.fatalf("fakegithub: AddReview: state %q (want APPROVED, CHANGES_REQUESTED, COMMENTED or DISMISSED)", state)
	}
}

// effective is the union of a branch's protection and ruleset.
type effective struct {
	reviews        int
	codeOwners     bool
	linear         bool
	pushRestricted bool
	mergeQueue     bool
}

// rulesOf unites branch's protection and ruleset. Called with s.mu held.
func (rp *repo) rulesOf(branch string) effective {
	var e effective
	for _, b := range []*branchRules{rp.protection[branch], rp.rulesets[branch]} {
		if b == nil {
			continue
		}
		e.reviews = max(e.reviews, b.reviews)
		e.codeOwners = e.codeOwners || b.codeOwners
		e.linear = e.linear || b.linear
		e.pushRestricted = e.pushRestricted || b.pushRestricted
		e.mergeQueue = e.mergeQueue || b.mergeQueue
	}
	return e
}

// required returns the union of protection and ruleset required checks of
// branch, and their App bindings. Called with s.mu held.
func (rp *repo) required(branch string) (contexts []string, strict, configured bool) {
	contexts, _, strict, configured = rp.requiredChecks(branch)
	return contexts, strict, configured
}

func (rp *repo) requiredChecks(branch string) (contexts []string, apps map[string]int64, strict, configured bool) {
	for _, b := range []*branchRules{rp.protection[branch], rp.rulesets[branch]} {
		if b == nil || b.checks == nil {
			continue
		}
		configured = true
		strict = strict || b.checks.strict
		for _, c := range b.checks.contexts {
			if !slices.Contains(contexts, c) {
				contexts = append(contexts, c)
			}
		}
		for c, id := range b.checks.appIDs {
			if apps == nil {
				apps = map[string]int64{}
			}
			apps[c] = id
		}
	}
	return contexts, apps, strict, configured
}

// requiredProblem returns GitHub's 405 message when the PR's head does not
// satisfy its base's required checks, or "". Neutral and skipped count as
// success, as on GitHub. A check bound to an App counts only that App's
// runs.
func (rp *repo) requiredProblem(pr *PR) string {
	contexts, _, _, _ := rp.requiredChecks(pr.BaseRef)
	for _, c := range contexts {
		if p := rp.checkProblem(pr.BaseRef, c, pr.HeadSHA); p != "" {
			return p
		}
	}
	return ""
}

// checkProblem is requiredProblem for one required context of branch on
// sha: GitHub's message, or "" when it passed.
func (rp *repo) checkProblem(branch, c, sha string) string {
	_, apps, _, _ := rp.requiredChecks(branch)
	app, bound := apps[c]
	found, ok := false, true
	for _, cr := range rp.latestRuns(sha) {
		if cr.Name == c && (!bound || cr.AppID == app) {
			found = true
			ok = ok && cr.Status == "completed" && (cr.Conclusion == "success" || cr.Conclusion == "neutral" || cr.Conclusion == "skipped")
		}
	}
	for _, st := range rp.latestStatuses(sha) {
		if st.Context == c && !bound {
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
	return ""
}

// reviewState returns the approvals and whether changes are requested:
// each reviewer's latest APPROVED, CHANGES_REQUESTED or DISMISSED review
// counts. Called with s.mu held.
func (rp *repo) reviewState(number int) (approvals int, changesRequested bool) {
	latest := map[string]string{}
	for _, r := range rp.reviews[number] {
		switch r.state {
		case "APPROVED", "CHANGES_REQUESTED":
			latest[r.login] = r.state
		case "DISMISSED":
			delete(latest, r.login)
		}
	}
	for _, st := range latest {
		if st == "APPROVED" {
			approvals++
		} else {
			changesRequested = true
		}
	}
	return approvals, changesRequested
}

// reviewProblem returns GitHub's 405 message when the PR lacks the reviews
// its base requires, or "".
func (rp *repo) reviewProblem(pr *PR) string {
	e := rp.rulesOf(pr.BaseRef)
	need := e.reviews
	if e.codeOwners {
		need = max(need, 1)
	}
	if need == 0 {
		return ""
	}
	approvals, changes := rp.reviewState(pr.Number)
	switch {
	case changes:
		return MsgChangesRequested
	case approvals < need && need == 1:
		return MsgOneApprovalRequired
	case approvals < need:
		return fmt.Sprintf("At least %d approving reviews are required by reviewers with write access.", need)
	}
	return ""
}

// methodProblem returns GitHub's 405 message when method may not be used
// to merge into branch, or "".
func (rp *repo) methodProblem(branch, method string) string {
	switch {
	case method == "merge" && !rp.methods.Merge:
		return MsgMergeCommitsNotAllowed
	case method == "squash" && !rp.methods.Squash:
		return MsgSquashNotAllowed
	case method == "rebase" && !rp.methods.Rebase:
		return MsgRebaseNotAllowed
	case method == "merge" && rp.rulesOf(branch).linear:
		return MsgLinearHistory
	}
	return ""
}
