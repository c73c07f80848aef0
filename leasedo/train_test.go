package leasedo

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

func TestTrainGroups(t *testing.T) {
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

		first, err := s.PlanGroups(ctx, l, "main", -1, [][]GroupPR{{{Number: 1, SHA: "a"}, {Number: 2, SHA: "b"}}}, false)
		if err != nil || len(first) != 1 {
			t.Fatalf("plan = %v %v", first, err)
		}
		second, err := s.PlanGroups(ctx, l, "main", -1, [][]GroupPR{{{Number: 3, SHA: "c"}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		if first[0].OwnBranch() != "mergegate/main/1" || first[0].Branch() != "mergegate/main/train" || second[0].Seq <= first[0].Seq {
			t.Fatalf("groups %+v %+v: want branch mergegate/main/1 and the second behind the first", first[0], second[0])
		}

		// The group is stored as it moves: building, then testing at its head.
		g := first[0]
		g.State, g.Parent = GroupBuilding, "tip"
		if err := s.SaveGroup(ctx, l, g); err != nil {
			t.Fatal(err)
		}
		g.State, g.Head, g.BuiltAt = GroupTesting, "g1", clk.Now().UnixMilli()
		if err := s.SaveGroup(ctx, l, g); err != nil {
			t.Fatal(err)
		}
		got, err := s.Groups(ctx, key)
		if err != nil || len(got) != 2 || !reflect.DeepEqual(got[0], g) {
			t.Fatalf("groups = %+v %v, want the first as saved: %+v", got, err, g)
		}

		// Bisection: the halves take the failed group's place, ahead of the
		// group behind it.
		if err := s.DeleteGroup(ctx, l, g.ID); err != nil {
			t.Fatal(err)
		}
		halves, err := s.PlanGroups(ctx, l, "main", g.Seq, [][]GroupPR{{{Number: 1, SHA: "a"}}, {{Number: 2, SHA: "b"}}}, true)
		if err != nil {
			t.Fatal(err)
		}
		got, _ = s.Groups(ctx, key)
		var order [][]int
		for _, g := range got {
			order = append(order, g.Numbers())
		}
		if want := [][]int{{1}, {2}, {3}}; !reflect.DeepEqual(order, want) || !got[0].Split || got[2].Split {
			t.Fatalf("after the split: %v (%+v), want %v with the halves split", order, got, want)
		}

		// Landing: the members are merged, the group is gone, the base's
		// landed tip is known, in one transaction.
		h := halves[0]
		h.Head, h.BuiltAt = "g2", clk.Now().Add(-4*time.Minute).UnixMilli()
		end := func(m GroupPR) CheckRunEnd { return CheckRunEnd{Conclusion: "success", Title: "Merged"} }
		if err := s.LandGroup(ctx, l, h, Landed{Tip: "tip2", Tested: h.Head}, "fast-forward", end); err != nil {
			t.Fatal(err)
		}
		items, _ := s.Items(ctx, key)
		if len(items) != 2 || items[0].PRNumber != 2 {
			t.Errorf("queue after landing #1: %+v", items)
		}
		// Its audit says how it landed and how long its CI took.
		if a, _ := s.AuditTail(ctx, key, 1); len(a) != 1 || a[0].Action != AuditMerge || a[0].Reason != fmt.Sprintf("fast-forward, train group %d after 4m0s of CI", h.ID) {
			t.Errorf("audit of the landing: %+v", a)
		}
		// It is the last the base landed, and the first of its recent.
		if landed, err := s.LandedOn(ctx, key, "main"); err != nil || !reflect.DeepEqual(landed, Landed{Tip: "tip2", Tested: "g2",
			Recent: []lifecycle.LandedPR{{Number: 1, At: clk.Now().UnixMilli()}}}) {
			t.Errorf("landed = %+v %v", landed, err)
		}
		if got, _ := s.Groups(ctx, key); len(got) != 2 {
			t.Errorf("groups after landing: %+v", got)
		}
		if err := s.SaveGroup(ctx, l, h); !errors.Is(err, ErrNoGroup) {
			t.Errorf("saving a landed group = %v, want ErrNoGroup", err)
		}

		// A worker that lost its lease writes nothing.
		clk.Advance(2 * time.Minute)
		other, err := s.Acquire(ctx, key, "other")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release(ctx, other) //nolint:errcheck
		if _, err := s.PlanGroups(ctx, l, "main", -1, [][]GroupPR{{{Number: 9, SHA: "z"}}}, false); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("plan after takeover = %v, want ErrLeaseLost", err)
		}
		if got, _ := s.Groups(ctx, key); len(got) != 2 {
			t.Errorf("groups after a refused write: %+v", got)
		}

		// Forgetting the repository forgets its train.
		if err := s.db.write(ctx, func(tx *wtx) error { return forget(ctx, tx, 0, []Key{key}) }); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Groups(ctx, key); len(got) != 0 {
			t.Errorf("groups of a forgotten repository: %+v", got)
		}
		if landed, _ := s.LandedOn(ctx, key, "main"); !reflect.DeepEqual(landed, Landed{}) {
			t.Errorf("landed tip of a forgotten repository: %+v", landed)
		}
	})
}
