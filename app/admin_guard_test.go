package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// adminDo sends one request to the harness's admin listener, with extra
// headers (Host is set as the request's Host) and returns status and body.
func (h *harness) adminDo(method, path, body string, headers map[string]string) (int, http.Header, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.admin+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const adminEvent = `{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"labeled","prNumber":42,"details":{"sha":"abc123"}}`

// TestAdminRefusesCrossSiteRequests: with no token (the loopback default),
// a web page's POST — text/plain JSON, which a browser sends without a
// preflight — is refused and changes nothing; curl's and same-origin
// requests pass, and so do cross-site GETs (they change nothing).
func TestAdminRefusesCrossSiteRequests(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	for name, hdr := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site": {"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"Sec-Fetch-Site same-site":  {"Content-Type": "text/plain", "Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost:8081"},
		"Origin only":               {"Content-Type": "text/plain", "Origin": "https://evil.example"},
	} {
		code, _, body := h.adminDo("POST", "/event", adminEvent, hdr)
		if code != http.StatusForbidden || !strings.Contains(body, "cross-origin") {
			t.Errorf("%s: %d %s, want 403 naming the cross-origin refusal", name, code, body)
		}
	}
	if code, _, body := h.adminDo("POST", "/lease/acquire", `{"tenant":"1","repo":"octo/app"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("cross-site lease acquire: %d %s", code, body)
	}
	if code, _, body := h.adminDo("GET", "/queue?tenant=1&repo=octo/app", "", nil); code != 200 || !strings.Contains(body, `"queue": []`) {
		t.Fatalf("after refused posts the queue is %d %s, want empty", code, body)
	}
	if code, _, body := h.adminDo("POST", "/event", adminEvent, map[string]string{"Sec-Fetch-Site": "same-origin"}); code != 200 || !strings.Contains(body, "joined") {
		t.Errorf("same-origin POST: %d %s", code, body)
	}
	if code, _, _ := h.adminDo("GET", "/queue?tenant=1&repo=octo/app", "", map[string]string{"Sec-Fetch-Site": "cross-site"}); code != 200 {
		t.Errorf("cross-site GET: %d, want 200", code)
	}
}

// TestAdminAnswersOnlyToItsHostNames: DNS rebinding (a name of the
// attacker's, resolving to 127.0.0.1) gets 421; loopback names with any
// port are answered.
func TestAdminAnswersOnlyToItsHostNames(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	_, port, _ := strings.Cut(strings.TrimPrefix(h.admin, "http://"), ":")
	for _, host := range []string{"localhost:" + port, "LOCALHOST:" + port, "127.0.0.1:" + port, "[::1]:" + port, "localhost", "127.0.0.1"} {
		if code, _, body := h.adminDo("GET", "/healthz", "", map[string]string{"Host": host}); code != 200 {
			t.Errorf("Host %s: %d %s, want 200", host, code, body)
		}
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "10.1.2.3:" + port} {
		code, _, body := h.adminDo("POST", "/event", adminEvent, map[string]string{"Host": host})
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "DNS rebinding") {
			t.Errorf("Host %s: %d %s, want 421 saying why", host, code, body)
		}
	}
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("a misdirected request changed the queue: %+v", q)
	}
}

// TestHostGuardOfAnAddressOffLoopback: an admin address of its own is
// answered by its name; one on every address answers IP literals.
func TestHostGuardOfAnAddressOffLoopback(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		addr, host string
		want       int
	}{
		{"10.0.0.5:8081", "10.0.0.5:8081", 200},
		{"10.0.0.5:8081", "10.0.0.6:8081", 421},
		{"admin.internal:8081", "admin.internal:8081", 200},
		{"admin.internal:8081", "evil.example:8081", 421},
		{"0.0.0.0:8081", "192.168.1.10:8081", 200},
		{"0.0.0.0:8081", "[fe80::1]:8081", 200},
		{"0.0.0.0:8081", "evil.example:8081", 421},
		{":8081", "evil.example", 421},
	} {
		r, _ := http.NewRequest("GET", "http://x/healthz", nil)
		r.Host = c.host
		w := &statusRecorder{header: http.Header{}, code: 200}
		hostGuard(c.addr, ok).ServeHTTP(w, r)
		if w.code != c.want {
			t.Errorf("admin %s, Host %s: %d, want %d", c.addr, c.host, w.code, c.want)
		}
	}
}

type statusRecorder struct {
	header http.Header
	code   int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.code = code }

// TestAdminWrongMethodIs405: every admin route answers another method 405
// with Allow, not the dashboard catch-all's 404.
func TestAdminWrongMethodIs405(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/event", "POST"},
		{"PUT", "/event", "POST"},
		{"GET", "/reconcile", "POST"},
		{"POST", "/lease", "GET, HEAD"},
		{"GET", "/lease/acquire", "POST"},
		{"DELETE", "/lease/release", "POST"},
		{"POST", "/queue", "GET, HEAD"},
		{"GET", "/deliveries/retry", "POST"},
		{"POST", "/deliveries/stats", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
		{"POST", "/metrics", "GET, HEAD"},
		{"POST", "/", "GET, HEAD"},
		{"POST", "/repos/1/octo/app", "GET, HEAD"},
	} {
		code, hdr, body := h.adminDo(c.method, c.path, "{}", nil)
		if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q (%s), want 405 Allow %q", c.method, c.path, code, hdr.Get("Allow"), body, c.allow)
		}
	}
}

// TestAdminBearerSchemeInAnyCase: RFC 9110 makes the scheme
// case-insensitive.
func TestAdminBearerSchemeInAnyCase(t *testing.T) {
	const token = "0123456789abcdef-token"
	h := newHarness(t, withoutGitHub, func(c *Config) { c.AdminToken = token })
	for _, auth := range []string{"Bearer " + token, "bearer " + token, "BEARER " + token, "beArEr  " + token} {
		if code, _, body := h.adminDo("GET", "/healthz", "", map[string]string{"Authorization": auth}); code != 200 {
			t.Errorf("%q: %d %s", auth[:8], code, body)
		}
	}
	for _, auth := range []string{"Bearer wrong", "Token " + token, "Bearer" + token, ""} {
		if code, _, _ := h.adminDo("GET", "/healthz", "", map[string]string{"Authorization": auth}); code != 401 {
			t.Errorf("%q: %d, want 401", auth, code)
		}
	}
}

// TestAdminTokenOffLoopbackIsLongEnough: an admin listener off loopback
// needs a token of at least 16 characters; the refusal names the flag
// and its environment variable.
func TestAdminTokenOffLoopbackIsLongEnough(t *testing.T) {
	base := Config{AdminAddr: "0.0.0.0:8081", MergeMethod: "merge", LeaseTTL: time.Second, LeaseDead: time.Second, ReconcileEvery: time.Minute}
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"0.0.0.0:8081", "", false},
		{"0.0.0.0:8081", "short-token", false},
		{"0.0.0.0:8081", strings.Repeat("t", 15), false},
		{"0.0.0.0:8081", strings.Repeat("t", 16), true},
		{"127.0.0.1:8081", "", true},
		{"127.0.0.1:8081", "short", true},
	} {
		cfg := base
		cfg.AdminAddr, cfg.AdminToken = c.addr, c.token
		err := cfg.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%s with a token of %d: %v", c.addr, len(c.token), err)
		}
		if err != nil && (!strings.Contains(err.Error(), "--admin-token") || !strings.Contains(err.Error(), "MERGEGATE_ADMIN_TOKEN")) {
			t.Errorf("refusal does not name the flag and variable: %v", err)
		}
	}
}

// A replica's name goes into GitHub's User-Agent: a name that is not a
// header value (a space, a newline, non-ASCII) is refused at start.
func TestReplicaNameIsAHeaderValue(t *testing.T) {
	base := Config{AdminAddr: "127.0.0.1:8081", MergeMethod: "merge", LeaseTTL: time.Second, LeaseDead: time.Second, ReconcileEvery: time.Minute}
	for name, ok := range map[string]bool{"": true, "mg-1": true, "vm-13899.example": true, "mg 1": false, "mg\n1": false, "mgé": false, strings.Repeat("m", 65): false} {
		cfg := base
		cfg.Replica = name
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("--replica %q: %v, want ok=%v", cfg.Replica, err, ok)
		} else if err != nil && !strings.Contains(err.Error(), "--replica") {
			t.Errorf("refusal does not name the flag: %v", err)
		}
	}
}
