package leasedo

import (
	"context"
	"testing"
	"time"
)

func TestPolicyStoredAndStale(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newStore(t)
		if _, ok, err := s.Policy(ctx, key); ok || err != nil {
			t.Fatalf("no policy yet: ok=%v err=%v", ok, err)
		}
		if m, err := s.Marks(ctx, key); err != nil || m.PolicyStored || m.PolicyStale || m.Commands {
			t.Fatalf("marks before anything = %+v %v", m, err)
		}
		p := StoredPolicy{Key: key, Source: "repository", File: key.Repo + ":.github/mergegate.yml", SHA: "abc", Content: "merge_method: squash\n"}
		if err := s.SavePolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
		// A push touching the file marks it stale, in the delivery's transaction.
		mustProcess(t, s, Event{EventType: "push", Tenant: key.Tenant, Repo: key.Repo, Op: OpPolicy})
		got, ok, err := s.Policy(ctx, key)
		if err != nil || !ok || !got.Stale || got.Content != p.Content || got.SHA != "abc" {
			t.Fatalf("after the push: %+v ok=%v err=%v", got, ok, err)
		}
		mustProcess(t, s, Event{EventType: "issue_comment", Tenant: key.Tenant, Repo: key.Repo, Op: OpCommand, PRNumber: 3,
			Details: &Details{Command: "refresh", By: "alice", CommentID: 9}})
		if m, err := s.Marks(ctx, key); err != nil || !m.PolicyStored || !m.PolicyStale || !m.Commands {
			t.Fatalf("marks after the push and a command = %+v %v", m, err)
		}
		if cmds, err := s.Commands(ctx, key); err != nil || len(cmds) != 1 || cmds[0].Author != "alice" || cmds[0].CommentID != 9 {
			t.Fatalf("commands = %+v %v", cmds, err)
		}
		p.BadSHA, p.Problems = "def", `[{"line":2}]`
		if err := s.SavePolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
		all, err := s.Policies(ctx)
		if err != nil || len(all) != 1 || all[0].Stale || all[0].BadSHA != "def" {
			t.Fatalf("policies = %+v %v", all, err)
		}
	})
}

func TestFreezeAndThaw(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newStore(t)
		mustProcess(t, s, join(1, "a1"))
		if changed, err := s.SetFreeze(ctx, key, "", true, "release", "alice"); !changed || err != nil {
			t.Fatalf("freeze: %v %v", changed, err)
		}
		if changed, _ := s.SetFreeze(ctx, key, "", true, "release", "alice"); changed {
			t.Error("freezing again with the same message changed something")
		}
		if _, err := s.SetFreeze(ctx, key, "release-1.x", true, "1.4 going out", "bob"); err != nil {
			t.Fatal(err)
		}
		fs, err := s.Freezes(ctx, key)
		if err != nil || len(fs) != 2 || fs[0].Branch != "" || fs[0].By != "alice" || fs[1].Branch != "release-1.x" {
			t.Fatalf("freezes = %+v %v", fs, err)
		}
		if changed, err := s.SetFreeze(ctx, key, "", false, "done", "carol"); !changed || err != nil {
			t.Fatalf("thaw: %v %v", changed, err)
		}
		if changed, _ := s.SetFreeze(ctx, key, "", false, "", "carol"); changed {
			t.Error("thawing what is not frozen changed something")
		}
		audit, _ := s.Audit(ctx, key)
		var said []string
		for _, a := range audit {
			if a.Action == AuditFreeze || a.Action == AuditThaw {
				said = append(said, a.Reason)
			}
		}
		want := []string{"repository frozen by alice: release", "base branch release-1.x frozen by bob: 1.4 going out", "repository thawed by carol: done"}
		if len(said) != len(want) {
			t.Fatalf("audit = %q", said)
		}
		for i := range want {
			if said[i] != want[i] {
				t.Errorf("audit[%d] = %q, want %q", i, said[i], want[i])
			}
		}
	})
}

