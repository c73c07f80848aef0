package app

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
)

// pushPolicyIn is a push to fullName's default branch that modified its
// policy file.
func (h *harness) pushPolicyIn(fullName, defaultBranch string) {
	h.t.Helper()
	h.mustSend("push", h.fixture("push/with-new-branch.payload.json", func(m map[string]any) {
		m["ref"] = "refs/heads/" + defaultBranch
		m["after"] = fakegithub.DeriveSHA(fullName, "push", h.clock.Now().String())
		repo := obj(m, "repository")
		repo["default_branch"], repo["full_name"] = defaultBranch, fullName
		repo["name"] = fullName[strings.Index(fullName, "/")+1:]
		m["commits"] = []any{map[string]any{"id": "c1", "added": []any{}, "removed": []any{}, "modified": []any{policy.Path}}}
	}))
}

// labelWith: PR n on the fake GitHub with labels, and its labeled
// delivery.
func (h *harness) labelWith(n int, sha, base string, labels ...string) {
	h.t.Helper()
	if _, ok := h.gh.PR(testRepo, n); !ok {
		h.gh.AddPR(testRepo, fakegithub.PR{Number: n, HeadSHA: sha, BaseRef: base, Labels: labels, Author: "octocat"})
	} else {
		h.gh.SetLabels(testRepo, n, labels...)
	}
	h.mustSend("pull_request", h.prPayloadBase("labeled", n, sha, base, labels...))
}

func (h *harness) policyView() *PolicyView {
	h.t.Helper()
	var qv QueueView
	getJSON(h.t.(*testing.T), h.admin+"/queue?tenant="+testTenant+"&repo="+url.QueryEscape(testRepo), &qv)
	return qv.Policy
}

// Issue 31 point 2: a push that thaws the queue, or takes a label off
// blocking_labels, lets the held pull requests merge at once, not at the
// cron's next pass (an hour away in the harness, never run by it).
func TestPolicyChangeMovesTheQueueAtOnce(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "frozen: true\nfreeze_message: release on Friday\nblocking_labels: [hold]\n")
	h.pushPolicy()
	h.settle()
	h.label(1, shaA)
	h.pass(shaA)
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("a frozen queue merged: %+v", h.merges())
	}
	if got := h.lastTitle(shaA); !strings.Contains(got, "frozen: release on Friday") {
		t.Fatalf("#1's check run while frozen = %q", got)
	}
	h.gh.SetFile(testRepo, policy.Path, "blocking_labels: [hold]\n")
	h.pushPolicy()
	h.eventually("#1 merged once the push thawed the queue", func() bool { return len(h.merges()) == 1 })

	h.labelWith(2, shaB, testBase, "automerge", "hold")
	h.pass(shaB)
	h.settle()
	if len(h.merges()) != 1 {
		t.Fatalf("#2 with hold merged: %+v", h.merges())
	}
	h.gh.SetFile(testRepo, policy.Path, "blocking_labels: []\n")
	h.pushPolicy()
	h.eventually("#2 merged once hold is no longer a blocking label", func() bool { return len(h.merges()) == 2 })
	if !strings.Contains(h.logBuf.String(), `"message":"policy changed: the queue is read again under it"`) {
		t.Errorf("the log does not say the queue was read again")
	}
}

// Issue 31 point 3: a pull request whose labeled delivery was translated
// under the old triggers joins when the push that adds its label to
// trigger_labels is read, not at the cron's pass.
func TestTriggerLabelAddedByAPolicyChange(t *testing.T) {
	h := newHarness(t)
	h.labelWith(1, shaA, testBase, "ship-it")
	h.settle()
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("joined under the defaults (automerge): %+v", q)
	}
	h.gh.SetFile(testRepo, policy.Path, "trigger_labels: [ship-it]\n")
	h.pushPolicy()
	h.eventually("#1 queued under the new trigger", func() bool { return len(h.queue()) == 1 })
	h.pass(shaA)
	h.eventually("#1 merged", func() bool { return len(h.merges()) == 1 })

	// And the other way: a label the file no longer lists takes its pull
	// request out.
	h.labelWith(2, shaB, testBase, "ship-it")
	h.eventually("#2 queued", func() bool { return len(h.queue()) == 1 })
	h.gh.SetFile(testRepo, policy.Path, "trigger_labels: [lgtm]\n")
	h.clock.Advance(time.Minute) // past the resync's grace for an entry that just joined
	h.pushPolicy()
	h.eventually("#2 out of the queue", func() bool { return len(h.queue()) == 0 })
}

