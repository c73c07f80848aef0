package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
)

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC = "cccccccccccccccccccccccccccccccccccccccc"
)

func TestLabelledGreenPRMergesAtTestedSha(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusEvaluating || !strings.Contains(q[0].GateReason, "ci/build") {
		t.Fatalf("before checks: %+v", q)
	}
	h.pass(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	m := h.merges()[0]
	if m.PRNumber != 7 || m.SHA != shaA || m.Method != "squash" {
		t.Fatalf("merge = %+v, want #7 at %s by squash", m, shaA)
	}
	h.settle()
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("queue after merge: %+v", q)
	}
	audit, _ := h.app.Store.Audit(t.Context(), testKey)
	var acts []string
	for _, a := range audit {
		acts = append(acts, a.Action)
	}
	if got := strings.Join(acts, ","); got != "join,gate_success,merge" {
		t.Fatalf("audit = %s", got)
	}
	// The PR's check run said where it stood, then that it merged.
	runs := h.gh.CheckRuns()
	last := runs[len(runs)-1]
	if last.Conclusion != "success" || last.HeadSHA != shaA || last.Name != "mergegate" {
		t.Fatalf("last check run write = %+v", last)
	}
}

// A push after the gate passed, landing while the merge is in flight:
// GitHub answers 409 to the sha guard, the PR is re-gated at its new head,
// and the untested sha is never merged.
func TestPushAfterGreenIsRegatedNeverMergedUntested(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(3, shaA)
	h.settle()
	// Hold the merge request a moment; the push lands meanwhile, so GitHub
	// itself answers 409 to the sha guard.
	h.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultDelay(300*time.Millisecond))
	h.pass(shaA)
	h.eventually("the merge request in flight", func() bool { return h.gh.FaultsLeft(fakegithub.RouteMerge) == 0 })
	h.gh.SetHead(testRepo, 3, shaB)
	h.eventually("a re-gate at the new head after the 409", func() bool {
		q := h.queue()
		return len(q) == 1 && q[0].PRSha == shaB
	})
	h.mustSend("pull_request", h.prPayload("synchronize", 3, shaB, "automerge"))
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("merged before the new head's checks passed: %+v", h.merges())
	}
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 1 {
		t.Fatalf("merge calls = %d, want the one refused with 409", n)
	}
	if q := h.queue(); q[0].Status == leasedo.StatusGatePassed {
		t.Fatalf("after the push: %+v", q[0])
	}
	h.pass(shaB)
	h.eventually("the merge at the new head", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.SHA != shaB {
		t.Fatalf("merged %s, want the tested head %s", m.SHA, shaB)
	}
}

// The head moved on GitHub before the merge was tried: the engine sees it
// when it re-reads the PR and re-gates instead of merging.
func TestHeadMovedBeforeMergeIsReevaluated(t *testing.T) {
	h := newHarness(t)
	h.label(4, shaA)
	h.settle()
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	h.gh.SetHead(testRepo, 4, shaB) // pushed; its webhook is late
	h.checkSuite(shaA)
	h.eventually("the reevaluation", func() bool {
		q := h.queue()
		return len(q) == 1 && q[0].PRSha == shaB
	})
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("merged an untested head: %+v", h.merges())
	}
	// Nobody knows yet who pushed: held until the webhook says.
	if q := h.queue(); !strings.Contains(q[0].GateReason, "has not seen who pushed") {
		t.Errorf("before the push's webhook: %q, want held for a writer", q[0].GateReason)
	}
	h.mustSend("pull_request", h.prPayload("synchronize", 4, shaB, "automerge")) // by the repository's owner
	h.pass(shaB)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 && h.merges()[0].SHA == shaB })
}

func TestFailingCheckBouncesWithCommentAndLabelRemoved(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(9, shaA)
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "failure")
	h.checkSuite(shaA)
	h.eventually("the bounce", func() bool { return len(h.gh.Comments()) == 1 })
	h.settle()
	c := h.gh.Comments()[0]
	if c.PRNumber != 9 || !strings.Contains(c.Body, `"ci/build"`) || !strings.Contains(c.Body, "automerge") {
		t.Fatalf("comment = %+v", c)
	}
	if lr := h.gh.LabelsRemoved(); len(lr) != 1 || lr[0].PRNumber != 9 || lr[0].Label != "automerge" {
		t.Fatalf("labels removed = %+v", lr)
	}
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusBounced {
		t.Fatalf("queue = %+v", q)
	}
	if len(h.merges()) != 0 {
		t.Fatal("a failing PR was merged")
	}
}

