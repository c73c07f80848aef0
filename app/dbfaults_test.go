package app

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
)

// Database faults on PostgreSQL through the real HTTP handler, with
// signed deliveries: connections cut by a pgtest.Proxy at exact moments,
// or terminated on the server.

// pgProxied runs the harness on a fresh PostgreSQL schema through a proxy.
func pgProxied(t *testing.T) (*harness, *pgtest.Proxy) {
	t.Helper()
	dsn, p := pgtest.NewProxy(t, pgtest.URL(t))
	return newHarness(t, withoutGitHub, func(c *Config) { c.DB = dsn }), p
}

// sendPR delivers "PR n labelled automerge" under delivery id.
func (h *harness) sendPR(id string, n int) int {
	h.t.Helper()
	return h.sendID("pull_request", id, h.prPayload("labeled", n, fmt.Sprintf("%040d", n), "automerge"))
}

// deliveryRows counts the test repository's stored deliveries of id, in
// any state.
func (h *harness) deliveryRows(id string) int {
	h.t.Helper()
	n := 0
	for _, st := range []string{leasedo.DeliveryPending, leasedo.DeliveryDone, leasedo.DeliveryFailed} {
		ds, err := h.app.Store.Deliveries(context.Background(), testKey, st, 1000)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, d := range ds {
			if d.ID == id {
				n++
			}
		}
	}
	return n
}

// joins counts the audit's joins of PR n: one per delivery applied.
func (h *harness) joins(n int) int {
	h.t.Helper()
	audit, err := h.app.Store.Audit(context.Background(), testKey)
	if err != nil {
		h.t.Fatal(err)
	}
	c := 0
	for _, a := range audit {
		if a.Action == "join" && a.PRNumber == n {
			c++
		}
	}
	return c
}

// A connection lost during the inbox's commit answers 503, and GitHub's
// redelivery (the same X-GitHub-Delivery) is applied once: when the
// COMMIT never reached the server, nothing of it was stored and the
// redelivery stores it; when it committed and only its answer was lost,
// the redelivery is a duplicate (202) and the stored one is applied, once.
func TestPostgresCommitLostAnswers503AndTheRedeliveryAppliesOnce(t *testing.T) {
	h, p := pgProxied(t)
	h.mustSend("pull_request", h.prPayload("labeled", 1, fmt.Sprintf("%040d", 1), "automerge"))
	h.settle()

	p.CutCommit(pgtest.CutBeforeCommit)
	if code := h.sendPR("cut-before", 2); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery whose COMMIT was cut answered %d, want 503", code)
	}
	if p.Armed() {
		t.Fatal("the proxy saw no COMMIT")
	}
	if n := h.deliveryRows("cut-before"); n != 0 {
		t.Fatalf("the cut delivery left %d rows", n)
	}
	if !strings.Contains(h.logBuf.String(), "delivery not stored") {
		t.Fatal("the 503 was not logged")
	}
	if code := h.sendPR("cut-before", 2); code != http.StatusAccepted {
		t.Fatalf("redelivery answered %d, want 202", code)
	}
	h.settle()

	p.CutCommit(pgtest.CutAfterCommit)
	if code := h.sendPR("cut-after", 3); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery whose commit's answer was lost answered %d, want 503", code)
	}
	if n := h.deliveryRows("cut-after"); n != 1 {
		t.Fatalf("the committed delivery: %d rows, want 1", n)
	}
	if code := h.sendPR("cut-after", 3); code != http.StatusAccepted {
		t.Fatalf("redelivery of a committed delivery answered %d, want 202", code)
	}
	// The engine applies the stored one (the sweep finds it: the 503
	// woke no worker, and a duplicate wakes none either).
	h.settle()
	for n := 1; n <= 3; n++ {
		if !h.queued(n) {
			t.Fatalf("PR #%d not queued: %+v", n, h.queue())
		}
		if j := h.joins(n); j != 1 {
			t.Fatalf("PR #%d joined %d times, want once", n, j)
		}
	}
	if n := h.deliveryRows("cut-after"); n != 1 {
		t.Fatalf("after the redelivery: %d rows of cut-after, want 1", n)
	}
	if code, body := getBody(t, h.pub+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz once the server answers: %d %s", code, body)
	}
}

