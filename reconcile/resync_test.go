package reconcile

import (
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
)

const app = "octo/app"

// stateLossWorld: three eligible PRs whose triggers were set at t1 < t2 < t3
// in an order unlike their creation or numbers, and three that are not
// eligible.
func stateLossWorld(e *env) (t1, t2, t3 time.Time) {
	base := e.clock.Now().Add(-24 * time.Hour)
	t1, t2, t3 = base.Add(time.Hour), base.Add(2*time.Hour), base.Add(3*time.Hour)
	e.gh.AddRepo(tenant, app, "main")
	e.gh.AddPR(app, fakegithub.PR{Number: 5, Labels: []string{"automerge"}, LabeledAt: t3, CreatedAt: base})
	e.gh.AddPR(app, fakegithub.PR{Number: 7, Labels: []string{"automerge"}, LabeledAt: t1, CreatedAt: base.Add(time.Minute)})
	e.gh.AddPR(app, fakegithub.PR{Number: 3, AutoMerge: true, AutoMergeAt: t2, CreatedAt: base.Add(2 * time.Minute)})
	e.gh.AddPR(app, fakegithub.PR{Number: 9, CreatedAt: base})                                                  // no trigger
	e.gh.AddPR(app, fakegithub.PR{Number: 11, Labels: []string{"automerge"}, Draft: true, CreatedAt: base})     // draft
	e.gh.AddPR(app, fakegithub.PR{Number: 12, Labels: []string{"automerge"}, State: "closed", CreatedAt: base}) // closed
	return t1, t2, t3
}

// State loss: an empty database is rebuilt by one RunAll, with no webhook:
// the repository is tracked from the App's installation listing and its
// queue holds the same PRs in GitHub's trigger order, audited.
func TestStateLossRebuild(t *testing.T) {
	e := newEnv(t)
	t1, t2, t3 := stateLossWorld(e)

	sum := e.runAll()
	if sum.Discovered != 1 || sum.Repos != 1 || sum.Reconciled != 1 || sum.Fixed != 3 {
		t.Fatalf("summary = %+v, want 1 repository discovered and reconciled, 3 fixed", sum)
	}
	want := []int{7, 3, 5}
	if got := e.prs(app); !slices.Equal(got, want) {
		t.Fatalf("rebuilt queue = %v, want %v (label/auto-merge time order)", got, want)
	}
	for i, at := range []time.Time{t1, t2, t3} {
		// The same pass read each one's checks (none reported yet).
		if it := e.items(app)[i]; it.QueuedAt != at.UnixMilli() || it.Status != leasedo.StatusEvaluating || it.GateReason != "no checks reported yet" ||
			it.BaseRef != "main" || it.PRSha != fakegithub.DeriveSHA(app, "pr", strconv.Itoa(it.PRNumber)) {
			t.Errorf("entry %d = %+v, want queuedAt %d, evaluating, base main, GitHub's head", i, it, at.UnixMilli())
		}
	}
	var joins []int
	for _, a := range e.audit(app) {
		if a.Action == leasedo.AuditJoin {
			joins = append(joins, a.PRNumber)
		}
	}
	if !slices.Equal(joins, want) {
		t.Errorf("audited joins = %v, want %v in that order", joins, want)
	}
	if len(e.changed) != 1 {
		t.Errorf("OnChange calls = %v, want one", e.changed)
	}

	// Delete the database: the next pass rebuilds the same queue.
	e.deleteDB()
	if got := e.prs(app); len(got) != 0 {
		t.Fatalf("queue after deleting the database = %v", got)
	}
	e.runAll()
	if got := e.prs(app); !slices.Equal(got, want) {
		t.Fatalf("queue rebuilt after deletion = %v, want %v", got, want)
	}

	// A third pass: nothing left to fix.
	if sum := e.runAll(); sum.Fixed != 0 {
		t.Errorf("third pass fixed %d, want 0", sum.Fixed)
	}
}

