package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/rules"
)

// minimal is a small App delivery: an unlabelled PR opened.
const minimal = `{"action":"opened","installation":{"id":7},"repository":{"full_name":"o/r"},` +
	`"pull_request":{"number":3,"state":"open","draft":false,"labels":[],"auto_merge":null,"head":{"sha":"abc"},"base":{"ref":"main"}}}`

// TestRefusals: every refused delivery gets its status and nothing is stored.
func TestRefusals(t *testing.T) {
	body := []byte(minimal)
	flipped := bytes.Clone(body)
	flipped[10] ^= 0x20
	big := bytes.Repeat([]byte("a"), 26<<20)
	cases := []struct {
		name    string
		d       delivery
		status  int
		message string // substring of the error
	}{
		{"GET", delivery{method: http.MethodGet, event: "pull_request", id: "1", body: body}, http.StatusMethodNotAllowed, "POST"},
		{"flipped byte", delivery{event: "pull_request", id: "1", body: flipped, signature: Sign(testSecret, body)}, http.StatusUnauthorized, "does not match"},
		{"wrong secret", delivery{event: "pull_request", id: "1", body: body, signature: Sign("not-the-secret", body)}, http.StatusUnauthorized, "does not match"},
		{"missing signature", delivery{event: "pull_request", id: "1", body: body, signature: "-"}, http.StatusUnauthorized, "missing X-Hub-Signature-256"},
		{"SHA-1 only", delivery{event: "pull_request", id: "1", body: body, signature: "-", sha1: true}, http.StatusUnauthorized, "SHA-1"},
		{"SHA-1 value in the SHA-256 header", delivery{event: "pull_request", id: "1", body: body, signature: "sha1=0123456789abcdef0123456789abcdef01234567"}, http.StatusUnauthorized, "malformed"},
		{"26 MiB body", delivery{event: "pull_request", id: "1", body: big}, http.StatusRequestEntityTooLarge, "25 MiB"},
		{"text/plain", delivery{contentType: "text/plain", event: "pull_request", id: "1", body: body}, http.StatusUnsupportedMediaType, "application/json"},
		{"no content type", delivery{contentType: ";", event: "pull_request", id: "1", body: body}, http.StatusUnsupportedMediaType, "content type"},
		{"malformed JSON", delivery{event: "pull_request", id: "1", body: []byte(`{"action":`)}, http.StatusBadRequest, "malformed"},
		{"JSON array", delivery{event: "pull_request", id: "1", body: []byte(`[1]`)}, http.StatusBadRequest, "not a JSON object"},
		{"empty body", delivery{event: "pull_request", id: "1", body: nil}, http.StatusBadRequest, "not a JSON object"},
		{"missing X-GitHub-Event", delivery{id: "1", body: body}, http.StatusBadRequest, "X-GitHub-Event"},
		{"missing X-GitHub-Delivery", delivery{event: "pull_request", body: body}, http.StatusBadRequest, "X-GitHub-Delivery"},
		{"repository hook", delivery{event: "pull_request", id: "1", body: []byte(`{"action":"opened","repository":{"full_name":"o/r"}}`)}, http.StatusBadRequest, "repository webhook (no installation)"},
		{"installation id 0", delivery{event: "pull_request", id: "1", body: []byte(`{"action":"opened","installation":{"id":0}}`)}, http.StatusBadRequest, "no installation"},
		{"form without payload", delivery{contentType: "application/x-www-form-urlencoded", event: "pull_request", id: "1", body: []byte("other=1")}, http.StatusBadRequest, "payload"},

		// Order of checks: method, content type, size, signature, headers/JSON.
		{"415 before 401", delivery{contentType: "text/plain", event: "pull_request", id: "1", body: body, signature: "-"}, http.StatusUnsupportedMediaType, ""},
		{"413 before 401", delivery{event: "pull_request", id: "1", body: big, signature: "-"}, http.StatusRequestEntityTooLarge, ""},
		{"401 before 400 (headers)", delivery{body: body, signature: "-"}, http.StatusUnauthorized, ""},
		{"401 before 400 (JSON)", delivery{event: "pull_request", id: "1", body: []byte("{"), signature: Sign("nope", []byte("{"))}, http.StatusUnauthorized, ""},
		{"405 before 415", delivery{method: http.MethodPut, contentType: "text/plain", body: body}, http.StatusMethodNotAllowed, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t)
			w := th.serve(c.d)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d (%s)", w.Code, c.status, w.Body)
			}
			if msg := errorOf(t, w); msg == "" || !strings.Contains(msg, c.message) {
				t.Errorf("error %q, want it to contain %q", msg, c.message)
			}
			if th.inbox.len() != 0 || th.onStoredCalls() != 0 {
				t.Fatal("a refused delivery was stored")
			}
		})
	}
}

