package fakegithub

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The App's webhook deliveries: what GitHub "sent" to the App's webhook URL,
// and its redelivery on request. Tests register past attempts with
// AddDelivery, or send one now with SendWebhook; POST .../attempts sends an
// attempt's payload again to the URL set with SetWebhook, signed like
// GitHub signs, and records the outcome as a new attempt (same GUID,
// Redelivery set).
const (
	RouteListDeliveries = "GET /app/hook/deliveries"
	RouteRedeliver      = "POST /app/hook/deliveries/{delivery_id}/attempts"
)

// RedeliveryWindow is how old an attempt GitHub.com still redelivers
// ("deliveries from the past 3 days"); older ones answer 422.
const RedeliveryWindow = 72 * time.Hour

// HookDelivery is one delivery attempt.
type HookDelivery struct {
	ID             int64 // assigned by AddDelivery when 0
	GUID           string
	Event          string
	Action         string
	StatusCode     int       // the receiver's answer; 0: none (down, timed out)
	Status         string    // "" derives GitHub's wording from StatusCode
	DeliveredAt    time.Time // zero: the server's clock
	InstallationID int64
	RepositoryID   int64
	Redelivery     bool
	// Payload is the body a redelivery sends again (nil: "{}").
	Payload []byte
}

// deliveryState is the fake's webhook side. Guarded by Server.mu.
type deliveryState struct {
	attempts    []*HookDelivery // in the order sent
	redelivered []int64         // attempt ids POSTed to .../attempts, in order
	hookURL     string
	hookSecret  string
	sending     int // redeliveries in flight
}

// deliveryStatus is GitHub's status text for an answer.
func deliveryStatus(code int, err error) string {
	switch {
	case code >= 200 && code < 300:
		return "OK"
	case code != 0:
		return "Invalid HTTP Response: " + strconv.Itoa(code)
	case err != nil && strings.Contains(err.Error(), "Timeout"):
		return "timed out"
	default:
		return "failed to connect to host"
	}
}

// SetWebhook sets the App's webhook URL and secret: where redeliveries
// and SendWebhook go.
func (s *Server) SetWebhook(url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.hookURL, s.hooks.hookSecret = url, secret
}

// AddDelivery records an attempt as if GitHub had sent it and returns its
// id. A zero DeliveredAt is now on the server's clock; an empty Status is
// derived from StatusCode.
func (s *Server) AddDelivery(d HookDelivery) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addDelivery(d)
}

// addDelivery is AddDelivery with s.mu held.
func (s *Server) addDelivery(d HookDelivery) int64 {
	if d.ID == 0 {
		d.ID = s.newID()
	}
	if d.GUID == "" {
		d.GUID = newGUID()
	}
	if d.DeliveredAt.IsZero() {
		d.DeliveredAt = s.now()
	}
	if d.Status == "" {
		d.Status = deliveryStatus(d.StatusCode, nil)
	}
	d.Payload = slices.Clone(d.Payload)
	s.hooks.attempts = append(s.hooks.attempts, &d)
	return d.ID
}

// SendWebhook sends payload as a delivery of event to the webhook URL now
// (signed with the webhook secret), records the attempt with the answer
// and returns it. guid "" gets a fresh one. Action, installation and
// repository are read from the payload.
func (s *Server) SendWebhook(event, guid string, payload []byte) HookDelivery {
	if guid == "" {
		guid = newGUID()
	}
	var meta struct {
		Action       string `json:"action"`
		Installation struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Repository struct {
			ID int64 `json:"id"`
		} `json:"repository"`
	}
	json.Unmarshal(payload, &meta) //nolint:errcheck // a payload that is not an object is sent as it is
	s.mu.Lock()
	hookURL, secret := s.hooks.hookURL, s.hooks.hookSecret
	s.mu.Unlock()
	code, err := s.post(hookURL, secret, event, guid, payload)
	d := HookDelivery{
		GUID: guid, Event: event, Action: meta.Action, StatusCode: code, Status: deliveryStatus(code, err),
		InstallationID: meta.Installation.ID, RepositoryID: meta.Repository.ID, Payload: payload,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d.ID = s.addDelivery(d)
	return d
}

// post sends one delivery as GitHub does: JSON body, event and delivery
// headers, HMAC-SHA256 (and the legacy SHA-1) signature of the body.
func (s *Server) post(hookURL, secret, event, guid string, payload []byte) (int, error) {
	if hookURL == "" {
		return 0, fmt.Errorf("no webhook URL set")
	}
	if payload == nil {
		payload = []byte("{}")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // GitHub's timeout
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hookURL, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(s.appID, 10))
	m256 := hmac.New(sha256.New, []byte(secret))
	m256.Write(payload)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m256.Sum(nil)))
	m1 := hmac.New(sha1.New, []byte(secret))
	m1.Write(payload)
	req.Header.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(m1.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Deliveries returns every attempt recorded, in the order sent.
func (s *Server) Deliveries() []HookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]HookDelivery, 0, len(s.hooks.attempts))
	for _, d := range s.hooks.attempts {
		out = append(out, *d)
	}
	return out
}

