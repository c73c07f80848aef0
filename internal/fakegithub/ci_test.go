package fakegithub_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// ciRun reads the one check run of sha through the API: its status and
// conclusion.
func ciRun(t *testing.T, c *client, sha string) (status, conclusion string) {
	t.Helper()
	st, v := c.get("repos/octo/r/commits/" + sha + "/check-runs")
	if st != 200 {
		t.Fatalf("check-runs of %s: %d %v", sha, st, v)
	}
	runs := v.(map[string]any)["check_runs"].([]any)
	if len(runs) != 1 {
		t.Fatalf("check-runs of %s: %d runs, want 1: %v", sha, len(runs), runs)
	}
	return str(runs[0], "status"), str(runs[0], "conclusion")
}

// The simulated CI runs on every new PR head and mergegate branch commit,
// for Duration on the fake's clock, failing the bad code and the breaking
// pairs; its check works as a required check.
func TestSimulatedCI(t *testing.T) {
	s, c, clk := newGitServer(t)
	start := clk.Now()
	s.SimulateCI("octo/r", fakegithub.CI{Duration: 10 * time.Minute, Bad: []int{2}, Breaking: [][2]int{{3, 4}}})
	s.SetRequired("octo/r", "main", []string{"ci"}, false)
	s.SetMergeableUnknownReads(0)
	for n := 1; n <= 4; n++ {
		s.AddPR("octo/r", fakegithub.PR{Number: n, HeadSHA: fmt.Sprintf("h%d", n)})
	}
	tok := "token " + c.token
	if got := s.CIRuns("octo/r"); got != 4 {
		t.Fatalf("CIRuns = %d after four PRs, want 4", got)
	}
	if due, ok := s.NextCIDue(); !ok || !due.Equal(start.Add(10*time.Minute)) {
		t.Errorf("NextCIDue = %v %v", due, ok)
	}
	if st, con := ciRun(t, c, "h1"); st != "in_progress" || con != "" {
		t.Errorf("h1 before its time: %s %s", st, con)
	}
	if st, _, v := c.do("PUT", "repos/octo/r/pulls/1/merge", tok, map[string]string{"sha": "h1"}, nil); st != 405 || message(v) != `Required status check "ci" is failing or has not completed.` {
		t.Errorf("merge while CI runs: %d %v", st, v)
	}

	clk.Add(10*time.Minute - time.Second)
	if st, _ := ciRun(t, c, "h2"); st != "in_progress" {
		t.Errorf("h2 a second early: %s", st)
	}
	clk.Add(time.Second)
	for sha, want := range map[string]string{"h1": "success", "h2": "failure", "h3": "success", "h4": "success"} {
		if st, con := ciRun(t, c, sha); st != "completed" || con != want {
			t.Errorf("%s: %s %s, want completed %s", sha, st, con, want)
		}
	}
	if _, ok := s.NextCIDue(); ok {
		t.Errorf("NextCIDue with every run done")
	}

	// A train of 3 and 4 fails; one of 1 passes. Creating the branch at
	// main's tip runs CI on that commit too (a push to a watched branch).
	main, _ := s.BranchHead("octo/r", "main")
	build := func(branch string, heads ...string) string {
		c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/" + branch, "sha": main}, nil)
		for _, h := range heads {
			if st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": branch, "head": h}, nil); st != 201 {
				t.Fatalf("merge %s into %s: %d %v", h, branch, st, v)
			}
		}
		tip, _ := s.BranchHead("octo/r", branch)
		return tip
	}
	bad := build("mergegate/main/1", "h3", "h4")
	good := build("mergegate/main/2", "h1")
	if got := s.CIRuns("octo/r"); got != 4+2+2+1 {
		t.Errorf("CIRuns = %d, want 9 (main's tip on each branch created on it, each merge)", got)
	}
	clk.Add(10 * time.Minute)
	if _, con := ciRun(t, c, bad); con != "failure" {
		t.Errorf("train of 3 and 4: %s", con)
	}
	if _, con := ciRun(t, c, good); con != "success" {
		t.Errorf("train of 1: %s", con)
	}

	// The check is the required one: PR 1 merges once it passed.
	if st, _, v := c.do("PUT", "repos/octo/r/pulls/1/merge", tok, map[string]string{"sha": "h1"}, nil); st != 200 {
		t.Errorf("merge after CI passed: %d %v", st, v)
	}
	// A push to a PR head starts CI; a branch CI does not watch does not.
	before := s.CIRuns("octo/r")
	s.SetHead("octo/r", 2, "h2-fixed")
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/docs", "sha": "h3"}, nil)
	if got := s.CIRuns("octo/r"); got != before+1 {
		t.Errorf("CIRuns = %d, want %d (the new head only)", got, before+1)
	}
	if got := s.Contains("octo/r", "h2-fixed"); !slices.Equal(got, []int{2}) {
		t.Errorf("Contains(h2-fixed) = %v", got)
	}
}

