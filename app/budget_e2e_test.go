package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// writesRun is what one drain of a queue cost in GitHub's budgets.
type writesRun struct {
	mode                 string
	queued, merged       int
	writes, calls        int
	charged              int           // calls that count against the rate limit (not a 304)
	took                 time.Duration // simulated
	peakMinute, peakHour int           // the most writes in any minute, any hour
	limited              int           // answers of a secondary limit
}

func (r writesRun) perMerged() float64 { return float64(r.writes) / float64(r.merged) }

func (r writesRun) chargedPerMerged() float64 { return float64(r.charged) / float64(r.merged) }

// withoutCheckTimeout: a drain whose CI always reports moves its clock far;
// the check timeout's timer is not one of its waits.
func withoutCheckTimeout(c *Config) { c.CheckTimeout = -1 }

// drainWrites queues n pull requests in one repository under policyFile
// (strict: the base requires up-to-date branches), runs CI of a fixed
// length until the queue is empty and counts the writes it took. The
// fake GitHub enforces the secondary limits; the write budget is
// mergegate's default.
func drainWrites(t testing.TB, mode string, n int, policyFile string, strict bool) writesRun {
	t.Helper()
	h := trainHarness(t, policyFile, fakegithub.CI{}, withoutCheckTimeout)
	// Every retry, a budget's wait included, is part of the drain; CI
	// always reports, so the check timeout's timer is not.
	h.horizon, h.patience = time.Hour, 2*time.Minute
	h.gh.SetRequired(testRepo, testBase, []string{"ci"}, strict)
	h.gh.AllowPush(testRepo, testBase)
	w0 := h.gh.Writes(testTenant)
	c0, charged0 := apiCallsCharged(h)
	var ns []int
	for i := 1; i <= n; i++ {
		ns = append(ns, i)
	}
	h.openLabeled(ns...)
	took := h.runCI(20*n, h.queueEmpty)
	h.settle()
	merged := 0 // a train lands by fast-forwarding the base: count the pull requests GitHub says merged
	for _, i := range ns {
		if pr, ok := h.gh.PR(testRepo, i); ok && pr.Merged {
			merged++
		}
	}
	calls, charged := apiCallsCharged(h)
	r := writesRun{mode: mode, queued: n, merged: merged, writes: h.gh.Writes(testTenant) - w0, calls: calls - c0, charged: charged - charged0, took: took,
		peakMinute: h.gh.PeakWrites(testTenant, time.Minute), peakHour: h.gh.PeakWrites(testTenant, time.Hour), limited: h.gh.SecondaryLimited("")}
	if r.merged != n {
		t.Fatalf("%s: %d of %d merged", mode, r.merged, n)
	}
	h.everyRunConcluded()
	return r
}

// everyRunConcluded: the last write of each mergegate check run completed it.
func (h *harness) everyRunConcluded() {
	h.t.Helper()
	last := map[int64]fakegithub.CheckRunWrite{}
	for _, w := range h.gh.CheckRuns() {
		last[w.ID] = w
	}
	for id, w := range last {
		if w.Status != "completed" {
			h.t.Errorf("check run %d on %s left %s: %q", id, w.HeadSHA, w.Status, w.Title)
		}
	}
}

