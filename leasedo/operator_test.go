package leasedo

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func queueOrder(t *testing.T, s *Store) []int {
	t.Helper()
	its, err := s.Items(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, it := range its {
		out = append(out, it.PRNumber)
	}
	return out
}

func lastAudit(t *testing.T, s *Store) AuditEntry {
	t.Helper()
	a, err := s.AuditTail(context.Background(), key, 1)
	if err != nil || len(a) != 1 {
		t.Fatalf("audit tail = %v %v", a, err)
	}
	return a[0]
}

// An operator moves an entry to the front or back of its base's queue,
// takes one out (its ending, comment and labels wait in the outbox) and
// retries a blocked one; each is audited with who and why.
func TestOperatorActions(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		for i, sha := range []string{"a", "b", "c"} {
			mustProcess(t, s, join(i+1, sha))
			clk.Advance(time.Second)
		}
		l, err := s.Acquire(ctx, key, "admin")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release(ctx, l) //nolint:errcheck

		if moved, err := s.MoveEntry(ctx, l, 3, true, "ana", "hotfix"); err != nil || !moved {
			t.Fatalf("move #3 to the front = %v %v", moved, err)
		}
		if got := queueOrder(t, s); !slices.Equal(got, []int{3, 1, 2}) {
			t.Fatalf("after moving #3 to the front: %v", got)
		}
		if a := lastAudit(t, s); a.Action != AuditMove || a.PRNumber != 3 || a.Reason != "moved to the front by ana: hotfix" {
			t.Fatalf("audit = %+v", a)
		}
		if moved, err := s.MoveEntry(ctx, l, 3, true, "ana", ""); err != nil || moved {
			t.Fatalf("move the first to the front again = %v %v, want unchanged", moved, err)
		}
		if moved, err := s.MoveEntry(ctx, l, 1, false, "bo", ""); err != nil || !moved {
			t.Fatalf("move #1 to the back = %v %v", moved, err)
		}
		if got := queueOrder(t, s); !slices.Equal(got, []int{3, 2, 1}) {
			t.Fatalf("after moving #1 to the back: %v", got)
		}
		if _, err := s.MoveEntry(ctx, l, 9, true, "ana", ""); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("move #9 = %v, want ErrNotQueued", err)
		}

		if err := s.SetCheckRun(ctx, l, 2, "b", 22, "Waiting for checks"); err != nil {
			t.Fatal(err)
		}
		end := CheckRunEnd{Conclusion: "neutral", Title: "Taken out of the merge queue", Summary: "by ana", Comment: "taken out by ana", Unlabel: []string{"automerge"}}
		if err := s.RemoveEntry(ctx, l, 2, "ana", "not this week", end); err != nil {
			t.Fatal(err)
		}
		if got := queueOrder(t, s); !slices.Equal(got, []int{3, 1}) {
			t.Fatalf("after taking #2 out: %v", got)
		}
		if a := lastAudit(t, s); a.Action != AuditRemove || a.Reason != "taken out by ana: not this week" {
			t.Fatalf("audit = %+v", a)
		}
		ends, err := s.CheckRunsToEnd(ctx, key)
		if err != nil || len(ends) != 1 || ends[0].CheckRunID != 22 || ends[0].Comment != end.Comment || !slices.Equal(ends[0].Unlabel, end.Unlabel) {
			t.Fatalf("outbox = %+v %v", ends, err)
		}
		if err := s.RemoveEntry(ctx, l, 2, "ana", "", end); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("remove #2 again = %v, want ErrNotQueued", err)
		}

		if err := s.RetryBlocked(ctx, l, 3, "ana"); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("retry an entry that is not blocked = %v, want ErrNotQueued", err)
		}
		if _, err := s.Block(ctx, l, 3, "c", "the App may not push to main"); err != nil {
			t.Fatal(err)
		}
		if err := s.RetryBlocked(ctx, l, 3, "ana"); err != nil {
			t.Fatal(err)
		}
		its, _ := s.Items(ctx, key)
		if its[0].PRNumber != 3 || its[0].Status != StatusQueued {
			t.Fatalf("after the retry: %+v", its[0])
		}
		if a := lastAudit(t, s); a.Action != AuditRetry || !strings.Contains(a.Reason, "by ana") {
			t.Fatalf("audit = %+v", a)
		}
	})
}

// ActivitySince reads the audit since a time and the queue's length in
// one snapshot, and says whether the capped audit reaches back that far.
func TestActivitySince(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		mustProcess(t, s, join(1, "a"))
		clk.Advance(time.Hour)
		from := clk.Now()
		mustProcess(t, s, join(2, "b"))
		bounce(t, s, 2, "b")
		a, err := s.ActivitySince(ctx, key, from)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range a.Audit {
			got = append(got, e.Action)
		}
		if !slices.Equal(got, []string{AuditJoin, AuditGateFailure, AuditBounce}) || a.QueueLength != 2 || !a.Complete {
			t.Fatalf("activity = %v, queue %d, complete %v", got, a.QueueLength, a.Complete)
		}
		// Past the cap, the oldest rows are gone: from before them, the
		// audit is not complete.
		for i := 0; i < AuditCap; i++ {
			mustProcess(t, s, join(100+i, "c"))
		}
		if a, err = s.ActivitySince(ctx, key, t0); err != nil || a.Complete || len(a.Audit) != AuditCap {
			t.Fatalf("after the cap: %d rows, complete %v, %v", len(a.Audit), a.Complete, err)
		}
	})
}
