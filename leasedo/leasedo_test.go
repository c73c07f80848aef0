package leasedo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*Store, *ManualClock) {
	t.Helper()
	db := openDB(t, Options{})
	clk := NewManualClock(t0)
	return NewStore(db, Config{TTL: 30 * time.Second, Dead: 90 * time.Second, Clock: clk}), clk
}

var key = Key{Tenant: "42", Repo: "octo/hello"}

func join(pr int, sha string) Event {
	return Event{EventType: "pull_request", Tenant: key.Tenant, Repo: key.Repo, Action: "labeled", Op: OpJoin, PRNumber: pr, Details: &Details{Sha: sha}}
}

// bounce bounces pr at sha under a lease of its own, as a sync does.
func bounce(t *testing.T, s *Store, pr int, sha string) {
	t.Helper()
	ctx := context.Background()
	l, err := s.Acquire(ctx, key, "worker")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release(ctx, l) //nolint:errcheck
	if err := s.Bounce(ctx, l, pr, sha, "its required check \"ci\" concluded failure", true,
		CheckRunEnd{Conclusion: "failure", Title: "Out of the merge queue", Summary: "failed"}); err != nil {
		t.Fatal(err)
	}
}

func mustProcess(t *testing.T, s *Store, ev Event) Result {
	t.Helper()
	r, err := s.ProcessEvent(context.Background(), ev, "worker")
	if err != nil {
		t.Fatalf("process %s/%s #%d: %v", ev.EventType, ev.Action, ev.PRNumber, err)
	}
	return r
}

// The lease's TTL table (docs/lease-protocol.md): 0–30 s active, 30–90 s stale, 90 s+ dead.
func TestLeaseTTLTable(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		for _, tc := range []struct {
			age        time.Duration
			locked     bool // acquire answers 409
			reconciled bool // reconcile force-releases it as dead
		}{
			{0, true, false},
			{10 * time.Second, true, false},
			{29999 * time.Millisecond, true, false},
			{30 * time.Second, false, false},
			{45 * time.Second, false, false},
			{89999 * time.Millisecond, false, false},
			{90 * time.Second, false, true},
			{120 * time.Second, false, true},
		} {
			t.Run(tc.age.String(), func(t *testing.T) {
				s, clk := newStore(t)
				if _, err := s.Acquire(ctx, key, "cron"); err != nil {
					t.Fatal(err)
				}
				clk.Advance(tc.age)

				st, err := s.Check(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if st.Locked != tc.locked || st.HeldBy != "cron" {
					t.Fatalf("check() = %+v, want locked=%v held_by=cron", st, tc.locked)
				}
				if tc.locked && *st.ExpiresIn != (30*time.Second-tc.age).Milliseconds() {
					t.Fatalf("expires_in = %d, want %d", *st.ExpiresIn, (30*time.Second - tc.age).Milliseconds())
				}

				ans, err := s.Reconcile(ctx, key, "reconcile", nil)
				if tc.locked {
					var le *LockedError
					if !errors.As(err, &le) || le.HeldBy != "cron" {
						t.Fatalf("reconcile on an active lease: err = %v, want locked by cron", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := len(ans.Results.StaleLeases) == 1; got != tc.reconciled {
					t.Fatalf("staleLeases = %+v, want dead=%v", ans.Results.StaleLeases, tc.reconciled)
				}
				if tc.reconciled && ans.Results.StaleLeases[0].AgeMS != tc.age.Milliseconds() {
					t.Fatalf("stale lease age = %d", ans.Results.StaleLeases[0].AgeMS)
				}
				// Either way a stale lease no longer locks: acquire takes it over.
				if _, err := s.Acquire(ctx, key, "worker"); err != nil {
					t.Fatalf("acquire over a %s lease: %v", tc.age, err)
				}
			})
		}
	})
}

func TestAcquireLockedAndRelease(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		l, err := s.Acquire(ctx, key, "worker")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire(ctx, key, "cron")
		var le *LockedError
		if !errors.As(err, &le) || le.HeldBy != "worker" || le.ExpiresIn != 30*time.Second {
			t.Fatalf("second acquire: %v", err)
		}
		if ok, err := s.Release(ctx, l); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
		if st, _ := s.Check(ctx, key); st.Locked || st.HeldBy != "" {
			t.Fatalf("after release: %+v", st)
		}
		// A holder whose lease went stale and was taken over releases nothing.
		l1, _ := s.Acquire(ctx, key, "worker")
		clk.Advance(31 * time.Second)
		l2, err := s.Acquire(ctx, key, "cron")
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.Release(ctx, l1); ok {
			t.Fatal("old holder released the new holder's lease")
		}
		if _, err := s.Apply(ctx, l1, join(1, "a")); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("write under a lost lease: %v", err)
		}
		if st, _ := s.Check(ctx, key); !st.Locked || st.HeldBy != "cron" {
			t.Fatalf("new holder's lease: %+v", st)
		}
		if ok, _ := s.Release(ctx, l2); !ok {
			t.Fatal("new holder could not release")
		}
	})
}