// Writes per merged pull request do not grow with the queue: at most 5 in
// serial mode (its run created, its title changed once its checks passed,
// concluded, the merge; and the branch's update on a strict base), at 8
// queued as at 64 (32 on a strict base, whose drain is the longest; the
// benchmark has 64); the fake's secondary limits never answer. A train (its
// run created and concluded, its merge onto the train branch, and its
// share of the base's fast-forwards and of the train branch's creation
// and deletion) costs no more than serial mode (issue 32), and at 64 makes
// no more calls counted against the rate limit.
func TestWritesPerMergedPRDoNotGrowWithTheQueue(t *testing.T) {
	// Long simulations: beside each other, after the package's other tests.
	t.Parallel()
	sizes := []int{8, 64}
	if testing.Short() {
		sizes = []int{8}
	}
	var runs []writesRun
	for _, n := range sizes {
		var serial writesRun
		for _, strict := range []bool{false, true} {
			mode, queued := "serial", n
			if strict {
				mode, queued = "serial, strict base", min(n, 32)
			}
			r := drainWrites(t, mode, queued, "mode: serial\n", strict)
			runs = append(runs, r)
			if r.perMerged() > 5 {
				t.Errorf("%s, %d queued: %d writes for %d merged, %.1f each; want at most 5", mode, queued, r.writes, r.merged, r.perMerged())
			}
			if r.limited != 0 || r.peakMinute > fakegithub.SecondaryWritesPerMinute {
				t.Errorf("%s, %d queued: %d secondary-limit answers, at most %d writes in a minute; want none and at most GitHub's 80", mode, queued, r.limited, r.peakMinute)
			}
			if !strict {
				serial = r
			}
		}
		for _, train := range []struct{ mode, file string }{{"train, the defaults", drainTrainDefaults}, {"train, speculate", drainTrainSpeculate}} {
			r := drainWrites(t, train.mode, n, train.file, false)
			runs = append(runs, r)
			if r.perMerged() > serial.perMerged() {
				t.Errorf("%s, %d queued: %d writes for %d merged, %.2f each; want at most serial mode's %.2f", train.mode, n, r.writes, r.merged, r.perMerged(), serial.perMerged())
			}
			// Calls: at 64, where the train's fewer reads of each pull
			// request show. At 8 the two make the same calls to within
			// two, and which makes more depends on when CI's reports
			// arrive between syncs.
			if n >= 64 && r.chargedPerMerged() > serial.chargedPerMerged() {
				t.Errorf("%s, %d queued: %d calls counted against the rate limit for %d merged, %.2f each; want at most serial mode's %.2f", train.mode, n, r.charged, r.merged, r.chargedPerMerged(), serial.chargedPerMerged())
			}
		}
	}
	t.Log("\n" + writesTable(runs...))
}

// A queue of 100 in one repository, and 20 repositories of 10 at once
// under one installation, drain without a secondary-limit answer, under
// GitHub's 80 writes a minute and 500 an hour as the fake counts them.
// (mergegate's own count keeps to 60 and 450 exactly: budget_internal_test
// in forge. The fake counts a write when it arrives, and the test moves
// the clock while requests are in flight: a write sent at 59.9 s may
// arrive at 60.0 s, so the fake may count one or two more in a minute.)
func TestDrainsWithinGitHubsSecondaryLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 300 pull requests through the fake GitHub")
	}
	// Long simulations: beside each other, after the package's other tests.
	t.Parallel()
	r := drainWrites(t, "serial", 100, "mode: serial\n", false)
	t.Log("\n" + writesTable(r))
	if r.limited != 0 || r.peakMinute > fakegithub.SecondaryWritesPerMinute || r.peakHour > fakegithub.SecondaryWritesPerHour {
		t.Errorf("100 queued: %d secondary-limit answers, at most %d writes a minute and %d an hour", r.limited, r.peakMinute, r.peakHour)
	}

	h := newHarness(t, withoutCheckTimeout)
	h.horizon, h.patience = time.Hour, 2*time.Minute
	const repos, each = 20, 10
	h.gh.SetWebhook(h.pub+"/webhook", testSecret)
	for i := 0; i < repos; i++ {
		repo := fmt.Sprintf("octo/r%02d", i)
		h.gh.AddRepo(testTenant, repo, testBase)
		h.gh.SetRequired(repo, testBase, []string{"ci"}, false)
		h.gh.SimulateCI(repo, fakegithub.CI{Duration: ciLength})
	}
	for n := 1; n <= each; n++ {
		for i := 0; i < repos; i++ {
			repo := fmt.Sprintf("octo/r%02d", i)
			pr := h.gh.AddPR(repo, fakegithub.PR{Number: n, BaseRef: testBase, Labels: []string{"automerge"}, Author: "octocat"})
			h.mustSend("pull_request", h.prPayloadIn(repo, "labeled", n, pr.HeadSHA, "automerge"))
		}
	}
	start := h.clock.Now()
	for round := 0; len(h.merges()) < repos*each; round++ {
		if round > 40*each {
			t.Fatalf("not drained: %d of %d merged", len(h.merges()), repos*each)
		}
		h.settle()
		if at, ok := h.gh.NextCIDue(); ok && at.After(h.clock.Now()) {
			h.clock.Set(at)
		} else if at, ok := h.clock.NextTimer(); ok {
			h.clock.Set(at)
		}
		h.gh.CompleteDueChecks()
	}
	h.settle()
	minute, hour, limited := h.gh.PeakWrites(testTenant, time.Minute), h.gh.PeakWrites(testTenant, time.Hour), h.gh.SecondaryLimited("")
	t.Logf("%d repositories × %d: %d writes, %.1f per merged pull request, at most %d a minute and %d an hour, drained in %s (simulated)",
		repos, each, h.gh.Writes(testTenant), float64(h.gh.Writes(testTenant))/float64(repos*each), minute, hour, h.clock.Now().Sub(start))
	if limited != 0 || minute > fakegithub.SecondaryWritesPerMinute || hour > fakegithub.SecondaryWritesPerHour {
		t.Errorf("%d repositories × %d: %d secondary-limit answers, at most %d writes a minute and %d an hour", repos, each, limited, minute, hour)
	}
	h.everyRunConcluded()
}

