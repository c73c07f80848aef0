package app

// End-to-end tests of merge trains (docs/trains.md): signed deliveries to
// the real App against the fake GitHub, whose CI simulator runs a check on
// every pushed commit and sends its check_run and check_suite deliveries.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
)

const ciLength = 10 * time.Minute

// trainHarness: the test repository's base runs a train under policyFile,
// requires the CI simulator's check "ci", and the fake GitHub sends its
// deliveries to mergegate.
func trainHarness(t testing.TB, policyFile string, ci fakegithub.CI, opts ...harnessOpt) *harness {
	t.Helper()
	h := newHarness(t, opts...)
	h.gh.SetFile(testRepo, policy.Path, policyFile)
	h.gh.SetRequired(testRepo, testBase, []string{"ci"}, false)
	if ci.Duration == 0 {
		ci.Duration = ciLength
	}
	h.gh.SimulateCI(testRepo, ci)
	h.gh.SetWebhook(h.pub+"/webhook", testSecret)
	h.pushPolicy()
	h.settle()
	return h
}

// open adds PRs n… (each its own file) and labels them, in order.
func (h *harness) openLabeled(ns ...int) {
	h.t.Helper()
	for _, n := range ns {
		pr := h.gh.AddPR(testRepo, fakegithub.PR{Number: n, BaseRef: testBase, Labels: []string{"automerge"}, Author: "octocat"})
		h.mustSend("pull_request", h.prPayload("labeled", n, pr.HeadSHA, "automerge"))
	}
}

// runCI moves the clock from one CI completion to the next, letting
// mergegate act on each, until done holds (or rounds run out). It returns
// the simulated time it took.
func (h *harness) runCI(rounds int, done func() bool) time.Duration {
	h.t.Helper()
	start := h.clock.Now()
	updates := len(h.gh.BranchUpdates())
	for i := 0; i < rounds; i++ {
		h.settle()
		// GitHub sends synchronize for a branch it updated (a serial
		// queue on a strict base asks for that), its sender the App's
		// bot; the fake leaves it to us.
		for ; updates < len(h.gh.BranchUpdates()); updates++ {
			u := h.gh.BranchUpdates()[updates]
			h.mustSend("pull_request", withSender(h.t, h.prPayload("synchronize", u.PRNumber, u.ToSHA, "automerge"), fakegithub.AppBotLogin))
			h.settle()
		}
		if done() {
			return h.clock.Now().Sub(start)
		}
		at, ok := h.gh.NextCIDue()
		// A timer of mergegate's due first (a group waiting for an entry
		// ahead of it: batch_wait) runs first, at its time.
		if next, timer := h.clock.NextTimer(); timer && next.After(h.clock.Now()) && (!ok || next.Before(at)) {
			h.clock.Set(next)
			continue
		}
		if !ok {
			next, timer := h.clock.NextTimer()
			h.t.Fatalf("nothing left running, and not done (busy %d, next timer %v %v, now %v): queue %+v, groups %+v", h.app.Engine.Busy(), next, timer, h.clock.Now(), h.queue(), h.groups())
		}
		if at.After(h.clock.Now()) {
			h.clock.Set(at)
		}
		h.gh.CompleteDueChecks()
	}
	h.t.Fatalf("not done after %d CI rounds: queue %+v, groups %+v", rounds, h.queue(), h.groups())
	return 0
}

// restartTrain restarts mergegate (with loseState, on an empty database)
// and points the fake GitHub's deliveries at its new address.
func (h *harness) restartTrain(loseState bool) {
	h.t.Helper()
	h.restart(loseState)
	h.gh.SetWebhook(h.pub+"/webhook", testSecret)
}

func (h *harness) groups() []leasedo.Group {
	h.t.Helper()
	gs, err := h.app.Store.Groups(context.Background(), testKey)
	if err != nil {
		h.t.Fatal(err)
	}
	return gs
}

func (h *harness) queueEmpty() bool { return len(h.liveQueue()) == 0 }

// liveQueue is the queue without bounced entries.
func (h *harness) liveQueue() []leasedo.Item {
	var out []leasedo.Item
	for _, it := range h.queue() {
		if it.Status != leasedo.StatusBounced {
			out = append(out, it)
		}
	}
	return out
}

// landedOnlyTested checks the promise: every commit the base pointed to
// after start passed the required check "ci" (it was a tested group
// head), the base holds exactly want, and no mergegate branch is left.
func (h *harness) landedOnlyTested(want ...int) {
	h.t.Helper()
	gh := testkit.Forge(h.t, h.gh, forge.Config{})
	passed := func(sha string) bool {
		results, err := gh.CheckResults(context.Background(), testTenant, testRepo, sha)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, r := range results {
			if r.Name == "ci" && r.Conclusion == "success" {
				return true
			}
		}
		return false
	}
	// Tested: the commit passed, or (a serial queue's merge commit) it
	// has the tree of a pull request's head that passed.
	tested := map[string]bool{}
	for _, n := range want {
		pr, _ := h.gh.PR(testRepo, n)
		for _, u := range h.gh.BranchUpdates() {
			if u.PRNumber == n && passed(u.ToSHA) {
				tested[h.gh.TreeOf(testRepo, u.ToSHA)] = true
			}
		}
		if passed(pr.HeadSHA) {
			tested[h.gh.TreeOf(testRepo, pr.HeadSHA)] = true
		}
	}
	history := h.gh.BaseHistory(testRepo, testBase)
	for _, sha := range history[1:] {
		if !passed(sha) && !tested[h.gh.TreeOf(testRepo, sha)] {
			h.t.Errorf("the base moved to %s (holding %v), which was never tested", sha, h.gh.Contains(testRepo, sha))
		}
	}
	tip, _ := h.gh.BranchHead(testRepo, testBase)
	if got := h.gh.Contains(testRepo, tip); !slices.Equal(got, want) {
		h.t.Errorf("the base holds %v, want %v", got, want)
	}
	for _, n := range want {
		if pr, _ := h.gh.PR(testRepo, n); !pr.Merged {
			h.t.Errorf("#%d is not merged on GitHub: %+v", n, pr)
		}
	}
	for _, w := range h.gh.RefWrites() {
		if strings.HasPrefix(w.Branch, leasedo.BranchPrefix) || strings.HasPrefix(w.Branch, leasedo.BuildBranchPrefix) {
			if _, exists := h.gh.BranchHead(testRepo, w.Branch); exists {
				h.t.Errorf("branch %s was left behind", w.Branch)
			}
		}
	}
}