// Conflicts with the base are the author's to resolve: GitHub refuses the
// merge, the PR read again reports mergeable false, and it bounces with a
// sentence that says so (not GitHub's bare "not mergeable").
func TestConflictBounces(t *testing.T) {
	h := newHarness(t)
	h.label(5, shaA)
	h.gh.SetMergeable(testRepo, 5, false)
	h.pass(shaA)
	h.eventually("the bounce", func() bool { return len(h.gh.Comments()) == 1 })
	h.settle()
	want := "mergegate took this pull request out of the merge queue at aaaaaaa because it has conflicts with master that must be resolved on its branch. Once that is fixed, add the `automerge` label again."
	if got := h.gh.Comments()[0].Body; got != want {
		t.Fatalf("comment = %q\nwant      %q", got, want)
	}
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 1 {
		t.Fatalf("merge calls = %d, want the one GitHub refused", n)
	}
	audit, _ := h.app.Store.Audit(t.Context(), testKey)
	if a := audit[len(audit)-1]; a.Action != leasedo.AuditBounce || !strings.Contains(a.Reason, "conflicts with master") {
		t.Fatalf("last audit = %+v", a)
	}
}

// A 405 whose reason mergegate does not sort otherwise is the author's: it
// bounces with GitHub's words, quoted once. (A ruleset that requires signed
// commits answers this way.)
func TestUnknown405BouncesWithGitHubsWords(t *testing.T) {
	h := newHarness(t)
	h.label(5, shaA)
	h.settle()
	h.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultStatus(http.StatusMethodNotAllowed, "Repository rule violations found: Commits must have verified signatures."))
	h.pass(shaA)
	h.eventually("the bounce", func() bool { return len(h.gh.Comments()) == 1 })
	want := "mergegate took this pull request out of the merge queue at aaaaaaa because GitHub refused to merge it (\"Repository rule violations found: Commits must have verified signatures\"). Once that is fixed, add the `automerge` label again."
	if got := h.gh.Comments()[0].Body; got != want {
		t.Fatalf("comment = %q\nwant      %q", got, want)
	}
}

func TestThreeQueuedPRsMergeInOrderOneAtATime(t *testing.T) {
	h := newHarness(t)
	shas := map[int]string{1: shaA, 2: shaB, 3: shaC}
	for _, n := range []int{1, 2, 3} {
		h.label(n, shas[n])
		h.clock.Advance(time.Second)
	}
	h.settle()
	// All three go green at once, the last first.
	for _, n := range []int{3, 2, 1} {
		h.pass(shas[n])
	}
	h.eventually("three merges", func() bool { return len(h.merges()) == 3 })
	for i, m := range h.merges() {
		if m.PRNumber != i+1 || m.SHA != shas[i+1] {
			t.Fatalf("merge %d = %+v, want #%d in queue order", i, m, i+1)
		}
	}
	// One at a time: each merge call was answered before the next was sent.
	var merges []fakegithub.Call
	for _, c := range h.gh.Calls() {
		if c.Route == fakegithub.RouteMerge {
			merges = append(merges, c)
		}
	}
	// Each merge moves the base, and GitHub would refuse the next PR's
	// merge once with "Base branch was modified" while it works out its
	// mergeability: mergegate reads that PR first (mergeable null: it
	// waits a moment) rather than spend a write on a refusal. 3 merge
	// calls, each answered 200, nothing in parallel.
	if len(merges) != 3 {
		t.Fatalf("merge calls = %d, want 3", len(merges))
	}
	for i, c := range merges {
		if c.Status != 200 {
			t.Fatalf("merge call %d answered %d, want 200", i, c.Status)
		}
	}
}

// A PR behind its base, where the base requires up-to-date branches, is
// updated once and merged after its new head's checks pass.
func TestBehindBaseUpdatedOnceThenMerged(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.label(6, shaA)
	h.gh.SetBehind(testRepo, 6, true)
	h.pass(shaA)
	h.eventually("the branch update", func() bool { return len(h.gh.BranchUpdates()) == 1 })
	h.settle()
	// Further events for the old head ask for no second update.
	h.checkSuite(shaA)
	h.mustSend("push", h.fixture("push/payload.json", func(m map[string]any) { m["ref"] = "refs/heads/" + testBase }))
	h.settle()
	if n := len(h.gh.BranchUpdates()); n != 1 {
		t.Fatalf("branch updates = %d, want exactly 1", n)
	}
	if len(h.merges()) != 0 {
		t.Fatal("merged a branch that is behind")
	}
	h.mergesUpdatedHead(6)
}