func writesTable(runs ...writesRun) string {
	var b strings.Builder
	b.WriteString("| mode | queued | writes | per merged PR | calls per merged PR | not a 304 | most in a minute | most in an hour | drained in (simulated) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %.1f | %.1f | %d | %d | %s |\n", r.mode, r.queued, r.writes, r.perMerged(), float64(r.calls)/float64(r.merged), r.chargedPerMerged(), r.peakMinute, r.peakHour, r.took.Round(time.Second))
	}
	return b.String()
}

// BenchmarkWritesPerMergedPR is the table of docs/performance.md: writes
// and calls per merged pull request at 8, 32 and 64 queued, serial and
// train mode, and a queue of 100 under the write budget (simulated time:
// one iteration is the measurement):
// go test -run '^$' -bench WritesPerMergedPR -benchtime 1x ./app
func BenchmarkWritesPerMergedPR(b *testing.B) {
	type mode struct {
		name, file string
		strict     bool
	}
	modes := []mode{{"serial", "mode: serial\n", false}, {"serial-strict", "mode: serial\n", true}, {"train", drainTrainDefaults, false}}
	var runs []writesRun
	for _, m := range modes {
		for _, n := range []int{8, 32, 64, 100} {
			if n == 100 && m.name != "serial" {
				continue
			}
			b.Run(fmt.Sprintf("%s-%d", m.name, n), func(b *testing.B) {
				var r writesRun
				for i := 0; i < b.N; i++ {
					r = drainWrites(b, m.name, n, m.file, m.strict)
				}
				runs = append(runs, r)
				b.ReportMetric(r.perMerged(), "writes/merge")
				b.ReportMetric(float64(r.calls)/float64(r.merged), "calls/merge")
				b.ReportMetric(r.chargedPerMerged(), "charged/merge")
				b.ReportMetric(r.took.Minutes(), "drain-min")
			})
		}
	}
	b.Log("\n" + writesTable(runs...))
}

// GitHub's limits may change without notice: a secondary limit answered
// despite the budget (on a merge, on a bounce's comment) is backed off,
// the queue keeps its order, and nothing is lost: every good pull request
// merges once, in order, and each bounce is said once.
func TestSecondaryLimitDespiteTheBudgetLosesNothing(t *testing.T) {
	h := trainHarness(t, "mode: serial\n", fakegithub.CI{Bad: []int{3, 6}})
	h.horizon = time.Hour
	h.openLabeled(1, 2, 3, 4, 5, 6, 7, 8)
	h.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultRetryAfter(403, 60))
	h.gh.Fail(fakegithub.RouteCreateComment, 1, fakegithub.FaultSecondary(403))
	h.runCI(200, func() bool { return len(h.merges()) == 6 && len(h.gh.Comments()) == 2 })
	h.settle()
	var order []int
	for _, m := range h.merges() {
		order = append(order, m.PRNumber)
	}
	if fmt.Sprint(order) != "[1 2 4 5 7 8]" {
		t.Errorf("merged %v, want [1 2 4 5 7 8] in queue order, each once", order)
	}
	said := map[int]int{}
	for _, c := range h.gh.Comments() {
		said[c.PRNumber]++
	}
	if len(said) != 2 || said[3] != 1 || said[6] != 1 {
		t.Errorf("bounce comments %v, want #3 and #6 told once each", said)
	}
	removed := map[int]bool{}
	for _, l := range h.gh.LabelsRemoved() {
		removed[l.PRNumber] = true
	}
	if !removed[3] || !removed[6] {
		t.Errorf("labels removed from %v, want #3 and #6", removed)
	}
	if !strings.Contains(h.logBuf.String(), "GitHub rate limit: the queue waits") {
		t.Error("the secondary limit was not backed off (no wait in the log)")
	}
	h.everyRunConcluded()
}

