package forge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/rs/zerolog"
)

// AuthFailure says that GitHub refuses an installation's credentials: a
// freshly minted token was refused too (401), or minting one was (the App's
// key revoked or replaced, the clock far off). The queue of that
// installation cannot move until the operator fixes it.
type AuthFailure struct {
	Tenant  string
	Repo    string // of the request that was refused; "" for a token request
	Status  int    // 401
	Message string // GitHub's, e.g. "Bad credentials"
	Since   time.Time
	Last    time.Time // the latest refusal (Config.Clock)
}

// AuthFailure reports whether GitHub refuses tenant's credentials now,
// and since when; false once a request of tenant succeeds again.
func (c *Client) AuthFailure(tenant string) (AuthFailure, bool) {
	c.mu.Lock()
	in := c.insts[parseTenant(tenant)]
	c.mu.Unlock()
	if in == nil || in.auth == nil {
		return AuthFailure{}, false
	}
	return in.auth.failure()
}

// AuthFailures lists the installations whose credentials GitHub refuses
// now, by tenant.
func (c *Client) AuthFailures() []AuthFailure {
	c.mu.Lock()
	ins := make([]*installation, 0, len(c.insts))
	for _, in := range c.insts {
		ins = append(ins, in)
	}
	c.mu.Unlock()
	var out []AuthFailure
	for _, in := range ins {
		if in.auth == nil {
			continue
		}
		if f, ok := in.auth.failure(); ok {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

// authTransport sits between go-github and ghinstallation, which keeps an
// installation token until its own expiry (an hour) even when GitHub has
// stopped accepting it. On a 401 it drops the token (by building a new
// ghinstallation transport, whose cache is empty) so that the next request
// mints another; a GET, which is safe to send again, is retried once at
// once. A 401 on a token minted after a 401 — or on minting itself — is
// not a stale token but the operator's problem: it is kept (AuthFailure)
// and logged once, until a request succeeds again.
type authTransport struct {
	tenant string
	fresh  func() http.RoundTripper // a ghinstallation transport with no token yet
	clock  func() time.Time
	log    zerolog.Logger

	mu     sync.Mutex
	cur    *authGen
	failed *AuthFailure
}

// authGen is one ghinstallation transport, and so one cached token.
type authGen struct {
	rt http.RoundTripper
	// afterRefusal: built because GitHub refused the token before; a 401
	// on it is a second refusal in a row. A success clears it.
	afterRefusal bool
}

func newAuthTransport(tenant string, fresh func() http.RoundTripper, clock func() time.Time, log zerolog.Logger) *authTransport {
	return &authTransport{tenant: tenant, fresh: fresh, clock: clock, log: log, cur: &authGen{rt: fresh()}}
}

func (t *authTransport) current() *authGen {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// drop replaces g, if it is still the current one, by a transport with no
// token: concurrent requests refused with the same token mint one new
// token, not one each.
func (t *authTransport) drop(g *authGen) *authGen {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == g {
		t.cur = &authGen{rt: t.fresh(), afterRefusal: true}
	}
	return t.cur
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g := t.current()
	resp, err := g.rt.RoundTrip(req)
	if err != nil {
		if he, ok := errors.AsType[*ghinstallation.HTTPError](err); ok && he.Response != nil && he.Response.StatusCode == http.StatusUnauthorized {
			// Minting was refused: the App's JWT, not a stale token.
			he.Response.Body = readMessage(he.Response.Body, func(msg string) {
				t.refused(req, he.Response.StatusCode, "installation token request: "+msg)
			})
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.accepted(g, resp.StatusCode)
		return resp, nil
	}
	var msg string
	resp.Body = readMessage(resp.Body, func(m string) { msg = m })
	next := t.drop(g)
	if g.afterRefusal {
		t.refused(req, resp.StatusCode, msg)
		return resp, nil
	}
	if !safeToResend(req) {
		return resp, nil // the next request mints a token
	}
	resp.Body.Close()
	resp, err = next.rt.RoundTrip(req.Clone(req.Context()))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		resp.Body = readMessage(resp.Body, func(m string) { msg = m })
		t.drop(next)
		t.refused(req, resp.StatusCode, msg)
		return resp, nil
	}
	t.accepted(next, resp.StatusCode)
	return resp, nil
}

// safeToResend: a GET or HEAD without a body changes nothing on GitHub.
func safeToResend(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) && (req.Body == nil || req.Body == http.NoBody)
}

// accepted ends a refusal streak: the token works.
func (t *authTransport) accepted(g *authGen, status int) {
	if status >= 500 {
		return // says nothing about the credentials
	}
	t.mu.Lock()
	g.afterRefusal = false
	was := t.failed
	t.failed = nil
	t.mu.Unlock()
	if was != nil {
		t.log.Info().Str("tenant", t.tenant).Str("repo", was.Repo).Time("since", was.Since).
			Msg("GitHub accepts the installation's credentials again")
	}
}

// refused records a second refusal in a row; the first of a streak is
// logged, the others only counted in Last.
func (t *authTransport) refused(req *http.Request, status int, msg string) {
	now := t.clock()
	repo, _ := req.Context().Value(repoKey{}).(string)
	t.mu.Lock()
	first := t.failed == nil
	if first {
		t.failed = &AuthFailure{Tenant: t.tenant, Repo: repo, Status: status, Message: msg, Since: now}
	}
	t.failed.Last = now
	t.mu.Unlock()
	if first {
		t.log.Error().Str("tenant", t.tenant).Str("repo", repo).Int("status", status).Str("github_message", msg).
			Msg("GitHub refuses the installation's credentials even with a new token: check the App's private key, that the App is still installed, and the clock")
	}
}

func (t *authTransport) failure() (AuthFailure, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed == nil {
		return AuthFailure{}, false
	}
	return *t.failed, true
}

// readMessage reads an error answer's body (bounded), hands GitHub's
// message to got, and returns a body that reads the same bytes. Reading
// the original to its end gives the request's slot back (inflight).
func readMessage(body io.ReadCloser, got func(string)) io.ReadCloser {
	if body == nil {
		got("")
		return body
	}
	b, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	body.Close()
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		got(e.Message)
	} else {
		got(http.StatusText(http.StatusUnauthorized))
	}
	return io.NopCloser(bytes.NewReader(b))
}

// repoKey carries an operation's repository (owner/name) in its
// requests' context, for the log line of a refusal.
type repoKey struct{}

// userAgentTransport gives a request that has no User-Agent the Client's:
// ghinstallation's installation token requests (POST
// /app/installations/{id}/access_tokens), which would otherwise say
// "Go-http-client/1.1" and not name the replica.
type userAgentTransport struct {
	next http.RoundTripper
	ua   string
}

func withUserAgent(next http.RoundTripper, ua string) http.RoundTripper {
	return userAgentTransport{next: next, ua: ua}
}

func (t userAgentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("User-Agent") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("User-Agent", t.ua)
	}
	return t.next.RoundTrip(req)
}
