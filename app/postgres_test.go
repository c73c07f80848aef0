package app

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
)

// One replica on PostgreSQL, end to end: the App on a database of its own
// on the test server (MERGEGATE_TEST_POSTGRES; skipped without one unless
// CI=true, failed then). A signed delivery labels a pull request: it joins
// the queue, its check passes, and it merges at the tested sha, as on
// SQLite (TestLabelledGreenPRMergesAtTestedSha).
func TestPostgresOneReplicaMerges(t *testing.T) {
	dsn := pgtest.URL(t)
	h := newHarness(t, func(c *Config) { c.DB = dsn })
	if !h.app.Store.DB().Postgres() {
		t.Fatalf("the App's database is not PostgreSQL: %s", h.app.Store.DB().Describe())
	}
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.settle()
	if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusEvaluating || !strings.Contains(q[0].GateReason, "ci/build") {
		t.Fatalf("before checks: %+v", q)
	}
	h.pass(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.PRNumber != 7 || m.SHA != shaA || m.Method != "squash" {
		t.Fatalf("merge = %+v, want #7 at %s by squash", m, shaA)
	}
	h.settle()
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("queue after merge: %+v", q)
	}
	audit, _ := h.app.Store.Audit(t.Context(), testKey)
	var acts []string
	for _, a := range audit {
		acts = append(acts, a.Action)
	}
	if got := strings.Join(acts, ","); got != "join,gate_success,merge" {
		t.Fatalf("audit = %s", got)
	}
	st, err := h.app.Store.DeliveryCounts(t.Context())
	if err != nil || len(st) != 0 {
		t.Fatalf("deliveries not applied: %v %v", st, err)
	}
	// /healthz says the database takes writes, and the log never holds
	// the connection string's password.
	resp, err := http.Get(h.pub + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %v %v, want 200", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(h.logBuf.String(), pw) {
			t.Error("the log holds the database password")
		}
	}
	if !strings.Contains(h.logBuf.String(), `"db":"`+h.app.Store.DB().Describe()+`"`) {
		t.Errorf("the listening line does not name the database as Describe does (%s)", h.app.Store.DB().Describe())
	}
	// A restart finds it all where it was.
	h.stop()
	h.start()
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("queue after restart: %+v", q)
	}
}