// headMerges counts, for pull requests 1…n, the merges of their heads
// onto mergegate's branches.
func (h *harness) headMerges(n int) map[int]int {
	merged := map[int]int{}
	for _, w := range h.gh.RefWrites() {
		for i := 1; i <= n; i++ {
			if pr, _ := h.gh.PR(testRepo, i); w.Action == "merge" && w.Head == pr.HeadSHA {
				merged[i]++
			}
		}
	}
	return merged
}

// comments returns the comments mergegate wrote on PR n.
func (h *harness) comments(n int) []string {
	var out []string
	for _, c := range h.gh.Comments() {
		if c.PRNumber == n && c.User == "" {
			out = append(out, c.Body)
		}
	}
	return out
}

// Five pull requests that each pass alone, #1 and #3 breaking the base
// together: the first group of four fails, bisection finds #3, which is
// told why; the others land, at tested commits only.
func TestTrainLandsWhatWasTested(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{Breaking: [][2]int{{1, 3}}})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4, 5)
	h.runCI(40, h.queueEmpty)
	h.landedOnlyTested(1, 2, 4, 5)
	got := h.comments(3)
	if len(got) != 1 || !strings.Contains(got[0], "passed its own checks but failed merged together with "+testBase) ||
		!strings.Contains(got[0], `"ci"`) {
		t.Errorf("#3's author read %q, want one sentence saying it failed merged with the base, naming the check", got)
	}
	for _, n := range []int{1, 2, 4, 5} {
		if c := h.comments(n); len(c) != 0 {
			t.Errorf("#%d was told %q", n, c)
		}
	}
	if len(h.merges()) != 0 {
		t.Errorf("fast-forward landing used the merge API: %+v", h.merges())
	}
	if gs := h.groups(); len(gs) != 0 {
		t.Errorf("groups left: %+v", gs)
	}
}

// Two pull requests that pass alone but break the base together: the
// second of them is the culprit, and only it is bounced.
func TestTrainFindsAPairThatBreaksTogether(t *testing.T) {
	h := trainHarness(t, "mode: train\nbatch_size: 4\n", fakegithub.CI{Breaking: [][2]int{{2, 4}}})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4, 5, 6)
	took := h.runCI(60, h.queueEmpty)
	h.landedOnlyTested(1, 2, 3, 5, 6)
	// CI ran on every step of the failed group [1 2 3 4]'s build, so the
	// culprit is known when the group fails: own checks, the group, then
	// [5 6] built again without #4.
	if took > 3*ciLength+time.Minute {
		t.Errorf("the drain took %s, want three CI lengths (%s): the culprit is found in the round its group failed", took, 3*ciLength)
	}
	// Its pieces are tested at their steps of its build, where CI ran:
	// none is pushed nor merged again. The group behind it, [5 6], waits
	// for the culprit to be out and is built once more. Every group is
	// built on the train branch: it is the one branch created.
	for _, w := range h.gh.RefWrites() {
		if w.Action == "create" && strings.HasPrefix(w.Branch, leasedo.BranchPrefix) && w.Branch != "mergegate/"+testBase+"/train" {
			t.Errorf("%s was pushed for a piece whose step CI had run on", w.Branch)
		}
	}
	merged := h.headMerges(6)
	if want := map[int]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 2, 6: 2}; !reflect.DeepEqual(merged, want) {
		t.Errorf("merges of each pull request's head %v, want %v", merged, want)
	}
	// What #4 failed on held #2, landed by then or ahead of it: its
	// author reads that it breaks the base with one of those that landed
	// since its own checks passed, #2 among them.
	if c := h.comments(4); len(c) != 1 || !strings.Contains(c[0], "passed its own checks but failed merged together with "+testBase) ||
		!strings.Contains(c[0], "since its own checks passed, #1, #2 and #3 landed on "+testBase+", and it breaks the base together with one of them") {
		t.Errorf("#4's author read %q", c)
	}
	for _, n := range []int{1, 2, 3, 5, 6} {
		if c := h.comments(n); len(c) != 0 {
			t.Errorf("#%d was told %q", n, c)
		}
	}
}

// Groups follow the queue (issue 32): #2's own checks take longer than
// the others', #4's are done first; #4 does not take #2's place, so of
// the pair that breaks the base together the later, #4, is taken out,
// not #2 (with batch_wait: 0 #4 is grouped first and #2 is bounced).
func TestTrainGroupsFollowTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name, file     string
		culprit, other int
	}{
		{"the default batch_wait", "mode: train\nbatch_size: 2\n", 4, 2},
		{"batch_wait: 0", "mode: train\nbatch_size: 2\nbatch_wait: 0\n", 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := trainHarness(t, tc.file, fakegithub.CI{Breaking: [][2]int{{2, 4}}, Slow: map[string]time.Duration{"feature-2": ciLength + 2*time.Minute}})
			h.gh.AllowPush(testRepo, testBase)
			h.openLabeled(1, 2, 3, 4)
			h.runCI(60, h.queueEmpty)
			var good []int
			for _, n := range []int{1, 2, 3, 4} {
				if n != tc.culprit {
					good = append(good, n)
				}
			}
			h.landedOnlyTested(good...)
			if c := h.comments(tc.culprit); len(c) != 1 || !strings.Contains(c[0], "passed its own checks but failed merged together with "+testBase) {
				t.Errorf("#%d's author read %q", tc.culprit, c)
			}
			if c := h.comments(tc.other); len(c) != 0 {
				t.Errorf("#%d was told %q", tc.other, c)
			}
		})
	}
}

