package app

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
)

// A repository that only the admin API ever named (POST /event) is tracked
// like one a webhook named: it shows on the dashboard, in /metrics, and the
// cron's pass reconciles it.
func TestAdminFedRepositoryIsTracked(t *testing.T) {
	h := newHarness(t)
	h.settle()
	k := leasedo.Key{Tenant: testTenant, Repo: "octo/admin-fed"}
	code, _, body := h.adminDo("POST", "/event", `{"eventType":"pull_request","tenant":"1","repo":"octo/admin-fed","action":"labeled","prNumber":42,"details":{"sha":"abc123"}}`, nil)
	if code != http.StatusOK || !strings.Contains(body, "joined") {
		t.Fatalf("POST /event: %d %s", code, body)
	}
	ctx := context.Background()
	tracked, err := h.app.Store.Tracked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tracked, func(tr leasedo.Tracked) bool { return tr.Key == k }) {
		t.Fatalf("tracked = %+v, want %s among them", tracked, k)
	}

	var ov Overview
	if code := getJSON(t, h.admin+"/?format=json", &ov); code != http.StatusOK {
		t.Fatalf("GET /?format=json = %d", code)
	}
	if !slices.ContainsFunc(ov.Repos, func(r RepoView) bool { return r.Repo == k.Repo && r.Tenant == k.Tenant }) {
		t.Errorf("the dashboard lists %+v, not %s", ov.Repos, k)
	}
	if code, _, _ := h.adminDo("GET", "/repos/1/octo/admin-fed", "", nil); code != http.StatusOK {
		t.Errorf("GET /repos/1/octo/admin-fed = %d, want 200", code)
	}

	resp, err := http.Get(h.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `mergegate_queue_depth{repo="octo/admin-fed",tenant="1"} 1`) {
		t.Errorf("/metrics has no queue depth of 1 for %s:\n%s", k, grepLines(string(metrics), "queue_depth"))
	}

	sum, _ := h.app.Reconciler.RunAll(ctx) // the fake GitHub does not list the repository: a "gone" error is fine
	if sum.Repos < 2 {
		t.Errorf("the cron's pass considered %d repositories (%+v), want the admin-fed one beside %s", sum.Repos, sum, testRepo)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