// Issue 31 point 3, the first delivery of a repository: mergegate has not
// read its file yet, the delivery is translated under the defaults; the
// sync that reads the file decides under it.
func TestFirstDeliveryOfARepositoryWithItsOwnTriggers(t *testing.T) {
	h := newHarness(t)
	const fresh = "Codertocat/fresh"
	h.gh.AddRepo(testTenant, fresh, testBase)
	h.gh.SetFile(fresh, policy.Path, "trigger_labels: [ship-it]\nmerge_method: rebase\n")
	h.gh.AddPR(fresh, fakegithub.PR{Number: 5, HeadSHA: shaC, BaseRef: testBase, Labels: []string{"ship-it"}})
	h.mustSend("pull_request", h.prPayloadIn(fresh, "labeled", 5, shaC, "ship-it"))
	key := leasedo.Key{Tenant: testTenant, Repo: fresh}
	h.eventually("#5 of a repository first heard of queued", func() bool {
		items, err := h.app.Store.Items(t.Context(), key)
		return err == nil && len(items) == 1
	})
	h.gh.SetCheckRun(fresh, shaC, "ci/build", "completed", "success")
	h.mustSend("check_suite", h.fixture("check_suite/completed.payload.json", func(m map[string]any) {
		obj(m, "check_suite")["head_sha"] = shaC
		obj(m, "check_suite")["pull_requests"] = []any{}
		obj(m, "repository")["full_name"] = fresh
	}))
	h.eventually("#5 merged", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.Method != "rebase" {
		t.Errorf("merged with %s, want the file's rebase", m.Method)
	}
}

// Issue 31 point 2, the organisation's file: a push to <owner>/.github
// that thaws it moves every repository that falls back on it at once.
func TestOrganisationPolicyChangeMovesItsRepositories(t *testing.T) {
	h := newHarness(t)
	const org = "Codertocat/.github"
	h.gh.AddRepo(testTenant, org, "main")
	h.gh.SetFile(org, policy.Path, "frozen: true\nfreeze_message: org-wide freeze\n")
	h.pushPolicyIn(org, "main")
	h.settle()
	h.label(1, shaA)
	h.pass(shaA)
	h.settle()
	if len(h.merges()) != 0 || !strings.Contains(h.lastTitle(shaA), "frozen: org-wide freeze") {
		t.Fatalf("merges %+v, title %q: want frozen by the organisation's file", h.merges(), h.lastTitle(shaA))
	}
	h.gh.SetFile(org, policy.Path, "frozen: false\n")
	h.pushPolicyIn(org, "main")
	h.eventually("#1 merged once the organisation's file thawed", func() bool { return len(h.merges()) == 1 })
}

// Issue 31 point 5: a file GitHub will not send (over 1 MB: 403
// too_large) or over mergegate's 256 KiB is a problem of the file like any
// other: shown in GET /queue and on the check runs, logged once per
// version, the last good policy kept.
func TestPolicyFileTooLarge(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "merge_method: rebase\n")
	h.pushPolicy()
	h.label(1, shaA)
	h.settle()

	h.gh.SetFile(testRepo, policy.Path, "merge_method: squash\n"+strings.Repeat("#", 1<<20))
	h.pushPolicy()
	h.settle()
	pv := h.policyView()
	if pv == nil || len(pv.Problems) != 1 || pv.Problems[0].Msg != "the file is 1,048,597 bytes: mergegate reads a policy file of at most 262,144 bytes (256 KiB); a policy is a few lines, make it smaller" {
		t.Fatalf("GET /queue policy = %+v", pv)
	}
	if got := h.lastTitle(shaA); !strings.Contains(got, "has a problem") {
		t.Errorf("#1's check run = %q", got)
	}
	h.pushPolicy() // the same version again: said already
	h.settle()
	if n := strings.Count(h.logBuf.String(), "policy file has problems"); n != 1 {
		t.Errorf("logged %d times for one version, want once", n)
	}
	if strings.Contains(h.logBuf.String(), "could not read the repository's policy file") {
		t.Errorf("a too large file is logged as a read failure")
	}

	h.gh.SetFile(testRepo, policy.Path, "merge_method: squash\n"+strings.Repeat("#", 300<<10))
	h.pushPolicy()
	h.settle()
	if pv := h.policyView(); len(pv.Problems) != 1 || !strings.Contains(pv.Problems[0].Msg, "the file is 307,221 bytes") {
		t.Fatalf("a file of 300 KiB: %+v", pv)
	}
	if n := strings.Count(h.logBuf.String(), "policy file has problems"); n != 2 {
		t.Errorf("logged %d times for two versions", n)
	}
	h.pass(shaA)
	h.eventually("#1 merged", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.Method != "rebase" {
		t.Errorf("merged with %s, want rebase (the last good file)", m.Method)
	}
}

// Freezes per base branch, from the file and from the admin API: the
// frozen base's queue waits, the others merge; thawed, it goes on.
func TestFreezePerBaseBranch(t *testing.T) {
	h := newHarness(t)
	const release = "release-1.x"
	h.gh.SetFile(testRepo, policy.Path, "base_branches:\n  "+release+":\n    frozen: true\n    freeze_message: release week\n")
	h.pushPolicy()
	h.settle()
	h.labelWith(1, shaA, testBase, "automerge")
	h.labelWith(2, shaB, release, "automerge")
	h.pass(shaA)
	h.pass(shaB)
	h.eventually("#1 on master merged", func() bool { return len(h.merges()) == 1 })
	h.settle()
	if m := h.merges(); len(m) != 1 || m[0].PRNumber != 1 {
		t.Fatalf("merges = %+v, want #1 only", m)
	}
	if got := h.lastTitle(shaB); !strings.Contains(got, "frozen: release week") {
		t.Errorf("#2's check run = %q", got)
	}
	// The admin API freezes master alone; the file thaws the release.
	var ans map[string]any
	if code := postJSON(t, h.admin+"/freeze", map[string]string{"tenant": testTenant, "repo": testRepo, "branch": testBase, "by": "alice", "message": "master frozen"}, &ans); code != 200 {
		t.Fatalf("POST /freeze: %d %v", code, ans)
	}
	h.labelWith(3, shaC, testBase, "automerge")
	h.pass(shaC)
	h.gh.SetFile(testRepo, policy.Path, "base_branches:\n  "+release+":\n    frozen: false\n")
	h.pushPolicy()
	h.eventually("#2 on the release branch merged once thawed", func() bool { return len(h.merges()) == 2 })
	h.settle()
	if m := h.merges(); len(m) != 2 || m[1].PRNumber != 2 {
		t.Fatalf("merges = %+v: #3 merged on a frozen master", m)
	}
	if got := h.lastTitle(shaC); !strings.Contains(got, "frozen: master frozen") {
		t.Errorf("#3's check run = %q", got)
	}
}

// auto_merge_trigger from the file: off, a pull request with GitHub's
// auto-merge on is not queued; turned on by a push, it joins at once.
func TestAutoMergeTriggerFromTheFile(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "auto_merge_trigger: false\n")
	h.pushPolicy()
	h.settle()
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 4, HeadSHA: shaA, BaseRef: testBase, AutoMerge: true, AutoMergeMethod: "squash"})
	var m map[string]any
	if err := json.Unmarshal(h.prPayload("auto_merge_enabled", 4, shaA), &m); err != nil {
		t.Fatal(err)
	}
	obj(m, "pull_request")["auto_merge"] = map[string]any{"merge_method": "squash", "enabled_by": map[string]any{"login": "octocat"}}
	body, _ := json.Marshal(m)
	h.mustSend("pull_request", body)
	h.settle()
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("queued with auto_merge_trigger: false: %+v", q)
	}
	h.gh.SetFile(testRepo, policy.Path, "auto_merge_trigger: true\n")
	h.pushPolicy()
	h.eventually("#4 queued once auto-merge is a trigger", func() bool { return len(h.queue()) == 1 })
	h.pass(shaA)
	h.eventually("#4 merged", func() bool { return len(h.merges()) == 1 })
}