// The store applies each typed op; what GitHub's vocabulary (POST /event's too)
// map to is the webhook package's (TestSeedVocabulary there).
func TestOps(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		ev := func(op Op, pr int, d *Details) Event {
			return Event{EventType: "test", Action: string(op), Op: op, Tenant: key.Tenant, Repo: key.Repo, PRNumber: pr, Details: d}
		}
		steps := []struct {
			ev     Event
			result string
			qlen   int
		}{
			{ev(OpJoin, 1, &Details{Sha: "s1", Base: "main"}), ResultJoined, 1},
			{ev(OpJoin, 1, &Details{Sha: "s1"}), ResultAlreadyQueued, 1}, // double-staging
			{ev(OpJoin, 2, &Details{Sha: "s2"}), ResultJoined, 2},
			{ev(OpJoin, 3, &Details{Sha: "s3"}), ResultJoined, 3},
			{ev(OpReevaluate, 1, &Details{Sha: "s1b"}), ResultReevaluated, 3},
			{ev(OpReevaluate, 9, &Details{Sha: "x"}), ResultIgnored, 3}, // not queued
			{ev(OpRecheck, 0, &Details{Sha: "s1b", GateResult: "success"}), ResultGateRecorded, 3},
			{ev(OpRecheck, 0, &Details{Sha: "nobody"}), ResultIgnored, 3},
			{ev(OpLeave, 3, nil), ResultLeft, 2},
			{ev(OpLeave, 3, nil), ResultLeft, 2}, // absent: silent success
			{ev(OpIgnore, 1, nil), ResultIgnored, 2},
		}
		for i, st := range steps {
			clk.Advance(time.Second)
			r := mustProcess(t, s, st.ev)
			if r.Result != st.result || r.QueueLength != st.qlen {
				t.Fatalf("step %d %s: got %+v, want %s/%d", i, st.ev.Op, r, st.result, st.qlen)
			}
		}
		q, err := s.Items(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// A posted gate result only starts a reading: nothing passed.
		one := q[0]
		if len(q) != 2 || one.PRNumber != 1 || one.PRSha != "s1b" || one.Status != StatusQueued || one.GateResult != "" ||
			one.ReevaluatedAt == nil || one.BaseRef != "main" || one.HeadAt != *one.ReevaluatedAt {
			t.Fatalf("queue = %+v", q)
		}
		events, _ := s.Events(ctx, key)
		if len(events) != len(steps) {
			t.Fatalf("events = %d, want every event logged (%d)", len(events), len(steps))
		}
		if _, err := s.ProcessEvent(ctx, Event{EventType: "pull_request", Action: "opened", Tenant: key.Tenant, Repo: key.Repo, PRNumber: 5,
			Details: &Details{Sha: "x"}}, "worker"); err == nil || !strings.Contains(err.Error(), "no queue operation") {
			t.Fatalf("an event without an op: err = %v, want it refused", err)
		}
	})
}

