package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// fixtureDir holds the octokit/webhooks examples (MIT, LICENSE beside them).
var fixtureDir = testkit.Testdata("github-webhooks")

// testSecret is the secret every test delivery is signed with.
const testSecret = "test-secret-do-not-use"

// fakeInbox is an in-memory Inbox: a map by delivery id, in arrival order.
type fakeInbox struct {
	mu    sync.Mutex
	byID  map[string]leasedo.Delivery
	order []string
	err   error // when set, Enqueue fails with it
}

func newFakeInbox() *fakeInbox { return &fakeInbox{byID: map[string]leasedo.Delivery{}} }

func (f *fakeInbox) Enqueue(_ context.Context, d leasedo.Delivery) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	if _, ok := f.byID[d.ID]; ok {
		return true, nil
	}
	d.Seq = int64(len(f.order) + 1)
	d.Body = bytes.Clone(d.Body)
	f.byID[d.ID] = d
	f.order = append(f.order, d.ID)
	return false, nil
}

func (f *fakeInbox) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.order)
}

func (f *fakeInbox) get(id string) (leasedo.Delivery, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.byID[id]
	return d, ok
}

var testNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testHandler wires a handler to a fresh fake inbox and a captured log.
type testHandler struct {
	h      http.Handler
	inbox  *fakeInbox
	logs   *testkit.SyncBuffer
	stored []leasedo.Delivery // OnStored calls
	mu     sync.Mutex
}

func newTestHandler(t testing.TB, mutate ...func(*HandlerConfig)) *testHandler {
	t.Helper()
	secrets, err := NewSecrets(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	th := &testHandler{inbox: newFakeInbox(), logs: &testkit.SyncBuffer{}}
	cfg := HandlerConfig{
		Secrets: secrets,
		Inbox:   th.inbox,
		Clock:   leasedo.NewManualClock(testNow), // never moved
		Logger:  zerolog.New(th.logs),
		OnStored: func(d leasedo.Delivery) {
			th.mu.Lock()
			defer th.mu.Unlock()
			d.Body = bytes.Clone(d.Body) // valid only during the call
			th.stored = append(th.stored, d)
		},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	th.h = NewHandler(cfg)
	return th
}

func (th *testHandler) onStoredCalls() int {
	th.mu.Lock()
	defer th.mu.Unlock()
	return len(th.stored)
}

// delivery describes one request; zero fields get GitHub's defaults.
type delivery struct {
	method      string
	contentType string // default application/json
	event       string
	id          string
	body        []byte
	signature   string // default: Sign(testSecret, body); "-" for none
	sha1        bool   // also send the legacy X-Hub-Signature
}

func (d delivery) request() *http.Request {
	method := d.method
	if method == "" {
		method = http.MethodPost
	}
	r := httptest.NewRequest(method, "/webhook", bytes.NewReader(d.body))
	d.setHeaders(r.Header)
	return r
}

func (d delivery) setHeaders(h http.Header) {
	ct := d.contentType
	if ct == "" {
		ct = "application/json"
	}
	h.Set("Content-Type", ct)
	h.Set("User-Agent", "GitHub-Hookshot/test")
	if d.event != "" {
		h.Set(EventHeader, d.event)
	}
	if d.id != "" {
		h.Set(DeliveryHeader, d.id)
	}
	switch d.signature {
	case "":
		h.Set(SignatureHeader, Sign(testSecret, d.body))
	case "-":
	default:
		h.Set(SignatureHeader, d.signature)
	}
	if d.sha1 {
		h.Set(legacySignatureHeader, "sha1=0123456789abcdef0123456789abcdef01234567")
	}
}

// serve sends d through the handler and returns the recorded answer.
func (th *testHandler) serve(d delivery) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	th.h.ServeHTTP(w, d.request())
	return w
}

// errorOf decodes an {"error": ...} answer.
func errorOf(t testing.TB, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("answer %q is not JSON: %v", w.Body.String(), err)
	}
	return body.Error
}

// readFixture reads one example payload as it stands (pretty-printed).
func readFixture(t testing.TB, rel string) []byte {
	t.Helper()
	return testkit.ReadTestdata(t, "github-webhooks", filepath.FromSlash(rel))
}

// editJSON decodes body into a generic map (numbers kept exact), applies
// edit and re-encodes it compactly.
func editJSON(t testing.TB, body []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// obj returns m[key] as an object, failing the test when it is not one.
func obj(t testing.TB, m map[string]any, key string) map[string]any {
	t.Helper()
	o, ok := m[key].(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", key)
	}
	return o
}
