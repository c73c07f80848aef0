package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// Fault tests: each asserts that nothing acknowledged is lost and that the
// database passes PRAGMA integrity_check afterwards.

// getBody GETs url and returns its status and body.
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (h *harness) integrityOK() {
	h.t.Helper()
	if got, err := h.app.DB.IntegrityCheck(context.Background()); err != nil || got != "ok" {
		h.t.Fatalf("integrity_check = %q, %v", got, err)
	}
}

// queued reports whether PR n is in the test repository's queue.
func (h *harness) queued(n int) bool {
	for _, it := range h.queue() {
		if it.PRNumber == n {
			return true
		}
	}
	return false
}

// The disk fills up (simulated with PRAGMA max_page_count on the writer
// connection: as root, chmod does not stop writes): ingest answers 503 —
// GitHub marks the delivery failed — and stores nothing; the deliveries
// acknowledged before are intact; once space is back, the operator
// redelivers it (same delivery id) and it is applied.
func TestFaultDiskFullAnswers503ThenRedeliveryApplies(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	for n := 1; n <= 10; n++ {
		h.mustSend("pull_request", h.prPayload("labeled", n, fmt.Sprintf("%040d", n), "automerge"))
	}
	h.settle()

	ctx := context.Background()
	if err := h.app.DB.LimitPages(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// A delivery larger than one page needs new pages: none left.
	big := h.fixture("pull_request/labeled.payload.json", func(m map[string]any) {
		m["number"] = 99
		pr := obj(m, "pull_request")
		pr["number"], pr["state"], pr["draft"], pr["auto_merge"] = 99, "open", false, nil
		pr["body"] = strings.Repeat("full disk ", 20_000)
		obj(pr, "head")["sha"] = fmt.Sprintf("%040d", 99)
		pr["labels"] = []any{map[string]any{"name": "automerge"}}
		m["label"] = map[string]any{"name": "automerge"}
	})
	for range 2 {
		if code := h.sendID("pull_request", "disk-full-1", big); code != http.StatusServiceUnavailable {
			t.Fatalf("delivery on a full disk answered %d, want 503", code)
		}
	}
	if !strings.Contains(h.logBuf.String(), "delivery not stored") {
		t.Fatalf("the 503 was not logged")
	}
	// /healthz says so on both listeners, with the reason on the admin
	// one (the public one says no more than "unavailable").
	if code, body := getBody(t, h.admin+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "database cannot be written") || !strings.Contains(body, "full") {
		t.Fatalf("admin healthz on a full disk: %d %s, want 503 with the reason", code, body)
	}
	if code, body := getBody(t, h.pub+"/healthz"); code != http.StatusServiceUnavailable || strings.Contains(body, "database") {
		t.Fatalf("public healthz on a full disk: %d %s, want 503 without the reason", code, body)
	}

	if err := h.app.DB.LimitPages(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if code := h.sendID("pull_request", "disk-full-1", big); code != http.StatusAccepted {
		t.Fatalf("redelivery after the disk was freed answered %d, want 202", code)
	}
	if code, body := getBody(t, h.pub+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz once writes commit again: %d %s", code, body)
	}
	h.settle()
	for n := 1; n <= 10; n++ {
		if !h.queued(n) {
			t.Fatalf("PR #%d, acknowledged before the disk filled, is not queued: %+v", n, h.queue())
		}
	}
	if !h.queued(99) {
		t.Fatalf("the redelivered PR #99 is not queued: %+v", h.queue())
	}
	h.integrityOK()
}

// The disk fills up while acknowledged deliveries wait to be applied: the
// engine's apply fails on it, they stay pending (retried with backoff),
// and are applied once it is freed.
func TestFaultDiskFullWhileApplyingLosesNothing(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	ctx := context.Background()
	// Hold the lease so the deliveries wait, stored but not applied.
	l, err := h.app.Store.Acquire(ctx, testKey, "admin")
	if err != nil {
		t.Fatal(err)
	}
	// Enough that applying them needs pages the database does not have:
	// a few fit in the room its last pages have left.
	const count = 200
	for n := 1; n <= count; n++ {
		h.mustSend("pull_request", h.prPayload("labeled", n, fmt.Sprintf("%040d", n), "automerge"))
	}
	if err := h.app.DB.LimitPages(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.app.Store.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	h.app.Engine.Kick(testKey)
	h.waitLogged("deliveries left pending; will retry", 1) // the engine tried on a full disk
	if err := h.app.DB.LimitPages(ctx, -1); err != nil {
		t.Fatal(err)
	}
	h.eventually("every acknowledged delivery applied", func() bool {
		for n := 1; n <= count; n++ {
			if !h.queued(n) {
				// Deliveries that failed on the full disk wait out their
				// backoff, on the harness's manual clock.
				h.clock.Advance(100 * time.Millisecond)
				h.app.Engine.Kick(testKey)
				return false
			}
		}
		return true
	})
	failed, err := h.app.Store.Deliveries(ctx, testKey, leasedo.DeliveryFailed, 100)
	if err != nil || len(failed) != 0 {
		t.Fatalf("failed deliveries: %+v %v", failed, err)
	}
	h.integrityOK()
}

// GitHub is down for a while (every call answers 502): deliveries are
// still acknowledged and applied, the merge waits, and happens once GitHub
// is back, without any new event.
func TestFaultGitHubDownMergeWaitsThenHappens(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()

	routes := []string{fakegithub.RouteGetPull, fakegithub.RouteListPulls, fakegithub.RouteMerge, fakegithub.RouteUpdateBranch,
		fakegithub.RouteGetProtection, fakegithub.RouteGetRequiredChecks, fakegithub.RouteGetBranchRules,
		fakegithub.RouteListCheckRuns, fakegithub.RouteCombinedStatus, fakegithub.RouteCreateCheckRun,
		fakegithub.RouteUpdateCheckRun, fakegithub.RouteCreateComment, fakegithub.RouteRemoveLabel}
	for _, r := range routes {
		h.gh.Fail(r, -1, fakegithub.FaultStatus(http.StatusBadGateway, "Server Error"))
	}
	calls := len(h.gh.Calls())
	h.pass(shaA) // acknowledged even though GitHub is down
	h.eventually("the check_suite delivery applied", func() bool {
		keys, err := h.app.Store.PendingKeys(context.Background())
		return err == nil && len(keys) == 0
	})
	h.eventually("the engine to try GitHub", func() bool { return len(h.gh.Calls()) > calls })
	h.waitLogged("GitHub unavailable: the queue waits", 1)
	if m := h.merges(); len(m) != 0 {
		t.Fatalf("merged while GitHub was down: %+v", m)
	}
	if q := h.queue(); len(q) != 1 || q[0].PRNumber != 7 || q[0].Status == leasedo.StatusBounced {
		t.Fatalf("queue while GitHub is down: %+v", q)
	}

	h.gh.ClearFaults()
	h.eventually("the merge once GitHub is back", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.PRNumber != 7 || m.SHA != shaA {
		t.Fatalf("merge = %+v", m)
	}
	h.integrityOK()
}

// The installation has not accepted a permission mergegate needs (here
// administration: read, for the base's protection): GitHub answers 403
// "Resource not accessible by integration" and names what the request
// needs in X-Accepted-GitHub-Permissions. The log says so, with what
// GitHub named, instead of a generic failure; nobody is bounced, and once
// the permission is accepted the queue's next try merges.
func TestFaultMissingPermissionIsNamed(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.gh.Fail(fakegithub.RouteGetProtection, -1, fakegithub.FaultMissingPermission("administration=read"))
	h.label(7, shaA)
	h.pass(shaA)
	h.waitLogged("GitHub refused a request the App's permissions on this installation do not cover; the queue retries in a minute (operator: give the App what app.yml asks for, and accept it on the installation; needs is what GitHub says the request needs)", 1)
	if log := h.logBuf.String(); !strings.Contains(log, `"needs":"administration=read"`) || strings.Contains(log, "queue step failed") {
		t.Errorf("the log does not name the permission (needs), or still says only that the step failed:\n%s", log)
	}
	if m := h.merges(); len(m) != 0 {
		t.Fatalf("merged without reading the base's protection: %+v", m)
	}
	if q := h.queue(); len(q) != 1 || q[0].PRNumber != 7 || q[0].Status == leasedo.StatusBounced {
		t.Fatalf("queue while the permission is missing: %+v", q)
	}

	h.gh.ClearFaults() // the owner accepted the permission
	h.eventually("the merge at the retry, a minute later", func() bool {
		h.clock.Advance(time.Minute)
		return len(h.merges()) == 1
	})
	if m := h.merges()[0]; m.PRNumber != 7 || m.SHA != shaA {
		t.Fatalf("merge = %+v", m)
	}
}

// The clock jumps back an hour while a lease is held: the lease expires one
// TTL after the jump (not stuck for the hour), and not before (not stolen
// early); a delivery that waited on it is then applied. A jump forward ages
// the lease: it may be taken over, and the old holder is fenced.
func TestFaultClockJumpsLease(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t, filepath.Join(t.TempDir(), "mergegate.db"), leasedo.Options{})
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk := leasedo.NewManualClock(t0)
	const ttl = 30 * time.Second
	s := leasedo.NewStore(db, leasedo.Config{TTL: ttl, Dead: 90 * time.Second, Clock: clk})
	k := leasedo.Key{Tenant: "1", Repo: "octo/clock"}
	lockedFor := func(what string) time.Duration {
		t.Helper()
		_, err := s.Acquire(ctx, k, "other")
		var le *leasedo.LockedError
		if !errors.As(err, &le) {
			t.Fatalf("%s: acquire = %v, want locked", what, err)
		}
		if le.ExpiresIn <= 0 || le.ExpiresIn > ttl {
			t.Fatalf("%s: expires in %s, want within the TTL (%s)", what, le.ExpiresIn, ttl)
		}
		st, err := s.Check(ctx, k)
		if err != nil || !st.Locked || st.ExpiresIn == nil || *st.ExpiresIn > ttl.Milliseconds() || *st.ExpiresIn <= 0 {
			t.Fatalf("%s: check = %+v %v", what, st, err)
		}
		return le.ExpiresIn
	}

	// Back one hour, holder silent: expires one TTL after the jump.
	l, err := s.Acquire(ctx, k, "holder")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(-time.Hour)
	lockedFor("just after the jump back")
	clk.Advance(ttl - time.Second)
	lockedFor("one second before the TTL after the jump")
	clk.Advance(2 * time.Second)
	l2, err := s.Acquire(ctx, k, "other")
	if err != nil {
		t.Fatalf("a TTL after the jump back the lease is still held: %v", err)
	}
	if ok, err := s.Release(ctx, l); ok || err != nil {
		t.Fatalf("the old holder released the new holder's lease: %v %v", ok, err)
	}
	if err := s.Renew(ctx, l); !errors.Is(err, leasedo.ErrLeaseLost) {
		t.Fatalf("old holder renew = %v, want ErrLeaseLost", err)
	}
	if ok, err := s.Release(ctx, l2); !ok || err != nil {
		t.Fatal(ok, err)
	}

	// Back one hour, holder still working: its renewal keeps it, for a TTL.
	l, err = s.Acquire(ctx, k, "holder")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(-time.Hour)
	if err := s.Renew(ctx, l); err != nil {
		t.Fatalf("renew after the jump back: %v", err)
	}
	if d := lockedFor("renewed after the jump back"); d != ttl {
		t.Fatalf("renewed lease expires in %s, want %s", d, ttl)
	}
	if ok, err := s.Release(ctx, l); !ok || err != nil {
		t.Fatal(ok, err)
	}

	// Forward one hour: the lease is stale by the clock and may be taken
	// over; the old holder can neither write nor release the new lease.
	l, err = s.Acquire(ctx, k, "holder")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	l2, err = s.Acquire(ctx, k, "other")
	if err != nil {
		t.Fatalf("after a jump forward past the TTL: %v", err)
	}
	ev := leasedo.Event{EventType: "pull_request", Tenant: k.Tenant, Repo: k.Repo, Action: "labeled", PRNumber: 1, Details: &leasedo.Details{Sha: "a"}}
	if _, err := s.Apply(ctx, l, ev); !errors.Is(err, leasedo.ErrLeaseLost) {
		t.Fatalf("old holder's write after the takeover = %v, want ErrLeaseLost", err)
	}
	if ok, _ := s.Release(ctx, l); ok {
		t.Fatal("old holder released the new lease")
	}
	if st, _ := s.Check(ctx, k); !st.Locked || st.HeldBy != "other" {
		t.Fatalf("lease after the old holder's attempts: %+v", st)
	}
	s.Release(ctx, l2) //nolint:errcheck
	if got, err := db.IntegrityCheck(ctx); got != "ok" || err != nil {
		t.Fatalf("integrity_check = %q %v", got, err)
	}
}

// Through the running App: a delivery that arrives while a lease taken
// before a jump back is held waits one TTL of the (manual) clock, not the
// jump's hour, and is then applied.
func TestFaultClockJumpBackDeliveryWaitsOneTTL(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	ctx := context.Background()
	if _, err := h.app.Store.Acquire(ctx, testKey, "admin"); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(-time.Hour)
	h.mustSend("pull_request", h.prPayload("labeled", 5, shaA, "automerge"))
	h.waitLogged("lease held; will retry", 1) // the worker found the lease held
	h.clock.Advance(h.cfg.LeaseTTL - 2*time.Second)
	h.waitLogged("lease held; will retry", 2) // its retry found it still held
	if h.queued(5) {
		t.Fatal("the delivery was applied before the lease's TTL ran out: the lease was stolen early")
	}
	h.clock.Advance(3 * time.Second)
	h.eventually("the delivery applied one TTL after the jump", func() bool { return h.queued(5) })
	h.integrityOK()
}