// hideLength makes a body of unknown length (chunked), so only
// MaxBytesReader can stop it.
type hideLength struct{ io.Reader }

func TestBodyLimitWithoutContentLength(t *testing.T) {
	th := newTestHandler(t)
	big := bytes.Repeat([]byte("a"), 26<<20)
	d := delivery{event: "pull_request", id: "1", body: big}
	r := d.request()
	r.Body = io.NopCloser(hideLength{bytes.NewReader(big)})
	r.ContentLength = -1
	w := httptest.NewRecorder()
	th.h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge || th.inbox.len() != 0 {
		t.Fatalf("status %d, stored %d; want 413 and nothing", w.Code, th.inbox.len())
	}
}

func TestBodyLimitBoundary(t *testing.T) {
	body := []byte(minimal)
	limit := func(n int64) func(*HandlerConfig) { return func(c *HandlerConfig) { c.MaxBody = n } }
	if w := newTestHandler(t, limit(int64(len(body)))).serve(delivery{event: "pull_request", id: "1", body: body}); w.Code != http.StatusAccepted {
		t.Errorf("body of exactly MaxBody: status %d, want 202", w.Code)
	}
	if w := newTestHandler(t, limit(int64(len(body)-1))).serve(delivery{event: "pull_request", id: "1", body: body}); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("body of MaxBody+1: status %d, want 413", w.Code)
	}
}

func TestStored(t *testing.T) {
	th := newTestHandler(t)
	w := th.serve(delivery{contentType: "application/json; charset=utf-8", event: "pull_request", id: "d-1", body: []byte(minimal)})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d (%s)", w.Code, w.Body)
	}
	var answer map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || answer["result"] != "stored" || answer["delivery"] != "d-1" {
		t.Errorf("answer %s", w.Body)
	}
	d, _ := th.inbox.get("d-1")
	if d.Action != "opened" || d.Tenant != "7" || d.Repo != "o/r" || string(d.Body) != minimal || !d.ReceivedAt.Equal(testNow) {
		t.Errorf("stored %+v", d)
	}
}

// At info, a stored delivery's line is the engine's "delivery applied":
// the handler's own line for it (and for a redelivery of it, a duplicate)
// is at debug, while a refused delivery is still told at warn.
func TestLogLevelsPerOutcome(t *testing.T) {
	levels := func(th *testHandler) []string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(th.logs.String()), "\n") {
			var v struct{ Level string }
			if json.Unmarshal([]byte(line), &v) == nil {
				out = append(out, v.Level)
			}
		}
		return out
	}
	th := newTestHandler(t)
	th.serve(delivery{event: "pull_request", id: "d-1", body: []byte(minimal)})
	th.serve(delivery{event: "pull_request", id: "d-1", body: []byte(minimal)})
	th.serve(delivery{event: "pull_request", id: "d-2", body: []byte(minimal), signature: "sha256=00"})
	if got, want := strings.Join(levels(th), ","), "debug,debug,warn"; got != want {
		t.Errorf("levels of stored, duplicate, forged: %s, want %s\n%s", got, want, th.logs.String())
	}
}

func TestRotationThroughHandler(t *testing.T) {
	secrets, err := ParseSecrets("new-secret," + testSecret)
	if err != nil {
		t.Fatal(err)
	}
	th := newTestHandler(t, func(c *HandlerConfig) { c.Secrets = secrets })
	body := []byte(minimal)
	for i, secret := range []string{"new-secret", testSecret} {
		id := string(rune('a' + i))
		if w := th.serve(delivery{event: "pull_request", id: id, body: body, signature: Sign(secret, body)}); w.Code != http.StatusAccepted {
			t.Errorf("signed with secret %d: status %d", i, w.Code)
		}
	}
	if th.inbox.len() != 2 {
		t.Fatalf("stored %d, want 2", th.inbox.len())
	}
}

