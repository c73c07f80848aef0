package forge_test

import (
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// EnqueuePR and QueuePosition against the fake's merge queue: GitHub's
// refusals sorted like REST refusals, an entry already queued taken as
// success, positions and the queue's size, and the reason of a removal.
func TestEnqueuePRAndQueuePosition(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetRulesetRequired(repo, "main", []string{"ci/build"}, false)
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "a1"})
	e.gh.AddPR(repo, fakegithub.PR{Number: 2, HeadSHA: "b2"})
	refused := func(n int, head string, want forge.Refusal) {
		t.Helper()
		_, err := e.c.EnqueuePR(e.ctx, tenant, repo, n, "", head)
		if kind, msg, ok := forge.RefusalOf(err); !ok || kind != want {
			t.Fatalf("enqueue #%d at %s: %v (%v %q %v), want refusal %v", n, head, err, kind, msg, ok, want)
		}
	}
	refused(1, "a1", forge.RefusedMergeQueue) // no merge queue on main yet
	e.gh.SetMergeQueue(repo, "main", true)
	refused(1, "stale", forge.RefusedHeadModified)
	refused(1, "a1", forge.RefusedChecks)
	e.gh.SetCheckRun(repo, "a1", "ci/build", "completed", "success")
	e.gh.SetCheckRun(repo, "b2", "ci/build", "completed", "success")

	got, err := e.c.EnqueuePR(e.ctx, tenant, repo, 1, "", "a1")
	if err != nil || got.Position != 1 || got.Size != 1 || got.State == "" {
		t.Fatalf("enqueue #1 = %+v, %v; want position 1 of 1", got, err)
	}
	again, err := e.c.EnqueuePR(e.ctx, tenant, repo, 1, "", "a1")
	if err != nil || again.Position != 1 {
		t.Fatalf("enqueue #1 again = %+v, %v; want success at position 1 (already in the queue)", again, err)
	}
	pr2, err := e.c.GetPR(e.ctx, tenant, repo, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.c.EnqueuePR(e.ctx, tenant, repo, 2, pr2.NodeID, "b2"); err != nil || got.Position != 2 || got.Size != 2 {
		t.Fatalf("enqueue #2 = %+v, %v; want position 2 of 2", got, err)
	}
	if q := e.gh.MergeQueueEnqueues(); len(q) != 2 || q[0].ExpectedHeadOid != "a1" || q[1].ExpectedHeadOid != "b2" {
		t.Fatalf("enqueues = %+v, want #1 at a1 then #2 at b2", q)
	}
	pos, queued, err := e.c.QueuePosition(e.ctx, tenant, repo, 2)
	if err != nil || !queued || pos.Position != 2 || pos.Size != 2 {
		t.Fatalf("QueuePosition(#2) = %+v %v %v, want position 2 of 2", pos, queued, err)
	}
	all, err := e.c.MergeQueueEntries(e.ctx, tenant, repo, "main")
	if err != nil || len(all) != 2 || all[1].Position != 1 || all[2].Position != 2 || all[2].Size != 2 {
		t.Fatalf("MergeQueueEntries = %+v, %v; want #1 then #2 of 2", all, err)
	}
	if none, err := e.c.MergeQueueEntries(e.ctx, tenant, repo, "dev"); err != nil || len(none) != 0 {
		t.Fatalf("MergeQueueEntries(dev) = %+v, %v; want none", none, err)
	}
	if n := e.gh.MergeQueueLand(repo, "main"); n != 1 {
		t.Fatalf("landed #%d, want #1", n)
	}
	if pos, queued, err = e.c.QueuePosition(e.ctx, tenant, repo, 2); err != nil || !queued || pos.Position != 1 || pos.Size != 1 {
		t.Fatalf("QueuePosition(#2) after #1 landed = %+v %v %v, want position 1 of 1", pos, queued, err)
	}
	e.gh.MergeQueueDequeue(repo, 2, fakegithub.DequeueCIFailure)
	pos, queued, err = e.c.QueuePosition(e.ctx, tenant, repo, 2)
	if err != nil || queued || pos.Removed != fakegithub.DequeueCIFailure || pos.RemovedAt.IsZero() {
		t.Fatalf("QueuePosition(#2) after the dequeue = %+v %v %v, want out, removed for %s", pos, queued, err, fakegithub.DequeueCIFailure)
	}
	e.gh.SetEnqueueForbidden(true)
	refused(2, "b2", forge.RefusedNotAuthorized)
	if _, _, err := e.c.QueuePosition(e.ctx, tenant, repo, 99); !forge.IsNotFound(err) {
		t.Fatalf("QueuePosition(#99) = %v, want not found", err)
	}
}