// The same rebuild through Pass (POST /reconcile): results.fixed lists the
// joins, with the trigger and its time.
func TestStateLossPassAnswer(t *testing.T) {
	e := newEnv(t)
	_, _, t3 := stateLossWorld(e)
	ans, err := e.r.Pass(e.ctx, e.key(app))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixes(ans); !slices.Equal(got, []string{"joined#3", "joined#5", "joined#7"}) {
		t.Fatalf("fixed = %v", got)
	}
	// Joins learned from GitHub are audited; the event log holds only
	// what arrived (deliveries, POST /event).
	if ans.QueueLength != 3 || ans.EventCount != 0 {
		t.Errorf("queueLength %d, eventCount %d; want 3, 0", ans.QueueLength, ans.EventCount)
	}
	last := ans.Results.Fixed[2]
	if last.PRNumber != 5 || !strings.Contains(last.Detail, `label "automerge"`) || !strings.Contains(last.Detail, t3.UTC().Format(time.RFC3339)) {
		t.Errorf("fix of #5 = %+v, want the label and its time", last)
	}
	if d := ans.Results.Fixed[1].Detail; !strings.Contains(d, "auto-merge") {
		t.Errorf("fix of #3 detail = %q, want auto-merge", d)
	}
	if a := e.audit(app)[0]; a.Action != leasedo.AuditJoin || !strings.Contains(a.Reason, "resync: eligible on GitHub but not queued") {
		t.Errorf("first audit = %+v, want the join with the resync reason", a)
	}
}

// Corrupted rows (as a damaged restore leaves them) are removed by the
// integrity pass and the PRs rejoin from GitHub in the same pass.
func TestCorruptRowsRebuilt(t *testing.T) {
	e := newEnv(t)
	t1, _, _ := stateLossWorld(e)
	e.runAll()
	raw, err := sql.Open("sqlite", "file:"+e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE queue SET status = 'exploded' WHERE pr_number = 7`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE queue SET pr_sha = '' WHERE pr_number = 5`); err != nil {
		t.Fatal(err)
	}
	ans, err := e.r.Pass(e.ctx, e.key(app))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixes(ans); !slices.Equal(got, []string{"corrupt_removed#5", "corrupt_removed#7", "joined#5", "joined#7"}) {
		t.Errorf("fixed = %v", got)
	}
	if got := e.prs(app); !slices.Equal(got, []int{7, 3, 5}) || e.items(app)[0].QueuedAt != t1.UnixMilli() {
		t.Errorf("queue = %v, want 7, 3, 5 with #7 at t1", got)
	}
}