// The second group is built on the first and tests while it does: both
// land within about one CI length of each other, not two.
func TestTrainParallelGroups(t *testing.T) {
	h := trainHarness(t, "mode: train\nbatch_size: 2\nparallel: 2\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4)
	// Each pull request's own CI first (one CI length), then both groups.
	took := h.runCI(20, h.queueEmpty)
	if took > 2*ciLength+time.Minute {
		t.Errorf("four pull requests in two parallel groups took %s, want about two CI lengths (%s)", took, 2*ciLength)
	}
	h.landedOnlyTested(1, 2, 3, 4)
	// CI runs on each step of a group's build, once: not on the commit a
	// group is built on.
	if n := h.gh.CIRuns(testRepo); n != 4+4 {
		t.Errorf("CI ran %d times, want 8 (four pull requests, then each one's step in its group)", n)
	}
}

// Replay landing: each pull request is merged through the merge API with
// its sha guard, and the base ends with the tested tree.
func TestTrainReplayLanding(t *testing.T) {
	h := trainHarness(t, "mode: train\nlanding: replay\nmerge_method: merge\n", fakegithub.CI{})
	h.openLabeled(1, 2, 3)
	h.runCI(20, h.queueEmpty)
	ms := h.merges()
	if len(ms) != 3 {
		t.Fatalf("merges = %+v, want #1, #2, #3 through the merge API", ms)
	}
	for i, m := range ms {
		pr, _ := h.gh.PR(testRepo, m.PRNumber)
		if m.PRNumber != i+1 || m.SHA != pr.HeadSHA || m.Method != "merge" {
			t.Errorf("merge %d = %+v, want #%d at its tested head with merge", i, m, i+1)
		}
	}
	tip, _ := h.gh.BranchHead(testRepo, testBase)
	if got := h.gh.Contains(testRepo, tip); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("the base holds %v", got)
	}
	if frozen := h.app.policies.Load().Freezes(testKey); len(frozen) != 0 {
		t.Errorf("the queue was frozen: %+v", frozen)
	}
}

// A base the App may not push to: the train stops with the base's queue
// frozen and the operator told what to change; nothing is bounced.
func TestTrainFastForwardRefused(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.SetRequiredReviews(testRepo, testBase, 0, false)
	h.gh.SetPushRestricted(testRepo, testBase, true)
	h.openLabeled(1)
	h.runCI(10, func() bool { return len(h.app.policies.Load().Freezes(testKey)) > 0 })
	fr := h.app.policies.Load().Freezes(testKey)
	if len(fr) != 1 || !strings.Contains(fr[0].Message, "landing: replay") || fr[0].By != "mergegate" {
		t.Errorf("freezes = %+v, want one by mergegate saying what to change", fr)
	}
	if c := h.comments(1); len(c) != 0 {
		t.Errorf("#1 was told %q: it is the operator's to fix", c)
	}
	if q := h.liveQueue(); len(q) != 1 {
		t.Errorf("queue = %+v, want #1 waiting", q)
	}
	if title := h.lastTitle(h.liveQueue()[0].PRSha); !strings.HasPrefix(title, "frozen: mergegate may not push") {
		t.Errorf("#1's check run says %q", title)
	}
	// The operator lets the App push and thaws the queue: the group that
	// passed lands.
	h.gh.AllowPush(testRepo, testBase)
	if code, _, body := h.adminDo("POST", "/thaw", `{"tenant":"`+testTenant+`","repo":"`+testRepo+`","branch":"`+testBase+`","by":"alice","message":"the App may push"}`,
		map[string]string{"Content-Type": "application/json"}); code != 200 {
		t.Fatalf("POST /thaw = %d %s", code, body)
	}
	h.runCI(10, h.queueEmpty)
	h.landedOnlyTested(1)
}

// A pull request that conflicts with the one ahead of it is bounced when
// its group is built, saying so; the group is built again without it.
func TestTrainConflictBounces(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	for n := 1; n <= 3; n++ {
		files := map[string]string{fmt.Sprintf("pr/%d.txt", n): "x"}
		if n != 3 {
			files["shared.txt"] = fmt.Sprintf("version %d", n)
		}
		pr := h.gh.AddPR(testRepo, fakegithub.PR{Number: n, BaseRef: testBase, Labels: []string{"automerge"}, Files: files})
		h.mustSend("pull_request", h.prPayload("labeled", n, pr.HeadSHA, "automerge"))
	}
	h.runCI(20, h.queueEmpty)
	h.landedOnlyTested(1, 3)
	if c := h.comments(2); len(c) != 1 || !strings.Contains(c[0], "conflicts with "+testBase+" and the pull requests ahead of it (#1)") {
		t.Errorf("#2's author read %q", c)
	}
}

// The train's last group, of one pull request that conflicts with what
// landed before it, goes, and so do the train's branches.
func TestTrainConflictAloneLeavesNoBranch(t *testing.T) {
	h := trainHarness(t, "mode: train\nbatch_size: 1\nparallel: 1\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	for n := 1; n <= 2; n++ {
		pr := h.gh.AddPR(testRepo, fakegithub.PR{Number: n, BaseRef: testBase, Labels: []string{"automerge"},
			Files: map[string]string{"shared.txt": fmt.Sprintf("version %d", n)}})
		h.mustSend("pull_request", h.prPayload("labeled", n, pr.HeadSHA, "automerge"))
	}
	h.runCI(20, h.queueEmpty)
	h.landedOnlyTested(1)
	if c := h.comments(2); len(c) != 1 {
		t.Errorf("#2's author read %q, want one sentence", c)
	}
}