func TestZeroSecretsRefuseEverything(t *testing.T) {
	th := newTestHandler(t, func(c *HandlerConfig) { c.Secrets = Secrets{} })
	body := []byte(minimal)
	for _, sig := range []string{Sign("", body), "-"} {
		if w := th.serve(delivery{event: "pull_request", id: "1", body: body, signature: sig}); w.Code != http.StatusUnauthorized {
			t.Errorf("no secret configured: status %d, want 401", w.Code)
		}
	}
}

// TestFormEncoded: GitHub's form content type puts the JSON in payload=;
// the signature is over the raw form body, the stored body is the JSON.
func TestFormEncoded(t *testing.T) {
	th := newTestHandler(t)
	raw := []byte(url.Values{"payload": {minimal}}.Encode())
	w := th.serve(delivery{contentType: "application/x-www-form-urlencoded", event: "pull_request", id: "f-1", body: raw})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d (%s)", w.Code, w.Body)
	}
	d, _ := th.inbox.get("f-1")
	if string(d.Body) != minimal || d.Tenant != "7" {
		t.Fatalf("stored %+v body %s", d, d.Body)
	}
	tr, err := Translate(d, rules.Options{AutoMergeTrigger: true, TriggerLabel: "automerge"})
	if err != nil || !strings.Contains(tr.Ignored, "not eligible") {
		t.Fatalf("Translate = %+v, %v", tr, err)
	}

	// Signing the decoded JSON instead of the raw body is refused.
	th = newTestHandler(t)
	w = th.serve(delivery{contentType: "application/x-www-form-urlencoded", event: "pull_request", id: "f-2", body: raw, signature: Sign(testSecret, []byte(minimal))})
	if w.Code != http.StatusUnauthorized || th.inbox.len() != 0 {
		t.Fatalf("signature over the JSON, not the body: status %d", w.Code)
	}
}

func TestDuplicateDelivery(t *testing.T) {
	th := newTestHandler(t)
	d := delivery{event: "pull_request", id: "dup-1", body: []byte(minimal)}
	for i := range 2 {
		if w := th.serve(d); w.Code != http.StatusAccepted {
			t.Fatalf("attempt %d: status %d", i, w.Code)
		}
	}
	if th.inbox.len() != 1 || th.onStoredCalls() != 1 {
		t.Fatalf("stored %d, OnStored %d; want 1 and 1", th.inbox.len(), th.onStoredCalls())
	}
	if !strings.Contains(th.logs.String(), `"duplicate":true`) {
		t.Error("the duplicate is not logged as one")
	}
}

func TestInboxFailureIs503(t *testing.T) {
	th := newTestHandler(t)
	th.inbox.err = errors.New("database or disk is full")
	w := th.serve(delivery{event: "pull_request", id: "x", body: []byte(minimal)})
	if w.Code != http.StatusServiceUnavailable || th.onStoredCalls() != 0 {
		t.Fatalf("status %d, OnStored %d; want 503 and 0", w.Code, th.onStoredCalls())
	}
	if !strings.Contains(th.logs.String(), "disk is full") {
		t.Error("the inbox error is not logged")
	}
}

func TestPingIsNotStored(t *testing.T) {
	th := newTestHandler(t)
	body := readFixture(t, "ping/with-app_id.payload.json")
	if w := th.serve(delivery{event: "ping", id: "p", body: body}); w.Code != http.StatusOK {
		t.Fatalf("ping: status %d", w.Code)
	}
	if w := th.serve(delivery{event: "ping", id: "p", body: body, signature: Sign("wrong", body)}); w.Code != http.StatusUnauthorized {
		t.Fatalf("ping with a wrong signature: status %d", w.Code)
	}
	if th.inbox.len() != 0 || th.onStoredCalls() != 0 {
		t.Fatal("ping was stored")
	}
}