// The queue orders by priority, then by arrival; a join of a PR already
// queued, and a change of its labels, take its new priority.
func TestPriorityOrders(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		mustProcess(t, s, join(1, "a1"))
		clk.Advance(1000)
		mustProcess(t, s, join(2, "a2"))
		clk.Advance(1000)
		urgent := 2
		ev := join(3, "a3")
		ev.Details.Priority, ev.Details.PriorityName = &urgent, "urgent"
		mustProcess(t, s, ev)
		order := func() []int {
			its, err := s.Items(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			var out []int
			for _, it := range its {
				out = append(out, it.PRNumber)
			}
			return out
		}
		if got := order(); len(got) != 3 || got[0] != 3 || got[1] != 1 || got[2] != 2 {
			t.Fatalf("order = %v, want [3 1 2]", got)
		}
		one := 1
		mustProcess(t, s, Event{EventType: "pull_request", Tenant: key.Tenant, Repo: key.Repo, Action: "labeled", Op: OpJoin, PRNumber: 2,
			Details: &Details{Sha: "a2", Priority: &one, PriorityName: "high"}})
		if got := order(); got[0] != 3 || got[1] != 2 || got[2] != 1 {
			t.Fatalf("order = %v, want [3 2 1]", got)
		}
		zero := 0
		mustProcess(t, s, Event{EventType: "pull_request", Tenant: key.Tenant, Repo: key.Repo, Action: "unlabeled", Op: OpLabels, PRNumber: 3,
			Details: &Details{Sha: "a3", Priority: &zero}})
		if got := order(); got[0] != 2 || got[1] != 1 || got[2] != 3 {
			t.Fatalf("order = %v, want [2 1 3]", got)
		}
		l, err := s.Acquire(ctx, key, "worker")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release(ctx, l) //nolint:errcheck
		if changed, err := s.SetPriority(ctx, l, 1, 1000, "high"); !changed || err != nil {
			t.Fatal(changed, err)
		}
		if got := order(); got[0] != 1 {
			t.Fatalf("order = %v, want 1 first", got)
		}
	})
}

// A head move of a pull request not queued is kept, with who moved it and
// when it was stored, while its command is deleted; a later move to the
// same head replaces it, and rows older than HeadSeenKept go as new ones
// come.
func TestSeeHead(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, clk := newStore(t)
		move := func(pr int, sha, by string) {
			t.Helper()
			mustProcess(t, s, Event{EventType: "pull_request", Tenant: key.Tenant, Repo: key.Repo, Action: "synchronize", Op: OpCommand, PRNumber: pr,
				Details: &Details{Command: "head", Arg: "push x " + sha, By: by, Sha: sha}})
			cmds, err := s.Commands(ctx, key)
			if err != nil || len(cmds) != 1 {
				t.Fatalf("commands = %+v %v", cmds, err)
			}
			l, err := s.Acquire(ctx, key, "worker")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(ctx, l) //nolint:errcheck
			if err := s.SeeHead(ctx, l, cmds[0], sha); err != nil {
				t.Fatal(err)
			}
		}
		move(1, "b1", "eve")
		if cmds, err := s.Commands(ctx, key); err != nil || len(cmds) != 0 {
			t.Fatalf("commands after SeeHead = %+v %v", cmds, err)
		}
		if h, ok, err := s.HeadSeenOf(ctx, key, 1, "b1"); err != nil || !ok || h.By != "eve" || h.At != t0.UnixMilli() {
			t.Fatalf("HeadSeenOf(1, b1) = %+v %v %v, want eve at t0", h, ok, err)
		}
		if _, ok, err := s.HeadSeenOf(ctx, key, 2, "b1"); ok || err != nil {
			t.Fatalf("HeadSeenOf(2, b1) = %v %v, want nothing", ok, err)
		}
		clk.Advance(time.Minute)
		move(1, "b1", "alice")
		if h, _, _ := s.HeadSeenOf(ctx, key, 1, "b1"); h.By != "alice" || h.At != t0.Add(time.Minute).UnixMilli() {
			t.Fatalf("moved to b1 again: %+v, want alice's, a minute later", h)
		}
		clk.Advance(HeadSeenKept + time.Second)
		move(2, "c2", "eve")
		if _, ok, _ := s.HeadSeenOf(ctx, key, 1, "b1"); ok {
			t.Error("a head seen more than HeadSeenKept ago is still kept")
		}
		if _, ok, _ := s.HeadSeenOf(ctx, key, 2, "c2"); !ok {
			t.Error("the new head is not kept")
		}
		// A repository with no push since: its heads go with the prune.
		clk.Advance(HeadSeenKept + time.Second)
		if _, err := s.Prune(ctx, t0); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.HeadSeenOf(ctx, key, 2, "c2"); ok {
			t.Error("a head seen more than HeadSeenKept ago outlived the prune")
		}
	})
}
