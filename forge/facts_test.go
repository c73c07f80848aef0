package forge_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// The reads behind the queue's rules, against the fake GitHub with the
// real go-github client.

func TestRequiredChecksRules(t *testing.T) {
	e := newEnv(t, envOpts{})
	get := func() forge.Required {
		t.Helper()
		req, err := e.c.RequiredChecks(e.ctx, tenant, repo, "main")
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	e.gh.SetRequiredReviews(repo, "main", 2, true)
	e.gh.SetLinearHistory(repo, "main", true)
	e.gh.SetConversationResolution(repo, "main", true)
	if req := get(); req.Configured || req.Reviews != 2 || !req.CodeOwners || !req.LinearHistory || !req.Conversations || req.MergeQueue {
		t.Errorf("protection without checks: %+v", req)
	}

	e.gh.SetRequired(repo, "main", []string{"build", "lint"}, false)
	e.gh.SetRequiredApp(repo, "main", "build", 77)
	e.gh.SetRulesetRequiredApp(repo, "main", "security", 88)
	e.gh.SetRulesetReviews(repo, "main", 3, false)
	e.gh.SetMergeQueue(repo, "main", true)
	req := get()
	if !req.Configured || !slices.Equal(req.Contexts, []string{"build", "lint", "security"}) ||
		len(req.AppIDs) != 2 || req.AppIDs["build"] != 77 || req.AppIDs["security"] != 88 {
		t.Errorf("checks and App bindings: %+v", req)
	}
	if req.Reviews != 3 || !req.CodeOwners || !req.MergeQueue || !req.LinearHistory {
		t.Errorf("union of protection and ruleset: %+v", req)
	}
	if n := e.gh.CallCount(fakegithub.RouteGetProtection); n != 2 {
		t.Errorf("protection requests = %d, want 1 per read", n)
	}
}

func TestCheckResultsCarryTheApp(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetCheckRun(repo, "s1", "build", "completed", "success")
	e.gh.SetCheckRunFromApp(repo, "s1", "build", "completed", "failure", 77, "other-ci")
	res, err := e.c.CheckResults(e.ctx, tenant, repo, "s1")
	if err != nil {
		t.Fatal(err)
	}
	apps := map[int64]string{}
	for _, r := range res {
		apps[r.AppID] = r.Conclusion
	}
	if len(res) != 2 || apps[fakegithub.CIAppID] != "success" || apps[77] != "failure" {
		t.Errorf("results = %+v", res)
	}
	req := forge.Required{Contexts: []string{"build"}, Configured: true, AppIDs: map[string]int64{"build": fakegithub.CIAppID}}
	if v := forge.EvaluateGate(req, res, nil); v.Result != forge.GateSuccess {
		t.Errorf("gate bound to the CI App = %+v", v)
	}
}

func TestCheckSuites(t *testing.T) {
	e := newEnv(t, envOpts{})
	for n := 0; n < 120; n++ {
		e.gh.AddCheckSuite(repo, "s1", int64(1000+n), "app")
	}
	e.gh.SetCheckRun(repo, "s1", "build", "completed", "success")
	e.gh.SetCheckRun(repo, "s1", "lint", "in_progress", "")
	e.gh.SetCheckRunFromApp(repo, "s1", "e2e", "completed", "failure", 77, "circleci")
	e.gh.SetCheckRunFromApp(repo, "s1", "unit", "completed", "success", 77, "circleci")
	if _, err := e.c.CreateCheckRun(e.ctx, tenant, repo, "s1", forge.CheckRun{Status: "in_progress"}); err != nil {
		t.Fatal(err)
	}
	suites, err := e.c.CheckSuites(e.ctx, tenant, repo, "s1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]forge.CheckSuite{}
	for _, s := range suites {
		got[s.AppID] = s
	}
	if len(suites) != 122 {
		t.Fatalf("%d suites, want 122 (every App but mergegate's)", len(suites))
	}
	if _, ok := got[e.gh.AppID()]; ok {
		t.Error("mergegate's own suite was listed")
	}
	if s := got[fakegithub.CIAppID]; s.Status != "in_progress" || s.Runs != 2 || s.AppSlug != "github-actions" {
		t.Errorf("CI suite = %+v", s)
	}
	if s := got[77]; s.Status != "completed" || s.Conclusion != "failure" || s.Runs != 2 {
		t.Errorf("circleci suite = %+v (worst conclusion wins)", s)
	}
	if s := got[1000]; s.Status != "queued" || s.Runs != 0 {
		t.Errorf("suite without runs = %+v", s)
	}
	if n := e.gh.CallCount(fakegithub.RouteListCheckSuites); n != 2 {
		t.Errorf("suite requests = %d, want 2 pages", n)
	}
}

func TestReviews(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 3})
	e.gh.AddReview(repo, 3, "alice", "APPROVED")
	e.gh.AddReview(repo, 3, "alice", "COMMENTED") // does not change alice's state
	e.gh.AddReview(repo, 3, "bob", "APPROVED")
	e.gh.AddReview(repo, 3, "bob", "CHANGES_REQUESTED")
	e.gh.AddReview(repo, 3, "zed", "CHANGES_REQUESTED")
	e.gh.AddReview(repo, 3, "carol", "APPROVED")
	e.gh.AddReview(repo, 3, "carol", "DISMISSED") // clears carol
	for n := 0; n < 110; n++ {
		e.gh.AddReview(repo, 3, "dave", "COMMENTED")
	}
	got, err := e.c.Reviews(e.ctx, tenant, repo, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Approvals != 1 || !slices.Equal(got.ChangesRequested, []string{"bob", "zed"}) {
		t.Errorf("Reviews = %+v, want 1 approval (alice), changes requested by bob and zed", got)
	}
	if n := e.gh.CallCount(fakegithub.RouteListReviews); n != 2 {
		t.Errorf("review requests = %d, want 2 pages of 100", n)
	}
}

func TestMergeMethodsAndPRFacts(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetMergeMethods(repo, fakegithub.MergeMethods{Squash: true, Rebase: true})
	m, err := e.c.MergeMethods(e.ctx, tenant, repo)
	if err != nil || m != (forge.MergeMethods{Squash: true, Rebase: true}) {
		t.Errorf("MergeMethods = %+v, %v", m, err)
	}
	e.gh.AddPR(repo, fakegithub.PR{Number: 5, Author: "mallory", Fork: true, MaintainerCanModify: true, AutoMerge: true, AutoMergeMethod: "squash"})
	e.gh.AddPR(repo, fakegithub.PR{Number: 6})
	pr, err := e.c.GetPR(e.ctx, tenant, repo, 5)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := e.gh.BranchHead(repo, "main")
	if !pr.Fork || !pr.MaintainerCanModify || pr.AutoMergeMethod != "squash" || pr.BaseSHA != base ||
		pr.Methods == nil || *pr.Methods != (forge.MergeMethods{Squash: true, Rebase: true}) {
		t.Errorf("fork PR = %+v (methods %+v)", pr, pr.Methods)
	}
	if pr, _ := e.c.GetPR(e.ctx, tenant, repo, 6); pr.Fork || pr.MaintainerCanModify || pr.AutoMergeMethod != "" {
		t.Errorf("same-repository PR = %+v", pr)
	}
	prs, err := e.c.ListOpenPRs(e.ctx, tenant, repo)
	if err != nil || len(prs) != 2 || prs[0].Methods != nil {
		t.Errorf("list: %+v, %v; want no merge methods", prs, err)
	}
}

// Each refusal of the fake, through the client, sorted by RefusalOf.
func TestRefusalsThroughTheClient(t *testing.T) {
	e := newEnv(t, envOpts{})
	n := 0
	pr := func(p fakegithub.PR) int {
		n++
		p.Number, p.HeadSHA = n, "h"+string(rune('a'+n))
		e.gh.AddPR(repo, p)
		return n
	}
	merge := func(number int, method string) error {
		p, _ := e.gh.PR(repo, number)
		_, err := e.c.Merge(e.ctx, tenant, repo, number, p.HeadSHA, method)
		return err
	}
	want := func(what string, err error, r forge.Refusal, status int) {
		t.Helper()
		got, msg, ok := forge.RefusalOf(err)
		var me *forge.MergeError
		if !ok || got != r || !errors.As(err, &me) || me.Status != status {
			t.Errorf("%s: %v sorted %d (%q, %v), want %d with status %d", what, err, got, msg, ok, r, status)
		}
	}

	e.gh.SetMergeMethods(repo, fakegithub.MergeMethods{Squash: true, Rebase: true})
	want("merge commit on a squash-only repository", merge(pr(fakegithub.PR{}), "merge"), forge.RefusedMethod, 405)
	e.gh.SetMergeMethods(repo, fakegithub.MergeMethods{Merge: true, Squash: true, Rebase: true})

	e.gh.SetLinearHistory(repo, "main", true)
	want("merge commit with linear history", merge(pr(fakegithub.PR{}), "merge"), forge.RefusedMethod, 405)
	e.gh.SetLinearHistory(repo, "main", false)

	e.gh.SetRequiredReviews(repo, "main", 1, false)
	reviewed := pr(fakegithub.PR{})
	want("no approval", merge(reviewed, "squash"), forge.RefusedReview, 405)
	e.gh.AddReview(repo, reviewed, "alice", "CHANGES_REQUESTED")
	want("changes requested", merge(reviewed, "squash"), forge.RefusedReview, 405)
	e.gh.AddReview(repo, reviewed, "alice", "APPROVED")
	if err := merge(reviewed, "squash"); err != nil {
		t.Errorf("approved: %v", err)
	}
	e.gh.SetRequiredReviews(repo, "main", 0, false)

	e.gh.SetMergeQueue(repo, "main", true)
	want("merge queue", merge(pr(fakegithub.PR{}), "squash"), forge.RefusedMergeQueue, 405)
	e.gh.SetMergeQueue(repo, "main", false)

	e.gh.SetPushRestricted(repo, "main", true)
	want("push restrictions", merge(pr(fakegithub.PR{}), "squash"), forge.RefusedNotAuthorized, 405)
	e.gh.SetPushRestricted(repo, "main", false)

	wf := pr(fakegithub.PR{TouchesWorkflows: true, Behind: true})
	want("workflows on merge", merge(wf, "squash"), forge.RefusedWorkflows, 403)
	p, _ := e.gh.PR(repo, wf)
	want("workflows on update-branch", e.c.UpdateBranch(e.ctx, tenant, repo, wf, p.HeadSHA), forge.RefusedWorkflows, 403)
	if msg, ok := forge.AuthorMessage(merge(wf, "squash")); ok {
		t.Errorf("a 403 went to the author: %q", msg)
	}
	e.gh.SetWorkflowsPermission(true)
	if err := merge(wf, "squash"); err != nil {
		t.Errorf("workflows with the permission: %v", err)
	}

	fork := pr(fakegithub.PR{Fork: true, Behind: true})
	p, _ = e.gh.PR(repo, fork)
	want("fork without maintainer edits", e.c.UpdateBranch(e.ctx, tenant, repo, fork, p.HeadSHA), forge.RefusedNotAuthorized, 403)
	e.gh.UpdatePR(repo, fork, func(p *fakegithub.PR) { p.MaintainerCanModify = true })
	if err := e.c.UpdateBranch(e.ctx, tenant, repo, fork, p.HeadSHA); err != nil {
		t.Errorf("fork with maintainer edits: %v", err)
	}

	e.gh.SetRequired(repo, "main", []string{"build"}, false)
	e.gh.SetRequiredApp(repo, "main", "build", 77)
	bound := pr(fakegithub.PR{})
	p, _ = e.gh.PR(repo, bound)
	e.gh.SetCheckRun(repo, p.HeadSHA, "build", "completed", "success") // the wrong App
	want("an App-bound check from another App", merge(bound, "squash"), forge.RefusedChecks, 405)
	e.gh.SetCheckRunFromApp(repo, p.HeadSHA, "build", "completed", "success", 77, "the-ci")
	if err := merge(bound, "squash"); err != nil {
		t.Errorf("the bound App's run: %v", err)
	}

	based := pr(fakegithub.PR{})
	e.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultBaseModified())
	want("base modified", merge(based, "squash"), forge.RefusedBaseModified, 405)
}
