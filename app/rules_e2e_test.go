package app

// End-to-end tests of the queue's rules (docs/queue.md, rules.Decide),
// through signed deliveries to the real App against the fake GitHub.

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

const releaseBase = "release-1.x"

// labelInto puts PR n at sha into base, labelled automerge, on the fake
// GitHub and by a signed pull_request labeled delivery.
func (h *harness) labelInto(base string, n int, sha string) {
	h.t.Helper()
	if _, ok := h.gh.PR(testRepo, n); !ok {
		h.gh.AddPR(testRepo, fakegithub.PR{Number: n, HeadSHA: sha, BaseRef: base, Labels: []string{"automerge"}})
	}
	h.mustSend("pull_request", h.edit(h.prPayload("labeled", n, sha, "automerge"), func(m map[string]any) {
		obj(obj(m, "pull_request"), "base")["ref"] = base
	}))
}

// edit applies fn to a JSON payload.
func (h *harness) edit(body []byte, fn func(m map[string]any)) []byte {
	h.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		h.t.Fatal(err)
	}
	fn(m)
	out, err := json.Marshal(m)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// review submits login's review (APPROVED, CHANGES_REQUESTED) of PR n on
// the fake GitHub and delivers GitHub's pull_request_review submitted.
func (h *harness) review(n int, login, state string) {
	h.t.Helper()
	h.gh.AddReview(testRepo, n, login, state)
	pr, _ := h.gh.PR(testRepo, n)
	h.mustSend("pull_request_review", h.fixture("pull_request_review/submitted.payload.json", func(m map[string]any) {
		m["action"] = "submitted"
		rv := obj(m, "review")
		rv["state"] = strings.ToLower(state) // the webhook's review.state is lower case
		rv["commit_id"] = pr.HeadSHA
		obj(rv, "user")["login"] = login
		p := obj(m, "pull_request")
		p["number"] = n
		obj(p, "head")["sha"] = pr.HeadSHA
		obj(p, "base")["ref"] = pr.BaseRef
		var ls []any
		for _, l := range pr.Labels {
			ls = append(ls, map[string]any{"name": l})
		}
		p["labels"] = ls
		obj(m, "repository")["full_name"] = testRepo
	}))
}

// queueEntry is an entry of GET /queue as an operator reads it.
type queueEntry struct {
	PRNumber   int    `json:"prNumber"`
	PRSha      string `json:"prSha"`
	Status     string `json:"status"`
	BaseRef    string `json:"baseRef"`
	GateReason string `json:"gateReason"`
}