// Webhooks lost while mergegate was down: #2 closed, #3 labelled, #4 pushed
// to, #6 unlabelled, #8 made a draft. The first pass makes the queue agree.
func TestLostWebhooks(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	sha := func(n int) string { return fakegithub.DeriveSHA(app, "pr", strconv.Itoa(n)) }
	for _, n := range []int{1, 2, 4, 6, 8} {
		e.gh.AddPR(app, fakegithub.PR{Number: n, Labels: []string{"automerge"}})
		e.join(app, n, sha(n))
	}
	e.gh.AddPR(app, fakegithub.PR{Number: 3})
	if err := e.store.Track(e.ctx, e.key(app)); err != nil {
		t.Fatal(err)
	}

	// mergegate is down for five minutes.
	e.clock.Advance(2 * time.Minute)
	e.gh.ClosePR(app, 2)
	e.gh.SetLabels(app, 3, "automerge")
	labelledAt := e.clock.Now()
	e.gh.SetHead(app, 4, "4444444444444444444444444444444444444444")
	e.gh.SetLabels(app, 6)
	e.gh.SetDraft(app, 8, true)
	e.clock.Advance(3 * time.Minute)

	ans, err := e.r.Pass(e.ctx, e.key(app))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixes(ans); !slices.Equal(got, []string{"joined#3", "left#2", "left#6", "left#8", "reevaluated#4"}) {
		t.Fatalf("fixed = %v", got)
	}
	if got := e.prs(app); !slices.Equal(got, []int{1, 4, 3}) {
		t.Fatalf("queue = %v, want 1, 4, 3", got)
	}
	it := e.items(app)
	if it[1].PRSha != "4444444444444444444444444444444444444444" || it[1].ReevaluatedAt == nil {
		t.Errorf("#4 = %+v, want the new head, reevaluated", it[1])
	}
	if it[2].QueuedAt != labelledAt.UnixMilli() {
		t.Errorf("#3 queuedAt = %d, want its label time %d", it[2].QueuedAt, labelledAt.UnixMilli())
	}
	got := map[string][]int{}
	for _, a := range e.audit(app)[5:] { // after the five webhook joins
		got[a.Action] = append(got[a.Action], a.PRNumber)
	}
	if !slices.Equal(got["leave"], []int{2, 6, 8}) || !slices.Equal(got["reevaluate"], []int{4}) || !slices.Equal(got["join"], []int{3}) {
		t.Errorf("audit = %v", got)
	}
	// What the resync learned from GitHub is audited, not logged as
	// events that never arrived.
	if events, _ := e.store.Events(e.ctx, e.key(app)); len(events) != 5 {
		t.Errorf("events = %d, want the five webhook joins only", len(events))
	}

	// The next pass finds nothing to fix (it reads the check runs mergegate
	// wrote); the one after is answered with 304s.
	if ans, err = e.r.Pass(e.ctx, e.key(app)); err != nil || len(ans.Results.Fixed) != 0 {
		t.Fatalf("second pass: %v, fixed %v", err, ans.Results.Fixed)
	}
	e.gh.ResetCalls()
	ans, err = e.r.Pass(e.ctx, e.key(app))
	if err != nil || len(ans.Results.Fixed) != 0 {
		t.Fatalf("second pass: %v, fixed %v", err, ans.Results.Fixed)
	}
	for _, c := range e.gh.Calls() {
		if !c.NotModified {
			t.Errorf("second pass call %s %s: status %d, want 304", c.Method, c.Path, c.Status)
		}
	}
}

// An entry that joined a moment ago is not removed on a listing that does
// not show it yet (GitHub's API can lag its webhooks); the next pass does.
func TestGraceForRecentEntries(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	e.gh.AddPR(app, fakegithub.PR{Number: 1}) // the label is not visible yet
	e.join(app, 1, fakegithub.DeriveSHA(app, "pr", "1"))
	e.clock.Advance(5 * time.Second)
	ans, err := e.r.Pass(e.ctx, e.key(app))
	if err != nil || len(ans.Results.Fixed) != 0 {
		t.Fatalf("pass within the grace: %v, fixed %v", err, ans.Results.Fixed)
	}
	e.clock.Advance(DefaultGrace)
	ans, err = e.r.Pass(e.ctx, e.key(app))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixes(ans); !slices.Equal(got, []string{"left#1"}) {
		t.Errorf("after the grace: fixed = %v, want left#1", got)
	}
}