// Every connection of mergegate's terminated on the server
// (pg_terminate_backend; a restart of the server does the same): the
// next delivery is stored (202) and applied, with no restart of
// mergegate. Then every connection cut by the proxy, twice in a row,
// with the same outcome. Only this test's backends are terminated (by
// application_name): the server is shared.
func TestPostgresConnectionsTerminatedNextDeliveryIsApplied(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	appName := "mergegate-" + strings.TrimPrefix(u.Query().Get("search_path"), "t_")
	q := u.Query()
	q.Set("application_name", appName)
	u.RawQuery = q.Encode()
	dsn, p := pgtest.NewProxy(t, u.String())
	h := newHarness(t, withoutGitHub, func(c *Config) { c.DB = dsn })
	h.mustSend("pull_request", h.prPayload("labeled", 1, fmt.Sprintf("%040d", 1), "automerge"))
	h.settle()

	admin, err := sql.Open("pgx", pgtest.Server(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	pgtest.TerminateBackends(t, admin, appName)
	if code := h.sendPR("after-terminate", 2); code != http.StatusAccepted {
		t.Fatalf("first delivery after the backends were terminated answered %d, want 202", code)
	}
	h.settle()
	if !h.queued(2) {
		t.Fatalf("PR #2 not queued after the backends were terminated: %+v", h.queue())
	}

	for i, pr := range []int{3, 4} {
		p.CutAll()
		if code := h.sendPR(fmt.Sprintf("after-cut-%d", i), pr); code != http.StatusAccepted {
			t.Fatalf("delivery after every connection was cut answered %d, want 202", code)
		}
	}
	h.settle()
	for pr := 1; pr <= 4; pr++ {
		if j := h.joins(pr); j != 1 {
			t.Fatalf("PR #%d joined %d times, want once: %+v", pr, j, h.queue())
		}
	}
}

// GET /healthz on PostgreSQL says when the database cannot be written: a
// read-only standby (after a failover to a DSN that names it), a server
// down; meanwhile webhooks are answered 503. Once writable, 200 and 202
// again. The probe's outcome is kept two seconds on the App's clock.
func TestPostgresHealthzSaysWhenTheDatabaseCannotBeWritten(t *testing.T) {
	h, p := pgProxied(t)
	health := func() (int, string) {
		t.Helper()
		h.clock.Advance(3 * 1e9)              // past the kept outcome of the last probe
		return getBody(t, h.admin+"/healthz") // the reason is on the admin listener
	}
	if code, body := health(); code != http.StatusOK {
		t.Fatalf("healthz: %d %s", code, body)
	}

	p.SetReadOnly(true)
	p.CutAll()
	h.clock.Advance(3 * 1e9)
	if code, body := getBody(t, h.admin+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "database cannot be written") ||
		!strings.Contains(body, "read-only") || !strings.Contains(body, "answers webhooks 503 until it can") {
		t.Fatalf("admin healthz on a read-only server: %d %s", code, body)
	}
	// The public listener says no more than that (issue 30, hole 8).
	h.clock.Advance(3 * 1e9)
	if code, body := getBody(t, h.pub+"/healthz"); code != http.StatusServiceUnavailable || strings.Join(strings.Fields(body), "") != `{"status":"unavailable"}` {
		t.Fatalf("public healthz on a read-only server: %d %s", code, body)
	}
	if code := h.sendPR("read-only", 1); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery to a read-only server answered %d, want 503", code)
	}

	p.SetDown(true)
	if code, body := health(); code != http.StatusServiceUnavailable || !strings.Contains(body, "database cannot be written") ||
		!strings.Contains(body, "failed to connect") {
		t.Fatalf("healthz with the server down: %d %s", code, body)
	}
	if code := h.sendPR("read-only", 1); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery with the server down answered %d, want 503", code)
	}

	p.SetDown(false)
	p.SetReadOnly(false)
	if code, body := health(); code != http.StatusOK {
		t.Fatalf("healthz once the server is writable again: %d %s", code, body)
	}
	if code := h.sendPR("read-only", 1); code != http.StatusAccepted {
		t.Fatalf("redelivery once writable answered %d, want 202", code)
	}
	h.settle()
	if j := h.joins(1); j != 1 {
		t.Fatalf("PR #1 joined %d times, want once", j)
	}
}

// Failover with a DSN of two hosts and target_session_attrs=read-write:
// mergegate writes to the primary; the primary goes away (webhooks 503,
// /healthz 503) until the standby is promoted, and then mergegate writes
// to it with no restart.
func TestPostgresFailoverWithAMultiHostDSN(t *testing.T) {
	dsn, standby, primary := pgtest.Cluster(t)
	h := newHarness(t, withoutGitHub, func(c *Config) { c.DB = dsn })
	if code := h.sendPR("before", 1); code != http.StatusAccepted {
		t.Fatalf("delivery: %d", code)
	}
	h.settle()

	primary.SetDown(true)
	h.clock.Advance(3 * 1e9)
	if code, body := getBody(t, h.admin+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "database cannot be written") {
		t.Fatalf("healthz with the primary down and the standby not promoted: %d %s", code, body)
	}
	if code := h.sendPR("during", 2); code != http.StatusServiceUnavailable {
		t.Fatalf("delivery with no writable host answered %d, want 503", code)
	}

	standby.SetReadOnly(false) // promoted
	h.clock.Advance(3 * 1e9)
	if code, body := getBody(t, h.pub+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz after the standby was promoted: %d %s", code, body)
	}
	if code := h.sendPR("during", 2); code != http.StatusAccepted {
		t.Fatalf("redelivery after the failover answered %d, want 202", code)
	}
	h.settle()
	for n := 1; n <= 2; n++ {
		if j := h.joins(n); j != 1 {
			t.Fatalf("PR #%d joined %d times, want once", n, j)
		}
	}
}