// Branches patterns replace the default: here CI runs on release branches
// only, not on PR heads nor mergegate's branches.
func TestSimulatedCIBranches(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.SimulateCI("octo/r", fakegithub.CI{Name: "build", Branches: []string{"release/*", "hotfix/**"}})
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	tok := "token " + c.token
	for _, b := range []string{"mergegate/main/1", "release/1.0", "release/1.0/rc", "hotfix/a/b"} {
		c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/" + b, "sha": "h1"}, nil)
	}
	// Each push is a workflow run: the commit pushed to two watched
	// branches runs twice, and its check runs list the latest.
	if got := s.CIRuns("octo/r"); got != 2 {
		t.Errorf("CIRuns = %d, want 2 (h1 pushed to release/1.0 and to hotfix/a/b)", got)
	}
	_, v := c.get("repos/octo/r/commits/h1/check-runs")
	if runs := v.(map[string]any)["check_runs"].([]any); len(runs) != 1 || str(runs[0], "name") != "build" || str(runs[0], "app", "slug") != "github-actions" {
		t.Errorf("runs of h1: %v", runs)
	}
	// A branch set to the commit it holds is no push; one moved away and
	// back is two.
	patch := func(sha string) {
		if st, _, v := c.do("PATCH", "repos/octo/r/git/refs/heads/release/1.0", tok, map[string]any{"sha": sha, "force": true}, nil); st != 200 {
			t.Fatalf("PATCH release/1.0 to %s: %d %v", sha, st, v)
		}
	}
	patch("h1")
	if got := s.CIRuns("octo/r"); got != 2 {
		t.Errorf("CIRuns = %d after a PATCH to the same commit, want 2", got)
	}
	main, _ := s.BranchHead("octo/r", "main")
	patch(main)
	patch("h1")
	if got := s.CIRuns("octo/r"); got != 4 {
		t.Errorf("CIRuns = %d after release/1.0 moved to main and back, want 4", got)
	}
}

