package app

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func scrape(t *testing.T, h *harness) string {
	t.Helper()
	resp, err := http.Get(h.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func TestMetricsNamesAfterAMergeAndABounce(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.pass(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.gh.SetCheckRun(testRepo, shaC, "ci/build", "completed", "failure")
	h.label(9, shaC)
	h.settle()
	h.label(8, shaB) // waits behind the bounced #9
	h.settle()

	text := scrape(t, h)
	for _, want := range []string{
		// deliveries by event and outcome; ingest and processing latency
		`mergegate_deliveries_total{event="pull_request",outcome="joined"}`,
		`mergegate_webhook_requests_total{status="202"}`,
		"mergegate_ingest_seconds_bucket", "mergegate_processing_delay_seconds_bucket",
		// queue depth, oldest entry, lease age per repository
		`mergegate_queue_depth{repo="Codertocat/Hello-World",tenant="1"} 2`,
		`mergegate_queue_oldest_entry_age_seconds{repo="Codertocat/Hello-World",tenant="1"}`,
		`mergegate_lease_age_seconds{repo="Codertocat/Hello-World",tenant="1"}`,
		`mergegate_lease_held{repo="Codertocat/Hello-World",tenant="1"}`,
		"mergegate_tracked_repositories 1",
		`mergegate_deliveries_unapplied{state="pending"} 0`,
		// merges, bounces by reason, gates
		`mergegate_merges_total{repo="Codertocat/Hello-World",tenant="1"} 1`,
		`mergegate_bounces_total{reason=`,
		"mergegate_gate_evaluations_total", "mergegate_time_to_merge_seconds_bucket",
		// GitHub calls by operation (forge's names) and status, rate limit
		`mergegate_github_calls_total{operation="pulls.merge",status="200"} 1`,
		`mergegate_github_calls_total{operation="apps.create-installation-access-token",status="201"}`,
		`mergegate_github_requests_total{operation="pulls.merge"}`,
		"mergegate_github_not_modified_total",
		`mergegate_github_rate_limit_remaining{tenant="1"}`,
		"mergegate_github_rate_limit_reset_timestamp_seconds",
		`mergegate_github_requests_waited_total{tenant="1"}`,
		`mergegate_github_request_wait_seconds_total{tenant="1"}`,
		"mergegate_github_app_configured 1",
		// the cron
		"mergegate_reconcile_last_duration_seconds", "mergegate_reconcile_last_success_timestamp_seconds",
		"mergegate_reconcile_runs_total",
		// Go and the process
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The database's size on disk, file and WAL, as the operator's df sees it.
	size, err := h.app.DB.Size()
	if m := regexp.MustCompile(`(?m)^mergegate_db_bytes (\S+)$`).FindStringSubmatch(text); err != nil || m == nil || m[1] == "0" {
		t.Errorf("mergegate_db_bytes = %v (the database takes %d bytes, %v)", m, size, err)
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
	// A held lease: its age.
	resp, err := http.Post(h.admin+"/lease/acquire", "application/json", strings.NewReader(`{"tenant":"1","repo":"Codertocat/Hello-World"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("acquire: %v %v", resp, err)
	}
	resp.Body.Close()
	h.clock.Advance(10 * time.Second)
	text = scrape(t, h)
	for _, want := range []string{
		`mergegate_lease_held{repo="Codertocat/Hello-World",tenant="1"} 1`,
		`mergegate_lease_age_seconds{repo="Codertocat/Hello-World",tenant="1"} 10`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	mfs, err := h.app.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsWithoutGitHub(t *testing.T) {
	h, _ := startApp(t, nil, nil, bareConfig("https://api.github.com/", nil, t.TempDir()))
	text := scrape(t, h)
	for _, want := range []string{"mergegate_github_app_configured 0", "mergegate_tracked_repositories 0", "mergegate_reconcile_runs_total"} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, text)
		}
	}
}

// GET /deliveries/stats agrees with what was sent: one delivery applied,
// one kept failed, none pending, and the process's RSS.
func TestDeliveryStats(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	h.mustSend("pull_request", []byte(`{"action":"labeled","pull_request":{"state":"open"},"repository":{"full_name":"Codertocat/Hello-World"},"installation":{"id":1}}`))
	h.mustSend("pull_request", h.prPayload("labeled", 2, shaB, "automerge"))
	h.settle()

	resp, err := http.Get(h.admin + "/deliveries/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st DeliveryStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /deliveries/stats = %d, %v", resp.StatusCode, err)
	}
	if st.Pending != 0 || st.Failed != 1 || st.AppliedSinceStart != 1 || st.FailedSinceStart != 1 {
		t.Fatalf("stats = %+v, want 0 pending, 1 failed, 1 applied and 1 failed since start", st)
	}
	if runtime.GOOS == "linux" && st.RSSBytes < 1<<20 {
		t.Errorf("rssBytes = %d, want the process's resident memory", st.RSSBytes)
	}
	text := scrape(t, h)
	for _, want := range []string{
		`mergegate_deliveries_total{event="pull_request",outcome="failed"} 1`,
		`mergegate_deliveries_unapplied{state="failed"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s, which the stats answered", want)
		}
	}
}
