package forge_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// The deliveries are listed newest first over several pages (cursor
// paging), as the App (no installation's points), and visit stops it.
func TestListHookDeliveriesPagesByCursor(t *testing.T) {
	e := newEnv(t, envOpts{})
	t0 := e.clock.Now().UTC().Truncate(time.Second)
	for i := 0; i < 250; i++ {
		e.gh.AddDelivery(fakegithub.HookDelivery{
			GUID: fmt.Sprintf("guid-%03d", i), Event: "pull_request", Action: "labeled",
			StatusCode: 202, DeliveredAt: t0.Add(time.Duration(i) * time.Second), InstallationID: 31337, RepositoryID: 9,
		})
	}
	var got []forge.HookDelivery
	if err := e.c.ListHookDeliveries(e.ctx, func(d forge.HookDelivery) bool { got = append(got, d); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 250 {
		t.Fatalf("listed %d, want 250", len(got))
	}
	for i, d := range got {
		want := fmt.Sprintf("guid-%03d", 249-i)
		if d.GUID != want {
			t.Fatalf("attempt %d = %s, want %s (newest first, no page repeated or skipped)", i, d.GUID, want)
		}
	}
	d := got[0]
	if !d.OK() || d.Tenant != tenant || d.RepoID != 9 || d.Event != "pull_request" || d.Action != "labeled" ||
		!d.DeliveredAt.Equal(t0.Add(249*time.Second)) || d.ID == 0 {
		t.Fatalf("decoded %+v", d)
	}
	if n := e.gh.CallCount(fakegithub.RouteListDeliveries); n != 3 {
		t.Errorf("%d listing requests, want 3 pages of 100", n)
	}
	if used := e.gh.RateLimitUsed(); used != 0 {
		t.Errorf("rate-limit points used = %d, want 0 (the App's JWT)", used)
	}

	// visit stops the listing: no further page is asked for.
	e.gh.ResetCalls()
	n := 0
	if err := e.c.ListHookDeliveries(e.ctx, func(forge.HookDelivery) bool { n++; return n < 10 }); err != nil {
		t.Fatal(err)
	}
	if c := e.gh.CallCount(fakegithub.RouteListDeliveries); n != 10 || c != 1 {
		t.Errorf("stopped after %d attempts and %d pages, want 10 and 1", n, c)
	}

	// Redelivery: 202 is success; an unknown attempt is the operator's error.
	if err := e.c.RedeliverHookDelivery(e.ctx, d.ID); err != nil {
		t.Fatalf("redeliver: %v", err)
	}
	if err := e.c.RedeliverHookDelivery(e.ctx, 1); !forge.IsNotFound(err) {
		t.Fatalf("redeliver an unknown attempt: %v, want a 404", err)
	}
}

func TestHookDeliveryOK(t *testing.T) {
	for _, c := range []struct {
		code   int
		status string
		ok     bool
	}{{200, "OK", true}, {202, "OK", true}, {503, "Invalid HTTP Response: 503", false}, {0, "failed to connect to host", false}, {200, "timed out", false}} {
		if got := (forge.HookDelivery{StatusCode: c.code, Status: c.status}).OK(); got != c.ok {
			t.Errorf("%d %q: OK = %v, want %v", c.code, c.status, got, c.ok)
		}
	}
}

// GitHub's own examples decode, and its 202 (an empty answer) is success.
func TestHookDeliveryExamplesDecode(t *testing.T) {
	c := serveFixtures(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /app/hook/deliveries":                         file(t, 200, "apps_list-webhook-deliveries.200.json"),
		"POST /app/hook/deliveries/{delivery_id}/attempts": file(t, 202, "apps_redeliver-webhook-delivery.202.json"),
	})
	var got []forge.HookDelivery
	if err := c.ListHookDeliveries(t.Context(), func(d forge.HookDelivery) bool { got = append(got, d); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("decoded %d attempts, want 2", len(got))
	}
	a, b := got[0], got[1]
	if a.ID != 12345678 || a.GUID != "0b989ba4-242f-11e5-81e1-c7b6966d2516" || a.Redelivery || !a.OK() ||
		a.Tenant != "123" || a.RepoID != 456 || a.Event != "issues" || a.Action != "opened" ||
		!a.DeliveredAt.Equal(time.Date(2019, 6, 3, 0, 57, 16, 0, time.UTC)) {
		t.Fatalf("first = %+v", a)
	}
	if b.GUID != a.GUID || !b.Redelivery {
		t.Fatalf("second = %+v, want a redelivery of the same GUID", b)
	}
	if err := c.RedeliverHookDelivery(t.Context(), a.ID); err != nil {
		t.Fatalf("redeliver answered GitHub's 202 example: %v", err)
	}
}