// The transitions a sync applies after deciding: wait, block, bounce,
// merged, each audited as the protocol has it and each ending the check run
// through the outbox.
func TestTransitions(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		mustProcess(t, s, join(1, "a"))
		mustProcess(t, s, join(2, "b"))
		mustProcess(t, s, join(3, "c"))
		l, err := s.Acquire(ctx, key, "worker")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release(ctx, l) //nolint:errcheck
		for _, id := range []struct {
			pr  int
			sha string
			id  int64
		}{{1, "a", 11}, {2, "b", 22}} {
			if err := s.SetCheckRun(ctx, l, id.pr, id.sha, id.id, "title"); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Second)
		mustChange := func(want bool) func(bool, error) {
			return func(changed bool, err error) {
				t.Helper()
				if err != nil || changed != want {
					t.Fatalf("changed = %v %v, want %v", changed, err, want)
				}
			}
		}
		mustChange(true)(s.Wait(ctx, l, 1, "a", StatusEvaluating, `waiting for required check "ci"`))
		mustChange(false)(s.Wait(ctx, l, 1, "a", StatusEvaluating, `waiting for required check "ci"`))
		mustChange(true)(s.Wait(ctx, l, 1, "a", StatusGatePassed, "waiting for an approving review"))
		mustChange(true)(s.Wait(ctx, l, 1, "a", StatusGatePassed, ""))
		mustChange(false)(s.Wait(ctx, l, 1, "old-sha", StatusGatePassed, "")) // a moved head is left alone
		if _, err := s.Wait(ctx, l, 1, "a", StatusBounced, ""); err == nil {
			t.Fatal("Wait with a status that is no waiting status: want an error")
		}
		mustChange(true)(s.Block(ctx, l, 3, "c", "the base uses GitHub's merge queue"))
		mustChange(false)(s.Block(ctx, l, 3, "c", "the base uses GitHub's merge queue"))
		if n, err := s.Recheck(ctx, l, StatusBlocked); n != 1 || err != nil {
			t.Fatalf("recheck blocked = %d %v", n, err)
		}
		mustChange(false)(s.Block(ctx, l, 3, "c", "the base uses GitHub's merge queue")) // tried again, said once
		if err := s.Bounce(ctx, l, 2, "b", "its check failed", true, CheckRunEnd{Conclusion: "failure", Title: "Out", Summary: "its check failed"}); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkMerged(ctx, l, 1, "a", "squash", CheckRunEnd{Conclusion: "success", Title: "Merged", Summary: "merged"}); err != nil {
			t.Fatal(err)
		}
		q, _ := s.Items(ctx, key)
		if len(q) != 2 || q[0].PRNumber != 2 || q[0].Status != StatusBounced || q[0].GateResult != forge.GateFailure ||
			q[1].PRNumber != 3 || q[1].Status != StatusBlocked {
			t.Fatalf("queue = %+v", q)
		}
		audit, _ := s.Audit(ctx, key)
		var actions []string
		for _, a := range audit {
			actions = append(actions, fmt.Sprintf("%s#%d", a.Action, a.PRNumber))
		}
		if want := "[join#1 join#2 join#3 gate_success#1 blocked#3 gate_failure#2 bounce#2 merge#1]"; fmt.Sprint(actions) != want {
			t.Fatalf("audit = %v\nwant    %s", actions, want)
		}
		ends, err := s.CheckRunsToEnd(ctx, key)
		if err != nil || len(ends) != 2 || ends[0].CheckRunID != 22 || ends[0].Conclusion != "failure" ||
			ends[1].CheckRunID != 11 || ends[1].Conclusion != "success" || ends[1].Sha != "a" {
			t.Fatalf("check runs to end = %+v %v", ends, err)
		}
		if err := s.CheckRunEnded(ctx, l, ends[0].ID); err != nil {
			t.Fatal(err)
		}
		// A new head ends the old head's run; leaving ends the current one.
		if err := s.SetCheckRun(ctx, l, 3, "c", 33, "title"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reevaluate(ctx, l, 3, "c2", "", "new head"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetCheckRun(ctx, l, 3, "c2", 34, "title"); err != nil {
			t.Fatal(err)
		}
		if err := s.Leave(ctx, l, 3, "closed on GitHub"); err != nil {
			t.Fatal(err)
		}
		ends, _ = s.CheckRunsToEnd(ctx, key)
		if len(ends) != 3 || ends[1].CheckRunID != 33 || ends[1].Sha != "c" || ends[2].CheckRunID != 34 || ends[2].Conclusion != "neutral" ||
			!strings.Contains(ends[2].Summary, "closed on GitHub") {
			t.Fatalf("check runs to end = %+v", ends)
		}
	})
}

