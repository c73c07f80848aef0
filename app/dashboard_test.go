package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
)

// dashboardQueue builds a queue with one of each state: #7 at the head
// waiting for ci/build, #9 bounced (its check failed), #8 waiting behind.
func dashboardQueue(t *testing.T, h *harness) {
	t.Helper()
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()
	h.clock.Advance(90 * time.Second)
	h.gh.SetCheckRun(testRepo, shaC, "ci/build", "completed", "failure")
	h.label(9, shaC)
	h.settle()
	h.clock.Advance(30 * time.Second)
	h.label(8, shaB)
	h.settle()
	h.clock.Advance(4 * time.Minute)
	q := h.queue()
	if len(q) != 3 {
		t.Fatalf("queue = %+v", q)
	}
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode
}

func TestDashboardJSONTwins(t *testing.T) {
	h := newHarness(t)
	dashboardQueue(t, h)

	var ov Overview
	if code := getJSON(t, h.admin+"/?format=json", &ov); code != http.StatusOK {
		t.Fatalf("GET /?format=json = %d", code)
	}
	if len(ov.Repos) != 1 || ov.Repos[0].Repo != testRepo || ov.Queued != 3 || !ov.Status.GitHub {
		t.Fatalf("overview = %+v", ov)
	}
	if code, page := getBody(t, h.admin+"/"); code != http.StatusOK || !regexp.MustCompile(`database [0-9.]+ (kB|MB) on disk`).MatchString(page) {
		t.Errorf("GET / = %d; its footer does not give the database's size", code)
	}
	r := ov.Repos[0]
	var got []string
	for _, q := range r.Queue {
		got = append(got, fmt.Sprintf("%d:%s", q.PRNumber, q.Status))
	}
	if s := strings.Join(got, ","); s != "7:evaluating,9:bounced,8:evaluating" {
		t.Fatalf("queue = %s", s)
	}
	if !r.Queue[0].Head || r.Queue[0].WaitingMS != (6*time.Minute).Milliseconds() || !strings.Contains(r.Queue[0].GateReason, "ci/build") {
		t.Fatalf("head = %+v", r.Queue[0])
	}
	if r.Queue[0].URL != h.gh.WebURL()+"/"+testRepo+"/pull/7" {
		t.Fatalf("PR link = %q", r.Queue[0].URL)
	}
	if len(r.Audit) == 0 || r.Audit[0].Action != leasedo.AuditJoin || r.Lease.Locked {
		t.Fatalf("audit %+v, lease %+v", r.Audit, r.Lease)
	}

	var rv RepoView
	for _, u := range []string{"/repos/1/Codertocat/Hello-World.json", "/repos/1/Codertocat/Hello-World?format=json"} {
		if code := getJSON(t, h.admin+u, &rv); code != http.StatusOK {
			t.Fatalf("GET %s = %d", u, code)
		}
		if len(rv.Queue) != 3 || len(rv.Events) == 0 || len(rv.Audit) < 4 {
			t.Fatalf("GET %s = %+v", u, rv)
		}
	}
	var e map[string]string
	if code := getJSON(t, h.admin+"/repos/1/Codertocat/Nope.json", &e); code != http.StatusNotFound {
		t.Fatalf("untracked repository = %d, want 404", code)
	}
}

