package forge_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
)

func run(name, status, conclusion string) forge.CheckResult {
	return forge.CheckResult{Name: name, Source: forge.SourceCheckRun, Status: status, Conclusion: conclusion}
}

func done(name, conclusion string) forge.CheckResult { return run(name, "completed", conclusion) }

func stat(name, state string) forge.CheckResult {
	st := "completed"
	if state == "pending" {
		st = "pending"
	}
	return forge.CheckResult{Name: name, Source: forge.SourceStatus, Status: st, Conclusion: state}
}

func fromApp(r forge.CheckResult, app int64) forge.CheckResult { r.AppID = app; return r }

func TestEvaluateGate(t *testing.T) {
	required := func(contexts ...string) forge.Required {
		return forge.Required{Contexts: contexts, Configured: true}
	}
	bound := func(name string, app int64, also ...string) forge.Required {
		return forge.Required{Contexts: append([]string{name}, also...), Configured: true, AppIDs: map[string]int64{name: app}}
	}
	suite := func(slug, status string, runs int) forge.CheckSuite {
		return forge.CheckSuite{AppID: int64(len(slug)), AppSlug: slug, Status: status, Runs: runs}
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		req     forge.Required
		results []forge.CheckResult
		suites  []forge.CheckSuite
		want    forge.Verdict
	}{
		{"all required succeed", required("build", "lint"),
			[]forge.CheckResult{done("build", "success"), done("lint", "success")},
			nil, forge.Verdict{Result: "success", Reason: "all 2 required checks passed"}},
		{"skipped and neutral count as success", required("build", "docs"),
			[]forge.CheckResult{done("build", "neutral"), done("docs", "skipped")},
			nil, forge.Verdict{Result: "success", Reason: "all 2 required checks passed"}},
		{"missing required check is pending, not failure", required("build", "e2e"),
			[]forge.CheckResult{done("build", "success")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "e2e", which has not reported yet`, Waiting: []string{"e2e"}}},
		{"in progress is pending", required("lint"),
			[]forge.CheckResult{run("lint", "in_progress", "")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "lint"`, Waiting: []string{"lint"}}},
		{"queued is pending", required("lint"),
			[]forge.CheckResult{run("lint", "queued", "")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "lint"`, Waiting: []string{"lint"}}},
		{"stale is a failure (GitHub marks runs stale after 14 days incomplete)", required("lint"),
			[]forge.CheckResult{done("lint", "stale")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "lint" concluded stale`}},
		{"failure", required("ci/build"),
			[]forge.CheckResult{done("ci/build", "failure")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "ci/build" concluded failure`}},
		{"cancelled", required("a"), []forge.CheckResult{done("a", "cancelled")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "a" concluded cancelled`}},
		{"timed_out", required("a"), []forge.CheckResult{done("a", "timed_out")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "a" concluded timed_out`}},
		{"action_required", required("a"), []forge.CheckResult{done("a", "action_required")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "a" concluded action_required`}},
		{"status error", required("a"), []forge.CheckResult{stat("a", "error")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "a" concluded error`}},
		{"status failure", required("a"), []forge.CheckResult{stat("a", "failure")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "a" concluded failure`}},
		{"status pending", required("a"), []forge.CheckResult{stat("a", "pending")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "a"`, Waiting: []string{"a"}}},
		{"failure wins over pending", required("slow", "broken"),
			[]forge.CheckResult{run("slow", "in_progress", ""), done("broken", "failure")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "broken" concluded failure`}},
		{"check run and status with the same name: both pass", required("ci"),
			[]forge.CheckResult{done("ci", "success"), stat("ci", "success")},
			nil, forge.Verdict{Result: "success", Reason: `required check "ci" passed`}},
		{"check run passes, status fails", required("ci"),
			[]forge.CheckResult{done("ci", "success"), stat("ci", "failure")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "ci" concluded failure`}},
		{"status passes, check run pending", required("ci"),
			[]forge.CheckResult{stat("ci", "success"), run("ci", "in_progress", "")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "ci"`, Waiting: []string{"ci"}}},
		{"unrequired failure is ignored when checks are configured", required("build"),
			[]forge.CheckResult{done("build", "success"), done("flaky", "failure")},
			nil, forge.Verdict{Result: "success", Reason: `required check "build" passed`}},
		{"nothing configured: every reported check is required", forge.Required{},
			[]forge.CheckResult{done("build", "success"), stat("deploy", "success"), done("flaky", "failure")},
			nil, forge.Verdict{Result: "failure", Reason: `check "flaky" concluded failure`}},
		{"nothing configured, all reported pass", forge.Required{},
			[]forge.CheckResult{done("build", "success"), stat("deploy", "success")},
			nil, forge.Verdict{Result: "success", Reason: "all 2 checks passed"}},
		{"configured but empty list uses every reported check", forge.Required{Configured: true, Strict: true},
			[]forge.CheckResult{run("build", "queued", "")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for check "build"`, Waiting: []string{"build"}}},
		{"nothing required, nothing reported: pending", forge.Required{}, nil,
			nil, forge.Verdict{Result: "pending", Reason: "no checks reported yet"}},
		{"mergegate's own check run never gates", forge.Required{},
			[]forge.CheckResult{run("mergegate", "in_progress", ""), done("build", "success")},
			nil, forge.Verdict{Result: "success", Reason: `check "build" passed`}},
		{"latest of the same name wins", required("build"),
			[]forge.CheckResult{
				{Name: "build", Source: forge.SourceCheckRun, Status: "completed", Conclusion: "success", At: t0.Add(time.Minute)},
				{Name: "build", Source: forge.SourceCheckRun, Status: "completed", Conclusion: "failure", At: t0},
			},
			nil, forge.Verdict{Result: "success", Reason: `required check "build" passed`}},
		{"unknown conclusion waits", required("a"), []forge.CheckResult{done("a", "something_new")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "a"`, Waiting: []string{"a"}}},
		{"waiting lists every required check not concluded, in requirement order", required("e2e", "build", "lint", "unit"),
			[]forge.CheckResult{done("build", "success"), run("lint", "queued", ""), stat("unit", "pending")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "e2e", which has not reported yet`, Waiting: []string{"e2e", "lint", "unit"}}},
		{"an App-bound check passes with that App's run", bound("build", 77),
			[]forge.CheckResult{fromApp(done("build", "success"), 77)},
			nil, forge.Verdict{Result: "success", Reason: `required check "build" passed`}},
		{"an App-bound check is not satisfied by another App's run", bound("build", 77),
			[]forge.CheckResult{fromApp(done("build", "success"), 99)},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "build" from GitHub App 77: another App or a status reported it, which does not count`, Waiting: []string{"build"}}},
		{"an App-bound check is not satisfied by a status", bound("build", 77),
			[]forge.CheckResult{stat("build", "success")},
			nil, forge.Verdict{Result: "pending", Reason: `waiting for required check "build" from GitHub App 77: another App or a status reported it, which does not count`, Waiting: []string{"build"}}},
		{"an App-bound check fails on that App's failure, whatever others say", bound("build", 77),
			[]forge.CheckResult{fromApp(done("build", "failure"), 77), fromApp(done("build", "success"), 99), stat("build", "success")},
			nil, forge.Verdict{Result: "failure", Reason: `required check "build" concluded failure`}},
		{"another App's failure of an App-bound name is ignored", bound("build", 77),
			[]forge.CheckResult{fromApp(done("build", "success"), 77), fromApp(done("build", "failure"), 99)},
			nil, forge.Verdict{Result: "success", Reason: `required check "build" passed`}},
		{"nothing required: a suite with runs still in progress waits", forge.Required{},
			[]forge.CheckResult{done("build", "success")},
			[]forge.CheckSuite{suite("github-actions", "completed", 1), suite("circleci", "in_progress", 2)},
			forge.Verdict{Result: "pending", Reason: `waiting for the checks of GitHub App "circleci"`, Waiting: []string{"circleci"}}},
		{"nothing required: a queued suite with no runs is ignored", forge.Required{},
			[]forge.CheckResult{done("build", "success")},
			[]forge.CheckSuite{suite("dependabot", "queued", 0)},
			forge.Verdict{Result: "success", Reason: `check "build" passed`}},
		{"nothing required: waiting checks come before waiting suites", forge.Required{},
			[]forge.CheckResult{run("build", "in_progress", "")},
			[]forge.CheckSuite{suite("circleci", "queued", 1)},
			forge.Verdict{Result: "pending", Reason: `waiting for check "build"`, Waiting: []string{"build", "circleci"}}},
		{"nothing required: a failure wins over a waiting suite", forge.Required{},
			[]forge.CheckResult{done("build", "failure")},
			[]forge.CheckSuite{suite("circleci", "in_progress", 1)},
			forge.Verdict{Result: "failure", Reason: `check "build" concluded failure`}},
		{"explicit requirements ignore suites", required("build"),
			[]forge.CheckResult{done("build", "success")},
			[]forge.CheckSuite{suite("circleci", "in_progress", 3)},
			forge.Verdict{Result: "success", Reason: `required check "build" passed`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := forge.EvaluateGate(tt.req, tt.results, tt.suites); got.Result != tt.want.Result || got.Reason != tt.want.Reason || !slices.Equal(got.Waiting, tt.want.Waiting) {
				t.Errorf("EvaluateGate = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A check's name is whoever wrote the workflow's choice, a fork's author
// included; the gate's reason quotes it into comments and check run
// summaries, where it must not mention, link or reference anyone.
func TestGateReasonQuotesNamesInert(t *testing.T) {
	hostile := "@acme/security-team see [fix](https://evil.example) #1"
	for _, results := range [][]forge.CheckResult{
		{done(hostile, "failure")},
		{run(hostile, "in_progress", "")},
	} {
		got := forge.EvaluateGate(forge.Required{}, results, nil)
		for _, live := range []string{"@acme", "](", "https://", "#1"} {
			if strings.Contains(got.Reason, live) {
				t.Errorf("%s: reason %q holds %q", got.Result, got.Reason, live)
			}
		}
		if plain := strings.ReplaceAll(got.Reason, "\u200b", ""); !strings.Contains(plain, strconv.Quote(hostile)) {
			t.Errorf("%s: reason %q does not read as the name", got.Result, got.Reason)
		}
	}
}

func TestAuthorMessageSortsAudiences(t *testing.T) {
	cases := []struct {
		err    error
		want   string
		author bool
	}{
		{&forge.MergeError{Op: "merge", Status: 405, Message: "Pull Request is not mergeable"},
			"GitHub refused to merge this pull request: Pull Request is not mergeable.", true},
		{&forge.MergeError{Op: "merge", Status: 409, Message: "Head branch was modified. Review and try the merge again."},
			"The head branch changed after its checks passed, so its new commits must pass the checks before it can be merged.", true},
		{&forge.MergeError{Op: "update-branch", Status: 422, Message: "merge conflict between base and head"},
			"GitHub could not update this branch with its base: merge conflict between base and head.", true},
		{&forge.MergeError{Op: "merge", Status: 405, Message: "You're not authorized to push to this branch. Visit https://docs.github.com/articles/about-protected-branches/ for more information."},
			"GitHub refused to merge this pull request: You're not authorized to push to this branch. Visit https://docs.github.com/articles/about-protected-branches/ for more information.", true},
		{&forge.MergeError{Op: "merge", Status: 405, Message: "GitHub refused the merge."},
			"GitHub refused the merge.", true},
		{&forge.MergeError{Op: "merge", Status: 403, Message: "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission"}, "", false},
		{&forge.RateLimitError{Tenant: "1", Status: 429}, "", false},
		{&forge.TransientError{Op: "merge", Status: 502}, "", false},
		{&forge.APIError{Op: "pulls.get", Status: 403, Message: "Resource not accessible by integration"}, "", false},
	}
	for _, c := range cases {
		got, ok := forge.AuthorMessage(c.err)
		if got != c.want || ok != c.author {
			t.Errorf("AuthorMessage(%v) = %q, %v; want %q, %v", c.err, got, ok, c.want, c.author)
		}
	}
}