// TestLogLine: one line per delivery with the fixed keys, and neither the
// secret, the signature nor the body.
func TestLogLine(t *testing.T) {
	th := newTestHandler(t)
	body := []byte(minimal)
	th.serve(delivery{event: "pull_request", id: "log-1", body: body})
	th.serve(delivery{event: "pull_request", id: "log-2", body: body, signature: Sign("wrong", body)})
	lines := strings.Split(strings.TrimSpace(th.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), th.logs)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	wantKeys := map[string]any{"delivery": "log-1", "event": "pull_request", "action": "opened", "tenant": "7", "repo": "o/r", "status": float64(202)}
	for k, v := range wantKeys {
		if first[k] != v {
			t.Errorf("log key %s = %v, want %v", k, first[k], v)
		}
	}
	all := th.logs.String()
	for _, secret := range []string{testSecret, strings.TrimPrefix(Sign(testSecret, body), "sha256="), strings.TrimPrefix(Sign("wrong", body), "sha256="), `"head"`, "abc"} {
		if strings.Contains(all, secret) {
			t.Errorf("log contains %q:\n%s", secret, all)
		}
	}
}

// TestRealServer sends deliveries over a real connection, including a
// chunked body over the limit.
func TestRealServer(t *testing.T) {
	th := newTestHandler(t)
	srv := httptest.NewServer(th.h)
	defer srv.Close()

	post := func(d delivery, body io.Reader) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhook", body)
		if err != nil {
			t.Fatal(err)
		}
		d.setHeaders(req.Header)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	body := []byte(minimal)
	if code := post(delivery{event: "pull_request", id: "r-1", body: body}, bytes.NewReader(body)); code != http.StatusAccepted {
		t.Fatalf("status %d, want 202", code)
	}
	big := bytes.Repeat([]byte(" "), 26<<20)
	if code := post(delivery{event: "pull_request", id: "r-2", body: big}, hideLength{bytes.NewReader(big)}); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 26 MiB: status %d, want 413", code)
	}
	if th.inbox.len() != 1 {
		t.Fatalf("stored %d, want 1", th.inbox.len())
	}
	if _, ok := th.inbox.get("r-1"); !ok {
		t.Fatal("r-1 not stored")
	}
}

func TestNewHandlerNeedsInbox(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewHandler without an Inbox did not panic")
		}
	}()
	NewHandler(HandlerConfig{})
}

var _ Inbox = (*fakeInbox)(nil)

// TestLengthsGitHubNeverExceeds: a delivery id over 100 bytes, an owner
// over 39 or a repository name over 100 characters is refused (400) and
// not stored; at the limits it is stored.
func TestLengthsGitHubNeverExceeds(t *testing.T) {
	withRepo := func(full string) []byte {
		return []byte(`{"action":"opened","installation":{"id":7},"repository":{"full_name":"` + full + `"}}`)
	}
	cases := []struct {
		name   string
		id     string
		body   []byte
		status int
	}{
		{"id of 100 bytes", strings.Repeat("d", 100), []byte(minimal), http.StatusAccepted},
		{"id of 101 bytes", strings.Repeat("d", 101), []byte(minimal), http.StatusBadRequest},
		{"owner of 39", "o39", withRepo(strings.Repeat("o", 39) + "/r"), http.StatusAccepted},
		{"owner of 40", "o40", withRepo(strings.Repeat("o", 40) + "/r"), http.StatusBadRequest},
		{"name of 100", "n100", withRepo("o/" + strings.Repeat("é", 100)), http.StatusAccepted},
		{"name of 101", "n101", withRepo("o/" + strings.Repeat("n", 101)), http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t)
			w := th.serve(delivery{event: "pull_request", id: c.id, body: c.body})
			if w.Code != c.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, c.status)
			}
			stored := th.inbox.len() == 1
			if stored != (c.status == http.StatusAccepted) {
				t.Fatalf("stored %v with status %d", stored, w.Code)
			}
			if c.status == http.StatusBadRequest && strings.Contains(th.logs.String(), strings.Repeat("d", 101)) {
				t.Error("the refused id is logged whole")
			}
		})
	}
}
