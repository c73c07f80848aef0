package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// End to end, through signed deliveries, the queue's rules of
// docs/queue.md. The fake GitHub answers as GitHub does.

// cronPass runs the cron's pass for the test repository now.
func (h *harness) cronPass() leasedo.ReconcileAnswer {
	h.t.Helper()
	ans, err := h.app.Reconciler.Pass(h.t.Context(), testKey)
	if err != nil {
		h.t.Fatalf("cron pass: %v", err)
	}
	h.settle()
	return ans
}

// A required check that never concludes bounces the head after
// --check-timeout (default 1 h), with a sentence naming the checks that
// never finished; the engine's timer for the deadline is what notices
// (TestCheckTimeoutFiresAtItsDeadline), a cron pass before it does not
// bounce.
func TestCheckTimeoutBouncesNamingTheChecks(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build", "lint"}, false)
	h.label(7, shaA)
	h.gh.SetCheckRun(testRepo, shaA, "lint", "completed", "success")
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "in_progress", "")
	h.checkSuite(shaA)
	h.settle()
	h.clock.Advance(59 * time.Minute)
	h.cronPass()
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusEvaluating {
		t.Fatalf("before the timeout: %+v", q)
	}
	h.clock.Advance(2 * time.Minute)
	h.eventually("the bounce", func() bool { return len(h.gh.Comments()) == 1 })
	h.settle()
	want := "mergegate took this pull request out of the merge queue at aaaaaaa because its required check \"ci/build\" did not finish within 1h. " +
		"Once that is fixed, add the `automerge` label again."
	if c := h.gh.Comments(); len(c) != 1 || c[0].Body != want {
		t.Fatalf("comments = %+v\nwant %q", c, want)
	}
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusBounced {
		t.Fatalf("after the timeout: %+v", q)
	}
	if cr := h.lastCheckRun(shaA); cr.Status != "completed" || cr.Conclusion != "failure" || cr.Summary != want {
		t.Fatalf("check run = %+v", cr)
	}
}

// A stale conclusion (GitHub marks runs left incomplete for 14
// days) counts as failed.
func TestStaleCheckCountsAsFailed(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "stale")
	h.checkSuite(shaA)
	h.eventually("the bounce", func() bool { return len(h.gh.Comments()) == 1 })
	if c := h.gh.Comments()[0].Body; !strings.Contains(c, `because its required check "ci/build" concluded stale.`) {
		t.Fatalf("comment = %q", c)
	}
}

// The cron reads again every entry that waits on checks, so a
// check webhook that never arrived is repaired on the next pass.
func TestCronRepairsALostCheckWebhook(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success") // its webhook is lost
	h.clock.Advance(5 * time.Minute)
	h.cronPass()
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.PRNumber != 7 || m.SHA != shaA {
		t.Fatalf("merge = %+v", m)
	}
}

// Without required checks mergegate does not merge on the first
// green check: it waits until every other App's check suite on the head
// that has check runs has completed. A suite with no runs (GitHub leaves
// those queued forever) and mergegate's own suite do not count.
func TestWithoutRequiredChecksWaitsForEveryAppsSuite(t *testing.T) {
	h := newHarness(t)
	const otherApp = 9001
	h.label(7, shaA)
	h.gh.AddCheckSuite(testRepo, shaA, 4242, "renovate") // no runs: ignored
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	h.gh.SetCheckRunFromApp(testRepo, shaA, "e2e", "queued", "", otherApp, "circleci")
	h.checkSuite(shaA)
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("merged on the first green check while circleci's suite ran: %+v", h.merges())
	}
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusEvaluating || !strings.Contains(q[0].GateReason, "e2e") {
		t.Fatalf("queue = %+v, want it waiting for circleci's e2e", q)
	}
	h.gh.SetCheckRunFromApp(testRepo, shaA, "e2e", "completed", "success", otherApp, "circleci")
	h.checkSuite(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
}