// webhookFixture is one of octokit/webhooks' payload examples (testdata).
func webhookFixture(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github-webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

type delivered struct {
	event, signature string
	body             map[string]any
}

// CompleteDueChecks sends GitHub-shaped check_run and check_suite
// completed deliveries for the runs that completed, once each, with the
// PR a head's run belongs to and none for a branch's commit.
func TestSimulatedCIDeliveries(t *testing.T) {
	s, c, clk := newGitServer(t)
	var mu sync.Mutex
	var got []delivered
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		mu.Lock()
		got = append(got, delivered{r.Header.Get("X-GitHub-Event"), r.Header.Get("X-Hub-Signature-256"), m})
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(hook.Close)
	s.SetWebhook(hook.URL, "secret")
	s.SimulateCI("octo/r", fakegithub.CI{Duration: 5 * time.Minute, Bad: []int{1}})
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	main, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}, nil)
	_, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/1", "head": "h1"}, nil)
	train := str(v, "sha")
	// Another check of the same CI App on the train's commit holds its
	// suite open: no check_suite completed for it.
	s.SetCheckRun("octo/r", train, "lint", "in_progress", "")

	if n := s.CompleteDueChecks(); n != 0 || len(got) != 0 {
		t.Fatalf("before the due time: %d reported, %d sent", n, len(got))
	}
	clk.Add(5 * time.Minute)
	ciRun(t, c, main) // completed by a read: still reported once
	if n := s.CompleteDueChecks(); n != 3 {
		t.Fatalf("CompleteDueChecks = %d, want 3", n)
	}
	if n := s.CompleteDueChecks(); n != 0 {
		t.Errorf("CompleteDueChecks again = %d", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 5 {
		t.Fatalf("%d deliveries, want 5 (three runs, two suites): %v", len(got), got)
	}
	runFixture := webhookFixture(t, "check_run/completed.payload.json")
	suiteFixture := webhookFixture(t, "check_suite/completed.payload.json")
	bySHA := map[string]map[string]any{}
	for _, d := range got {
		if d.signature == "" || d.body["action"] != "completed" {
			t.Errorf("%s: signature %q action %v", d.event, d.signature, d.body["action"])
		}
		if inst := d.body["installation"].(map[string]any); fmt.Sprint(inst["id"]) != tenant {
			t.Errorf("%s: installation %v", d.event, inst)
		}
		body := map[string]any{}
		for k, v := range d.body {
			if k != "installation" { // the examples come from a repository hook
				body[k] = v
			}
		}
		withoutSlug(body)
		switch d.event {
		case "check_run":
			subShape(t, "check_run", body, runFixture)
			has(t, "check_run", body, "check_run.head_sha", "check_run.conclusion", "check_run.check_suite.id", "check_run.app.id", "repository.full_name")
			bySHA[str(d.body, "check_run", "head_sha")] = d.body["check_run"].(map[string]any)
		case "check_suite":
			if str(d.body, "check_suite", "head_sha") == train {
				t.Errorf("check_suite completed for the train while lint runs")
			}
			subShape(t, "check_suite", body, suiteFixture)
			has(t, "check_suite", body, "check_suite.head_sha", "check_suite.conclusion", "check_suite.app.id")
		default:
			t.Errorf("delivery of %s", d.event)
		}
	}
	for sha, want := range map[string]struct {
		conclusion string
		prs        int
	}{"h1": {"failure", 1}, main: {"success", 0}, train: {"failure", 0}} {
		run := bySHA[sha]
		if run == nil {
			t.Errorf("no check_run delivery for %s", sha)
			continue
		}
		if run["conclusion"] != want.conclusion || len(run["pull_requests"].([]any)) != want.prs {
			t.Errorf("%s: conclusion %v, pull_requests %v; want %s and %d", sha, run["conclusion"], run["pull_requests"], want.conclusion, want.prs)
		}
	}
}

// withoutSlug drops app.slug wherever it is: a field of GitHub's App
// (the REST examples' apps, checks_list-for-ref's included, have it) that
// octokit/webhooks' older check examples lack.
func withoutSlug(v any) {
	switch x := v.(type) {
	case map[string]any:
		if app, ok := x["app"].(map[string]any); ok {
			delete(app, "slug")
		}
		for _, el := range x {
			withoutSlug(el)
		}
	case []any:
		for _, el := range x {
			withoutSlug(el)
		}
	}
}

// CancelSuperseded: a merge onto a branch whose previous commit's run is
// still in progress cancels that run, as a workflow with a concurrency
// group per ref and cancel-in-progress does; the cancelled commit pushed
// again (to another branch) is run again, and its latest run is the one
// that counts.
func TestSimulatedCICancelSuperseded(t *testing.T) {
	s, c, clk := newGitServer(t)
	s.SimulateCI("octo/r", fakegithub.CI{Duration: 10 * time.Minute, CancelSuperseded: true})
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	s.AddPR("octo/r", fakegithub.PR{Number: 2, HeadSHA: "h2"})
	clk.Add(10 * time.Minute)
	tok := "token " + c.token
	main, _ := s.BranchHead("octo/r", "main")
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}, nil)
	var steps []string
	for _, h := range []string{"h1", "h2"} {
		if st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/1", "head": h}, nil); st != 201 {
			t.Fatalf("merge %s: %d %v", h, st, v)
		}
		tip, _ := s.BranchHead("octo/r", "mergegate/main/1")
		steps = append(steps, tip)
	}
	runsOf := func(sha string) []string {
		_, v := c.get("repos/octo/r/commits/" + sha + "/check-runs?filter=all")
		var out []string
		for _, r := range v.(map[string]any)["check_runs"].([]any) {
			out = append(out, str(r, "status")+" "+str(r, "conclusion"))
		}
		slices.Sort(out)
		return out
	}
	if got := runsOf(steps[0]); !slices.Equal(got, []string{"completed cancelled"}) {
		t.Errorf("the first merge's runs after the second merge: %v, want it cancelled", got)
	}
	if got := runsOf(steps[1]); !slices.Equal(got, []string{"in_progress "}) {
		t.Errorf("the branch's tip: %v, want in progress", got)
	}
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/2", "sha": steps[0]}, nil)
	clk.Add(10 * time.Minute)
	if got := runsOf(steps[0]); !slices.Equal(got, []string{"completed cancelled", "completed success"}) {
		t.Errorf("the first merge pushed again: %v, want its cancelled run and a new one that passed", got)
	}
	if st, con := ciRun(t, c, steps[1]); st != "completed" || con != "success" {
		t.Errorf("the tip: %s %s", st, con)
	}
}