// GitHub updates a branch in the background after update-branch's 202:
// for a while the pull request reads as it was, its old head still
// behind the base. mergegate asks once, waits through the events and the
// cron's pass of that while (the check run does not change), and merges
// the updated head after its checks.
func TestBehindBaseUpdatedAfterTheAnswer(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.gh.SetBranchUpdateDelay(30 * time.Second)
	h.label(6, shaA)
	h.gh.SetBehind(testRepo, 6, true)
	h.pass(shaA)
	h.eventually("the ask to update", func() bool { return h.gh.CallCount(fakegithub.RouteUpdateBranch) == 1 })
	h.settle()
	title := h.lastTitle(shaA)
	h.clock.Advance(10 * time.Second)
	h.checkSuite(shaA)
	h.settle()
	h.cronPass()
	if n, ups := h.gh.CallCount(fakegithub.RouteUpdateBranch), h.gh.BranchUpdates(); n != 1 || len(ups) != 0 {
		t.Fatalf("while GitHub works: update-branch calls = %d, updates %+v; want one ask and no update yet", n, ups)
	}
	if q := h.queue(); len(q) != 1 || q[0].GateReason != rules.UpdatingPrefix+testBase || len(h.merges()) != 0 {
		t.Fatalf("while GitHub works: queue %+v, merges %+v; want #6 waiting for its update", q, h.merges())
	}
	if got := h.lastTitle(shaA); got != title {
		t.Errorf("the check run went from %q to %q while the update was made", title, got)
	}
	h.clock.Advance(20 * time.Second)
	h.gh.CompleteDueChecks()
	if ups := h.gh.BranchUpdates(); len(ups) != 1 || ups[0].FromSHA != shaA {
		t.Fatalf("updates after 30 s = %+v, want shaA's", ups)
	}
	h.mergesUpdatedHead(6)
}

// mergesUpdatedHead: GitHub's first branch update of pr is pushed (its
// synchronize delivered) and passes its checks; it is what merges.
func (h *harness) mergesUpdatedHead(pr int) {
	h.t.Helper()
	newHead := h.gh.BranchUpdates()[0].ToSHA
	h.mustSend("pull_request", h.prPayload("synchronize", pr, newHead, "automerge"))
	h.pass(newHead)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.SHA != newHead {
		h.t.Fatalf("merged %s, want the updated head %s", m.SHA, newHead)
	}
}

// GitHub answers update-branch 202 and updates the branch later; when the
// update never comes, the pull request does not wait for ever: a pass
// after rules.UpdatePatience asks again (one more write), and the
// updated head merges after its checks. A pass before then asks nothing.
func TestBehindBaseUpdateThatNeverComesIsAskedAgain(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.label(6, shaA)
	h.gh.SetBehind(testRepo, 6, true)
	h.gh.Fail(fakegithub.RouteUpdateBranch, 1, fakegithub.FaultUpdateLost())
	h.pass(shaA)
	h.eventually("the ask to update", func() bool { return h.gh.CallCount(fakegithub.RouteUpdateBranch) == 1 })
	h.settle()
	if q := h.queue(); len(q) != 1 || q[0].GateReason != rules.UpdatingPrefix+testBase {
		t.Fatalf("queue after the ask = %+v, want #6 waiting for the update", q)
	}
	h.clock.Advance(rules.UpdatePatience - time.Minute)
	h.cronPass()
	if n := h.gh.CallCount(fakegithub.RouteUpdateBranch); n != 1 {
		t.Fatalf("update-branch calls = %d before the patience ran out, want 1", n)
	}
	h.clock.Advance(time.Minute)
	h.cronPass()
	if n, ups := h.gh.CallCount(fakegithub.RouteUpdateBranch), h.gh.BranchUpdates(); n != 2 || len(ups) != 1 {
		t.Fatalf("update-branch calls = %d, updates %+v; want the lost one and one more, which updated", n, ups)
	}
	h.waitLogged("GitHub has not updated the branch it was asked to update: asked again", 1)
	h.mergesUpdatedHead(6)
}

// Rate-limited answers delay the merge and do not lose it.
func TestRateLimitDelaysMergeWithoutLosingIt(t *testing.T) {
	h := newHarness(t)
	h.label(8, shaA)
	h.settle()
	h.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultRetryAfter(http.StatusTooManyRequests, 2))
	h.pass(shaA)
	h.eventually("the rate-limited attempt", func() bool { return h.gh.CallCount(fakegithub.RouteMerge) == 1 })
	if len(h.merges()) != 0 {
		t.Fatal("merged through a rate limit")
	}
	// The injected clock moves to the engine's retry, after retry-after:
	// it goes through, and only one more merge call is sent.
	h.eventually("the merge after the limit", func() bool { return len(h.merges()) == 1 })
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 2 {
		t.Fatalf("merge calls = %d, want 2 (no hammering during the limit)", n)
	}
	if m := h.merges()[0]; m.PRNumber != 8 || m.SHA != shaA {
		t.Fatalf("merge = %+v", m)
	}
}

