package app

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// startApp runs the real App with cfg against gh (a harness whose
// configuration the test chose: newHarness always has credentials).
// The returned stop shuts it down (also at the end of the test).
func startApp(t *testing.T, gh *fakegithub.Server, clk *leasedo.ManualClock, cfg Config) (*harness, func()) {
	t.Helper()
	logBuf := &testkit.SyncBuffer{}
	log := zerolog.New(logBuf).Level(zerolog.DebugLevel)
	a, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, gh: gh, app: a, clock: clk, logBuf: logBuf}
	pub, adm := a.Addrs()
	h.pub, h.admin = "http://"+pub, "http://"+adm
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx) //nolint:errcheck
		if t.Failed() {
			t.Logf("log:\n%s", logBuf.String())
		}
	}
	t.Cleanup(stop)
	return h, stop
}

// bareConfig is a configuration without GitHub credentials: the first
// start of a new install.
func bareConfig(githubURL string, clk *leasedo.ManualClock, dir string) Config {
	c := Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DB: filepath.Join(dir, "mergegate.db"),
		GitHubURL: githubURL, ReconcileEvery: time.Hour, LeaseTTL: 30 * time.Second, LeaseDead: 90 * time.Second,
		TriggerLabel: "automerge", AutoMerge: true, MergeMethod: "squash",
	}
	if clk != nil {
		c.Clock = clk
	}
	return c
}

// settleAny is harness.settle for an App whose engine the set-up replaced.
func (h *harness) settleAny() {
	h.t.Helper()
	h.eventually("the engine to settle", func() bool {
		_, eng, _ := h.app.current()
		keys, err := h.app.Store.PendingKeys(context.Background())
		return err == nil && len(keys) == 0 && eng.Busy() == 0
	})
}

// browser is an HTTP client with cookies that does not follow redirects.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var (
	formAction    = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
	manifestField = regexp.MustCompile(`name="manifest" value="([^"]+)"`)
)

// registerForm reads the set-up page's GitHub form: where it posts and the
// manifest it sends.
func registerForm(t *testing.T, page string) (action string, manifest map[string]any, raw string) {
	t.Helper()
	am, mm := formAction.FindStringSubmatch(page), manifestField.FindStringSubmatch(page)
	if am == nil || mm == nil {
		t.Fatalf("no manifest form in the set-up page:\n%s", page)
	}
	raw = html.UnescapeString(mm[1])
	if err := json.Unmarshal([]byte(raw), &manifest); err != nil {
		t.Fatalf("manifest is not JSON: %v\n%s", err, raw)
	}
	return html.UnescapeString(am[1]), manifest, raw
}

