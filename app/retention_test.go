package app

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// The engine's prune, through the App: an applied delivery's payload goes
// after --body-retention while its row, its queue events and the audit
// stay; a failed one keeps its payload for the operator's retry; after
// --retention the applied one's row goes too, and the audit still holds
// the join. (Pending deliveries: leasedo's TestDropBodiesKeepsWhatIsStillToBeApplied.)
func TestBodyRetentionThroughTheEngine(t *testing.T) {
	h := newHarness(t, withoutGitHub, func(c *Config) { c.Retention, c.BodyRetention = 72*time.Hour, 24*time.Hour })
	ctx := context.Background()
	h.sendID("pull_request", "applied", h.prPayload("labeled", 1, shaA, "automerge"))
	// Signed and well-formed JSON, but a pull_request without a number.
	h.sendID("pull_request", "failed", []byte(`{"action":"labeled","pull_request":{"state":"open"},"repository":{"full_name":"Codertocat/Hello-World"},"installation":{"id":1}}`))
	h.settle()
	kept := func() string {
		var ids []string
		if err := h.app.Store.KeptDeliveries(ctx, testKey, time.Time{}, func(d leasedo.Delivery) error {
			ids = append(ids, d.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sort.Strings(ids)
		return strings.Join(ids, ",")
	}
	rows := func(state string) int {
		ds, err := h.app.Store.Deliveries(ctx, testKey, state, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(ds)
	}
	if got := kept(); got != "applied,failed" {
		t.Fatalf("bodies kept at first: %s", got)
	}

	h.clock.Advance(23 * time.Hour)
	h.app.Engine.Prune(ctx)
	if got := kept(); got != "applied,failed" {
		t.Fatalf("bodies kept after 23 h: %s, want both", got)
	}
	h.clock.Advance(2 * time.Hour)
	h.app.Engine.Prune(ctx)
	if got := kept(); got != "failed" {
		t.Fatalf("bodies kept after 25 h: %s, want the failed one's only", got)
	}
	if rows(leasedo.DeliveryDone) != 1 || rows(leasedo.DeliveryFailed) != 1 {
		t.Fatalf("rows after 25 h: %d done, %d failed; want both kept", rows(leasedo.DeliveryDone), rows(leasedo.DeliveryFailed))
	}
	v, err := LoadQueueView(ctx, h.app.Store, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Queue) != 1 || len(v.Events) == 0 || len(v.Audit) == 0 || v.Audit[0].Action != "join" {
		t.Fatalf("after the body went: queue %+v, events %+v, audit %+v", v.Queue, v.Events, v.Audit)
	}
	if !strings.Contains(h.logBuf.String(), `"bodies_dropped":1`) {
		t.Errorf("no prune line says a body was dropped:\n%s", h.logBuf.String())
	}

	h.clock.Advance(48 * time.Hour)
	h.app.Engine.Prune(ctx)
	if rows(leasedo.DeliveryDone) != 0 || rows(leasedo.DeliveryFailed) != 1 || kept() != "failed" {
		t.Fatalf("after 73 h: %d done rows, %d failed, kept %s; want the applied row pruned, the failed one kept whole",
			rows(leasedo.DeliveryDone), rows(leasedo.DeliveryFailed), kept())
	}
	if v, _ := LoadQueueView(ctx, h.app.Store, testKey); len(v.Audit) == 0 || v.Audit[0].Action != "join" {
		t.Fatalf("the audit after the row was pruned: %+v", v.Audit)
	}
}