// update_method per base branch: a branch behind master is updated by a
// merge (the REST update-branch), one behind the release branch, whose
// base_branches entry says rebase, is rebased (GraphQL).
func TestUpdateMethodPerBaseBranch(t *testing.T) {
	h := newHarness(t)
	const release = "release-1.x"
	h.gh.SetFile(testRepo, policy.Path, "base_branches:\n  "+release+":\n    update_method: rebase\n")
	h.pushPolicy()
	h.settle()
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.gh.SetRequired(testRepo, release, []string{"ci/build"}, true)
	h.labelWith(1, shaA, testBase, "automerge")
	h.labelWith(2, shaB, release, "automerge")
	h.gh.SetBehind(testRepo, 1, true)
	h.gh.SetBehind(testRepo, 2, true)
	h.pass(shaA)
	h.pass(shaB)
	h.eventually("both branches updated", func() bool { return len(h.gh.BranchUpdates()) == 2 })
	h.settle()
	methods := map[int]string{}
	for _, u := range h.gh.BranchUpdates() {
		methods[u.PRNumber] = u.Method
	}
	if methods[1] != "merge" || methods[2] != "rebase" {
		t.Errorf("update methods = %v, want #1 merge (master), #2 rebase (%s)", methods, release)
	}
	if n := h.gh.CallCount(fakegithub.RouteUpdateBranch); n != 1 {
		t.Errorf("REST update-branch called %d times, want once (#1)", n)
	}
}

// Issue 31 point 6: a file of 6,000 unknown keys. The check runs list the
// first 50 problems and how many more, and stay far within GitHub's
// 65,535 characters.
func TestManyProblemsStayReadable(t *testing.T) {
	h := newHarness(t)
	var b strings.Builder
	for i := range 6000 {
		b.WriteString("unknown_key_" + strings.Repeat("x", i%40) + "_" + strconv.Itoa(i) + ": 1\n")
	}
	h.gh.SetFile(testRepo, policy.Path, b.String())
	h.pushPolicy()
	h.label(1, shaA)
	h.settle()
	cr := h.lastCheckRun(shaA)
	if !strings.Contains(cr.Summary, `mergegate.yml:1:1: unknown key "unknown_key__0"`) || len(cr.Summary) > 32<<10 {
		t.Fatalf("check run summary of %d bytes: %.300q", len(cr.Summary), cr.Summary)
	}
	pv := h.policyView()
	if ps := policy.Problems(pv.Problems); len(ps) != 51 || ps[0].Line != 1 || ps[0].Column != 1 || ps.Total() != 6000 || ps[50].More != 5950 {
		t.Errorf("GET /queue: %d problems (total %d), first %+v", len(ps), ps.Total(), ps[0])
	}
}