// A push to a pull request in a group takes it out of the group, which is
// built again without it; the new head is judged afresh.
func TestTrainNewPushLeavesTheGroup(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2)
	h.runCI(10, func() bool { gs := h.groups(); return len(gs) == 1 && gs[0].State == leasedo.GroupTesting })
	// The dashboard shows the group, its branch and state.
	code, _, body := h.adminDo("GET", "/repos/"+testTenant+"/"+testRepo+".json", "", nil)
	var v struct {
		Trains []struct {
			Base    string `json:"base"`
			Landing string `json:"landing"`
			Groups  []struct {
				State  string `json:"state"`
				Branch string `json:"branch"`
				Head   string `json:"headSha"`
				PRs    []leasedo.GroupPR
			} `json:"groups"`
		} `json:"trains"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil || len(v.Trains) != 1 || v.Trains[0].Landing != "fast-forward" ||
		len(v.Trains[0].Groups) != 1 || v.Trains[0].Groups[0].State != leasedo.GroupTesting || !strings.HasPrefix(v.Trains[0].Groups[0].Branch, "mergegate/master/") {
		t.Errorf("dashboard = %d %v %+v", code, err, v)
	}
	code, _, page := h.adminDo("GET", "/repos/"+testTenant+"/"+testRepo, "", nil)
	if code != 200 || !strings.Contains(page, "Merge train for master") || !strings.Contains(page, "#1, #2") {
		t.Errorf("the repository's page does not show the train (%d)", code)
	}
	if g := v.Trains[0].Groups[0]; g.Head == "" || !strings.Contains(page, "/commit/"+g.Head+`">`+forge.ShortSHA(g.Head)+"</a>") {
		t.Errorf("the repository's page does not link group 1's tested commit %s", g.Head)
	}
	newHead := strings.Repeat("9", 40)
	h.gh.SetHead(testRepo, 2, newHead)
	h.mustSend("pull_request", h.prPayload("synchronize", 2, newHead, "automerge"))
	h.settle()
	if gs := h.groups(); len(gs) != 1 || !slices.Equal(gs[0].Numbers(), []int{1}) {
		t.Fatalf("groups after #2's push: %+v, want #1 alone", gs)
	}
	h.runCI(20, h.queueEmpty)
	h.landedOnlyTested(1, 2)
	tip, _ := h.gh.BranchHead(testRepo, testBase)
	if files := h.gh.FilesOf(testRepo, tip); files == nil {
		t.Fatal("no tree for the base")
	}
}

// Crashes in the middle: the landing's push happened but its answer was
// lost; a build stopped half-way; mergegate restarted while groups
// tested, once with its database lost. Nothing lands untested, nothing is
// lost, nothing lands twice.
func TestTrainSurvivesCrashes(t *testing.T) {
	t.Run("landing answered 502 after it happened, then a restart", func(t *testing.T) {
		h := trainHarness(t, "mode: train\n", fakegithub.CI{})
		h.gh.AllowPush(testRepo, testBase)
		h.gh.Fail(fakegithub.RouteUpdateRef, 1, fakegithub.FaultLostAnswer(502))
		h.openLabeled(1, 2)
		h.runCI(10, func() bool { return h.gh.FaultsLeft(fakegithub.RouteUpdateRef) == 0 })
		h.restartTrain(false)
		h.runCI(10, h.queueEmpty)
		h.landedOnlyTested(1, 2)
		if n := len(h.gh.BaseHistory(testRepo, testBase)); n != 2 {
			t.Errorf("the base moved %d times, want once: %v", n-1, h.gh.BaseHistory(testRepo, testBase))
		}
	})
	t.Run("a build stopped half-way, then a restart", func(t *testing.T) {
		h := trainHarness(t, "mode: train\n", fakegithub.CI{})
		h.gh.AllowPush(testRepo, testBase)
		// The second merge into the build branch fails: the group is
		// stored building, its branch half made.
		h.gh.Fail(fakegithub.RouteMergeBranch, 1, fakegithub.FaultStatus(502, "Server Error"))
		h.openLabeled(1, 2)
		h.runCI(10, func() bool { return h.gh.FaultsLeft(fakegithub.RouteMergeBranch) == 0 })
		h.restartTrain(false)
		h.runCI(10, h.queueEmpty)
		h.landedOnlyTested(1, 2)
	})
	t.Run("restarts while groups test, the second with the database lost", func(t *testing.T) {
		h := trainHarness(t, "mode: train\nbatch_size: 2\nparallel: 2\n", fakegithub.CI{Breaking: [][2]int{{1, 4}}})
		h.gh.AllowPush(testRepo, testBase)
		h.openLabeled(1, 2, 3, 4, 5)
		h.runCI(10, func() bool { return len(h.groups()) == 2 && h.groups()[1].State == leasedo.GroupTesting })
		h.restartTrain(false)
		h.runCI(10, func() bool { gs := h.groups(); return len(gs) > 0 && gs[0].State == leasedo.GroupTesting })
		h.restartTrain(true) // the start-up pass rebuilds the queue from GitHub
		h.runCI(40, h.queueEmpty)
		tip, _ := h.gh.BranchHead(testRepo, testBase)
		got := h.gh.Contains(testRepo, tip)
		if slices.Contains(got, 1) && slices.Contains(got, 4) {
			t.Errorf("the base holds both #1 and #4, which break it together: %v", got)
		}
		h.landedOnlyTested(got...)
		if len(got) < 4 {
			t.Errorf("the base holds %v: want all but one of #1 and #4", got)
		}
	})
}