// A PR bounced at its current head whose label could not be removed does
// not rejoin; once the label is set again (after the bounce) it does. A
// base change is reevaluated and recorded.
func TestBouncedNotRejoinedAndBaseChange(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	e.gh.AddPR(app, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	e.gh.AddPR(app, fakegithub.PR{Number: 2, Labels: []string{"automerge"}})
	sha1 := fakegithub.DeriveSHA(app, "pr", "1")
	e.join(app, 1, sha1)
	e.join(app, 2, fakegithub.DeriveSHA(app, "pr", "2"))
	e.clock.Advance(time.Minute)
	e.bounce(app, 1, sha1)
	e.gh.UpdatePR(app, 2, func(pr *fakegithub.PR) { pr.BaseRef = "release" })
	e.clock.Advance(time.Minute)

	ans, err := e.r.Pass(e.ctx, e.key(app))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixes(ans); !slices.Equal(got, []string{"bounced_removed#1", "reevaluated#2"}) {
		t.Fatalf("fixed = %v, want #1's bounce swept (not rejoined) and #2 reevaluated", got)
	}
	if it := e.items(app); len(it) != 1 || it[0].BaseRef != "release" {
		t.Errorf("queue = %+v, want #2 on base release", it)
	}

	// Someone asks again: the label is set after the bounce.
	e.gh.SetLabels(app, 1)
	e.clock.Advance(time.Second)
	e.gh.SetLabels(app, 1, "automerge")
	ans, err = e.r.Pass(e.ctx, e.key(app))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixes(ans); !slices.Equal(got, []string{"joined#1"}) {
		t.Errorf("after relabelling: fixed = %v, want joined#1", got)
	}
}

// A suspended installation is paused, not forgotten: RunAll leaves its
// repositories alone; the queue is still there afterwards.
func TestSuspendedTenantPaused(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	e.gh.AddPR(app, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	e.runAll()
	e.gh.SuspendInstallation(tenant, true)
	e.gh.ClosePR(app, 1)
	e.clock.Advance(time.Hour)
	e.gh.ResetCalls()

	sum := e.runAll()
	if sum.Suspended != 1 || sum.Repos != 0 {
		t.Errorf("summary = %+v, want the repository paused", sum)
	}
	if got := e.prs(app); !slices.Equal(got, []int{1}) {
		t.Errorf("queue of a suspended installation = %v, want it kept", got)
	}
	for _, c := range e.gh.Calls() {
		if c.Route != fakegithub.RouteListInstallations {
			t.Errorf("suspended installation: GitHub called %s", c.Route)
		}
	}
}

// A repository GitHub no longer lists for its installation (removed while
// mergegate was down) is reconciled without a resync, not failed each pass.
func TestGoneRepository(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	if err := e.store.Track(e.ctx, e.key(app), e.key("octo/removed")); err != nil {
		t.Fatal(err)
	}
	sum := e.runAll()
	if sum.Gone != 1 || sum.Reconciled != 2 || sum.Failed != 0 {
		t.Errorf("summary = %+v, want 1 gone, 2 reconciled", sum)
	}
}

// A fork's pull request the resync finds labelled but not queued (its
// label's delivery lost, or the database) joins held: anyone the fork's
// owner lets in may have pushed its head after a writer's label, and
// nothing GitHub says of the label tells. A branch of the repository
// (pushed by someone who may write) and a fork's pull request GitHub's
// auto-merge triggers (GitHub disables it on a push by someone who may not
// write) join as before. A writer's @mergegate queue lets the held one go.
func TestResyncHoldsAForksLabelledPullRequest(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, app, "main")
	fork := e.gh.AddPR(app, fakegithub.PR{Number: 1, Fork: true, Labels: []string{"automerge"}})
	own := e.gh.AddPR(app, fakegithub.PR{Number: 2, Labels: []string{"automerge"}})
	auto := e.gh.AddPR(app, fakegithub.PR{Number: 3, Fork: true, AutoMerge: true})
	for _, pr := range []fakegithub.PR{fork, own, auto} {
		e.gh.SetCheckRun(app, pr.HeadSHA, "ci", "completed", "success")
	}
	if err := e.store.Track(e.ctx, e.key(app)); err != nil {
		t.Fatal(err)
	}
	e.settle(app)
	merged := func() (ns []int) {
		for _, m := range e.gh.Merges() {
			ns = append(ns, m.PRNumber)
		}
		return ns
	}
	if got := merged(); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("merged %v, want #2 and #3 (not the fork's labelled #1)", got)
	}
	if got := e.lastTitle(fork.HeadSHA); !strings.Contains(got, "no writer consented to this head") || !strings.Contains(got, "pushed before or after the label") {
		t.Errorf("#1's title = %q, want the hold and why", got)
	}
	_, err := e.store.ProcessEvent(e.ctx, leasedo.Event{EventType: "issue_comment", Tenant: tenant, Repo: app, Action: "created", Op: leasedo.OpJoin,
		PRNumber: 1, Details: &leasedo.Details{Sha: fork.HeadSHA, Base: "main", Consent: leasedo.ConsentGiven}}, "worker")
	if err != nil {
		t.Fatal(err)
	}
	e.settle(app)
	if got := merged(); !slices.Equal(got, []int{2, 3, 1}) {
		t.Fatalf("merged %v after a writer's consent, want #1 too", got)
	}
}