func TestRejoinAfterBounce(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		s, _ := newStore(t)
		mustProcess(t, s, join(5, "a"))
		bounce(t, s, 5, "a")
		if r := mustProcess(t, s, join(5, "b")); r.Result != ResultJoined || r.QueueLength != 1 {
			t.Fatalf("rejoin after bounce: %+v", r)
		}
		q, _ := s.Queue(context.Background(), key)
		if q[0].Status != StatusQueued || q[0].PRSha != "b" {
			t.Fatalf("queue: %+v", q)
		}
	})
}

func TestValidation(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		s, _ := newStore(t)
		for _, tc := range []struct {
			ev    Event
			field string
		}{
			{Event{Tenant: "1", Repo: "a/b"}, "eventType"},
			{Event{EventType: "pull_request", Repo: "a/b"}, "tenant"},
			{Event{EventType: "pull_request", Tenant: "1"}, "repo"},
			{Event{EventType: "pull_request", Tenant: "1", Repo: "a/b", Action: "opened", Op: OpJoin, PRNumber: 1}, "details.sha"},
			{Event{EventType: "pull_request", Tenant: "1", Repo: "a/b", Action: "opened", Op: OpJoin, Details: &Details{Sha: "x"}}, "prNumber"},
			{Event{EventType: "status", Tenant: "1", Repo: "a/b", Details: &Details{Sha: "x", GateResult: "green"}}, "details.gateResult"},
		} {
			_, err := s.ProcessEvent(context.Background(), tc.ev, "worker")
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("%+v: err = %v, want field %s", tc.ev, err, tc.field)
			}
			if st, _ := s.Check(context.Background(), Key{"1", "a/b"}); st.Locked {
				t.Fatalf("lease left held after a rejected event")
			}
		}
	})
}

func TestCapsHold(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newStore(t)
		other := Key{Tenant: key.Tenant, Repo: "octo/other"}
		for i := 1; i <= 260; i++ {
			mustProcess(t, s, join(i, fmt.Sprintf("sha%d", i)))
			mustProcess(t, s, Event{EventType: "pull_request", Tenant: other.Tenant, Repo: other.Repo, Action: "assigned", Op: OpIgnore, PRNumber: i})
		}
		events, _ := s.Events(ctx, key)
		audit, _ := s.Audit(ctx, key)
		if len(events) != EventCap || len(audit) != AuditCap {
			t.Fatalf("events=%d audit=%d, want %d and %d", len(events), len(audit), EventCap, AuditCap)
		}
		if events[0].PRNumber != 161 || events[99].PRNumber != 260 || audit[0].PRNumber != 61 {
			t.Fatalf("caps keep the newest: first event #%d last #%d first audit #%d", events[0].PRNumber, events[99].PRNumber, audit[0].PRNumber)
		}
		// The tail the dashboard's overview reads: the newest few, oldest first.
		if tail, err := s.AuditTail(ctx, key, 3); err != nil || len(tail) != 3 || tail[0].PRNumber != 258 || tail[2].PRNumber != 260 {
			t.Fatalf("AuditTail(3) = %+v, %v; want #258..#260", tail, err)
		}
		if tail, _ := s.AuditTail(ctx, key, 10*AuditCap); len(tail) != AuditCap {
			t.Fatalf("AuditTail past the cap = %d entries, want %d", len(tail), AuditCap)
		}
		if oe, _ := s.Events(ctx, other); len(oe) != EventCap {
			t.Fatalf("other repo's events = %d", len(oe))
		}
		// Each insert trims its repository's rows to the cap: the tables hold
		// no more than readers see.
		for _, k := range []Key{key, other} {
			if ev := countRows(t, s, `SELECT count(*) FROM events WHERE tenant = ? AND repo = ?`, k.Tenant, k.Repo); ev != EventCap {
				t.Errorf("%s: %d event rows kept, want %d", k, ev, EventCap)
			}
		}
		if au := countRows(t, s, `SELECT count(*) FROM audit WHERE tenant = ? AND repo = ?`, key.Tenant, key.Repo); au != AuditCap {
			t.Errorf("%d audit rows kept, want %d", au, AuditCap)
		}
		if ans, err := s.Reconcile(ctx, key, "cron", nil); err != nil || ans.EventCount != EventCap {
			t.Fatalf("reconcile eventCount = %d (%v), want %d", ans.EventCount, err, EventCap)
		}
	})
}

