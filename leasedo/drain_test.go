package leasedo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// failAll marks k's next pending deliveries failed, one Drain each, as a
// malformed delivery is: ids must be k's first pending deliveries, in order.
func failAll(t *testing.T, s *Store, k Key, ids ...string) {
	t.Helper()
	for _, id := range ids {
		res, err := s.Drain(context.Background(), k, "test", 1, func(d Delivery) (Batch, error) {
			return Batch{}, fmt.Errorf("%s: malformed", d.ID)
		}, DrainPolicy{})
		if err != nil || len(res.Done) != 1 || res.Done[0].Delivery.ID != id || !res.Done[0].Failed {
			t.Fatalf("fail %s: %+v %v", id, res, err)
		}
	}
}

// decodeEvent is a Prepare for deliveries whose body is one /event JSON.
func decodeEvent(d Delivery) (Batch, error) {
	var ev Event
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return Batch{}, err
	}
	ev.Op = opFor(ev.Action)
	return Batch{Events: []Event{ev}}, nil
}

// opFor is the op these tests' events carry (the webhook package maps
// GitHub's vocabulary for real).
func opFor(action string) Op {
	switch action {
	case "labeled", "opened":
		return OpJoin
	case "unlabeled", "closed":
		return OpLeave
	case "synchronize":
		return OpReevaluate
	case "completed":
		return OpRecheck
	}
	return OpIgnore
}

func enqueueJoins(t *testing.T, in *Inbox, k Key, prs ...int) {
	t.Helper()
	for _, pr := range prs {
		ev := join(pr, fmt.Sprintf("sha-%d", pr))
		ev.Tenant, ev.Repo = k.Tenant, k.Repo
		body, _ := json.Marshal(ev)
		mustEnqueue(t, in, delivery(fmt.Sprintf("%s-%d", k.Repo, pr), k, string(body)))
	}
}

func queuedPRs(t *testing.T, s *Store, k Key) string {
	t.Helper()
	q, err := s.Queue(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range q {
		out = append(out, fmt.Sprint(e.PRNumber))
	}
	return strings.Join(out, ",")
}

// Drain applies in arrival order, limit per call, and says when more wait;
// the lease is taken and given back inside the transaction: nothing of it
// stays behind, and only k's deliveries are touched.
func TestDrainAppliesInOrderInBatches(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		other := Key{Tenant: "42", Repo: "octo/other"}
		enqueueJoins(t, in, key, 1, 2)
		enqueueJoins(t, in, other, 9)
		enqueueJoins(t, in, key, 3, 4, 5)

		var seen []string
		prep := func(d Delivery) (Batch, error) {
			seen = append(seen, d.ID)
			if d.Tenant != key.Tenant || d.Repo != key.Repo || d.State != DeliveryPending || len(d.Body) == 0 {
				t.Errorf("prepare got %+v", d)
			}
			return decodeEvent(d)
		}
		res, err := s.Drain(ctx, key, "worker", 2, prep, DrainPolicy{})
		if err != nil || len(res.Done) != 2 || !res.More || !res.RetryAt.IsZero() {
			t.Fatalf("first drain: %+v %v", res, err)
		}
		if r := res.Done[0]; r.Err != nil || len(r.Results) != 1 || r.Results[0].Result != ResultJoined || r.Results[0].QueueLength != 1 {
			t.Fatalf("first delivery: %+v", r)
		}
		if got := queuedPRs(t, s, key); got != "1,2" {
			t.Fatalf("queue after 2 = %s", got)
		}
		res, err = s.Drain(ctx, key, "worker", 2, prep, DrainPolicy{})
		if err != nil || len(res.Done) != 2 || !res.More {
			t.Fatalf("second drain: %+v %v", res, err)
		}
		res, err = s.Drain(ctx, key, "worker", 2, prep, DrainPolicy{})
		if err != nil || len(res.Done) != 1 || res.More {
			t.Fatalf("third drain: %+v %v", res, err)
		}
		res, err = s.Drain(ctx, key, "worker", 2, prep, DrainPolicy{})
		if err != nil || len(res.Done) != 0 || res.More {
			t.Fatalf("empty drain: %+v %v", res, err)
		}
		if got := strings.Join(seen, " "); got != "octo/hello-1 octo/hello-2 octo/hello-3 octo/hello-4 octo/hello-5" {
			t.Fatalf("prepared %s", got)
		}
		if got := queuedPRs(t, s, key); got != "1,2,3,4,5" {
			t.Fatalf("queue = %s", got)
		}
		if got := queuedPRs(t, s, other); got != "" {
			t.Fatalf("another repository's delivery was applied: %s", got)
		}
		if p, _ := s.Pending(ctx, other, 10); len(p) != 1 {
			t.Fatalf("other's pending = %d", len(p))
		}
		if n := countRows(t, s, `SELECT count(*) FROM leases`); n != 0 {
			t.Fatalf("%d lease rows left behind", n)
		}
		if d := deliveryRow(t, s, "octo/hello-5"); d.State != DeliveryDone || d.Attempts != 1 {
			t.Fatalf("applied delivery: %+v", d)
		}
	})
}

