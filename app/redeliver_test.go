package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
)

// withRedeliver turns the redelivery sweep on with budget.
func withRedeliver(budget int) harnessOpt {
	return func(c *Config) { c.RedeliverBudget = budget }
}

// withFixedAddr keeps the public listener on one port across restarts, as
// GitHub's webhook URL stays the same.
func withFixedAddr(t *testing.T) harnessOpt {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return func(c *Config) { c.Addr = addr }
}

// sweeper is a redelivery sweep over the harness's App, run by hand.
func (h *harness) sweeper(budget int) *redeliverer {
	cfg := h.cfg
	cfg.RedeliverBudget = budget
	return newRedeliverer(h.app.Forge, h.app.Store, cfg, h.log, h.app.Metrics)
}

func (h *harness) sweep(r *redeliverer) RedeliverySummary {
	h.t.Helper()
	sum, err := r.Sweep(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return sum
}

// redeliveredGUIDs maps the attempts POSTed to .../attempts to their GUIDs.
func (h *harness) redeliveredGUIDs() []string {
	byID := map[int64]string{}
	for _, d := range h.gh.Deliveries() {
		byID[d.ID] = d.GUID
	}
	var out []string
	for _, id := range h.gh.RedeliveryRequests() {
		out = append(out, byID[id])
	}
	return out
}

// What the sweep asks GitHub for: each GUID that no attempt handed over and
// that the inbox does not hold, once, through its newest attempt, within
// the window, oldest first, at most the budget a pass.
func TestRedeliverySweepChoosesWhatToAskFor(t *testing.T) {
	h := newHarness(t)
	now := h.clock.Now()
	add := func(guid string, code int, ago time.Duration, redelivery bool) int64 {
		return h.gh.AddDelivery(fakegithub.HookDelivery{
			GUID: guid, Event: "pull_request", Action: "labeled", StatusCode: code, DeliveredAt: now.Add(-ago),
			InstallationID: 1, RepositoryID: 1296269, Redelivery: redelivery,
			Payload: h.prPayload("labeled", 1, shaA, "automerge"),
		})
	}
	add("lost-old", 503, 50*time.Hour, false) // the oldest candidate
	add("handed-over", 0, 40*time.Hour, false)
	add("handed-over", 202, 39*time.Hour, true) // GitHub's later attempt got through
	add("too-old", 0, 73*time.Hour, false)      // beyond GitHub's window
	add("stored", 0, 30*time.Hour, false)       // stored, but GitHub timed out waiting
	if code := h.sendID("pull_request", "stored", h.prPayload("opened", 2, shaB)); code != http.StatusAccepted {
		t.Fatalf("storing a delivery: %d", code)
	}
	add("tried-thrice", 503, 20*time.Hour, false)
	add("tried-thrice", 0, 10*time.Hour, true)
	newestOfThree := add("tried-thrice", 503, 5*time.Hour, true)
	add("lost-new", 0, time.Hour, false)

	// Redeliveries go nowhere for now (as if mergegate were down again).
	h.gh.SetWebhook("http://127.0.0.1:1/webhook", testSecret)
	r := h.sweeper(2)
	sum := h.sweep(r)
	if sum.Failed != 4 || sum.Stored != 1 || sum.Requested != 2 || sum.Left != 1 || sum.Refused != 0 || !sum.Complete {
		t.Fatalf("first pass = %+v, want 4 failed (1 stored), 2 asked, 1 left for the budget", sum)
	}
	if got := strings.Join(h.redeliveredGUIDs(), ","); got != "lost-old,tried-thrice" {
		t.Fatalf("asked for %s, want the two oldest, once each", got)
	}
	if reqs := h.gh.RedeliveryRequests(); reqs[1] != newestOfThree {
		t.Errorf("redelivered attempt %d of tried-thrice, want its newest %d", reqs[1], newestOfThree)
	}
	h.eventually("the redeliveries sent", func() bool { return h.gh.RedeliveriesInFlight() == 0 && len(h.gh.Deliveries()) == 11 })

	// Now mergegate answers: the next pass asks for what is left and
	// again for the two whose redelivery failed.
	h.gh.SetWebhook(h.pub+"/webhook", testSecret)
	sum = h.sweep(r)
	if sum.Requested != 2 || sum.Left != 1 {
		t.Fatalf("second pass = %+v, want 2 asked, 1 left", sum)
	}
	if got := strings.Join(h.redeliveredGUIDs(), ","); got != "lost-old,tried-thrice,lost-old,tried-thrice" {
		t.Fatalf("asked for %s", got)
	}
	h.eventually("the redeliveries stored", func() bool {
		known, _ := h.app.Store.KnownDeliveries(context.Background(), []string{"lost-old", "tried-thrice"})
		return len(known) == 2
	})
	sum = h.sweep(r)
	if sum.Requested != 1 || sum.Left != 0 {
		t.Fatalf("third pass = %+v, want lost-new asked", sum)
	}
	h.eventually("lost-new stored", func() bool {
		known, _ := h.app.Store.KnownDeliveries(context.Background(), []string{"lost-new"})
		return len(known) == 1
	})
	// Everything is handed over or stored: nothing more is asked for, and
	// the pass reads only what is new since the last complete one.
	h.gh.ResetCalls()
	before := len(h.gh.RedeliveryRequests())
	if sum = h.sweep(r); sum.Requested != 0 || sum.Left != 0 {
		t.Fatalf("fourth pass = %+v, want nothing to do", sum)
	}
	if len(h.gh.RedeliveryRequests()) != before {
		t.Fatal("asked again for a delivery GitHub handed over")
	}
	resp, err := http.Get(h.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `mergegate_redeliveries_requested_total{result="accepted"} 5`; !strings.Contains(string(scrape), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	h.settle()
	if strings.Contains(h.logBuf.String(), "ghs_") || strings.Contains(h.logBuf.String(), "eyJ") {
		t.Error("a token or JWT was logged")
	}
}

// A delivery mergegate refuses every time is asked for a bounded number of
// times, and the sweep stops asking.
func TestRedeliverySweepGivesUpOnAGUID(t *testing.T) {
	h := newHarness(t)
	h.gh.AddDelivery(fakegithub.HookDelivery{GUID: "refused", Event: "pull_request", StatusCode: 401, InstallationID: 1})
	h.gh.SetWebhook(h.pub+"/webhook", "not the secret") // every redelivery answers 401
	r := h.sweeper(20)
	for pass := 0; pass < 6; pass++ {
		h.sweep(r)
		h.eventually("the redelivery sent", func() bool { return h.gh.RedeliveriesInFlight() == 0 })
		h.clock.Advance(5 * time.Minute)
	}
	if n := len(h.gh.RedeliveryRequests()); n != redeliverTries {
		t.Fatalf("asked %d times for a delivery refused each time, want %d", n, redeliverTries)
	}
	// Given up on, it does not hold the next passes to the whole window:
	// they read only from a minute before the newest attempt seen.
	h.gh.AddDelivery(fakegithub.HookDelivery{GUID: "handed-over", Event: "push", StatusCode: 202, InstallationID: 1})
	if sum := h.sweep(r); sum.Scanned != 2 || sum.Requested != 0 || sum.GaveUp != 1 {
		t.Fatalf("pass after giving up = %+v, want the new attempt and the last redelivery read, nothing asked", sum)
	}
}

// mergegate is down while three deliveries fail; after the restart the
// start-up sweep has GitHub redeliver all three, they are applied, and the
// pull request merges. The resync cannot help: listing pull requests fails
// throughout, so only the redelivered deliveries put the PR in the queue.
func TestDeliveriesLostWhileDownAreRedeliveredAndMerge(t *testing.T) {
	h := newHarness(t, withRedeliver(DefaultRedeliverBudget), withFixedAddr(t))
	h.gh.SetWebhook(h.pub+"/webhook", testSecret)
	h.gh.Fail(fakegithub.RouteListPulls, 1000, fakegithub.FaultStatus(http.StatusBadGateway, "Server Error"))
	h.stop()
	h.gh.ResetCalls()

	h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, HeadSHA: shaA, BaseRef: testBase, Author: "octocat"})
	opened := h.gh.SendWebhook("pull_request", "", h.prPayload("opened", 1, shaA))
	h.gh.LabelPR(testRepo, 1, "automerge", h.clock.Now())
	labeled := h.gh.SendWebhook("pull_request", "", h.prPayload("labeled", 1, shaA, "automerge"))
	h.gh.SetCheckRun(testRepo, shaA, "ci/build", "completed", "success")
	suite := h.gh.SendWebhook("check_suite", "", h.fixture("check_suite/completed.payload.json", func(m map[string]any) {
		obj(m, "check_suite")["head_sha"] = shaA
		obj(m, "check_suite")["pull_requests"] = []any{}
	}))
	guids := []string{opened.GUID, labeled.GUID, suite.GUID}
	for _, d := range []fakegithub.HookDelivery{opened, labeled, suite} {
		if d.Status == "OK" {
			t.Fatalf("a delivery reached mergegate while it was down: %+v", d)
		}
	}
	h.clock.Advance(10 * time.Minute)

	h.start()
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.settle()
	if m := h.merges()[0]; m.PRNumber != 1 || m.SHA != shaA {
		t.Fatalf("merge = %+v, want #1 at %s", m, shaA)
	}
	if got := h.redeliveredGUIDs(); strings.Join(got, ",") != strings.Join(guids, ",") {
		t.Fatalf("redelivered %v, want the three lost ones in order %v", got, guids)
	}
	known, err := h.app.Store.KnownDeliveries(context.Background(), guids)
	if err != nil || len(known) != 3 {
		t.Fatalf("stored %v (%v), want all three", known, err)
	}
	events, _ := h.app.Store.Events(context.Background(), testKey)
	if len(events) != 3 {
		t.Fatalf("events applied = %+v, want the three redelivered", events)
	}
	// The resync had no part in it: no listing of pull requests succeeded,
	// and the start-up pass fixed nothing.
	for _, c := range h.gh.Calls() {
		if c.Route == fakegithub.RouteListPulls && !c.Fault {
			t.Fatalf("a pull request listing was answered: %+v", c)
		}
	}
	if sum, _ := h.app.Cron.LastSummary(); sum.Fixed != 0 {
		t.Fatalf("start-up pass = %+v: the resync fixed something", sum)
	}
	audit, _ := h.app.Store.Audit(context.Background(), testKey)
	if len(audit) == 0 || audit[0].Action != leasedo.AuditJoin {
		t.Fatalf("audit = %+v, want the join from the redelivered label", audit)
	}
}

// Issue 30, hole 7: several replicas each on their own SQLite file (the
// unit's --db beat MERGEGATE_DB) ran with no error. A SQLite serve whose
// App's deliveries GitHub says were handed over since it started, but
// that its database never stored, says loudly that another mergegate
// answers them.
func TestSQLiteServeSaysAnotherReplicaAnswers(t *testing.T) {
	h := newHarness(t)
	r := h.sweeper(5) // as serve makes it, at start
	h.clock.Advance(time.Minute)
	now := h.clock.Now()
	add := func(guid string, code int, ago time.Duration, event string) {
		h.gh.AddDelivery(fakegithub.HookDelivery{
			GUID: guid, Event: event, Action: "labeled", StatusCode: code, DeliveredAt: now.Add(-ago),
			InstallationID: 1, RepositoryID: 1296269, Payload: h.prPayload("labeled", 1, shaA, "automerge"),
		})
	}
	if code := h.sendID("pull_request", "here", h.prPayload("opened", 2, shaB)); code != http.StatusAccepted {
		t.Fatalf("storing a delivery: %d", code)
	}
	add("here", 202, 0, "pull_request")              // this process stored it
	add("before-start", 202, time.Hour, "push")      // before this process ran
	add("a-ping", 200, 0, "ping")                    // never stored
	add("elsewhere-1", 202, 10*time.Second, "push")  // another process took it
	add("elsewhere-2", 202, 5*time.Second, "status") // and this one
	sum := h.sweep(r)
	if sum.Elsewhere != 2 {
		t.Fatalf("sweep = %+v, want 2 deliveries answered elsewhere", sum)
	}
	if !strings.Contains(h.logBuf.String(), `"level":"error","deliveries":2,"delivery":"elsewhere-1"`) ||
		!strings.Contains(h.logBuf.String(), "another mergegate answers this App's webhooks") {
		t.Errorf("log lacks the warning:\n%s", h.logBuf.String())
	}
}