// A failed group's pieces are stored with the commits they are pushed
// at: after a restart in the middle of the split they are pushed, not
// merged again, and the culprit is the later of the pair.
func TestTrainSplitSurvivesARestart(t *testing.T) {
	// CI cancels a branch's run when the branch moves on: the steps
	// before the group's head have no result, and its pieces are pushed.
	h := trainHarness(t, "mode: train\n", fakegithub.CI{Breaking: [][2]int{{2, 4}}, CancelSuperseded: true})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4, 5)
	h.runCI(20, func() bool {
		split := 0
		for _, g := range h.groups() {
			if g.Split && g.State == leasedo.GroupTesting {
				split++
			}
		}
		return split == 4
	})
	h.restartTrain(false)
	h.runCI(40, h.queueEmpty)
	h.landedOnlyTested(1, 2, 3, 5)
	merged := map[int]int{}
	for _, w := range h.gh.RefWrites() {
		for _, n := range []int{1, 2, 3, 4} {
			if pr, _ := h.gh.PR(testRepo, n); w.Action == "merge" && w.Head == pr.HeadSHA {
				merged[n]++
			}
		}
	}
	if want := map[int]int{1: 1, 2: 1, 3: 1, 4: 1}; !reflect.DeepEqual(merged, want) {
		t.Errorf("merges of #1-#4's heads %v, want one each: the pieces are pushed at the group's steps", merged)
	}
	pushed := map[string]int{}
	for _, w := range h.gh.RefWrites() {
		if w.Action == "create" && strings.HasPrefix(w.Branch, leasedo.BranchPrefix) {
			pushed[w.Branch]++
		}
	}
	// The train branch; group 1 ([1 2 3 4]), whose head's run there was
	// cancelled when group 2 ([5]) was merged behind it; and the three
	// pieces whose steps' runs were cancelled: once each.
	want := map[string]int{"mergegate/" + testBase + "/train": 1, "mergegate/" + testBase + "/1": 1}
	for _, g := range h.gh.RefWrites() {
		if id, ok := strings.CutPrefix(g.Branch, "mergegate/"+testBase+"/"); ok && g.Action == "create" && id != "train" && id != "1" {
			want[g.Branch] = 1
		}
	}
	if len(pushed) != 5 || !reflect.DeepEqual(pushed, want) {
		t.Errorf("branches created %v, want the train branch, group 1's own (its run cancelled by the next push) and one for each of the three pieces ahead of the failed group's head", pushed)
	}
	if c := h.comments(4); len(c) != 1 {
		t.Errorf("#4's author read %q, want one sentence", c)
	}
}

// CI that cancels the run a newer push to the branch supersedes cancels a
// group's head on the train branch when the next group is merged behind
// it: the head is pushed to a branch of its own and run again, once, and
// nothing waits for check_timeout. Here the second group fails (#5 and #6
// break the base together), so the first lands on its own second run,
// not on the second group's pass.
func TestTrainCancelledHeadIsRunAgain(t *testing.T) {
	h := trainHarness(t, "mode: train\nbatch_size: 4\nparallel: 2\n", fakegithub.CI{Breaking: [][2]int{{5, 6}}, CancelSuperseded: true})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4, 5, 6, 7)
	took := h.runCI(40, h.queueEmpty)
	h.landedOnlyTested(1, 2, 3, 4, 5, 7)
	created := map[string]int{}
	for _, w := range h.gh.RefWrites() {
		if w.Action == "create" && strings.HasPrefix(w.Branch, leasedo.BranchPrefix) {
			created[w.Branch]++
		}
	}
	if created["mergegate/"+testBase+"/1"] != 1 {
		t.Errorf("branches created %v, want group 1's own once: its head's run on the train branch was cancelled", created)
	}
	if history := h.gh.BaseHistory(testRepo, testBase); len(history) < 2 {
		t.Errorf("the base moved %d times", len(history)-1)
	} else if first := h.gh.Contains(testRepo, history[1]); !slices.Equal(first, []int{1, 2, 3, 4}) {
		t.Errorf("the base moved first to a commit holding %v, want group 1's head [1 2 3 4], landed on its own run", first)
	}
	if took > 4*ciLength+time.Minute {
		t.Errorf("the drain took %s, want at most four CI lengths: nothing waits for check_timeout", took)
	}
	if !strings.Contains(h.logBuf.String(), "merge train group pushed to a branch of its own, for CI to run on its head") {
		t.Error("the log does not say why group 1 was pushed again")
	}
	if c := h.comments(6); len(c) != 1 {
		t.Errorf("#6's author read %q, want one sentence", c)
	}
}

// A group's own branch whose deletion GitHub refused stays until the
// train is empty; then the train's branches are listed (one read) and
// every one of this base's is deleted, that one too.
func TestTrainLeftoverBranchGoesWhenTheTrainEmpties(t *testing.T) {
	h := trainHarness(t, "mode: train\nbatch_size: 4\nparallel: 2\n", fakegithub.CI{Breaking: [][2]int{{5, 6}}, CancelSuperseded: true})
	h.gh.AllowPush(testRepo, testBase)
	h.gh.Fail(fakegithub.RouteDeleteRef, 1, fakegithub.FaultStatus(403, "Resource not accessible by integration"))
	h.openLabeled(1, 2, 3, 4, 5, 6, 7)
	h.runCI(40, h.queueEmpty)
	h.landedOnlyTested(1, 2, 3, 4, 5, 7) // no branch of mergegate's left
	if h.gh.FaultsLeft(fakegithub.RouteDeleteRef) != 0 {
		t.Fatal("no deletion was refused")
	}
	if !strings.Contains(h.logBuf.String(), "could not delete a merge train branch") {
		t.Error("the refused deletion was not logged")
	}
	if n := h.gh.CallCount(fakegithub.RouteMatchingRefs); n == 0 {
		t.Error("the train's branches were never listed")
	}
}

// Left-over branches of groups go twenty per emptying of the train (a
// write each; whoever can create branches can make many), the train's own
// two every time; another base's branches, whose names start with this
// base's, never.
func TestTrainLeftoverBranchesGoTwentyAtATime(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	tip, _ := h.gh.BranchHead(testRepo, testBase)
	for i := 0; i < 25; i++ {
		h.gh.SetBaseHead(testRepo, fmt.Sprintf("mergegate/%s/%d", testBase, 1000+i), tip)
	}
	other := "mergegate/" + testBase + "/1/train" // base master/1's train branch
	h.gh.SetBaseHead(testRepo, other, tip)
	left := func() (n int) {
		for i := 0; i < 25; i++ {
			if _, ok := h.gh.BranchHead(testRepo, fmt.Sprintf("mergegate/%s/%d", testBase, 1000+i)); ok {
				n++
			}
		}
		return n
	}
	h.openLabeled(1)
	h.runCI(20, h.queueEmpty)
	if n := left(); n != 5 {
		t.Errorf("%d left-over branches after the first emptying, want 5 (twenty deleted)", n)
	}
	for _, b := range []string{"mergegate/" + testBase + "/train", "mergegate-build/" + testBase + "/train"} {
		if _, ok := h.gh.BranchHead(testRepo, b); ok {
			t.Errorf("%s is left after the train emptied", b)
		}
	}
	h.openLabeled(2)
	h.runCI(20, h.queueEmpty)
	if n := left(); n != 0 {
		t.Errorf("%d left-over branches after the second emptying, want none", n)
	}
	if _, ok := h.gh.BranchHead(testRepo, other); !ok {
		t.Errorf("%s, another base's, was deleted", other)
	}
}