func TestReleaseAfterErrorAndPanic(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newStore(t)
		boom := errors.New("boom")
		_ = boom
		// Error: a join without a sha fails inside the transaction.
		if _, err := s.ProcessEvent(ctx, Event{EventType: "pull_request", Tenant: key.Tenant, Repo: key.Repo, Action: "opened", Op: OpJoin, PRNumber: 1}, "worker"); err == nil {
			t.Fatal("want an error")
		}
		if st, _ := s.Check(ctx, key); st.Locked {
			t.Fatal("lease held after an error")
		}
		if n, _ := s.Events(ctx, key); len(n) != 0 {
			t.Fatal("a failed event was half written")
		}
		// Panic inside the handler.
		s.beforeApply = func(Event) { panic("handler bug") }
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("want the panic to propagate")
				}
			}()
			s.ProcessEvent(ctx, join(1, "a"), "worker") //nolint:errcheck
		}()
		s.beforeApply = nil
		if st, _ := s.Check(ctx, key); st.Locked {
			t.Fatal("lease held after a panic")
		}
		if r := mustProcess(t, s, join(1, "a")); r.Result != ResultJoined {
			t.Fatalf("after panic: %+v", r)
		}
	})
}

func TestNoCrossTenantLeakage(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newStore(t)
		a := Key{Tenant: "1", Repo: "octo/same"}
		b := Key{Tenant: "2", Repo: "octo/same"}
		mustProcess(t, s, Event{EventType: "pull_request", Tenant: a.Tenant, Repo: a.Repo, Action: "opened", Op: OpJoin, PRNumber: 7, Details: &Details{Sha: "x"}})
		if _, err := s.Acquire(ctx, a, "worker"); err != nil {
			t.Fatal(err)
		}
		// b is a different (tenant, repo): its lease is free, its queue empty.
		r, err := s.ProcessEvent(ctx, Event{EventType: "check_run", Tenant: b.Tenant, Repo: b.Repo, Action: "completed", Op: OpRecheck, Details: &Details{Sha: "x", GateResult: "success"}}, "worker")
		if err != nil || r.Result != ResultIgnored || r.QueueLength != 0 {
			t.Fatalf("tenant 2 saw tenant 1's PR: %+v %v", r, err)
		}
		qa, _ := s.Queue(ctx, a)
		if qa[0].Status != StatusQueued {
			t.Fatalf("tenant 1's entry changed: %+v", qa[0])
		}
		if ea, _ := s.Events(ctx, a); len(ea) != 1 {
			t.Fatalf("tenant 1 events = %d", len(ea))
		}
		if st, _ := s.Check(ctx, b); st.Locked {
			t.Fatal("tenant 2 saw tenant 1's lease")
		}
	})
}