func TestDashboardNeedsTheAdminTokenAsPassword(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AdminToken = "dash-token" })
	resp, err := http.Get(h.admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("without the token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	req, _ := http.NewRequest(http.MethodGet, h.admin+"/", nil)
	req.SetBasicAuth("me", "dash-token")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("with the token: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// chromium finds headless Chromium. In CI (CI=true) a missing browser is
// a failure: .ci/run installs it; elsewhere the test is skipped.
func chromium(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	if p := os.Getenv("MERGEGATE_CHROMIUM"); p != "" {
		names = []string{p}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("headless Chromium is not installed (apt-get install -y chromium); CI must run the dashboard test")
	}
	t.Skip("headless Chromium is not installed (apt-get install -y chromium): skipping the dashboard browser test")
	return ""
}

// runChromium runs headless Chromium with args and the URL, and returns
// its standard output.
func runChromium(t *testing.T, bin, u string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), u)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// screenshot writes a PNG of u at the window size to dir/name and checks
// it is a real picture (not one flat colour).
func screenshot(t *testing.T, bin, dir, name, u string, width, height int, flags ...string) image.Image {
	t.Helper()
	file := filepath.Join(dir, name)
	runChromium(t, bin, u, append([]string{"--screenshot=" + file, fmt.Sprintf("--window-size=%d,%d", width, height)}, flags...)...)
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", file, err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Fatalf("screenshot %s is %v, want %dx%d", file, b, width, height)
	}
	colours := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if len(colours) < 4 {
		t.Fatalf("screenshot %s is blank (%d colours)", file, len(colours))
	}
	t.Logf("screenshot: %s", file)
	return img
}

func screenshotDir(t *testing.T) string {
	if d := os.Getenv("MERGEGATE_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDashboardInChromium(t *testing.T) {
	bin := chromium(t)
	h := newHarness(t)
	dashboardQueue(t, h)
	// An operator holds the lease: the page says who, and for how long.
	resp, err := http.Post(h.admin+"/lease/acquire", "application/json", strings.NewReader(`{"tenant":"1","repo":"Codertocat/Hello-World"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire: %v %v", resp, err)
	}
	resp.Body.Close()
	h.clock.Advance(12 * time.Second)
	dir := screenshotDir(t)

	dom := string(runChromium(t, bin, h.admin+"/", "--dump-dom"))
	for _, want := range []string{
		"Merge queues", testRepo, // the repository
		`href="` + h.gh.WebURL() + "/" + testRepo + `/pull/7"`, "#7", "#8", "#9", // PRs linked to GitHub
		forge.ShortSHA(shaA), "evaluating", "bounced", // sha and status
		"6m12s", "4m42s", "4m12s", // waited
		"ci/build",                     // gate reason
		"held by <b>admin</b> for 12s", // the lease
		"Recent audit", "gate_failure", // the audit log
		`name="viewport"`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("DOM:\n%s", dom)
	}
	repoURL := h.admin + "/repos/1/Codertocat/Hello-World"
	dom = string(runChromium(t, bin, repoURL, "--dump-dom"))
	for _, want := range []string{"Pending deliveries", "Failed deliveries", "Audit log", "Events", "#9", "pull_request"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the repository page lacks %q\n", want)
		}
	}
	if t.Failed() {
		t.Fatalf("DOM:\n%s", dom)
	}
	for _, want := range []string{`<svg class="chart"`, "Queue length, last 24 h", "Merges per day, last 7 days", "Time from joining to merged", "Bounces by reason",
		"First in line for master: waiting for its checks", `action="/queue/move"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the repository page lacks %q\n", want)
		}
	}
	if t.Failed() {
		t.Fatalf("DOM:\n%s", dom)
	}
	// Layout: neither page is wider than a phone's screen.
	for _, u := range []string{h.admin + "/", repoURL} {
		if over := overflow(t, bin, u, 390, 844); over != 0 {
			t.Errorf("%s is %d px wider than a 390 px phone screen", u, over)
		}
	}
	screenshot(t, bin, dir, "dashboard.png", h.admin+"/", 1200, 900)
	screenshot(t, bin, dir, "dashboard-phone.png", h.admin+"/", 390, 844)
	screenshot(t, bin, dir, "repository.png", repoURL, 1200, 900)
	screenshot(t, bin, dir, "repository-phone.png", repoURL, 390, 844)
	// Dark: the page follows prefers-color-scheme.
	dark := screenshot(t, bin, dir, "dashboard-dark.png", h.admin+"/", 1200, 900, "--force-dark-mode", "--blink-settings=preferredColorScheme=0")
	if r, g, b, _ := dark.At(2, 2).RGBA(); r>>8 > 0x30 || g>>8 > 0x30 || b>>8 > 0x30 {
		t.Errorf("the dark screenshot's background is #%02x%02x%02x, want the dark theme's", r>>8, g>>8, b>>8)
	}
	light := screenshot(t, bin, dir, "repository-light-check.png", repoURL, 400, 300)
	if r, g, b, _ := light.At(2, 2).RGBA(); r>>8 < 0xf0 || g>>8 < 0xf0 || b>>8 < 0xf0 {
		t.Errorf("the light screenshot's background is #%02x%02x%02x, want white", r>>8, g>>8, b>>8)
	}
	os.Remove(filepath.Join(dir, "repository-light-check.png"))
}

// overflow is how many CSS pixels u's page is wider than a window of
// width×height. The page allows no script (its CSP), so the test serves
// a copy of its HTML without the header, with a script that measures it.
func overflow(t *testing.T, bin, u string, width, height int) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	measure := `<script>document.body.setAttribute("data-overflow", String(document.documentElement.scrollWidth - document.documentElement.clientWidth))</script></body>`
	copyOf := strings.Replace(string(page), "</body>", measure, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, copyOf) //nolint:errcheck
	}))
	defer srv.Close()
	dom := string(runChromium(t, bin, srv.URL, "--dump-dom", fmt.Sprintf("--window-size=%d,%d", width, height)))
	m := regexp.MustCompile(`data-overflow="(-?[0-9]+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the measuring script did not run on %s:\n%s", u, dom)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestSetupPageInChromium(t *testing.T) {
	bin := chromium(t)
	clk := leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	h, _ := startApp(t, nil, clk, bareConfig("https://api.github.com/", clk, t.TempDir()))
	dom := string(runChromium(t, bin, h.pub+"/", "--dump-dom"))
	for _, want := range []string{"Register GitHub App", `name="manifest"`, "https://github.com/settings/apps/new?state=", "pull_requests"} {
		if !strings.Contains(dom, want) {
			t.Fatalf("the set-up page lacks %q:\n%s", want, dom)
		}
	}
	dir := screenshotDir(t)
	screenshot(t, bin, dir, "setup.png", h.pub+"/", 1200, 900)
	screenshot(t, bin, dir, "setup-phone.png", h.pub+"/", 390, 844)
}