// GitHub Actions with a concurrency group per branch (and no
// cancel-in-progress) runs the train branch's runs one at a time and
// cancels a waiting run when a newer push joins the group: most steps are
// cancelled and the groups test one after another. The train still lands
// only tested commits and takes out only the later of a breaking pair:
// heads and pieces whose runs were cancelled are pushed to branches of
// their own (other groups); and nothing waits for check_timeout.
func TestTrainCIGroupedPerBranch(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{Breaking: [][2]int{{2, 7}}, GroupPerBranch: true})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	took := h.runCI(80, h.queueEmpty)
	h.landedOnlyTested(1, 2, 3, 4, 5, 6, 8, 9, 10)
	if c := h.comments(7); len(c) != 1 {
		t.Errorf("#7's author read %q, want one sentence", c)
	}
	// Own checks, the first group's head, then the heads and pieces run
	// again on their own branches, then what is behind the culprit; not
	// check_timeout (an hour).
	if took > 6*ciLength {
		t.Errorf("the drain took %s, want at most six CI lengths (%s)", took, 6*ciLength)
	}
}

// A fork's code runs in the repository's CI once it is in a group: it
// enters one only when someone with write permission queued it.
func TestTrainForkNeedsAWriter(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	h.gh.SetRole(testRepo, "member", "write")
	for n, author := range map[int]string{1: "outsider", 2: "member"} {
		pr := h.gh.AddPR(testRepo, fakegithub.PR{Number: n, BaseRef: testBase, Labels: []string{"automerge"}, Author: author, Fork: true})
		h.mustSend("pull_request", h.prPayload("labeled", n, pr.HeadSHA, "automerge"))
	}
	h.runCI(20, func() bool { return len(h.liveQueue()) == 1 && len(h.groups()) == 0 })
	h.landedOnlyTested(2)
	q := h.liveQueue()
	if q[0].PRNumber != 1 || !strings.Contains(q[0].GateReason, "once someone with write permission queues it") {
		t.Errorf("queue = %+v, want #1 waiting for a writer", q)
	}
	for _, w := range h.gh.RefWrites() {
		if w.Head == q[0].PRSha {
			t.Errorf("the outsider's head was merged into %s", w.Branch)
		}
	}
}

// A push to the base outside mergegate while a group tests: the group was
// built on a tip that is no more, so it is built again on the new one,
// and lands there.
func TestTrainRebuildsWhenTheBaseMoves(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2)
	h.runCI(10, func() bool { gs := h.groups(); return len(gs) == 1 && gs[0].State == leasedo.GroupTesting })
	old := h.groups()[0]
	pushed := strings.Repeat("ab", 20)
	h.gh.SetBaseHead(testRepo, testBase, pushed)
	h.mustSend("push", h.fixture("push/with-new-branch.payload.json", func(m map[string]any) {
		m["ref"], m["before"], m["after"] = "refs/heads/"+testBase, old.Parent, pushed
		obj(m, "repository")["default_branch"] = testBase
		obj(m, "repository")["full_name"] = testRepo
		m["commits"] = []any{map[string]any{"id": pushed, "added": []any{"hotfix.txt"}, "removed": []any{}, "modified": []any{}}}
	}))
	h.settle()
	if gs := h.groups(); len(gs) != 1 || gs[0].Parent != pushed {
		t.Errorf("after the push the group is %+v, want it built again on %s", gs, forge.ShortSHA(pushed))
	}
	h.runCI(10, h.queueEmpty)
	tip, _ := h.gh.BranchHead(testRepo, testBase)
	if got := h.gh.Contains(testRepo, tip); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("the base holds %v", got)
	}
	history := h.gh.BaseHistory(testRepo, testBase)
	if len(history) != 3 || history[1] != pushed || history[2] == old.Head {
		t.Errorf("base history %v: want the push, then a group built on it (not %s, built on the old tip)", history, forge.ShortSHA(old.Head))
	}
	if parents := h.gh.Parents(testRepo, tip); len(parents) == 0 {
		t.Errorf("the landed commit has no parents")
	}
}

// A commit someone else pushes onto a group's branches while mergegate
// builds it (onto the build branch between its read and the first merge,
// onto the group's branch between two merges, after the last) is never
// tested nor landed: the next merge's parents, or the branch's tip after
// the last, say so; the group is abandoned, the log tells the operator
// why, and its pull requests are built again in a new group and land
// without the commit.
func TestTrainBuildBranchForeignCommit(t *testing.T) {
	for _, c := range []struct {
		name  string
		push  fakegithub.ForeignPush
		why   string // what the log's reason says ("": nothing to say)
		fresh bool   // reads of the branch are current
	}{
		{"between the read and the first merge", fakegithub.ForeignPush{Prefix: leasedo.BuildBranchPrefix, Merge: 1, Before: true}, "made", false},
		{"between two merges", fakegithub.ForeignPush{Prefix: leasedo.BranchPrefix, Merge: 1}, "made", false},
		{"after the last merge", fakegithub.ForeignPush{Prefix: leasedo.BranchPrefix, Merge: 2}, "after its merges", true},
		// The read after the last merge lags and shows the step before
		// it: the group's own head is tested and landed all the same
		// (the foreign commit is on top of it), and the next build,
		// which reads the branch, goes around it.
		{"after the last merge, read lagging", fakegithub.ForeignPush{Prefix: leasedo.BranchPrefix, Merge: 2}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := trainHarness(t, "mode: train\n", fakegithub.CI{})
			if c.fresh {
				h.gh.SetStaleRefReads(0)
			}
			h.gh.AllowPush(testRepo, testBase)
			c.push.Files = map[string]string{"evil.txt": "never reviewed\n"}
			h.gh.PushForeign(testRepo, c.push)
			h.openLabeled(1, 2, 3)
			h.runCI(30, h.queueEmpty)
			var foreign string
			for _, w := range h.gh.RefWrites() {
				if w.Action == "push" {
					foreign = w.SHA
				}
			}
			if foreign == "" {
				t.Fatal("the foreign commit was never pushed")
			}
			h.landedOnlyTested(1, 2, 3)
			tip, _ := h.gh.BranchHead(testRepo, testBase)
			if _, ok := h.gh.FilesOf(testRepo, tip)["evil.txt"]; ok {
				t.Errorf("the foreign commit's file reached %s", testBase)
			}
			// The one merge onto it is the one that found it (its parents
			// say so); nothing else mergegate wrote holds it.
			onto := 0
			for _, w := range h.gh.RefWrites() {
				if w.SHA == "" || w.SHA == foreign || !slices.Contains(h.gh.Parents(testRepo, w.SHA), foreign) {
					continue
				}
				if onto++; w.Action != "merge" || onto > 1 {
					t.Errorf("mergegate wrote %s at %s, on the foreign commit", w.Branch, forge.ShortSHA(w.SHA))
				}
			}
			log := h.logBuf.String()
			if c.why != "" && (!strings.Contains(log, "merge train group abandoned: its build branch holds a commit mergegate did not make") ||
				!strings.Contains(log, c.why) || !strings.Contains(log, "mergegate*/**")) {
				t.Errorf("the log does not tell the operator why (%q) and what to do:\n%s", c.why, log)
			}
		})
	}
}