// RedeliveryRequests returns the attempt ids POSTed to .../attempts and
// answered 202, in order.
func (s *Server) RedeliveryRequests() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hooks.redelivered)
}

// RedeliveriesInFlight returns how many redeliveries are being sent now.
func (s *Server) RedeliveriesInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hooks.sending
}

// deliveryJSON is an attempt in GitHub's list shape (hook-delivery-item).
func deliveryJSON(d *HookDelivery) obj {
	var action, inst, repoID any
	if d.Action != "" {
		action = d.Action
	}
	if d.InstallationID != 0 {
		inst = d.InstallationID
	}
	if d.RepositoryID != 0 {
		repoID = d.RepositoryID
	}
	return obj{
		"id": d.ID, "guid": d.GUID, "delivered_at": d.DeliveredAt.UTC().Format(time.RFC3339),
		"redelivery": d.Redelivery, "duration": 0.05, "status": d.Status, "status_code": d.StatusCode,
		"event": d.Event, "action": action, "installation_id": inst, "repository_id": repoID,
		"throttled_at": nil,
	}
}

// listDeliveries answers GET /app/hook/deliveries: newest first, per_page
// (default 30, at most 100), cursor paging with a Link rel="next".
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	perPage := 30
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "per_page must be a positive number")
			return
		}
		perPage = min(n, 100)
	}
	// Newest first: by delivery time, then id (attempts registered with a
	// past time sort where GitHub would have them).
	sorted := slices.Clone(s.hooks.attempts)
	sort.Slice(sorted, func(i, j int) bool { return newer(sorted[i], sorted[j]) })
	if c := r.URL.Query().Get("cursor"); c != "" {
		after, ok := parseCursor(c)
		if !ok {
			writeError(w, http.StatusBadRequest, "invalid cursor")
			return
		}
		i := sort.Search(len(sorted), func(i int) bool { return newer(&after, sorted[i]) })
		sorted = sorted[i:]
	}
	page := sorted[:min(perPage, len(sorted))]
	if len(page) < len(sorted) {
		next := *r.URL
		q := url.Values{}
		q.Set("per_page", strconv.Itoa(perPage))
		q.Set("cursor", cursorOf(page[len(page)-1]))
		next.RawQuery = q.Encode()
		next.Scheme, next.Host = "http", r.Host
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next.String()))
	}
	out := make([]obj, 0, len(page))
	for _, d := range page {
		out = append(out, deliveryJSON(d))
	}
	writeJSON(w, http.StatusOK, out)
}

// newer orders attempts newest first.
func newer(a, b *HookDelivery) bool {
	if !a.DeliveredAt.Equal(b.DeliveredAt) {
		return a.DeliveredAt.After(b.DeliveredAt)
	}
	return a.ID > b.ID
}

// cursorOf is the opaque cursor of the page after d: its time and id.
func cursorOf(d *HookDelivery) string {
	return "v1_" + strconv.FormatInt(d.DeliveredAt.UnixNano(), 10) + "_" + strconv.FormatInt(d.ID, 10)
}

func parseCursor(c string) (HookDelivery, bool) {
	secs, id, ok := strings.Cut(strings.TrimPrefix(c, "v1_"), "_")
	ts, err1 := strconv.ParseInt(secs, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || !strings.HasPrefix(c, "v1_") || err1 != nil || err2 != nil {
		return HookDelivery{}, false
	}
	return HookDelivery{ID: n, DeliveredAt: time.Unix(0, ts)}, true
}

// redeliver answers POST /app/hook/deliveries/{delivery_id}/attempts: 202,
// then sends the attempt's payload again in the background and records the
// outcome as a new attempt. Attempts older than RedeliveryWindow answer
// 422. Called with s.mu held.
func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("delivery_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	var orig *HookDelivery
	for _, d := range s.hooks.attempts {
		if d.ID == id {
			orig = d
		}
	}
	if orig == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if s.now().Sub(orig.DeliveredAt) > RedeliveryWindow {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: the delivery is too old to be redelivered")
		return
	}
	s.hooks.redelivered = append(s.hooks.redelivered, id)
	s.hooks.sending++
	d := *orig
	hookURL, secret := s.hooks.hookURL, s.hooks.hookSecret
	go func() {
		code, err := s.post(hookURL, secret, d.Event, d.GUID, d.Payload)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hooks.sending--
		d.ID, d.Redelivery, d.DeliveredAt = 0, true, time.Time{}
		d.StatusCode, d.Status = code, deliveryStatus(code, err)
		s.addDelivery(d)
	}()
	writeJSON(w, http.StatusAccepted, obj{})
}

// isAppHookRoute: the App's own webhook endpoints, authenticated with the
// App's JWT.
func isAppHookRoute(route string) bool {
	return route == RouteListDeliveries || route == RouteRedeliver
}

// newGUID is a random delivery GUID in GitHub's format.
func newGUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
