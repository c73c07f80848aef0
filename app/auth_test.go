package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// TestRevokedTokenDoesNotStallTheQueue: GitHub stops accepting the cached
// installation token; mergegate mints a new one and the pull request still
// merges: a refused token kept until its expiry, an hour, would stall the
// queue meanwhile.
func TestRevokedTokenDoesNotStallTheQueue(t *testing.T) {
	h := newHarness(t)
	// Tokens expire an hour after the fake's clock, and ghinstallation
	// judges expiry by the wall clock: on the harness's clock (a fixed
	// date) every token would look expired and be minted anew each call.
	h.gh.SetClock(time.Now)
	h.label(1, shaA)
	h.settle()
	if h.gh.TokensIssued() == 0 {
		t.Fatal("no token was minted before the revocation")
	}
	minted := h.gh.TokensIssued()
	h.gh.RevokeTokens(testTenant)
	h.pass(shaA)
	h.eventually("the merge after the token was revoked", func() bool { return len(h.merges()) == 1 })
	if n := h.gh.TokensIssued() - minted; n != 1 {
		t.Errorf("%d tokens minted after the revocation, want 1", n)
	}
	if _, ok := h.app.Forge.AuthFailure(testTenant); ok {
		t.Fatal("a replaced token is reported as an operator problem")
	}
}

// TestDashboardSaysGitHubRefusesTheCredentials: when a new token is
// refused too, the dashboard (HTML and JSON) and the log say so, once.
func TestDashboardSaysGitHubRefusesTheCredentials(t *testing.T) {
	h := newHarness(t)
	for _, r := range []string{fakegithub.RouteGetPull, fakegithub.RouteListPulls, fakegithub.RouteListCheckRuns, fakegithub.RouteCombinedStatus} {
		h.gh.Fail(r, -1, fakegithub.FaultStatus(http.StatusUnauthorized, "Bad credentials"))
	}
	h.label(1, shaA)
	var ov Overview
	h.eventually("the dashboard to report the refusal", func() bool {
		getJSON(t, h.admin+"/?format=json", &ov)
		return len(ov.Status.AuthFailures) == 1
	})
	if f := ov.Status.AuthFailures[0]; f.Tenant != testTenant || f.Message != "Bad credentials" || f.Since == 0 {
		t.Fatalf("authFailures = %+v", ov.Status.AuthFailures)
	}
	resp, err := http.Get(h.admin + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "GitHub refuses the credentials of installation "+testTenant) {
		t.Fatalf("the dashboard page does not say it:\n%s", page)
	}
	h.stop()
	if n := strings.Count(h.logBuf.String(), "refuses the installation's credentials"); n != 1 {
		t.Fatalf("%d log lines for the refusal, want 1", n)
	}
}