// Calls to GitHub for one PR's life (join → gate → merge) with checks
// already green: at most 8; a repeated read of unchanged data costs no
// rate-limit point.
func TestCallBudgetPerLifecycle(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 11, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}})
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	h.gh.ResetCalls()
	h.mustSend("pull_request", h.prPayload("labeled", 11, shaA, "automerge"))
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.settle()
	n := 0
	for _, c := range h.gh.Calls() {
		if c.Route != fakegithub.RouteCreateToken {
			n++
		}
	}
	t.Logf("GitHub calls for one PR lifecycle: %d (%v)", n, h.gh.CallCounts())
	if n > 8 {
		t.Fatalf("%d calls for one lifecycle, want at most 8: %v", n, h.gh.CallCounts())
	}
	// Re-reading unchanged data costs nothing (the first read sees the
	// check run mergegate wrote, so it is new data; the second is not).
	if _, err := h.app.Forge.CheckResults(t.Context(), testTenant, testRepo, shaA); err != nil {
		t.Fatal(err)
	}
	if _, err := h.app.Forge.GetPR(t.Context(), testTenant, testRepo, 11); err != nil {
		t.Fatal(err)
	}
	before := h.gh.RateLimitUsed()
	if _, err := h.app.Forge.CheckResults(t.Context(), testTenant, testRepo, shaA); err != nil {
		t.Fatal(err)
	}
	if _, err := h.app.Forge.GetPR(t.Context(), testTenant, testRepo, 11); err != nil {
		t.Fatal(err)
	}
	if used := h.gh.RateLimitUsed() - before; used != 0 {
		t.Fatalf("a repeated read cost %d rate-limit points", used)
	}
}

// GitHub merges but the answer is lost (502): mergegate re-reads the PR
// before any retry, sees it merged, records the merge, and never sends a
// second merge.
func TestMergeAnsweredWithErrorIsReadBackNotRetried(t *testing.T) {
	h := newHarness(t)
	h.label(12, shaA)
	h.settle()
	h.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultLostAnswer(http.StatusBadGateway))
	h.pass(shaA)
	h.eventually("the merge recorded", func() bool { return len(h.queue()) == 0 })
	h.settle()
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 1 {
		t.Fatalf("merge calls = %d, want 1 (no retry of a merge that happened)", n)
	}
	audit, _ := h.app.Store.Audit(t.Context(), testKey)
	if a := audit[len(audit)-1]; a.Action != leasedo.AuditMerge || a.PRSha != shaA {
		t.Fatalf("last audit = %+v, want the merge at %s", a, shaA)
	}
}

// GitHub sends synchronize for a push, and a read of the pull request a
// moment later may come from a replica that still shows the head before
// it. That read is not taken for "new commits": the entry is not gated
// again at the head it just left (whose checks had passed: it would be
// merged, or built into a train, at the commit its author replaced), and
// the pull request merges once, at its new head.
func TestLaggingReadOfAPushIsNotANewHead(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "blocking_labels: [hold]\n") // its labels are read before it merges
	h.pushPolicy()
	h.settle()
	h.label(5, shaA)
	h.settle()
	// shaA passed; the author force-pushes shaB, already tested elsewhere.
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	h.gh.SetCheckRun(testRepo, shaB, "ci/build", "completed", "success")
	h.gh.SetHead(testRepo, 5, shaB)
	h.gh.SetStaleHeadReads(testRepo, 5, shaA, 2)
	h.mustSend("pull_request", h.prPayload("synchronize", 5, shaB, "automerge"))
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.settle()
	if m := h.merges()[0]; m.SHA != shaB {
		t.Fatalf("merged %s, want the pushed head %s", m.SHA, shaB)
	}
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 1 {
		t.Fatalf("merge calls = %d, want 1: none at the head the push replaced", n)
	}
	if strings.Contains(h.logBuf.String(), `"sha":"`+shaA+`","state":"gate_passed"`) || strings.Contains(h.logBuf.String(), "new commits on GitHub") {
		t.Fatalf("gated again at the replaced head %s:\n%s", shaA, h.logBuf.String())
	}
	h.noBounce()
}

// GitHub sends check_run completed, and a read of the checks a moment
// later may still show the run in progress. The delivery's word is not
// the gate, but it makes the read be made again a second later rather
// than believed: the pull request merges now, not at the cron's next
// read of it.
func TestLaggingReadOfACheckIsReadAgain(t *testing.T) {
	h := newHarness(t)
	h.label(6, shaA)
	h.settle()
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	h.gh.SetStaleCheckReads(testRepo, shaA, 1)
	h.mustSend("check_run", h.fixture("check_run/completed.payload.json", func(m map[string]any) {
		run := obj(m, "check_run")
		run["head_sha"], run["name"], run["pull_requests"] = shaA, "ci/build", []any{}
	}))
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.SHA != shaA {
		t.Fatalf("merged %s, want %s", m.SHA, shaA)
	}
	if n := h.gh.CallCount(fakegithub.RouteListCheckRuns); n > 4 {
		t.Errorf("%d reads of the checks, want at most 4", n)
	}
	h.noBounce()
}