// adminQueue reads GET /queue for the test repository.
func (h *harness) adminQueue() []queueEntry {
	h.t.Helper()
	resp, err := http.Get(h.admin + "/queue?tenant=" + testTenant + "&repo=" + url.QueryEscape(testRepo))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET /queue = %d", resp.StatusCode)
	}
	var v struct {
		Queue []queueEntry `json:"queue"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		h.t.Fatal(err)
	}
	return v.Queue
}

// metric reads one sample of GET /metrics (0 when absent).
func (h *harness) metric(sample string) float64 {
	h.t.Helper()
	resp, err := http.Get(h.admin + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				h.t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// lastCheckRun is the last write to mergegate's check run on sha.
func (h *harness) lastCheckRun(sha string) fakegithub.CheckRunWrite {
	h.t.Helper()
	runs := h.gh.CheckRuns()
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].HeadSHA == sha {
			return runs[i]
		}
	}
	h.t.Fatalf("no check run written on %s", sha)
	return fakegithub.CheckRunWrite{}
}

// noBounce fails when anyone was bounced: a comment, a label removed, a
// bounce in the audit.
func (h *harness) noBounce() {
	h.t.Helper()
	if c := h.gh.Comments(); len(c) != 0 {
		h.t.Fatalf("comments posted: %+v", c)
	}
	if lr := h.gh.LabelsRemoved(); len(lr) != 0 {
		h.t.Fatalf("labels removed: %+v", lr)
	}
	audit, err := h.app.Store.Audit(h.t.Context(), testKey)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, a := range audit {
		if a.Action == leasedo.AuditBounce || a.Action == leasedo.AuditGateFailure {
			h.t.Fatalf("audit has %s: %+v", a.Action, a)
		}
	}
}

// A PR into release-1.x that waits for CI never holds back green
// PRs into the default branch; GET /queue and the check run titles name
// each entry's branch.
func TestRulesQueuesPerBaseBranch(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.gh.SetRequired(testRepo, releaseBase, []string{"ci/build"}, false)
	h.labelInto(releaseBase, 1, shaA) // first in line, its CI never reports
	h.clock.Advance(time.Second)
	h.labelInto(testBase, 2, shaB)
	h.clock.Advance(time.Second)
	h.labelInto(testBase, 3, shaC)
	h.settle()

	want := map[int]string{1: releaseBase, 2: testBase, 3: testBase}
	q := h.adminQueue()
	if len(q) != 3 {
		t.Fatalf("GET /queue = %+v, want 3 entries", q)
	}
	for _, e := range q {
		if e.BaseRef != want[e.PRNumber] {
			t.Fatalf("GET /queue: #%d baseRef %q, want %q (%+v)", e.PRNumber, e.BaseRef, want[e.PRNumber], q)
		}
	}
	titles := map[string]string{
		shaA: "First in line for release-1.x: ",
		shaB: "First in line for master: ",
		shaC: "In the merge queue for master: ",
	}
	for sha, prefix := range titles {
		if got := h.lastCheckRun(sha).Title; !strings.HasPrefix(got, prefix) {
			t.Fatalf("check run title on %s = %q, want it to start %q", forge.ShortSHA(sha), got, prefix)
		}
	}

	h.pass(shaC)
	h.pass(shaB)
	h.eventually("both PRs into master merged", func() bool { return len(h.merges()) == 2 })
	h.settle()
	if m := h.merges(); m[0].PRNumber != 2 || m[1].PRNumber != 3 {
		t.Fatalf("merges = %+v, want #2 then #3", m)
	}
	if q := h.queue(); len(q) != 1 || q[0].PRNumber != 1 || q[0].Status != leasedo.StatusEvaluating || q[0].BaseRef != releaseBase {
		t.Fatalf("queue = %+v, want #1 into %s still waiting for CI", q, releaseBase)
	}
	h.pass(shaA)
	h.eventually("the release PR merged", func() bool { return len(h.merges()) == 3 })
	h.noBounce()
}

// Mergeable null: right after a merge moved the base GitHub is
// still working out the second PR's mergeability (it refuses a merge with
// "Base branch was modified" then, and answers mergeable null); on a
// strict base the second of two green PRs is tried again after a pause,
// updated from its base and merged, not bounced.
func TestRulesMergeableUnknownWaitsThenUpdatesOnStrictBase(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.label(1, shaA)
	h.clock.Advance(time.Second)
	h.label(2, shaB)
	h.pass(shaA)
	h.pass(shaB)
	h.eventually("#1 merged and #2's branch updated", func() bool {
		return len(h.merges()) == 1 && len(h.gh.BranchUpdates()) == 1
	})
	h.settle()
	if !strings.Contains(h.logBuf.String(), "GitHub is still working out whether it can be merged") || h.gh.CallCount(fakegithub.RouteMerge) != 1 {
		t.Fatal("GitHub's computing after the base moved was not waited on (no such wait in the log)")
	}
	up := h.gh.BranchUpdates()[0]
	if up.PRNumber != 2 || up.FromSHA != shaB {
		t.Fatalf("branch update = %+v, want #2 from %s", up, shaB)
	}
	h.mustSend("pull_request", h.prPayload("synchronize", 2, up.ToSHA, "automerge"))
	h.pass(up.ToSHA)
	h.eventually("#2 merged", func() bool { return len(h.merges()) == 2 })
	if m := h.merges()[1]; m.PRNumber != 2 || m.SHA != up.ToSHA {
		t.Fatalf("second merge = %+v, want #2 at its updated head %s", m, up.ToSHA)
	}
	h.noBounce()
}

// Reviews: with a required approval missing the entry waits and
// its check run says so; changes requested names the reviewer; an approval
// (a pull_request_review delivery) moves it on to the merge. Nobody is
// bounced.
func TestRulesMissingReviewWaitsApprovalMerges(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.gh.SetRequiredReviews(testRepo, testBase, 1, false)
	h.label(4, shaA)
	h.pass(shaA)
	h.eventually("the wait for a review", func() bool {
		q := h.queue()
		return len(q) == 1 && q[0].GateReason == "waiting for an approving review"
	})
	h.settle()
	if q := h.queue(); q[0].Status != leasedo.StatusGatePassed {
		t.Fatalf("entry = %+v, want gate_passed", q[0])
	}
	if got, want := h.lastCheckRun(shaA).Title, "First in line for master: waiting for an approving review"; got != want {
		t.Fatalf("check run title = %q, want %q", got, want)
	}
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 0 {
		t.Fatalf("merge calls = %d while the review is missing, want 0", n)
	}

	h.review(4, "hubot", "CHANGES_REQUESTED")
	h.eventually("the wait on the requested changes", func() bool {
		q := h.queue()
		return len(q) == 1 && q[0].GateReason == "changes requested by @hubot"
	})
	h.settle()
	if got := h.lastCheckRun(shaA).Title; !strings.HasSuffix(got, "changes requested by @hubot") {
		t.Fatalf("check run title = %q, want it to name @hubot", got)
	}

	h.review(4, "hubot", "APPROVED")
	h.eventually("the merge after the approval", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.PRNumber != 4 || m.SHA != shaA {
		t.Fatalf("merge = %+v", m)
	}
	h.settle()
	h.noBounce()
}

// 405 "Base branch was modified": the merge is tried again after a
// short pause and succeeds; the PR is not bounced.
func TestRulesBaseModifiedIsRetried(t *testing.T) {
	h := newHarness(t)
	h.label(5, shaA)
	h.settle()
	h.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultBaseModified())
	h.pass(shaA)
	h.eventually("the merge after the retry", func() bool { return len(h.merges()) == 1 })
	h.settle()
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 2 {
		t.Fatalf("merge calls = %d, want 2 (the refused one and the retry)", n)
	}
	h.noBounce()
}

// 405 "not mergeable" while GitHub reports the pull request mergeable and
// clean, again and again: tried rules.MaxRetries times more after short
// pauses, then its author is told (it is not retried forever).
func TestRulesNotMergeableForNoReasonBouncesAfterRetries(t *testing.T) {
	h := newHarness(t)
	h.label(5, shaA)
	h.settle()
	h.gh.Fail(fakegithub.RouteMerge, 100, fakegithub.FaultStatus(http.StatusMethodNotAllowed, fakegithub.MsgNotMergeable))
	h.pass(shaA)
	// The pauses double (1 s, 2 s, ... 16 s): the clock is moved to each.
	h.eventually("the bounce", func() bool {
		if at, ok := h.clock.NextTimer(); ok {
			h.clock.Set(at)
		}
		return len(h.gh.Comments()) == 1
	})
	h.settle()
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != rules.MaxRetries+1 {
		t.Errorf("merge calls = %d, want %d (the first and %d retries)", n, rules.MaxRetries+1, rules.MaxRetries)
	}
	if c := h.gh.Comments()[0].Body; !strings.Contains(c, fakegithub.MsgNotMergeable) {
		t.Errorf("the author read %q", c)
	}
}

// 422 from update-branch because the head moved: the new head is
// gated again, and never merged before its own checks pass.
func TestRulesUpdateBranchHeadMovedRegatesNewHead(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.label(6, shaA)
	h.gh.SetBehind(testRepo, 6, true)
	h.settle()
	// Hold the update a moment; the push lands meanwhile, so GitHub itself
	// answers 422 "expected head sha didn't match current head ref.".
	h.gh.Fail(fakegithub.RouteUpdateBranch, 1, fakegithub.FaultDelay(300*time.Millisecond))
	h.pass(shaA)
	h.eventually("the update in flight", func() bool { return h.gh.FaultsLeft(fakegithub.RouteUpdateBranch) == 0 })
	h.gh.SetHead(testRepo, 6, shaB)
	h.eventually("a re-gate at the new head after the 422", func() bool {
		q := h.queue()
		return len(q) == 1 && q[0].PRSha == shaB
	})
	h.mustSend("pull_request", h.prPayload("synchronize", 6, shaB, "automerge"))
	h.settle()
	if len(h.merges()) != 0 || len(h.gh.BranchUpdates()) != 0 {
		t.Fatalf("acted on the untested head: merges %+v, updates %+v", h.merges(), h.gh.BranchUpdates())
	}
	if n := h.gh.CallCount(fakegithub.RouteUpdateBranch); n != 1 {
		t.Fatalf("update-branch calls = %d, want the one refused with 422", n)
	}
	if q := h.queue(); q[0].Status == leasedo.StatusGatePassed {
		t.Fatalf("after the push, before its checks: %+v", q[0])
	}
	// The new head is still behind: once its checks pass it is updated,
	// and the updated head merges after its own checks.
	h.pass(shaB)
	h.eventually("the update of the new head", func() bool { return len(h.gh.BranchUpdates()) == 1 })
	up := h.gh.BranchUpdates()[0]
	if up.FromSHA != shaB {
		t.Fatalf("branch update = %+v, want from %s", up, shaB)
	}
	h.mustSend("pull_request", h.prPayload("synchronize", 6, up.ToSHA, "automerge"))
	h.pass(up.ToSHA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.SHA != up.ToSHA {
		t.Fatalf("merged %s, want the tested head %s", m.SHA, up.ToSHA)
	}
	h.noBounce()
}

// A squash-only repository merges with squash although
// --merge-method is merge, and the check run's final summary says why.
// mergegate learns the repository's methods from GitHub's first refusal
// (and the pull request read after it) rather than reading them before
// every lifecycle: one refused try, once; the next PR merges at once.
func TestRulesSquashOnlyRepositoryMergesWithSquash(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MergeMethod = "merge" })
	h.gh.SetMergeMethods(testRepo, fakegithub.MergeMethods{Squash: true})
	h.label(7, shaA)
	h.pass(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.settle()
	if m := h.merges()[0]; m.Method != "squash" {
		t.Fatalf("merge = %+v, want squash", m)
	}
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 2 {
		t.Fatalf("merge calls = %d, want 2 (one refused for its method, then squash)", n)
	}
	last := h.lastCheckRun(shaA)
	want := "Merged at aaaaaaa, the commit whose checks passed, with squash, not merge (--merge-method): the repository does not allow it."
	if last.Conclusion != "success" || last.Summary != want {
		t.Fatalf("final check run = %q (%s)\nwant summary      %q", last.Summary, last.Conclusion, want)
	}
	h.label(8, shaB)
	h.pass(shaB)
	h.eventually("the second merge", func() bool { return len(h.merges()) == 2 })
	if m := h.merges()[1]; m.Method != "squash" {
		t.Fatalf("second merge = %+v, want squash", m)
	}
	if n := h.gh.CallCount(fakegithub.RouteMerge); n != 3 {
		t.Fatalf("merge calls = %d, want 3 (the second PR merged with squash at once)", n)
	}
	h.noBounce()
}

// A PR queued through GitHub auto-merge, its author having chosen
// rebase, merges with rebase (allowed) although --merge-method is squash.
func TestRulesAutoMergeMethodIsTheAuthors(t *testing.T) {
	h := newHarness(t) // --merge-method squash
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 8, HeadSHA: shaA, BaseRef: testBase, AutoMerge: true, AutoMergeMethod: "rebase"})
	h.mustSend("pull_request", h.edit(h.prPayload("auto_merge_enabled", 8, shaA), func(m map[string]any) {
		obj(m, "pull_request")["auto_merge"] = map[string]any{
			"enabled_by":     obj(obj(m, "pull_request"), "user"),
			"merge_method":   "rebase",
			"commit_title":   "Pull request 8",
			"commit_message": "",
		}
	}))
	h.pass(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.settle()
	if m := h.merges()[0]; m.PRNumber != 8 || m.Method != "rebase" {
		t.Fatalf("merge = %+v, want #8 with rebase", m)
	}
	want := "Merged at aaaaaaa, the commit whose checks passed, with rebase (the method chosen with auto-merge)."
	if s := h.lastCheckRun(shaA).Summary; s != want {
		t.Fatalf("final check run summary = %q\nwant                        %q", s, want)
	}
}

// Problems only the operator can fix (a base on GitHub's merge
// queue, a workflows change without the permission, a base the App may not
// push to) bounce nobody: the label stays, GET /queue says blocked and what
// to change, so does the check run, a metric counts it, the log says it
// once however many passes try again, and once fixed a cron pass merges.
func TestRulesOperatorProblemsBlockNotBounce(t *testing.T) {
	cases := []struct {
		name, problem, reason string
		setUp, fix            func(h *harness)
	}{
		{
			name: "workflows", problem: "workflows",
			reason: "give the App \"Workflows: read and write\"",
			setUp: func(h *harness) {
				h.gh.AddPR(testRepo, fakegithub.PR{Number: 9, HeadSHA: shaA, BaseRef: testBase, TouchesWorkflows: true})
			},
			fix: func(h *harness) { h.gh.SetWorkflowsPermission(true) },
		},
		{
			name: "push restricted", problem: "not_authorized",
			reason: "mergegate may not push to master",
			setUp:  func(h *harness) { h.gh.SetPushRestricted(testRepo, testBase, true) },
			fix:    func(h *harness) { h.gh.SetPushRestricted(testRepo, testBase, false) },
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			c.setUp(h)
			h.label(9, shaA)
			h.pass(shaA)
			h.eventually("the entry blocked", func() bool {
				q := h.queue()
				return len(q) == 1 && q[0].Status == leasedo.StatusBlocked
			})
			h.settle()
			sample := `mergegate_blocked_total{problem="` + c.problem + `"}`
			check := func(when string) {
				t.Helper()
				h.noBounce()
				if len(h.merges()) != 0 {
					t.Fatalf("%s: merged: %+v", when, h.merges())
				}
				q := h.adminQueue()
				if len(q) != 1 || q[0].Status != leasedo.StatusBlocked || !strings.Contains(q[0].GateReason, c.reason) {
					t.Fatalf("%s: GET /queue = %+v, want #9 blocked with %q", when, q, c.reason)
				}
				run := h.lastCheckRun(shaA)
				if !strings.HasPrefix(run.Title, "Blocked until an administrator acts: ") ||
					!strings.Contains(run.Title, c.reason) || !strings.Contains(run.Summary, c.reason) || run.Status == "completed" {
					t.Fatalf("%s: check run = %+v, want it to say what the operator must change", when, run)
				}
				if pr, _ := h.gh.PR(testRepo, 9); len(pr.Labels) != 1 {
					t.Fatalf("%s: labels = %v, want automerge kept", when, pr.Labels)
				}
				if n := h.metric(sample); n != 1 {
					t.Fatalf("%s: %s = %v, want 1", when, sample, n)
				}
				if n := strings.Count(h.logBuf.String(), "blocked: the operator must act"); n != 1 {
					t.Fatalf("%s: the log says blocked %d times, want once", when, n)
				}
			}
			check("blocked")
			for range 2 {
				h.clock.Advance(2 * time.Minute)
				if _, err := h.app.Reconciler.Pass(t.Context(), testKey); err != nil {
					t.Fatal(err)
				}
				h.settle()
			}
			check("after two cron passes")

			c.fix(h)
			h.clock.Advance(2 * time.Minute) // past the cache of the base's rules
			if _, err := h.app.Reconciler.Pass(t.Context(), testKey); err != nil {
				t.Fatal(err)
			}
			h.eventually("the merge once fixed", func() bool { return len(h.merges()) == 1 })
			if m := h.merges()[0]; m.PRNumber != 9 || m.SHA != shaA {
				t.Fatalf("merge = %+v", m)
			}
			h.noBounce()
		})
	}
}

// Tried as a new user would: a strict base with one required approval, a
// squash-only repository and --merge-method left at merge; three labelled
// PRs whose CI and approvals arrive in mixed order (CI for #3 first, the
// approval of #1 last), and CI runs again on every branch mergegate
// updates. All three merge, in queue order, with squash; none is bounced.
func TestRulesTriedAsANewUserWould(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MergeMethod = "merge" }) // the CLI's default
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.gh.SetRequiredReviews(testRepo, testBase, 1, false)
	h.gh.SetMergeMethods(testRepo, fakegithub.MergeMethods{Squash: true})
	shas := map[int]string{1: shaA, 2: shaB, 3: shaC}
	for _, n := range []int{1, 2, 3} {
		h.label(n, shas[n])
		h.clock.Advance(time.Second)
	}
	h.settle()
	h.pass(shaC)
	h.review(2, "hubot", "APPROVED")
	h.pass(shaA)
	h.review(3, "monalisa", "APPROVED")
	h.pass(shaB)
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("merged before #1 was approved: %+v", h.merges())
	}
	h.review(1, "hubot", "APPROVED")
	// CI: every branch mergegate updates is pushed, and its checks pass.
	seen := 0
	h.eventually("three merges", func() bool {
		ups := h.gh.BranchUpdates()
		for ; seen < len(ups); seen++ {
			h.mustSend("pull_request", h.prPayload("synchronize", ups[seen].PRNumber, ups[seen].ToSHA, "automerge"))
			h.pass(ups[seen].ToSHA)
		}
		return len(h.merges()) == 3
	})
	h.settle()
	for i, m := range h.merges() {
		if m.PRNumber != i+1 || m.Method != "squash" {
			t.Fatalf("merge %d = %+v, want #%d with squash", i, m, i+1)
		}
	}
	t.Logf("branch updates: %d", len(h.gh.BranchUpdates()))
	h.noBounce()
}

// The call budget of one join → gate → merge lifecycle where CI reports
// after the PR joined, the base's rules read for the first time: at most 8
// rate-limited calls (the protection and the rulesets, the check runs and
// statuses at the join, mergegate's check run, the check runs after CI,
// the merge, the check run's end). The test logs them by route.
func TestRulesCallBudgetCIAfterJoin(t *testing.T) {
	const today = 8
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 11, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}})
	h.gh.ResetCalls()
	used := h.gh.RateLimitUsed()
	h.mustSend("pull_request", h.prPayload("labeled", 11, shaA, "automerge"))
	h.settle()
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	h.checkSuite(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.settle()
	used = h.gh.RateLimitUsed() - used

	n, byRoute, free := 0, map[string]int{}, 0
	for _, c := range h.gh.Calls() {
		switch {
		case c.Route == fakegithub.RouteCreateToken:
		case c.NotModified:
			free++
		default:
			n++
			byRoute[c.Route]++
		}
	}
	routes := make([]string, 0, len(byRoute))
	for r := range byRoute {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	var lines []string
	for _, r := range routes {
		lines = append(lines, strconv.Itoa(byRoute[r])+" × "+r)
	}
	t.Logf("rate-limited calls for one lifecycle, CI after the join: %d (rate-limit points used: %d; 304s: %d)\n  %s",
		n, used, free, strings.Join(lines, "\n  "))
	if n > today {
		t.Fatalf("%d rate-limited calls for one lifecycle, want at most %d:\n  %s", n, today, strings.Join(lines, "\n  "))
	}
}

// GitHub sends pull_request_review submitted for an approval, and a read
// of the reviews a moment later may not count it yet: the reviews are
// read again a second later, and the pull request merges then, not at the
// cron's next read.
func TestLaggingReadOfAnApprovalIsReadAgain(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequiredReviews(testRepo, testBase, 1, false)
	h.label(8, shaA)
	h.pass(shaA)
	h.eventually("waiting for an approval", func() bool {
		q := h.queue()
		return len(q) == 1 && strings.Contains(q[0].GateReason, "approving review")
	})
	h.settle()
	h.gh.SetStaleReviewReads(testRepo, 8, 1)
	h.review(8, "alice", "APPROVED")
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.noBounce()
}
