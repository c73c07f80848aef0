package forge_test

import (
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

func TestEvaluateGate(t *testing.T) {
	required := func(contexts ...string) forge.Required {
		return forge.Required{Contexts: contexts, Configured: true}
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		req     forge.Required
		results []forge.CheckResult
		want    forge.Verdict
	}{
		{"all required succeed", required("build", "lint"),
			[]forge.CheckResult{done("build", "success"), done("lint", "success")},
			forge.Verdict{Result: "success", Reason: "all 2 required checks passed"}},
		{"skipped and neutral count as success", required("build", "docs"),
			[]forge.CheckResult{done("build", "neutral"), done("docs", "skipped")},
			forge.Verdict{Result: "success", Reason: "all 2 required checks passed"}},
		{"missing required check is pending, not failure", required("build", "e2e"),
			[]forge.CheckResult{done("build", "success")},
			forge.Verdict{Result: "pending", Reason: `waiting for required check "e2e", which has not reported yet`}},
		{"in progress is pending", required("lint"),
			[]forge.CheckResult{run("lint", "in_progress", "")},
			forge.Verdict{Result: "pending", Reason: `waiting for required check "lint"`}},
		{"queued is pending", required("lint"),
			[]forge.CheckResult{run("lint", "queued", "")},
			forge.Verdict{Result: "pending", Reason: `waiting for required check "lint"`}},
		{"stale is pending", required("lint"),
			[]forge.CheckResult{done("lint", "stale")},
			forge.Verdict{Result: "pending", Reason: `waiting for required check "lint"`}},
		{"failure", required("ci/build"),
			[]forge.CheckResult{done("ci/build", "failure")},
			forge.Verdict{Result: "failure", Reason: `required check "ci/build" concluded failure`}},
		{"cancelled", required("a"), []forge.CheckResult{done("a", "cancelled")},
			forge.Verdict{Result: "failure", Reason: `required check "a" concluded cancelled`}},
		{"timed_out", required("a"), []forge.CheckResult{done("a", "timed_out")},
			forge.Verdict{Result: "failure", Reason: `required check "a" concluded timed_out`}},
		{"action_required", required("a"), []forge.CheckResult{done("a", "action_required")},
			forge.Verdict{Result: "failure", Reason: `required check "a" concluded action_required`}},
		{"status error", required("a"), []forge.CheckResult{stat("a", "error")},
			forge.Verdict{Result: "failure", Reason: `required check "a" concluded error`}},
		{"status failure", required("a"), []forge.CheckResult{stat("a", "failure")},
			forge.Verdict{Result: "failure", Reason: `required check "a" concluded failure`}},
		{"status pending", required("a"), []forge.CheckResult{stat("a", "pending")},
			forge.Verdict{Result: "pending", Reason: `waiting for required check "a"`}},
		{"failure wins over pending", required("slow", "broken"),
			[]forge.CheckResult{run("slow", "in_progress", ""), done("broken", "failure")},
			forge.Verdict{Result: "failure", Reason: `required check "broken" concluded failure`}},
		{"check run and status with the same name: both pass", required("ci"),
			[]forge.CheckResult{done("ci", "success"), stat("ci", "success")},
			forge.Verdict{Result: "success", Reason: `required check "ci" passed`}},
		{"check run passes, status fails", required("ci"),
			[]forge.CheckResult{done("ci", "success"), stat("ci", "failure")},
			forge.Verdict{Result: "failure", Reason: `required check "ci" concluded failure`}},
		{"status passes, check run pending", required("ci"),
			[]forge.CheckResult{stat("ci", "success"), run("ci", "in_progress", "")},
			forge.Verdict{Result: "pending", Reason: `waiting for required check "ci"`}},
		{"unrequired failure is ignored when checks are configured", required("build"),
			[]forge.CheckResult{done("build", "success"), done("flaky", "failure")},
			forge.Verdict{Result: "success", Reason: `required check "build" passed`}},
		{"nothing configured: every reported check is required", forge.Required{},
			[]forge.CheckResult{done("build", "success"), stat("deploy", "success"), done("flaky", "failure")},
			forge.Verdict{Result: "failure", Reason: `check "flaky" concluded failure`}},
		{"nothing configured, all reported pass", forge.Required{},
			[]forge.CheckResult{done("build", "success"), stat("deploy", "success")},
			forge.Verdict{Result: "success", Reason: "all 2 checks passed"}},
		{"configured but empty list uses every reported check", forge.Required{Configured: true, Strict: true},
			[]forge.CheckResult{run("build", "queued", "")},
			forge.Verdict{Result: "pending", Reason: `waiting for check "build"`}},
		{"nothing required, nothing reported: pending", forge.Required{}, nil,
			forge.Verdict{Result: "pending", Reason: "no checks reported yet"}},
		{"mergegate's own check run never gates", forge.Required{},
			[]forge.CheckResult{run("mergegate", "in_progress", ""), done("build", "success")},
			forge.Verdict{Result: "success", Reason: `check "build" passed`}},
		{"latest of the same name wins", required("build"),
			[]forge.CheckResult{
				{Name: "build", Source: forge.SourceCheckRun, Status: "completed", Conclusion: "success", At: t0.Add(time.Minute)},
				{Name: "build", Source: forge.SourceCheckRun, Status: "completed", Conclusion: "failure", At: t0},
			},
			forge.Verdict{Result: "success", Reason: `required check "build" passed`}},
		{"unknown conclusion waits", required("a"), []forge.CheckResult{done("a", "something_new")},
			forge.Verdict{Result: "pending", Reason: `waiting for required check "a"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := forge.EvaluateGate(tt.req, tt.results, nil); got.Result != tt.want.Result || got.Reason != tt.want.Reason {
				t.Errorf("EvaluateGate = %+v, want %+v", got, tt.want)
			}
		})
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