// With a tight budget (10 writes a minute) the classes are served in
// order: merges go out while check-run titles wait, and a title that was
// held back until its pull request merged is never sent; every run still
// concludes.
func TestWriteBudgetMergesFirstAndDropsStaleTitles(t *testing.T) {
	// No check timeout: the test's horizon would reach its timer.
	h := newHarness(t, func(c *Config) { c.WritesPerMinute = 10; c.CheckTimeout = -1 })
	h.horizon = time.Hour
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	shas := map[int]string{}
	for n := 1; n <= 6; n++ {
		shas[n] = fmt.Sprintf("%040x", n)
		h.label(n, shas[n])
	}
	h.settle() // six runs created (a tell: 7 of 10 a minute)
	created := len(h.gh.CheckRuns())
	start := h.clock.Now()
	_ = created
	for n := 1; n <= 6; n++ {
		h.gh.SetCheckRun(testRepo, shas[n], "ci/build", "completed", "success")
	}
	for n := 1; n <= 6; n++ {
		h.checkSuite(shas[n])
	}
	h.eventually("all six merged", func() bool { return len(h.merges()) == 6 })
	h.settle()
	if !strings.Contains(h.logBuf.String(), "GitHub writes held back") {
		t.Fatalf("the budget never held anything back (%d runs created first)", created)
	}
	mergedAt := map[int]int64{}
	for _, m := range h.merges() {
		mergedAt[m.PRNumber] = m.Seq
	}
	for _, w := range h.gh.CheckRuns() {
		if w.Status == "completed" || !strings.HasPrefix(w.Title, "Checks passed") {
			continue
		}
		for n, sha := range shas {
			if w.HeadSHA == sha && w.Seq > mergedAt[n] {
				t.Errorf("#%d's title %q was sent after it merged", n, w.Title)
			}
		}
	}
	if took := h.clock.Now().Sub(start); took < time.Minute {
		t.Errorf("drained in %s: the budget of 10 a minute should have made it wait", took)
	}
	h.everyRunConcluded()

	// Said to the operator: writes by class on /metrics, the budget left,
	// and the budget on the dashboard.
	if n := h.metric(`mergegate_github_writes_total{class="land"}`); n != 6 {
		t.Errorf(`mergegate_github_writes_total{class="land"} = %v, want 6 merges`, n)
	}
	if n := h.metric(`mergegate_github_writes_total{class="cosmetic"}`) + h.metric(`mergegate_github_writes_total{class="tell"}`); n == 0 {
		t.Error("no tell or cosmetic writes counted")
	}
	if left := h.metric(`mergegate_github_write_budget_remaining{tenant="1",window="minute"}`); left < 0 || left > 10 {
		t.Errorf("budget left this minute = %v, want 0..10", left)
	}
	var ov Overview
	if code := getJSON(t, h.admin+"/?format=json", &ov); code != 200 || len(ov.Status.WriteBudgets) != 1 ||
		ov.Status.WriteBudgets[0].Tenant != testTenant || ov.Status.WriteBudgets[0].PerMinute != 10 {
		t.Errorf("dashboard: %d %+v, want installation 1's budget of 10 a minute", code, ov.Status.WriteBudgets)
	}
}