// Skip intermediate results: the second group, built on the first, passes
// while the first's CI still runs (its head, #2's step, is slower): both
// land at once at the
// second's commit, one move of the base, without waiting for the first.
func TestTrainSkipsIntermediateResults(t *testing.T) {
	h := trainHarness(t, "mode: train\nbatch_size: 2\nparallel: 2\n",
		fakegithub.CI{Slow: map[string]time.Duration{"#2": 3 * ciLength}})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4)
	took := h.runCI(20, h.queueEmpty)
	h.landedOnlyTested(1, 2, 3, 4)
	if history := h.gh.BaseHistory(testRepo, testBase); len(history) != 2 {
		t.Errorf("the base moved %d times (%v), want once, to the second group's commit", len(history)-1, history)
	}
	// Each pull request's own CI, then the second group's: the first
	// group's three lengths are not waited for.
	if took > 2*ciLength+time.Minute {
		t.Errorf("the drain took %s, want about two CI lengths (%s): the second group's pass proves the first", took, 2*ciLength)
	}
}

// A group ahead whose (flaky, slow) run has not failed yet when the group
// built on it passes is not split or bounced for it: the successor's
// commit holds its pull requests, tested; both land, and nobody is told
// anything. (One that fails before its successor passed is split, as
// before: its successor may fail because of it.)
func TestTrainFailedGroupAheadLandsWithItsSuccessor(t *testing.T) {
	h := trainHarness(t, "mode: train\nbatch_size: 1\nparallel: 4\n",
		fakegithub.CI{Flaky: []string{"#1"}, Slow: map[string]time.Duration{"#1": 2 * ciLength}})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1, 2, 3, 4)
	h.runCI(20, h.queueEmpty)
	h.landedOnlyTested(1, 2, 3, 4)
	for _, n := range []int{1, 2, 3, 4} {
		if c := h.comments(n); len(c) != 0 {
			t.Errorf("#%d was told %q", n, c)
		}
	}
	if n := h.gh.CIRuns(testRepo); n != 4+4 {
		t.Errorf("CI ran %d times, want 8 (four pull requests, four groups of one; nothing run again)", n)
	}
}

// Rules on the train's branches that do not let the App push refuse its
// merges (GitHub: 409 with the push's reason). That is the operator's to
// fix: nobody is bounced for it, the log says what GitHub said, and once
// the rules are gone the train goes on.
func TestTrainProtectedBranchBouncesNobody(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	for _, b := range []string{"mergegate/" + testBase + "/train", "mergegate-build/" + testBase + "/train"} {
		h.gh.SetPushRestricted(testRepo, b, true)
	}
	h.openLabeled(1)
	// Its own CI, then batch_wait, then the build: minutes of the clock.
	h.eventually("GitHub's refusal in the log", func() bool {
		h.clock.Advance(time.Minute)
		return strings.Contains(h.logBuf.String(), fakegithub.MsgNotAuthorized)
	})
	if c := h.comments(1); len(c) != 0 {
		t.Errorf("#1 was told %q: it is the operator's to fix", c)
	}
	if q := h.liveQueue(); len(q) != 1 {
		t.Fatalf("queue = %+v, want #1 waiting", q)
	}
	for _, b := range []string{"mergegate/" + testBase + "/train", "mergegate-build/" + testBase + "/train"} {
		h.gh.RemoveProtection(testRepo, b) // the operator's fix (kept, it would also refuse deleting the branch)
	}
	// The failed step's retry, a minute after the refusal: the test may
	// see the refusal's log line before the engine set that timer, so the
	// clock moves a minute at a time until the build is made.
	h.eventually("the build once the operator removed the rules", func() bool {
		h.clock.Advance(time.Minute)
		return strings.Contains(h.logBuf.String(), "merge train group built")
	})
	h.runCI(20, h.queueEmpty)
	h.landedOnlyTested(1)
}

