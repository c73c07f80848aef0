package forge_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
)

// TestRevokedTokenIsReplacedAndAGETRetried: GitHub stops accepting the
// cached token (401 Bad credentials): the token is dropped, a new one
// minted once, and the GET sent again, so the caller sees no error.
func TestRevokedTokenIsReplacedAndAGETRetried(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h1"})
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	if n := e.gh.RevokeTokens(tenant); n != 1 {
		t.Fatalf("revoked %d tokens", n)
	}
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatalf("GET after the token was revoked: %v", err)
	}
	if n := e.gh.TokensIssued(); n != 2 {
		t.Errorf("tokens minted %d, want 2 (one after the 401)", n)
	}
	if n := e.gh.CallCount(fakegithub.RouteGetPull); n != 3 {
		t.Errorf("GETs sent %d, want 3 (ok, 401, retried)", n)
	}
	if _, err := e.c.ListOpenPRs(e.ctx, tenant, repo); err != nil || e.gh.TokensIssued() != 2 {
		t.Errorf("the new token is not kept: %v, %d minted", err, e.gh.TokensIssued())
	}
	if f, ok := e.c.AuthFailure(tenant); ok {
		t.Errorf("a revoked token that was replaced is reported: %+v", f)
	}
}

// TestRevokedTokenOnAWriteIsDroppedNotResent: a write refused with 401 is
// not sent again (it is not safe to); its token is dropped, so the next
// call mints one and goes through.
func TestRevokedTokenOnAWriteIsDroppedNotResent(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h1"})
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	e.gh.RevokeTokens(tenant)
	if err := e.c.Comment(e.ctx, tenant, repo, 1, "first"); err == nil {
		t.Fatal("a comment refused with 401 answered no error")
	}
	if n := e.gh.CallCount(fakegithub.RouteCreateComment); n != 1 {
		t.Fatalf("the refused comment was sent %d times, want 1", n)
	}
	if err := e.c.Comment(e.ctx, tenant, repo, 1, "second"); err != nil {
		t.Fatalf("the next write, with a new token: %v", err)
	}
	if n := e.gh.TokensIssued(); n != 2 {
		t.Errorf("tokens minted %d, want 2", n)
	}
	if f, ok := e.c.AuthFailure(tenant); ok {
		t.Errorf("reported %+v", f)
	}
}

// TestSecondRefusalIsReportedAndLoggedOnce: a new token refused too is the
// operator's problem: AuthFailure says it, with when, and one log line
// (tenant, repo) says it, however many calls fail; a success clears it.
func TestSecondRefusalIsReportedAndLoggedOnce(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	e := newEnv(t, envOpts{log: logs})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h1"})
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	e.gh.Fail(fakegithub.RouteGetPull, -1, fakegithub.FaultStatus(401, "Bad credentials"))
	since := e.clock.Now()
	for range 3 {
		if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err == nil {
			t.Fatal("GET refused with 401 answered no error")
		}
		e.clock.Advance(1e9)
	}
	f, ok := e.c.AuthFailure(tenant)
	if !ok || f.Status != 401 || f.Message != "Bad credentials" || f.Repo != repo || !f.Since.Equal(since) || !f.Last.After(since) {
		t.Fatalf("AuthFailure = %+v, %v", f, ok)
	}
	if all := e.c.AuthFailures(); len(all) != 1 || all[0].Tenant != tenant {
		t.Fatalf("AuthFailures = %+v", all)
	}
	if n := strings.Count(logs.String(), "refuses the installation's credentials"); n != 1 {
		t.Fatalf("%d log lines for one refusal streak, want 1:\n%s", n, logs)
	}
	line := logs.String()
	if !strings.Contains(line, `"tenant":"`+tenant+`"`) || !strings.Contains(line, `"repo":"`+repo+`"`) || strings.Contains(line, "ghs_") {
		t.Fatalf("log line %s: want tenant and repo, and no token", line)
	}

	e.gh.ClearFaults()
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	if f, ok := e.c.AuthFailure(tenant); ok {
		t.Fatalf("still reported after a success: %+v", f)
	}
	if !strings.Contains(logs.String(), "accepts the installation's credentials again") {
		t.Fatalf("the recovery is not logged:\n%s", logs)
	}
}

// TestRefusedAppKeyIsReported: GitHub refuses the App's JWT when minting a
// token (the key was revoked or replaced): reported at once.
func TestRefusedAppKeyIsReported(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	logs := &testkit.SyncBuffer{}
	e := newEnv(t, envOpts{key: other, log: logs})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h1"})
	_, err = e.c.GetPR(e.ctx, tenant, repo, 1)
	var ae *forge.APIError
	if err == nil || !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("GET with a refused App key: %v, want a 401 APIError", err)
	}
	f, ok := e.c.AuthFailure(tenant)
	if !ok || !strings.Contains(f.Message, "installation token request") {
		t.Fatalf("AuthFailure = %+v, %v", f, ok)
	}
	if strings.Count(logs.String(), "refuses") != 1 {
		t.Fatalf("log:\n%s", logs)
	}
}

// Issue 30, hole 7: installation token requests said "Go-http-client/1.1";
// they carry the client's User-Agent (the replica's name) like every other
// request.
func TestTokenRequestsCarryTheUserAgent(t *testing.T) {
	gh := fakegithub.New(t)
	gh.AddRepo(tenant, repo, "main")
	gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h1"})
	const ua = "mergegate/test (replica r-7)"
	c := testkit.Forge(t, gh, forge.Config{UserAgent: ua})
	if _, err := c.GetPR(t.Context(), tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	var tokens int
	for _, m := range gh.Mutations() {
		if m.Route != fakegithub.RouteCreateToken {
			continue
		}
		tokens++
		if m.UserAgent != ua || m.Replica != "r-7" {
			t.Errorf("token request's User-Agent = %q, want %q", m.UserAgent, ua)
		}
	}
	if tokens != 1 {
		t.Errorf("%d token requests, want 1", tokens)
	}
}