// submit posts the manifest form to GitHub, as the browser does, and
// returns where GitHub sends the browser back.
func submit(t *testing.T, c *http.Client, action, manifest string) string {
	t.Helper()
	resp, err := c.PostForm(action, url.Values{"manifest": {manifest}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("GitHub answered the manifest form %d, want 302", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

func TestSetupManifestFlowSwitchesToTheAppWithoutRestart(t *testing.T) {
	for _, tc := range []struct{ name, prefix string }{{"github.com", ""}, {"enterprise server", "/api/v3"}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
			gh := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now, PathPrefix: tc.prefix})
			gh.AddRepo(testTenant, testRepo, testBase)
			gh.SetManifestWebhookSecret(testSecret) // so the harness's helpers sign with it
			dir := t.TempDir()
			cfg := bareConfig(gh.URL(), clk, dir)
			h, stop := startApp(t, gh, clk, cfg)
			c := browser(t)

			// Before: no webhook, the set-up page on the public listener.
			if code := h.send("ping", []byte(`{}`)); code != http.StatusNotFound {
				t.Fatalf("POST /webhook before set-up = %d, want 404", code)
			}
			code, page, hdr := get(t, c, h.pub+"/")
			if code != http.StatusOK || !strings.Contains(page, "Register GitHub App") {
				t.Fatalf("GET / = %d:\n%s", code, page)
			}
			if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+gh.WebURL()) {
				t.Fatalf("CSP %q does not let the form post to GitHub", csp)
			}
			action, manifest, raw := registerForm(t, page)
			if want := gh.WebURL() + "/settings/apps/new?state="; !strings.HasPrefix(action, want) {
				t.Fatalf("form action %q, want %s...", action, want)
			}
			hook := manifest["hook_attributes"].(map[string]any)
			if hook["url"] != h.pub+"/webhook" || manifest["redirect_url"] != h.pub+"/setup/callback" {
				t.Fatalf("manifest URLs: hook %v, redirect %v", hook["url"], manifest["redirect_url"])
			}
			wantPerms := map[string]any{"pull_requests": "write", "issues": "write", "checks": "write", "statuses": "read",
				"contents": "write", "workflows": "write", "administration": "read", "metadata": "read"}
			if got := manifest["default_permissions"].(map[string]any); !mapsEqual(got, wantPerms) {
				t.Fatalf("permissions = %v, want %v", got, wantPerms)
			}
			var events []string
			for _, e := range manifest["default_events"].([]any) {
				events = append(events, e.(string))
			}
			slices.Sort(events)
			if got := strings.Join(events, ","); got != "check_run,check_suite,issue_comment,merge_group,pull_request,pull_request_review,push,status" {
				t.Fatalf("events = %s", got)
			}

			// GitHub creates the App and sends the browser back.
			back := submit(t, c, action, raw)
			if !strings.HasPrefix(back, h.pub+"/setup/callback?") {
				t.Fatalf("GitHub redirected to %q", back)
			}
			bu, _ := url.Parse(back)
			// A callback from another browser (no state cookie), or with a
			// state not issued here, is refused and burns nothing.
			if code, _, _ := get(t, browser(t), back); code != http.StatusBadRequest {
				t.Fatalf("callback without the state cookie = %d, want 400", code)
			}
			forged := *bu
			q := forged.Query()
			q.Set("state", strings.Repeat("0", 64))
			forged.RawQuery = q.Encode()
			if code, _, _ := get(t, c, forged.String()); code != http.StatusBadRequest {
				t.Fatalf("callback with a forged state = %d, want 400", code)
			}
			if n := len(gh.ManifestApps()); n != 1 || gh.ManifestApps()[0].Converted {
				t.Fatalf("a refused callback exchanged the code: %+v", gh.ManifestApps())
			}

			code, done, _ := get(t, c, back)
			if code != http.StatusOK || !strings.Contains(done, "GitHub App registered") || !strings.Contains(done, "/installations/new") {
				t.Fatalf("callback = %d:\n%s", code, done)
			}
			// The credentials are beside the database, mode 0600.
			path := filepath.Join(dir, "mergegate.credentials.json")
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Fatalf("credentials file mode %v, want 0600", st.Mode().Perm())
			}
			creds, err := ReadCredentials(path)
			if err != nil {
				t.Fatal(err)
			}
			if creds.AppID != gh.AppID() || creds.WebhookSecret != testSecret || creds.PrivateKey != string(gh.PrivateKeyPEM()) {
				t.Fatalf("stored credentials: app %d, secret ok %v, key ok %v", creds.AppID, creds.WebhookSecret == testSecret, creds.PrivateKey == string(gh.PrivateKeyPEM()))
			}

			// After: the set-up pages are gone, a replayed callback too.
			for _, u := range []string{h.pub + "/", h.pub + "/setup", back} {
				if code, _, _ := get(t, c, u); code != http.StatusNotFound {
					t.Fatalf("GET %s after set-up = %d, want 404", u, code)
				}
			}
			// Webhooks are served and the queue merges, without a restart.
			gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
			h.label(7, shaA)
			h.pass(shaA)
			h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
			h.settleAny()

			// A restart without flags loads the credentials file.
			stop()
			secrets := pemSecrets(gh.PrivateKeyPEM())
			secrets["webhook secret"] = testSecret
			secrets["manifest code"] = bu.Query().Get("code")
			secrets["state"] = bu.Query().Get("state")
			if found := secretsIn(h.logBuf.String(), secrets); len(found) > 0 {
				t.Fatalf("the set-up logged %v", found)
			}
			h2, _ := startApp(t, gh, clk, cfg)
			if fc, _, _ := h2.app.current(); fc == nil || h2.app.setup != nil {
				t.Fatal("after a restart the credentials file was not used")
			}
			if code, _, _ := get(t, c, h2.pub+"/"); code != http.StatusNotFound {
				t.Fatalf("set-up page after a restart = %d, want 404", code)
			}
			if code := h2.send("ping", []byte(`{"zen":"x","hook_id":1}`)); code != http.StatusOK {
				t.Fatalf("ping after a restart = %d, want 200", code)
			}
		})
	}
}