// GitHub's reads lag its writes (the fake's default: the first read of a
// branch after each write sees it as it was): a branch just created is not
// there yet for the read before the first merge onto it (or, on another
// replica, for the merge: 404 "Base does not exist"), the read after the
// last merge shows the step before it, the base reads as it was just after
// a landing. None of that is an error, a foreign commit, or a base moved
// from outside: the train drains in its three rounds, each head is merged
// once, and nothing is abandoned or rebuilt. The read before the merge
// keeps the refused merges off the write budget.
func TestTrainWhenGitHubsReadsLag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refused int // merges answered 404 "Base does not exist" (injected)
	}{
		{"the read before the merge lags", 0},
		{"the merge's read lags too", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := trainHarness(t, "mode: train\nbatch_size: 4\n", fakegithub.CI{Breaking: [][2]int{{2, 4}}})
			h.gh.AllowPush(testRepo, testBase)
			if tc.refused > 0 {
				h.gh.Fail(fakegithub.RouteMergeBranch, tc.refused, fakegithub.FaultStatus(http.StatusNotFound, fakegithub.MsgBaseMissing))
			}
			h.openLabeled(1, 2, 3, 4, 5, 6)
			took := h.runCI(60, h.queueEmpty)
			h.landedOnlyTested(1, 2, 3, 5, 6)
			if took > 3*ciLength+time.Minute {
				t.Errorf("the drain took %s, want three CI lengths", took)
			}
			refused := 0
			for _, c := range h.gh.Calls() {
				if c.Route == fakegithub.RouteMergeBranch && c.Status == http.StatusNotFound {
					refused++
				}
			}
			if refused != tc.refused {
				t.Errorf("%d merges refused for a branch GitHub did not show yet, want %d (the injected ones)", refused, tc.refused)
			}
			merged := h.headMerges(6)
			if want := map[int]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 2, 6: 2}; !reflect.DeepEqual(merged, want) {
				t.Errorf("merges of each pull request's head %v, want %v (a build that met a lagging read goes on where it stopped)", merged, want)
			}
			log := h.logBuf.String()
			for _, bad := range []string{`"level":"error"`, "abandoned", "queue step failed", "outside mergegate"} {
				if strings.Contains(log, bad) {
					t.Errorf("the log says %q:\n%s", bad, log)
				}
			}
			if !strings.Contains(log, "GitHub does not show the branch mergegate just wrote yet") {
				t.Errorf("the log does not say the build waited for GitHub's read to catch up (the fake's reads did not lag?):\n%s", log)
			}
		})
	}
}

// A group's CI reports (check_run and check_suite completed) and
// GitHub's reads of its checks a moment later, one after each delivery,
// still show the run in progress: the train reads them again a second
// later, and the group lands then, not at the cron's next pass.
func TestTrainLaggingReadOfAGroupsChecks(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1)
	h.runCI(10, func() bool {
		gs := h.groups()
		return len(gs) == 1 && gs[0].State == leasedo.GroupTesting && gs[0].Head != ""
	})
	head := h.groups()[0].Head
	h.gh.SetStaleCheckReads(testRepo, head, 2)
	at, ok := h.gh.NextCIDue()
	if !ok {
		t.Fatal("the group's CI is not running")
	}
	h.clock.Set(at)
	h.gh.CompleteDueChecks()
	h.eventually("the group landed", h.queueEmpty)
	h.settle()
	h.landedOnlyTested(1)
	if !strings.Contains(h.logBuf.String(), "reads as running after its delivery said it concluded") {
		t.Errorf("the lagging read was not read again:\n%s", h.logBuf.String())
	}
}

// speculate: true (docs/trains.md): pull requests join groups while their
// own checks run, so a queue with nothing failing drains in about one CI
// length, not two; a group lands only once its pull requests' own checks
// passed; one whose own checks fail is taken out for them, and the others
// land without it, at tested commits only.
func TestTrainSpeculates(t *testing.T) {
	const file = "mode: train\nbatch_size: 2\nparallel: 4\nspeculate: true\n"
	t.Run("nothing fails: one CI length", func(t *testing.T) {
		h := trainHarness(t, file, fakegithub.CI{})
		h.gh.AllowPush(testRepo, testBase)
		h.openLabeled(1, 2, 3, 4)
		h.settle()
		gs := h.groups()
		if len(gs) == 0 {
			t.Fatal("no group while the pull requests' own checks run")
		}
		for _, g := range gs {
			for _, n := range g.Numbers() {
				if it, _ := h.entry(n); it.Status != leasedo.StatusEvaluating {
					t.Errorf("#%d in group %d is %s, want evaluating (its own checks run)", n, g.ID, it.Status)
				}
			}
		}
		if took := h.runCI(20, h.queueEmpty); took > ciLength+time.Minute {
			t.Errorf("four pull requests took %s, want about one CI length (%s)", took, ciLength)
		}
		h.landedOnlyTested(1, 2, 3, 4)
		if n := h.gh.CIRuns(testRepo); n != 4+4 {
			t.Errorf("CI ran %d times, want 8 (four pull requests, each one's step in its group)", n)
		}
	})
	t.Run("a group waits for its members' own checks", func(t *testing.T) {
		h := trainHarness(t, file, fakegithub.CI{Slow: map[string]time.Duration{"feature-1": 2 * ciLength}})
		h.gh.AllowPush(testRepo, testBase)
		opened := h.clock.Now()
		h.openLabeled(1, 2)
		h.runCI(20, func() bool {
			gs := h.groups()
			return len(gs) > 0 && gs[len(gs)-1].State == leasedo.GroupPassed
		})
		if it, _ := h.entry(1); it.Status != leasedo.StatusEvaluating {
			t.Fatalf("#1 is %s when its group passed, want evaluating (its own checks take two CI lengths)", it.Status)
		}
		if got := h.gh.BaseHistory(testRepo, testBase); len(got) != 1 {
			t.Fatalf("the base moved (%v) while #1's own checks still ran", got)
		}
		h.runCI(20, h.queueEmpty)
		if now := h.clock.Now().Sub(opened); now > 2*ciLength+time.Minute {
			t.Errorf("it landed %s after #1 was opened, want just after its own checks passed (%s)", now, 2*ciLength)
		}
		h.landedOnlyTested(1, 2)
	})
	t.Run("own checks fail", func(t *testing.T) {
		h := trainHarness(t, file, fakegithub.CI{Bad: []int{2}})
		h.gh.AllowPush(testRepo, testBase)
		h.openLabeled(1, 2, 3, 4)
		h.runCI(40, h.queueEmpty)
		h.landedOnlyTested(1, 3, 4)
		if c := h.comments(2); len(c) != 1 || strings.Contains(c[0], "merged together") {
			t.Errorf("#2's author read %q, want one comment on its own checks", c)
		}
	})
}
