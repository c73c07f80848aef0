package forge_test

import (
	"slices"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/forge/fakegithub"
)

func TestConditionalGetPRCostsNothingWhenUnchanged(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})

	first, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	used := e.gh.RateLimitUsed()
	second, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.gh.RateLimitUsed(); got != used {
		t.Errorf("rate-limit points: %d after the repeat, %d before; want no cost", got, used)
	}
	if first.HeadSHA != second.HeadSHA || !slices.Equal(first.Labels, second.Labels) || second.Number != 1 {
		t.Errorf("cached answer differs: %+v vs %+v", first, second)
	}
	calls := e.gh.Calls()
	if last := calls[len(calls)-1]; last.Status != 304 || !last.NotModified {
		t.Errorf("last call = %+v, want a 304", last)
	}
	if req, nm := e.c.Stats(); nm != 1 || req != 3 {
		t.Errorf("Stats = %d requests, %d not modified; want 3 (token, get, get), 1", req, nm)
	}
	if st := e.c.EndpointStats()["pulls.get"]; st.Requests != 2 || st.NotModified != 1 {
		t.Errorf("pulls.get stats = %+v", st)
	}

	// A change is seen, and paid for.
	e.gh.SetLabels(repo, 1, "automerge", "urgent")
	third, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(third.Labels, []string{"automerge", "urgent"}) {
		t.Errorf("labels after change = %v", third.Labels)
	}
	if got := e.gh.RateLimitUsed(); got != used+1 {
		t.Errorf("rate-limit points = %d, want %d", got, used+1)
	}
}

func TestConditionalListAndChecksCostNothingWhenUnchanged(t *testing.T) {
	e := newEnv(t, envOpts{})
	for n := 1; n <= 150; n++ {
		e.gh.AddPR(repo, fakegithub.PR{Number: n})
	}
	e.gh.SetRequired(repo, "main", []string{"ci"}, true)
	e.gh.SetCheckRun(repo, "h", "ci", "completed", "success")
	e.gh.SetStatus(repo, "h", "legacy", "success")

	read := func() ([]forge.PR, forge.Required, []forge.CheckResult) {
		t.Helper()
		prs, err := e.c.ListOpenPRs(e.ctx, tenant, repo)
		if err != nil {
			t.Fatal(err)
		}
		req, err := e.c.RequiredChecks(e.ctx, tenant, repo, "main")
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.c.CheckResults(e.ctx, tenant, repo, "h")
		if err != nil {
			t.Fatal(err)
		}
		return prs, req, res
	}
	prs1, req1, res1 := read()
	used := e.gh.RateLimitUsed()
	_, nm0 := e.c.Stats()
	prs2, req2, res2 := read()
	if got := e.gh.RateLimitUsed(); got != used {
		t.Errorf("repeat resync cost %d points, want 0", got-used)
	}
	_, nm1 := e.c.Stats()
	// 2 list pages + protection + rules + check runs + status
	if nm1-nm0 != 6 {
		t.Errorf("304s = %d, want 6", nm1-nm0)
	}
	if len(prs1) != 150 || len(prs2) != 150 || !slices.Equal(req1.Contexts, req2.Contexts) || len(res1) != len(res2) {
		t.Errorf("cached answers differ: %d/%d PRs, %v/%v, %d/%d results", len(prs1), len(prs2), req1, req2, len(res1), len(res2))
	}
}

// TestLifecycleCallBudget counts the GitHub calls of one PR's life through
// the queue (join → gate → merge) as the app is expected to make them, and
// the cost of re-evaluating an unchanged gate.
func TestLifecycleCallBudget(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetRequired(repo, "main", []string{"ci"}, false)
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h", Labels: []string{"automerge"}})
	e.gh.SetCheckRun(repo, "h", "ci", "completed", "success")
	ctx := e.ctx

	// join: read the PR, put mergegate's check run on it.
	pr, err := e.c.GetPR(ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.c.CreateCheckRun(ctx, tenant, repo, pr.HeadSHA, forge.CheckRun{Status: "in_progress", Title: "Queued: position 1", Summary: "Waiting for required checks."})
	if err != nil {
		t.Fatal(err)
	}
	// gate
	req, err := e.c.RequiredChecks(ctx, tenant, repo, pr.BaseRef)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.c.CheckResults(ctx, tenant, repo, pr.HeadSHA)
	if err != nil {
		t.Fatal(err)
	}
	if v := forge.EvaluateGate(req, res); v.Result != forge.GateSuccess {
		t.Fatalf("gate = %+v", v)
	}
	usedBeforeRepeat := e.gh.RateLimitUsed()
	if _, err := e.c.RequiredChecks(ctx, tenant, repo, pr.BaseRef); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CheckResults(ctx, tenant, repo, pr.HeadSHA); err != nil {
		t.Fatal(err)
	}
	repeatCost := e.gh.RateLimitUsed() - usedBeforeRepeat
	// merge, and close mergegate's check run.
	if _, err := e.c.Merge(ctx, tenant, repo, 1, pr.HeadSHA, "merge"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.UpdateCheckRun(ctx, tenant, repo, id, forge.CheckRun{Conclusion: "success", Title: "Merged", Summary: "Merged by mergegate."}); err != nil {
		t.Fatal(err)
	}

	counts := e.gh.CallCounts()
	api := 0
	for route, n := range counts {
		if route != fakegithub.RouteCreateToken {
			api += n
		}
	}
	api -= 4 // the repeated gate reads (304s), reported separately
	t.Logf("lifecycle: %d API calls (+%d token), repeat gate read: 4 calls, %d rate-limit points; per route: %v",
		api, counts[fakegithub.RouteCreateToken], repeatCost, counts)
	if api > 8 {
		t.Errorf("lifecycle used %d API calls, budget 8", api)
	}
	if repeatCost != 0 {
		t.Errorf("repeat read of an unchanged gate cost %d points, want 0", repeatCost)
	}
}
