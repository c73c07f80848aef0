package forge

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Secondary rate limits answered without a retry-after header are backed off
// exponentially: 1m, 2m, 4m, ... capped at 15m. A successful answer resets
// the sequence.
const (
	secondaryBackoffStart = time.Minute
	secondaryBackoffMax   = 15 * time.Minute
)

// limiter is one installation's rate-limit state. It is the only place that
// decides whether a request may be sent; go-github never sees a rate-limit
// header (rateGuard strips them) so its own wall-clock bookkeeping stays out
// of the way of the injected clock.
type limiter struct {
	tenant string
	clock  func() time.Time

	mu        sync.Mutex
	blocked   *RateLimitError // non-nil while clock() < blocked.RetryAt
	strikes   int             // consecutive secondary limits without retry-after
	remaining int
	reset     time.Time
	known     bool
}

// check returns the pending RateLimitError, if any, without sending anything.
func (l *limiter) check() *RateLimitError {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.blocked != nil && l.clock().Before(l.blocked.RetryAt) {
		return l.blocked
	}
	l.blocked = nil
	return nil
}

// observe records the rate headers of resp and returns a RateLimitError when
// resp is a rate-limit answer. body is the (already read) response body, used
// to tell a secondary limit from a permission 403.
func (l *limiter) observe(resp *http.Response, body []byte) *RateLimitError {
	now := l.clock()
	h := resp.Header
	var remaining, resetUnix int
	var remOK, resetOK bool
	// The GraphQL API has a quota of its own: its headers say nothing of
	// the REST quota this limiter guards, and its end is answered 200 with
	// a GraphQL error (fromGraphQL). A secondary limit on it (403 or 429)
	// is the installation's, as on REST.
	if !strings.EqualFold(h.Get("X-Ratelimit-Resource"), "graphql") {
		remaining, remOK = headerInt(h, "X-Ratelimit-Remaining")
		resetUnix, resetOK = headerInt(h, "X-Ratelimit-Reset")
	}
	var reset time.Time
	if resetOK {
		reset = time.Unix(int64(resetUnix), 0)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if remOK {
		l.remaining, l.known = remaining, true
		if resetOK {
			l.reset = reset
		}
	}

	status := resp.StatusCode
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		if status < 400 {
			l.strikes = 0
		}
		if remOK && remaining == 0 && resetOK && reset.After(now) {
			// The quota is spent: the next request would be refused anyway.
			l.blocked = &RateLimitError{Tenant: l.tenant, RetryAt: reset, Status: http.StatusForbidden, Message: "rate limit quota exhausted (x-ratelimit-remaining: 0)"}
		}
		return nil
	}

	msg := errorMessage(body)
	retryAfter, raOK := parseRetryAfter(h.Get("Retry-After"), now)
	var rl *RateLimitError
	switch {
	case remOK && remaining == 0 && resetOK:
		retryAt := reset
		if raOK && now.Add(retryAfter).After(retryAt) {
			retryAt = now.Add(retryAfter)
		}
		rl = &RateLimitError{RetryAt: retryAt}
	case raOK:
		rl = &RateLimitError{RetryAt: now.Add(retryAfter), Secondary: true}
	case status == http.StatusTooManyRequests || isSecondaryMessage(msg):
		backoff := secondaryBackoffStart << min(l.strikes, 8)
		if backoff > secondaryBackoffMax {
			backoff = secondaryBackoffMax
		}
		l.strikes++
		rl = &RateLimitError{RetryAt: now.Add(backoff), Secondary: true}
	default:
		return nil // an ordinary 403 (permissions): not a rate limit
	}
	rl.Tenant, rl.Status, rl.Message = l.tenant, status, msg
	l.blocked = rl
	return rl
}

// rate returns the last known quota.
func (l *limiter) rate() (int, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining, l.reset, l.known
}

// rateGuard is the RoundTripper, below ghinstallation, that enforces the
// limiter: a blocked installation sends nothing, rate-limit answers become
// *RateLimitError, and rate headers are consumed here.
type rateGuard struct {
	lim  *limiter
	next http.RoundTripper
}

func (g *rateGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if rl := g.lim.check(); rl != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, rl
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	var body []byte
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	if rl := g.lim.observe(resp, body); rl != nil {
		resp.Body.Close()
		return nil, rl
	}
	if strings.EqualFold(resp.Header.Get("X-Ratelimit-Resource"), "graphql") {
		// Kept for fromGraphQL: GitHub answers the GraphQL quota's end
		// with 200 and a RATE_LIMITED error, and these headers say when it
		// resets.
		resp.Header.Set(graphQLResetHeader, resp.Header.Get("X-Ratelimit-Reset"))
	}
	for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Used", "X-Ratelimit-Reset", "X-Ratelimit-Resource", "Retry-After"} {
		resp.Header.Del(k)
	}
	return resp, nil
}

// graphQLResetHeader carries a GraphQL answer's X-Ratelimit-Reset past the
// rate guard, which takes the rate headers off every answer (go-github
// would otherwise refuse requests by them on its own).
const graphQLResetHeader = "X-Mergegate-Graphql-Reset"

func headerInt(h http.Header, key string) (int, bool) {
	v := h.Get(key)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	return n, err == nil
}

// parseRetryAfter reads retry-after as seconds or as an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// errorMessage returns the message of GitHub's error body; a secondary
// limit whose message does not say so is recognised by its documentation
// URL, which is then appended.
func errorMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
		DocURL  string `json:"documentation_url"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if strings.Contains(e.DocURL, "secondary-rate-limits") || strings.Contains(e.DocURL, "abuse-rate-limits") {
		return e.Message + " (secondary rate limit)"
	}
	return e.Message
}

func isSecondaryMessage(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "secondary rate limit") || strings.Contains(m, "abuse") || strings.Contains(m, "rate limit exceeded")
}