// After a lost database the cron's pass rebuilds the queue without
// waiting for the write budget; the check runs of the rebuilt entries
// follow through it afterwards (the engine's retries), never faster than
// the budget, until every entry has one.
func TestRebuiltEntriesCheckRunsFollowThroughTheBudget(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.WritesPerMinute = 10 })
	const n = 30
	for i := 1; i <= n; i++ {
		h.gh.AddPR(testRepo, fakegithub.PR{Number: i, HeadSHA: fmt.Sprintf("%040x", i), BaseRef: testBase, Labels: []string{"automerge"}, Author: "octocat"})
	}
	h.clock.Advance(time.Minute) // past the resync's grace
	if _, err := h.app.Reconciler.Pass(h.t.Context(), testKey); err != nil {
		t.Fatal(err)
	}
	if q := h.queue(); len(q) != n {
		t.Fatalf("rebuilt %d entries, want %d", len(q), n)
	}
	inPass := h.gh.Writes(testTenant)
	if inPass >= n {
		t.Fatalf("the pass wrote %d check runs itself; want the budget (7 a minute for runs created) to leave most for later", inPass)
	}
	h.horizon = time.Hour
	h.settle()
	withRun := map[string]bool{}
	for _, w := range h.gh.CheckRuns() {
		withRun[w.HeadSHA] = true
	}
	if len(withRun) != n {
		t.Errorf("%d of %d rebuilt entries have a check run", len(withRun), n)
	}
	if peak := h.gh.PeakWrites(testTenant, time.Minute); peak > 10 || h.gh.SecondaryLimited("") != 0 {
		t.Errorf("at most %d writes in a minute (budget 10), %d secondary-limit answers", peak, h.gh.SecondaryLimited(""))
	}
	t.Logf("the pass created %d runs; the rest followed over %d writes", inPass, h.gh.Writes(testTenant)-inPass)
}

// On a base that uses GitHub's merge queue, what a merged pull request
// costs does not grow with the queue: at 8 queued as at 64, at most 4
// writes (its check run created, changed twice, and the enqueue) and 6
// GraphQL requests, of the installation's 5,000 points an hour (the
// enqueue, its place read when it passed, when GitHub's queue merged it
// and when it closed, and the queue's places for the check runs). A pull
// request GitHub's queue merged is read, not enqueued again: GitHub would
// refuse it ("Pull request is closed"), a mutation spent per merged pull
// request.
func TestGitHubMergeQueueCostDoesNotGrowWithTheQueue(t *testing.T) {
	t.Parallel()
	sizes := []int{8, 64}
	if testing.Short() {
		sizes = []int{8}
	}
	for _, n := range sizes {
		h := newHarness(t, withoutCheckTimeout)
		h.horizon, h.patience = time.Hour, 2*time.Minute
		h.mergeQueueBase()
		g0, w0 := h.gh.CallCount(fakegithub.RouteGraphQL), h.gh.Writes(testTenant)
		var ns []int
		for i := 1; i <= n; i++ {
			ns = append(ns, i)
		}
		h.openLabeled(ns...)
		h.settle()
		for _, i := range ns {
			pr, _ := h.gh.PR(testRepo, i)
			h.pass(pr.HeadSHA)
		}
		h.eventually("every pull request in GitHub's merge queue", func() bool { return len(h.gh.MergeQueueEnqueues()) == n })
		h.settleQueue()
		for h.gh.MergeQueueLand(testRepo, testBase) != 0 {
			h.settleQueue()
		}
		h.eventually("mergegate's queue empty", h.queueEmpty)
		graphQL := float64(h.gh.CallCount(fakegithub.RouteGraphQL)-g0) / float64(n)
		writes := float64(h.gh.Writes(testTenant)-w0) / float64(n)
		t.Logf("GitHub's merge queue, %d queued: %.2f writes and %.2f GraphQL requests per merged pull request", n, writes, graphQL)
		if writes > 4 || graphQL > 6.5 {
			t.Errorf("%d queued: %.2f writes and %.2f GraphQL requests per merged pull request, want at most 4 and 6.5", n, writes, graphQL)
		}
		if refused := strings.Count(h.logBuf.String(), `"op":"enqueue"`); refused != 0 {
			t.Errorf("%d queued: %d enqueues GitHub refused, want none", n, refused)
		}
		h.noBounce()
	}
}