// A lease younger than the TTL, held by someone else, stops the drain:
// nothing applied, *LockedError answered. Once stale it is removed (as an
// acquire and release would) and the deliveries are applied.
func TestDrainRespectsHeldLease(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		enqueueJoins(t, in, key, 1)
		if _, err := s.Acquire(ctx, key, "admin"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Second)
		_, err := s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{})
		var le *LockedError
		if !errors.As(err, &le) || le.HeldBy != "admin" || le.ExpiresIn != 20*time.Second {
			t.Fatalf("drain under admin's lease: %v", err)
		}
		if p, _ := s.Pending(ctx, key, 10); len(p) != 1 {
			t.Fatalf("pending = %d, want 1", len(p))
		}
		clk.Advance(21 * time.Second) // admin's lease is stale (31 s old)
		res, err := s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{})
		if err != nil || len(res.Done) != 1 || res.Done[0].Err != nil {
			t.Fatalf("drain after the lease went stale: %+v %v", res, err)
		}
		if st, _ := s.Check(ctx, key); st.HeldBy != "" {
			t.Fatalf("stale lease left: %+v", st)
		}
	})
}

// A lease from the future (the clock went back) is restamped to now, as
// Acquire does: it locks for one TTL after the jump, not for the jump.
func TestDrainLeaseFromTheFuture(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		enqueueJoins(t, in, key, 1)
		if _, err := s.Acquire(ctx, key, "admin"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(-time.Hour)
		_, err := s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{})
		var le *LockedError
		if !errors.As(err, &le) || le.ExpiresIn != 30*time.Second {
			t.Fatalf("drain after the clock went back: %v", err)
		}
		clk.Advance(30 * time.Second)
		if res, err := s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{}); err != nil || len(res.Done) != 1 {
			t.Fatalf("drain one TTL after the jump: %+v %v", res, err)
		}
	})
}

// A delivery that cannot be prepared (malformed) is failed at once and
// the drain goes on; one whose apply fails is rolled back alone, retried
// after a backoff (nothing after it applied meanwhile: arrival order), and
// failed after MaxAttempts, when the rest follows. The error is kept,
// bounded to 2,000 bytes.
func TestDrainFailuresBackoffAndArrivalOrder(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		mustEnqueue(t, in, delivery("junk", key, "not json"))
		enqueueJoins(t, in, key, 1)
		// PR 2's delivery joins without a sha: the store refuses it.
		mustEnqueue(t, in, delivery("no-sha", key, `{"eventType":"pull_request","action":"labeled","tenant":"42","repo":"octo/hello","prNumber":2,"details":{}}`))
		enqueueJoins(t, in, key, 3)

		policy := DrainPolicy{MaxAttempts: 3, Backoff: func(n int) time.Duration { return time.Duration(n) * time.Minute }}
		res, err := s.Drain(ctx, key, "worker", 16, decodeEvent, policy)
		if err != nil || len(res.Done) != 3 {
			t.Fatalf("drain: %+v %v", res, err)
		}
		if r := res.Done[0]; r.Delivery.ID != "junk" || !r.Failed || r.Err == nil {
			t.Fatalf("malformed: %+v", r)
		}
		if r := res.Done[1]; r.Err != nil {
			t.Fatalf("PR 1: %+v", r)
		}
		if r := res.Done[2]; r.Delivery.ID != "no-sha" || r.Failed || r.Err == nil || !strings.Contains(r.Err.Error(), "sha") {
			t.Fatalf("no-sha: %+v", r)
		}
		if !res.RetryAt.Equal(clk.Now().Add(time.Minute)) || res.More {
			t.Fatalf("retry at %v, want in 1 m (more=%v)", res.RetryAt, res.More)
		}
		if got := queuedPRs(t, s, key); got != "1" {
			t.Fatalf("queue = %s: PR 3 went before the delivery in backoff", got)
		}
		if d := deliveryRow(t, s, "junk"); d.State != DeliveryFailed || d.Attempts != 1 || !strings.Contains(d.LastError, "invalid character") {
			t.Fatalf("junk: %+v", d)
		}

		// Still in backoff: nothing happens.
		res, err = s.Drain(ctx, key, "worker", 16, decodeEvent, policy)
		if err != nil || len(res.Done) != 0 || !res.RetryAt.Equal(clk.Now().Add(time.Minute)) {
			t.Fatalf("drain in backoff: %+v %v", res, err)
		}
		clk.Advance(time.Minute)
		res, err = s.Drain(ctx, key, "worker", 16, decodeEvent, policy)
		if err != nil || len(res.Done) != 1 || res.Done[0].Failed || !res.RetryAt.Equal(clk.Now().Add(2*time.Minute)) {
			t.Fatalf("second attempt: %+v %v", res, err)
		}
		clk.Advance(2 * time.Minute)
		res, err = s.Drain(ctx, key, "worker", 16, decodeEvent, policy)
		if err != nil || len(res.Done) != 2 || !res.Done[0].Failed || res.Done[1].Err != nil || !res.RetryAt.IsZero() {
			t.Fatalf("third attempt: %+v %v", res, err)
		}
		if got := queuedPRs(t, s, key); got != "1,3" {
			t.Fatalf("queue = %s", got)
		}
		if d := deliveryRow(t, s, "no-sha"); d.State != DeliveryFailed || d.Attempts != 3 {
			t.Fatalf("no-sha: %+v", d)
		}

		// The operator retries them; a long error is kept bounded.
		long := strings.Repeat("é", 3000) // 6,000 bytes
		if n, err := s.RetryFailed(ctx, key); n != 2 || err != nil {
			t.Fatalf("RetryFailed: %d %v", n, err)
		}
		res, err = s.Drain(ctx, key, "worker", 16, func(d Delivery) (Batch, error) { return Batch{}, errors.New(long) }, policy)
		if err != nil || len(res.Done) != 2 {
			t.Fatalf("after retry: %+v %v", res, err)
		}
		if d := deliveryRow(t, s, "junk"); d.State != DeliveryFailed || len(d.LastError) > 2000 || !strings.HasPrefix(d.LastError, "éé") {
			t.Fatalf("long error kept as %d bytes: %+v", len(d.LastError), d.State)
		}
	})
}