func TestReconcileFixes(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		mustProcess(t, s, join(1, "a"))
		mustProcess(t, s, join(2, "b"))
		mustProcess(t, s, join(3, "c"))
		bounce(t, s, 2, "b")
		// A duplicate and a corrupted row, as a restored backup or hand edit leaves them.
		for _, q := range []string{
			`INSERT INTO queue (tenant, repo, pr_number, pr_sha, queued_at, status) VALUES ('42', 'octo/hello', 1, 'a', 9999999999999, 'queued')`,
			`INSERT INTO queue (tenant, repo, pr_number, pr_sha, queued_at, status) VALUES ('42', 'octo/hello', 8, 'h', 1, 'exploded')`,
		} {
			if _, err := s.db.w.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		// And a dead lease.
		if _, err := s.Acquire(ctx, key, "worker"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(95 * time.Second)

		ans, err := s.Reconcile(ctx, key, "cron", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, f := range ans.Results.Fixed {
			got[f.Fix] = f.PRNumber
		}
		if len(ans.Results.Fixed) != 3 || got["duplicate_removed"] != 1 || got["bounced_removed"] != 2 || got["corrupt_removed"] != 8 {
			t.Fatalf("fixed = %+v", ans.Results.Fixed)
		}
		if len(ans.Results.StaleLeases) != 1 || ans.Results.StaleLeases[0].HeldBy != "worker" {
			t.Fatalf("staleLeases = %+v", ans.Results.StaleLeases)
		}
		if ans.QueueLength != 2 || ans.EventCount != 3 {
			t.Fatalf("queueLength=%d eventCount=%d", ans.QueueLength, ans.EventCount)
		}
		if st, _ := s.Check(ctx, key); st.Locked || st.HeldBy != "" {
			t.Fatalf("reconcile left a lease: %+v", st)
		}
		// A second pass finds nothing.
		ans, _ = s.Reconcile(ctx, key, "cron", nil)
		if len(ans.Results.Fixed) != 0 || len(ans.Results.StaleLeases) != 0 {
			t.Fatalf("second pass: %+v", ans.Results)
		}
	})
}

// 32 goroutines acquire the same (tenant, repo): exactly one wins, the rest
// get locked, and no SQLITE_BUSY reaches a caller.
func TestConcurrentAcquire(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		s, _ := newStore(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, locked := 0, 0
		var other []error
		start := make(chan struct{})
		for i := 0; i < 32; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := s.Acquire(context.Background(), key, "worker")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case IsLocked(err):
					locked++
				default:
					other = append(other, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if won != 1 || locked != 31 || len(other) != 0 {
			t.Fatalf("won=%d locked=%d errors=%v", won, locked, other)
		}
	})
}

// Gauges says, for every tracked repository at once, what Items and Check
// say one repository at a time; untracked repositories are left out.
func TestGaugesMatchItemsAndCheck(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := openTB(t, Options{})
		held, stale, empty, untracked := key, Key{Tenant: "42", Repo: "octo/stale"}, Key{Tenant: "7", Repo: "other/empty"}, Key{Tenant: "42", Repo: "octo/untracked"}
		if err := s.Track(ctx, held, stale, empty); err != nil {
			t.Fatal(err)
		}
		for i, k := range []Key{held, held, stale, untracked} {
			ev := join(10+i, fmt.Sprintf("sha-%d", i))
			ev.Tenant, ev.Repo = k.Tenant, k.Repo
			mustProcess(t, s, ev)
			clk.Advance(time.Second)
		}
		if _, err := s.Acquire(ctx, stale, "cron"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Minute) // past the TTL and the dead time: stale
		if _, err := s.Acquire(ctx, held, "worker"); err != nil {
			t.Fatal(err)
		}
		gauges, err := s.Gauges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range gauges {
			items, err := s.Items(ctx, g.Key)
			if err != nil {
				t.Fatal(err)
			}
			ls, err := s.Check(ctx, g.Key)
			if err != nil {
				t.Fatal(err)
			}
			if g.QueueDepth != len(items) || leaseText(g.Lease) != leaseText(ls) {
				t.Errorf("%s: gauges %d %s, Items/Check %d %s", g.Key, g.QueueDepth, leaseText(g.Lease), len(items), leaseText(ls))
			}
			if len(items) > 0 && !g.OldestQueuedAt.Equal(time.UnixMilli(items[0].QueuedAt)) {
				t.Errorf("%s: oldest %v, want %v", g.Key, g.OldestQueuedAt, time.UnixMilli(items[0].QueuedAt))
			}
			got = append(got, fmt.Sprintf("%s:%d:%v:%v", g.Key, g.QueueDepth, g.Lease.Locked, g.Lease.Stale))
		}
		if want := "42:octo/hello:2:true:false 42:octo/stale:1:false:true 7:other/empty:0:false:false"; strings.Join(got, " ") != want {
			t.Fatalf("gauges %q, want %q", strings.Join(got, " "), want)
		}
	})
}

func leaseText(ls LeaseState) string {
	num := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("locked=%v by=%s expires=%s stale=%v age=%s", ls.Locked, ls.HeldBy, num(ls.ExpiresIn), ls.Stale, num(ls.AgeMS))
}