// A required check bound to an App (branch protection's
// checks[].app_id) is satisfied only by that App's check run.
func TestRequiredCheckBoundToAnApp(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequiredApp(testRepo, testBase, "ci/build", fakegithub.CIAppID)
	h.label(7, shaA)
	h.gh.SetCheckRunFromApp(testRepo, shaA, "ci/build", "completed", "success", 777, "impostor")
	h.checkSuite(shaA)
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("merged on another App's check run of the required name: %+v", h.merges())
	}
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusEvaluating {
		t.Fatalf("queue = %+v", q)
	}
	h.pass(shaA) // the CI App's own run
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
}

// A fork's pull request behind a strict base is updated only when
// its author lets maintainers edit it; otherwise it waits, and its check
// run tells the author to update the branch.
func TestForkBehindStrictBaseWaitsForItsAuthor(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 7, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}, Fork: true, Behind: true})
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 8, HeadSHA: shaB, BaseRef: "release-1.x", Labels: []string{"automerge"}, Fork: true,
		MaintainerCanModify: true, Behind: true})
	h.gh.SetRequired(testRepo, "release-1.x", []string{"ci/build"}, true)
	h.mustSend("pull_request", h.prPayload("labeled", 7, shaA, "automerge"))
	h.mustSend("pull_request", h.prPayloadBase("labeled", 8, shaB, "release-1.x", "automerge"))
	h.pass(shaA)
	h.pass(shaB)
	h.eventually("the fork that allows edits updated", func() bool { return len(h.gh.BranchUpdates()) == 1 })
	h.settle()
	if u := h.gh.BranchUpdates(); len(u) != 1 || u[0].PRNumber != 8 {
		t.Fatalf("branch updates = %+v, want #8's only", u)
	}
	if cr := h.lastCheckRun(shaA); !strings.Contains(cr.Title, "update the branch") || cr.Status != "in_progress" {
		t.Fatalf("#7's check run = %+v, want it to ask its author to update the branch", cr)
	}
	if len(h.gh.Comments()) != 0 || len(h.merges()) != 0 {
		t.Fatalf("comments %+v, merges %+v: want neither", h.gh.Comments(), h.merges())
	}
}

// mergegate's check run always ends: leaving the queue completes
// it (neutral, with the reason), and a change of base never leaves a
// second one running.
func TestCheckRunEndsWhenThePullRequestLeaves(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()
	if cr := h.lastCheckRun(shaA); cr.Status != "in_progress" || !strings.Contains(cr.Title, "for "+testBase+": waiting for its checks") {
		t.Fatalf("check run while queued = %+v", cr)
	}
	// The base changes: same commit, same run, retitled.
	h.gh.UpdatePR(testRepo, 7, func(pr *fakegithub.PR) { pr.BaseRef = "develop" })
	var edited map[string]any
	if err := json.Unmarshal(h.prPayloadBase("edited", 7, shaA, "develop", "automerge"), &edited); err != nil {
		t.Fatal(err)
	}
	delete(edited, "label")
	edited["changes"] = map[string]any{"base": map[string]any{"ref": map[string]any{"from": testBase}}}
	body, _ := json.Marshal(edited)
	h.mustSend("pull_request", body)
	h.settle()
	var created []int64
	for _, cr := range h.gh.CheckRuns() {
		if cr.Action == "created" && cr.HeadSHA == shaA && cr.Name == "mergegate" {
			created = append(created, cr.ID)
		}
	}
	if len(created) != 1 {
		t.Fatalf("check runs created on %s: %v, want one (a base change retitles it)", shaA, created)
	}
	if cr := h.lastCheckRun(shaA); !strings.Contains(cr.Title, "for develop: waiting for its checks") {
		t.Fatalf("check run after the base change = %+v", cr)
	}
	// The label goes: the PR leaves, and its run ends.
	h.gh.SetLabels(testRepo, 7)
	h.mustSend("pull_request", h.prPayload("unlabeled", 7, shaA))
	h.settle()
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("queue = %+v", q)
	}
	cr := h.lastCheckRun(shaA)
	if cr.Status != "completed" || cr.Conclusion != "neutral" || !strings.Contains(cr.Summary, "no longer eligible") {
		t.Fatalf("check run after leaving = %+v", cr)
	}
	if cr.ID != created[0] {
		t.Fatalf("ended run %d, want the one created (%d)", cr.ID, created[0])
	}
}