// A "#N" pattern in Slow and Flaky picks the run of the merge of pull
// request N's head (its step of a train's build), whatever the branch:
// here #2's step is slow and fails once; #1's step and the heads are as
// the others.
func TestSimulatedCIStepPatterns(t *testing.T) {
	s, c, clk := newGitServer(t)
	s.SimulateCI("octo/r", fakegithub.CI{Duration: 10 * time.Minute, Slow: map[string]time.Duration{"#2": 30 * time.Minute}, Flaky: []string{"#2"}})
	for n := 1; n <= 2; n++ {
		s.AddPR("octo/r", fakegithub.PR{Number: n, HeadSHA: fmt.Sprintf("h%d", n)})
	}
	steps := buildTrain(t, s, c, "h1", "h2")
	clk.Add(10 * time.Minute)
	for sha, want := range map[string]string{"h1": "success", "h2": "success", steps[0]: "success"} {
		if st, con := ciRun(t, c, sha); st != "completed" || con != want {
			t.Errorf("%s after 10m: %s %s, want completed %s", sha, st, con, want)
		}
	}
	if st, _ := ciRun(t, c, steps[1]); st != "in_progress" {
		t.Errorf("#2's step after 10m: %s, want in_progress (it takes 30m)", st)
	}
	clk.Add(20 * time.Minute)
	if st, con := ciRun(t, c, steps[1]); st != "completed" || con != "failure" {
		t.Errorf("#2's step after 30m: %s %s, want completed failure (flaky, once)", st, con)
	}
}

// GroupPerBranch: a branch's runs go one at a time; a push while one runs
// waits, queued, and a newer push cancels the waiting one. Here three
// merges onto one branch: the first runs, the second is replaced by the
// third, which starts when the first completes.
func TestSimulatedCIGroupPerBranch(t *testing.T) {
	s, c, clk := newGitServer(t)
	s.SimulateCI("octo/r", fakegithub.CI{Duration: 10 * time.Minute, GroupPerBranch: true})
	for n := 1; n <= 3; n++ {
		s.AddPR("octo/r", fakegithub.PR{Number: n, HeadSHA: fmt.Sprintf("h%d", n)})
	}
	clk.Add(10 * time.Minute) // the heads' own runs, each on its own branch, beside each other
	for _, h := range []string{"h1", "h2", "h3"} {
		if st, con := ciRun(t, c, h); st != "completed" || con != "success" {
			t.Fatalf("%s: %s %s: heads run beside each other", h, st, con)
		}
	}
	steps := buildTrain(t, s, c, "h1", "h2", "h3")
	for i, want := range []string{"in_progress ", "completed cancelled", "queued "} {
		if st, con := ciRun(t, c, steps[i]); st+" "+con != want {
			t.Errorf("step %d at once: %s %s, want %s", i+1, st, con, want)
		}
	}
	if due, ok := s.NextCIDue(); !ok || !due.Equal(clk.Now().Add(10*time.Minute)) {
		t.Errorf("NextCIDue = %v %v, want the first step's end", due, ok)
	}
	clk.Add(10 * time.Minute)
	if st, con := ciRun(t, c, steps[0]); st != "completed" || con != "success" {
		t.Errorf("step 1 after 10m: %s %s", st, con)
	}
	if st, _ := ciRun(t, c, steps[2]); st != "in_progress" {
		t.Errorf("step 3 after 10m: %s, want in_progress: it starts when step 1 ends", st)
	}
	clk.Add(10 * time.Minute)
	if st, con := ciRun(t, c, steps[2]); st != "completed" || con != "success" {
		t.Errorf("step 3 after 20m: %s %s", st, con)
	}
}

// buildTrain merges heads onto main as mergegate builds a train: the
// first on mergegate-build/main/train, mergegate/main/train created at
// it, the others onto mergegate/main/train. It returns each step's sha.
func buildTrain(t *testing.T, s *fakegithub.Server, c *client, heads ...string) []string {
	t.Helper()
	tok := "token " + c.token
	main, _ := s.BranchHead("octo/r", "main")
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate-build/main/train", "sha": main}, nil)
	var steps []string
	for i, h := range heads {
		branch := "mergegate/main/train"
		if i == 0 {
			branch = "mergegate-build/main/train"
		}
		st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": branch, "head": h}, nil)
		if st != 201 {
			t.Fatalf("merge %s: %d %v", h, st, v)
		}
		steps = append(steps, str(v, "sha"))
		if i == 0 {
			c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/train", "sha": steps[0]}, nil)
		}
	}
	return steps
}
