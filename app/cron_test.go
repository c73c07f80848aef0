package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
)

func queuedNumbers(items []leasedo.Item) []int {
	var out []int
	for _, it := range items {
		out = append(out, it.PRNumber)
	}
	return out
}

// Stop mergegate, delete its database, start again: the start-up pass
// rebuilds the queue from GitHub with the same PRs in the same order (their
// label times), and the next merge happens.
func TestStateLossQueueRebuiltInOrderAndMerges(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	// Labelled in the order 2, 3, 1 (created in another order).
	for _, n := range []int{2, 3, 1} {
		h.label(n, fakegithub.DeriveSHA("head", string(rune('0'+n))))
		h.clock.Advance(time.Minute)
	}
	h.settle()
	before := queuedNumbers(h.queue())
	if len(before) != 3 || before[0] != 2 || before[1] != 3 || before[2] != 1 {
		t.Fatalf("queue before the loss = %v, want [2 3 1]", before)
	}
	h.restart(true)
	h.settle()
	after := queuedNumbers(h.queue())
	if len(after) != 3 || after[0] != 2 || after[1] != 3 || after[2] != 1 {
		t.Fatalf("queue rebuilt = %v, want %v", after, before)
	}
	audit, _ := h.app.Store.Audit(context.Background(), testKey)
	if len(audit) < 3 || audit[0].Action != leasedo.AuditJoin || audit[0].PRNumber != 2 {
		t.Fatalf("the rebuild is not audited: %+v", audit)
	}
	// The next merge happens: the head's checks pass.
	sha2 := fakegithub.DeriveSHA("head", "2")
	h.pass(sha2)
	h.eventually("the head's merge", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.PRNumber != 2 || m.SHA != sha2 {
		t.Fatalf("merge = %+v, want #2 at its head", m)
	}
}

// Webhooks lost while mergegate was down: a PR labelled and one closed
// meanwhile are joined and removed by the first pass.
func TestWebhooksLostWhileDownRepairedByFirstPass(t *testing.T) {
	h := newHarness(t)
	h.label(1, shaA)
	h.settle()
	h.stop()
	h.gh.ClosePR(testRepo, 1)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 2, HeadSHA: shaB, BaseRef: testBase, Author: "octocat"})
	h.clock.Advance(time.Minute) // beyond the resync's grace for fresh entries
	h.gh.LabelPR(testRepo, 2, "automerge", h.clock.Now())
	h.start()
	h.settle()
	if got := queuedNumbers(h.queue()); len(got) != 1 || got[0] != 2 {
		t.Fatalf("queue after the first pass = %v, want [2]", got)
	}
	ans, err := h.app.Reconciler.Pass(context.Background(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Results.Fixed) != 0 {
		t.Fatalf("a second pass still fixed %+v", ans.Results.Fixed)
	}
}

// A webhook is being processed when the cron comes: the cron gets 409 and
// skips, the webhook finishes, and the next pass reconciles. No event is lost.
func TestConcurrentWebhookAndCron(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// A worker holds the lease (a webhook in processing).
	l, err := h.app.Store.Acquire(ctx, testKey, "worker")
	if err != nil {
		t.Fatal(err)
	}
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 5, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}})
	h.mustSend("pull_request", h.prPayload("labeled", 5, shaA, "automerge"))
	_, err = h.app.Reconciler.Pass(ctx, testKey)
	var le *leasedo.LockedError
	if !errors.As(err, &le) || le.HeldBy != "worker" {
		t.Fatalf("cron during a webhook: %v, want 409 locked by worker", err)
	}
	if _, err := h.app.Store.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	h.app.Engine.Kick(testKey)
	h.settle()
	if got := queuedNumbers(h.queue()); len(got) != 1 || got[0] != 5 {
		t.Fatalf("queue = %v: the delivery was lost", got)
	}
	ans, err := h.app.Reconciler.Pass(ctx, testKey)
	if err != nil {
		t.Fatalf("next pass: %v", err)
	}
	if ans.QueueLength != 1 {
		t.Fatalf("next pass: %+v", ans)
	}
	events, _ := h.app.Store.Events(ctx, testKey)
	if len(events) != 1 || events[0].PRNumber != 5 {
		t.Fatalf("events = %+v", events)
	}
}
