package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
)

// While the lease is held (by an operator here; the cron or another
// process alike), 100 deliveries for the repository arrive: all are
// acknowledged, none is applied until the release, then all 100 are
// applied, none lost, none twice.
func TestDeliveriesWaitForTheLeaseNoneLostNoneTwice(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	if r := adminCall(t, h, "POST", "/lease/acquire", `{"tenant":"1","repo":"Codertocat/Hello-World"}`); r != http.StatusOK {
		t.Fatalf("acquire: %d", r)
	}
	var wg sync.WaitGroup
	for i := 1; i <= 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := h.prPayload("labeled", i, fmt.Sprintf("%040d", i), "automerge")
			if code := h.sendID("pull_request", fmt.Sprintf("d-%d", i), body); code != http.StatusAccepted {
				t.Errorf("delivery %d: %d", i, code)
			}
			// A redelivery of the same id is acknowledged and stored once.
			if i%10 == 0 {
				if code := h.sendID("pull_request", fmt.Sprintf("d-%d", i), body); code != http.StatusAccepted {
					t.Errorf("redelivery %d: %d", i, code)
				}
			}
		}()
	}
	wg.Wait()
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("applied while the lease was held: %d entries", len(q))
	}
	pending, _ := h.app.Store.Deliveries(context.Background(), testKey, leasedo.DeliveryPending, 1000)
	if len(pending) != 100 {
		t.Fatalf("pending deliveries = %d, want 100", len(pending))
	}
	if r := adminCall(t, h, "POST", "/lease/release", `{"tenant":"1","repo":"Codertocat/Hello-World"}`); r != http.StatusOK {
		t.Fatalf("release: %d", r)
	}
	h.settle()
	q := h.queue()
	if len(q) != 100 {
		t.Fatalf("queue = %d entries, want 100", len(q))
	}
	seen := map[int]bool{}
	for _, e := range q {
		if seen[e.PRNumber] {
			t.Fatalf("PR %d queued twice", e.PRNumber)
		}
		seen[e.PRNumber] = true
	}
	audit, _ := h.app.Store.Audit(context.Background(), testKey)
	joins := 0
	for _, a := range audit {
		if a.Action == leasedo.AuditJoin {
			joins++
		}
	}
	if joins != 100 {
		t.Fatalf("audit joins = %d, want 100 (each delivery applied once)", joins)
	}
	counts, _ := h.app.Store.DeliveryCounts(context.Background())
	done, _ := h.app.Store.Deliveries(context.Background(), testKey, leasedo.DeliveryDone, 1000)
	if len(done) != 100 || counts[leasedo.DeliveryPending] != 0 || counts[leasedo.DeliveryFailed] != 0 {
		t.Fatalf("delivery states = %v, %d done", counts, len(done))
	}
}

// A delivery whose payload cannot be translated is kept, marked failed with
// its error, and visible in GET /queue; the ones after it still apply.
func TestBadDeliveryIsKeptFailedAndVisible(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	// Signed and well-formed JSON, but a pull_request without a number.
	h.mustSend("pull_request", []byte(`{"action":"labeled","pull_request":{"state":"open"},"repository":{"full_name":"Codertocat/Hello-World"},"installation":{"id":1}}`))
	h.mustSend("pull_request", h.prPayload("labeled", 2, shaB, "automerge"))
	h.settle()
	if q := h.queue(); len(q) != 1 || q[0].PRNumber != 2 {
		t.Fatalf("queue = %+v", q)
	}
	v, err := LoadQueueView(context.Background(), h.app.Store, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Deliveries.Failed) != 1 || v.Deliveries.Failed[0].LastError == "" {
		t.Fatalf("failed deliveries = %+v", v.Deliveries.Failed)
	}
	// After a fix the operator can retry it (it fails again here: the
	// payload itself is bad, and it is kept again).
	if r := adminCall(t, h, "POST", "/deliveries/retry", `{"tenant":"1","repo":"Codertocat/Hello-World"}`); r != http.StatusOK {
		t.Fatalf("retry: %d", r)
	}
	h.settle()
	counts, _ := h.app.Store.DeliveryCounts(context.Background())
	if counts[leasedo.DeliveryFailed] != 1 {
		t.Fatalf("states after retry = %v", counts)
	}
}

func adminCall(t *testing.T, h *harness, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, h.admin+path, stringsReader(body))
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}