func TestSetupFlagsWinOverTheCredentialsFile(t *testing.T) {
	clk := leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	gh := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now})
	gh.AddRepo(testTenant, testRepo, testBase)
	dir := t.TempDir()
	cfg := bareConfig(gh.URL(), clk, dir)
	if err := WriteCredentials(CredentialsPath(cfg.DB), Credentials{AppID: gh.AppID(), PrivateKey: string(gh.PrivateKeyPEM()), WebhookSecret: "from-the-file"}); err != nil {
		t.Fatal(err)
	}
	cfg.WebhookSecret = testSecret // a flag: wins over the file's secret
	h, _ := startApp(t, gh, clk, cfg)
	if fc, _, _ := h.app.current(); fc == nil {
		t.Fatal("the file's App id and key were not used")
	}
	if code := h.send("ping", []byte(`{}`)); code != http.StatusOK {
		t.Fatalf("ping signed with the flag's secret = %d, want 200", code)
	}
	// Never overwritten: it holds the App's only copy of its key.
	if err := WriteCredentials(CredentialsPath(cfg.DB), Credentials{AppID: 1}); err == nil {
		t.Fatal("WriteCredentials overwrote an existing file")
	}
}

func TestSetupAsksForTheAdminTokenWhenOneIsSet(t *testing.T) {
	clk := leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	gh := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now})
	cfg := bareConfig(gh.URL(), clk, t.TempDir())
	cfg.AdminToken = "admin-token-for-setup"
	h, _ := startApp(t, gh, clk, cfg)
	if code, _, _ := get(t, browser(t), h.pub+"/"); code != http.StatusUnauthorized {
		t.Fatalf("set-up page without the token = %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, h.pub+"/", nil)
	req.SetBasicAuth("admin", cfg.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("set-up page with the token = %d, want 200", resp.StatusCode)
	}
}

func TestSetupStateExpires(t *testing.T) {
	clk := leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	gh := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now})
	h, _ := startApp(t, gh, clk, bareConfig(gh.URL(), clk, t.TempDir()))
	c := browser(t)
	_, page, _ := get(t, c, h.pub+"/setup?org=my-org&url=https://mergegate.example.com&name=mergegate-test")
	action, manifest, raw := registerForm(t, page)
	if !strings.HasPrefix(action, gh.WebURL()+"/organizations/my-org/settings/apps/new?state=") {
		t.Fatalf("organisation form action = %q", action)
	}
	if manifest["name"] != "mergegate-test" || manifest["redirect_url"] != "https://mergegate.example.com/setup/callback" {
		t.Fatalf("manifest = %v", manifest)
	}
	back := submit(t, c, action, raw)
	bu, _ := url.Parse(back)
	clk.Advance(2 * time.Hour)
	local := h.pub + bu.Path + "?" + bu.RawQuery // the public URL typed was not this test's listener
	if code, _, _ := get(t, c, local); code != http.StatusBadRequest {
		t.Fatalf("callback after the state expired = %d, want 400", code)
	}
	if gh.ManifestApps()[0].Org != "my-org" {
		t.Fatalf("registered for %q", gh.ManifestApps()[0].Org)
	}
}

func TestWebURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.github.com/":             "https://github.com",
		"https://api.github.com":              "https://github.com",
		"https://ghe.example.com/api/v3/":     "https://ghe.example.com",
		"https://ghe.example.com/api/v3":      "https://ghe.example.com",
		"https://api.acme.ghe.com/":           "https://acme.ghe.com",
		"http://127.0.0.1:4000/":              "http://127.0.0.1:4000",
		"http://127.0.0.1:4000/prefix/api/v3": "http://127.0.0.1:4000/prefix",
	} {
		if got := WebURL(in); got != want {
			t.Errorf("WebURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCredentialsPath(t *testing.T) {
	for in, want := range map[string]string{
		"mergegate.db":                 "mergegate.credentials.json",
		"/var/lib/mergegate/queue.db":  "/var/lib/mergegate/queue.credentials.json",
		"/var/lib/mergegate/mergegate": "/var/lib/mergegate/mergegate.credentials.json",
		"./data/x.sqlite3":             "data/x.credentials.json",
	} {
		if got := CredentialsPath(in); got != want {
			t.Errorf("CredentialsPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