// The database's own failure (here: full) is not the delivery's: the whole
// drain fails, no attempt is counted, nothing is applied; once there is
// room again the same deliveries apply.
func TestDrainDatabaseFullCountsNoAttempt(t *testing.T) {
	// SQLite only: a full disk is made with a page cap (LimitPages).
	sqliteOnly(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		enqueueJoins(t, in, key, 1)
		// PR 2 targets a base whose name needs pages of its own (overflow).
		ev := join(2, "sha-2")
		ev.Details.Base = strings.Repeat("b", 100<<10)
		body, _ := json.Marshal(ev)
		mustEnqueue(t, in, delivery("big", key, string(body)))
		if err := s.db.LimitPages(ctx, 0); err != nil {
			t.Fatal(err)
		}
		_, err := s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{MaxAttempts: 1})
		if err == nil || !strings.Contains(err.Error(), "full") {
			t.Fatalf("drain on a full database: %v", err)
		}
		for _, id := range []string{"octo/hello-1", "big"} {
			if d := deliveryRow(t, s, id); d.State != DeliveryPending || d.Attempts != 0 || d.LastError != "" {
				t.Fatalf("%s after a full database: %+v", id, d)
			}
		}
		if got := queuedPRs(t, s, key); got != "" {
			t.Fatalf("queue after a failed drain = %s", got)
		}
		if err := s.db.LimitPages(ctx, -1); err != nil {
			t.Fatal(err)
		}
		res, err := s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{MaxAttempts: 1})
		if err != nil || len(res.Done) != 2 || queuedPRs(t, s, key) != "1,2" {
			t.Fatalf("after room was made: %+v %v", res, err)
		}
	})
}

// Deliveries are prepared before the write transaction, which applies
// them in the order they are pending then: one that changed state
// meanwhile (applied or failed by someone else) is skipped, and an earlier
// one put back to pending meanwhile (not prepared) stops the call, so
// nothing is applied ahead of it. Prepare may write: it runs outside the
// transaction.
func TestDrainSkipsWhatChangedSincePrepared(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		enqueueJoins(t, in, key, 1, 2, 3)
		setState := func(id, state string) {
			t.Helper()
			if err := s.db.write(ctx, func(tx *wtx) error {
				_, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = ? WHERE delivery_id = ?`, state, id)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		prep := func(d Delivery) (Batch, error) {
			if d.ID == key.Repo+"-1" {
				setState(key.Repo+"-2", DeliveryFailed) // failed meanwhile
			}
			return decodeEvent(d)
		}
		res, err := s.Drain(ctx, key, "worker", 16, prep, DrainPolicy{})
		if err != nil || len(res.Done) != 2 || res.Done[0].Delivery.ID != key.Repo+"-1" || res.Done[1].Delivery.ID != key.Repo+"-3" {
			t.Fatalf("drain: %+v %v", res, err)
		}
		if got := queuedPRs(t, s, key); got != "1,3" {
			t.Fatalf("queue = %s, want 1,3 (2 skipped)", got)
		}

		// 2 goes back to pending while 4 is prepared: 4 must wait for it.
		enqueueJoins(t, in, key, 4)
		prep = func(d Delivery) (Batch, error) {
			setState(key.Repo+"-2", DeliveryPending)
			return decodeEvent(d)
		}
		res, err = s.Drain(ctx, key, "worker", 16, prep, DrainPolicy{})
		if err != nil || len(res.Done) != 0 || !res.More {
			t.Fatalf("drain with an earlier delivery back to pending: %+v %v", res, err)
		}
		res, err = s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{})
		if err != nil || len(res.Done) != 2 || queuedPRs(t, s, key) != "1,3,2,4" {
			t.Fatalf("next drain: %+v %v, queue %s", res, err, queuedPRs(t, s, key))
		}
	})
}