// A new head ends the old head's run; GitHub being down when the
// PR leaves only delays the ending (the outbox), it never loses it.
func TestCheckRunEndsAfterGitHubWasDown(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()
	h.gh.SetHead(testRepo, 7, shaB)
	h.mustSend("pull_request", h.prPayload("synchronize", 7, shaB, "automerge"))
	h.settle()
	if cr := h.lastCheckRun(shaA); cr.Status != "completed" || cr.Conclusion != "neutral" {
		t.Fatalf("old head's run = %+v, want it ended", cr)
	}
	h.gh.Fail(fakegithub.RouteUpdateCheckRun, 1, fakegithub.FaultStatus(502, "Server Error"))
	h.gh.ClosePR(testRepo, 7)
	h.mustSend("pull_request", h.prPayload("closed", 7, shaB, "automerge"))
	h.eventually("the run ended once GitHub answers again", func() bool {
		h.clock.Advance(time.Second)
		cr := h.lastCheckRun(shaB)
		return cr.Status == "completed" && cr.Conclusion == "neutral"
	})
}

// A queued PR missing from the open list leaves only after a GET
// says it is closed; one the GET shows open stays.
func TestResyncConfirmsClosedWithAGet(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()
	h.gh.ClosePR(testRepo, 7) // its webhook is lost
	h.clock.Advance(5 * time.Minute)
	h.gh.ResetCalls()
	ans := h.cronPass()
	if n := h.gh.CallCount(fakegithub.RouteGetPull); n < 1 {
		t.Fatalf("GET /pulls/7 calls = %d, want the confirmation", n)
	}
	if len(ans.Results.Fixed) != 1 || ans.Results.Fixed[0].Fix != "left" || ans.Results.Fixed[0].Detail != "closed on GitHub" {
		t.Fatalf("fixed = %+v", ans.Results.Fixed)
	}
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("queue = %+v", q)
	}
}

// prPayloadBase is prPayload for a pull request into base.
func (h *harness) prPayloadBase(action string, n int, sha, base string, labels ...string) []byte {
	var m map[string]any
	if err := json.Unmarshal(h.prPayload(action, n, sha, labels...), &m); err != nil {
		h.t.Fatal(err)
	}
	obj(obj(m, "pull_request"), "base")["ref"] = base
	b, err := json.Marshal(m)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// A repair made beside the running server (here: an
// entry joined through a second handle on the database, as `mergegate
// reconcile` without a server does) is acted on within seconds: the
// server's sweep finds work no worker has.
func TestServerActsOnARepairMadeBesideIt(t *testing.T) {
	h := newHarness(t)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 7, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}})
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	beside := leasedo.NewStore(testkit.OpenDB(t, h.cfg.DB, leasedo.Options{}), leasedo.Config{Clock: h.clock})
	if _, err := beside.ProcessEvent(t.Context(), leasedo.Event{EventType: "reconcile", Action: "join", Op: leasedo.OpJoin,
		Tenant: testTenant, Repo: testRepo, PRNumber: 7, Details: &leasedo.Details{Sha: shaA, Base: testBase}}, "reconcile"); err != nil {
		t.Fatal(err)
	}
	h.eventually("the merge of the entry the server did not schedule", func() bool { return len(h.merges()) == 1 })
}

// A gate result posted to POST /event (or carried by a
// payload) only starts a reading; the merge waits for the checks as
// mergegate reads them from GitHub.
func TestPostedGateResultNeverMergesARunningCheck(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "in_progress", "")
	body := `{"eventType":"check_run","tenant":"1","repo":"Codertocat/Hello-World","action":"completed","prNumber":7,` +
		`"details":{"sha":"` + shaA + `","gateResult":"success"}}`
	h.settle()
	// 409 is the lease protocol's answer while a worker holds the lease: try again.
	h.eventually("POST /event answered 200", func() bool {
		resp, err := http.Post(h.admin+"/event", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("merged on a posted gate result while the check ran: %+v", h.merges())
	}
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusEvaluating || q[0].GateResult != "" {
		t.Fatalf("queue = %+v, want it evaluating, nothing passed", q)
	}
	h.pass(shaA)
	h.eventually("the merge once GitHub says the check passed", func() bool { return len(h.merges()) == 1 })
}
