package fakegithub_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// The deliveries list speaks GitHub's shape, needs the App's JWT, pages by
// cursor newest first, and a redelivery re-sends the payload signed.
func TestDeliveriesListAndRedeliver(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: func() time.Time { return now }})
	c := &client{t: t, s: s}
	jwt := "Bearer " + appJWT(t, s.PrivateKeyPEM(), s.AppID(), 9*time.Minute)

	var ids []int64
	for i := 0; i < 5; i++ {
		ids = append(ids, s.AddDelivery(fakegithub.HookDelivery{
			GUID: "guid-" + string(rune('a'+i)), Event: "pull_request", Action: "labeled", StatusCode: 503,
			InstallationID: 1, RepositoryID: 2, Payload: []byte(`{"n":` + string(rune('0'+i)) + `}`),
		}))
	}
	s.AddDelivery(fakegithub.HookDelivery{GUID: "old", Event: "push", StatusCode: 0, DeliveredAt: now.Add(-73 * time.Hour)})

	if st, _, _ := c.do("GET", "app/hook/deliveries", "", nil, nil); st != 401 {
		t.Errorf("no JWT: %d, want 401", st)
	}
	st, hdr, v := c.do("GET", "app/hook/deliveries?per_page=4", jwt, nil, nil)
	if st != 200 {
		t.Fatalf("list: %d %v", st, v)
	}
	page := v.([]any)
	if len(page) != 4 || page[0].(map[string]any)["guid"] != "guid-e" {
		t.Fatalf("first page = %v, want 4 attempts newest first", page)
	}
	subShape(t, "deliveries", v, fixture(t, "apps_list-webhook-deliveries.200.json"))
	has(t, "deliveries", v, "id", "guid", "delivered_at", "redelivery", "status", "status_code", "event", "action", "installation_id", "repository_id")
	if got := page[0].(map[string]any)["status"]; got != "Invalid HTTP Response: 503" {
		t.Errorf("status of a 503 = %q", got)
	}
	link := hdr.Get("Link")
	if !strings.Contains(link, `rel="next"`) || !strings.Contains(link, "cursor=") {
		t.Fatalf("Link = %q, want a next cursor", link)
	}
	next := link[strings.Index(link, "<")+1 : strings.Index(link, ">")]
	next = next[strings.Index(next, "app/hook/deliveries"):]
	st, hdr, v = c.do("GET", next, jwt, nil, nil)
	if st != 200 || len(v.([]any)) != 2 || hdr.Get("Link") != "" {
		t.Fatalf("second page: %d %v Link %q, want the last 2 and no next", st, v, hdr.Get("Link"))
	}
	if g := v.([]any)[1].(map[string]any)["status"]; g != "failed to connect to host" {
		t.Errorf("status without an answer = %q", g)
	}

	// A receiver for the redelivery.
	var mu sync.Mutex
	var got []*http.Request
	var bodies []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer recv.Close()
	s.SetWebhook(recv.URL+"/webhook", "sekrit")

	if st, _, _ := c.do("POST", "app/hook/deliveries/999999/attempts", jwt, nil, nil); st != 404 {
		t.Errorf("unknown delivery: %d, want 404", st)
	}
	all := s.Deliveries()
	if st, _, _ := c.do("POST", "app/hook/deliveries/"+itoa(all[5].ID)+"/attempts", jwt, nil, nil); st != 422 {
		t.Errorf("a delivery older than 3 days: %d, want 422", st)
	}
	st, _, v = c.do("POST", "app/hook/deliveries/"+itoa(ids[1])+"/attempts", jwt, nil, nil)
	if st != 202 {
		t.Fatalf("redeliver: %d %v", st, v)
	}
	subShape(t, "redeliver", v, fixture(t, "apps_redeliver-webhook-delivery.202.json"))
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Deliveries()) < 7 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	all = s.Deliveries()
	if len(all) != 7 {
		t.Fatalf("attempts after a redelivery: %d, want 7", len(all))
	}
	re := all[6]
	if re.GUID != "guid-b" || !re.Redelivery || re.StatusCode != 202 || re.Status != "OK" || re.ID <= ids[4] {
		t.Fatalf("redelivery attempt = %+v", re)
	}
	mu.Lock()
	defer mu.Unlock()
	r := got[0]
	mac := hmac.New(sha256.New, []byte("sekrit"))
	mac.Write([]byte(bodies[0]))
	if bodies[0] != `{"n":1}` || r.Header.Get("X-GitHub-Delivery") != "guid-b" || r.Header.Get("X-GitHub-Event") != "pull_request" ||
		r.Header.Get("X-Hub-Signature-256") != "sha256="+hex.EncodeToString(mac.Sum(nil)) || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("redelivered %q with headers %v", bodies[0], r.Header)
	}
	if reqs := s.RedeliveryRequests(); len(reqs) != 1 || reqs[0] != ids[1] {
		t.Errorf("redelivery requests = %v", reqs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
