package fakegithub_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jwt "github.com/golang-jwt/jwt/v4"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

const tenant = "100"

// appJWT signs an App JWT with key, like ghinstallation does.
func appJWT(t *testing.T, pemKey []byte, appID int64, ttl time.Duration) string {
	t.Helper()
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(appID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type client struct {
	t     *testing.T
	s     *fakegithub.Server
	token string
}

// do sends a request with auth ("" = none) and returns status, headers and
// the decoded JSON body.
func (c *client) do(method, path, auth string, body any, hdr map[string]string) (int, http.Header, any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.s.URL()+strings.TrimPrefix(path, "/"), rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			c.t.Fatalf("%s %s: body is not JSON: %q", method, path, raw)
		}
	}
	return resp.StatusCode, resp.Header, v
}

func (c *client) get(path string) (int, any) {
	c.t.Helper()
	st, _, v := c.do("GET", path, "token "+c.token, nil, nil)
	return st, v
}

func newClient(t *testing.T, s *fakegithub.Server) *client {
	t.Helper()
	c := &client{t: t, s: s}
	st, _, v := c.do("POST", "app/installations/"+tenant+"/access_tokens", "Bearer "+appJWT(t, s.PrivateKeyPEM(), s.AppID(), 9*time.Minute), nil, nil)
	if st != 201 {
		t.Fatalf("token: %d %v", st, v)
	}
	c.token = v.(map[string]any)["token"].(string)
	return c
}

func TestAuthentication(t *testing.T) {
	clock := time.Now()
	var mu sync.Mutex
	s := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	s.AddRepo(tenant, "o/r", "main")
	c := &client{t: t, s: s}

	if st, _, _ := c.do("GET", "repos/o/r/pulls", "", nil, nil); st != 401 {
		t.Errorf("no token: %d, want 401", st)
	}
	if st, _, _ := c.do("GET", "repos/o/r/pulls", "token ghs_made_up", nil, nil); st != 401 {
		t.Errorf("unknown token: %d, want 401", st)
	}
	tokenPath := "app/installations/" + tenant + "/access_tokens"
	if st, _, _ := c.do("POST", tokenPath, "Bearer not.a.jwt", nil, nil); st != 401 {
		t.Errorf("bad JWT: %d, want 401", st)
	}
	if st, _, _ := c.do("POST", tokenPath, "Bearer "+appJWT(t, s.PrivateKeyPEM(), s.AppID()+1, time.Minute), nil, nil); st != 401 {
		t.Errorf("JWT of another App: %d, want 401", st)
	}
	if st, _, _ := c.do("POST", tokenPath, "Bearer "+appJWT(t, s.PrivateKeyPEM(), s.AppID(), time.Hour), nil, nil); st != 401 {
		t.Errorf("JWT valid for an hour: %d, want 401 (GitHub allows 10 minutes)", st)
	}
	if st, _, _ := c.do("POST", "app/installations/999/access_tokens", "Bearer "+appJWT(t, s.PrivateKeyPEM(), s.AppID(), time.Minute), nil, nil); st != 404 {
		t.Errorf("unknown installation: %d, want 404", st)
	}

	c = newClient(t, s)
	for _, scheme := range []string{"token ", "Bearer "} {
		if st, _, _ := c.do("GET", "repos/o/r/pulls", scheme+c.token, nil, nil); st != 200 {
			t.Errorf("%q token: %d, want 200", scheme, st)
		}
	}
	s.AddRepo("200", "x/private", "main")
	if st, _ := c.get("repos/x/private/pulls"); st != 404 {
		t.Errorf("repo of another installation: %d, want 404", st)
	}

	mu.Lock()
	clock = clock.Add(fakegithub.TokenTTL)
	mu.Unlock()
	if st, _ := c.get("repos/o/r/pulls"); st != 401 {
		t.Errorf("expired token: %d, want 401", st)
	}
	if n := s.TokensIssued(); n != 1 {
		t.Errorf("tokens issued = %d", n)
	}
}

// An installation's quota grows with its repositories, as GitHub's does:
// 5,000 an hour, 50 more for each repository past 20, at most 12,500.
func TestInstallationQuotaGrowsWithRepositories(t *testing.T) {
	s := fakegithub.New(t)
	for i, want := range map[int]int{1: 5000, 20: 5000, 21: 5050, 100: 9000, 150: 11500, 300: 12500} {
		s := fakegithub.New(t)
		tn := fmt.Sprintf("t%d", i)
		for r := 0; r < i; r++ {
			s.AddRepo(tn, fmt.Sprintf("o/r%d", r), "main")
		}
		if got := s.RateLimitRemaining(tn); got != want {
			t.Errorf("%d repositories: quota %d, want %d", i, got, want)
		}
	}
	// A repository added once the window is open counts at once.
	s.AddRepo("late", "o/first", "main")
	if got := s.RateLimitRemaining("late"); got != 5000 {
		t.Fatalf("quota %d", got)
	}
	for r := 0; r < 30; r++ {
		s.AddRepo("late", fmt.Sprintf("o/more%d", r), "main")
	}
	if got := s.RateLimitRemaining("late"); got != 5550 {
		t.Errorf("31 repositories: quota %d, want 5550", got)
	}
}

func TestETagAndRateLimitAccounting(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	s.AddPR("o/r", fakegithub.PR{Number: 1})
	c := newClient(t, s)

	st, h, _ := c.do("GET", "repos/o/r/pulls/1", "token "+c.token, nil, nil)
	etag := h.Get("ETag")
	if st != 200 || etag == "" || h.Get("X-Ratelimit-Remaining") != "4999" || h.Get("X-Ratelimit-Used") != "1" ||
		h.Get("X-Ratelimit-Limit") != "5000" || h.Get("X-Ratelimit-Reset") == "" || h.Get("X-Ratelimit-Resource") != "core" {
		t.Fatalf("first GET: %d %v", st, h)
	}
	st, h, v := c.do("GET", "repos/o/r/pulls/1", "token "+c.token, nil, map[string]string{"If-None-Match": etag})
	if st != 304 || v != nil || h.Get("X-Ratelimit-Remaining") != "4999" {
		t.Errorf("conditional GET: %d body %v remaining %s; want 304, empty, 4999", st, v, h.Get("X-Ratelimit-Remaining"))
	}
	if st, _, _ := c.do("GET", "repos/o/r/pulls/1", "token "+c.token, nil, map[string]string{"If-None-Match": `W/` + etag}); st != 304 {
		t.Errorf("weak validator: %d, want 304", st)
	}
	if used := s.RateLimitUsed(); used != 1 {
		t.Errorf("used = %d, want 1 (304s are free)", used)
	}
	s.SetHead("o/r", 1, "new")
	if st, h, _ := c.do("GET", "repos/o/r/pulls/1", "token "+c.token, nil, map[string]string{"If-None-Match": etag}); st != 200 || h.Get("ETag") == etag {
		t.Errorf("changed PR: %d etag %s, want 200 with a new ETag", st, h.Get("ETag"))
	}
	// Writes and errors cost a point too.
	c.do("POST", "repos/o/r/issues/1/comments", "token "+c.token, map[string]string{"body": "hi"}, nil)
	c.get("repos/o/r/pulls/404")
	if used := s.RateLimitUsed(); used != 4 {
		t.Errorf("used = %d, want 4", used)
	}
	if rem := s.RateLimitRemaining(tenant); rem != 4996 {
		t.Errorf("remaining = %d", rem)
	}
	if st, v := c.get("rate_limit"); st != 200 || v.(map[string]any)["rate"].(map[string]any)["used"].(float64) != 4 {
		t.Errorf("rate_limit: %d %v", st, v)
	}

	s.SetRateLimit(tenant, 10, 0)
	st, h, v = c.do("GET", "repos/o/r/pulls/1", "token "+c.token, nil, nil)
	if st != 403 || h.Get("X-Ratelimit-Remaining") != "0" || !strings.Contains(v.(map[string]any)["message"].(string), "rate limit") {
		t.Errorf("exhausted quota: %d %v %v", st, h, v)
	}
	calls := s.Calls()
	var notModified int
	for _, call := range calls {
		if call.NotModified {
			notModified++
			if call.Status != 304 || call.Route != fakegithub.RouteGetPull {
				t.Errorf("call %+v", call)
			}
		}
	}
	if notModified != 2 {
		t.Errorf("304 calls recorded = %d, want 2", notModified)
	}
}

func TestPaginationLinkHeader(t *testing.T) {
	s := fakegithub.NewWithOptions(t, fakegithub.Options{PathPrefix: "/api/v3"})
	s.AddRepo(tenant, "o/r", "main")
	for n := 1; n <= 5; n++ {
		s.AddPR("o/r", fakegithub.PR{Number: n})
	}
	c := newClient(t, s)
	st, h, v := c.do("GET", "repos/o/r/pulls?per_page=2&page=2", "token "+c.token, nil, nil)
	if st != 200 || len(v.([]any)) != 2 {
		t.Fatalf("%d %v", st, v)
	}
	link := h.Get("Link")
	for _, want := range []string{`/api/v3/repos/o/r/pulls?page=3&per_page=2>; rel="next"`, `page=3&per_page=2>; rel="last"`, `page=1&per_page=2>; rel="prev"`, `page=1&per_page=2>; rel="first"`} {
		if !strings.Contains(link, want) {
			t.Errorf("Link %q lacks %q", link, want)
		}
	}
	_, h, v = c.do("GET", "repos/o/r/pulls?per_page=2&page=3", "token "+c.token, nil, nil)
	if len(v.([]any)) != 1 || strings.Contains(h.Get("Link"), `rel="next"`) {
		t.Errorf("last page: %d items, Link %q", len(v.([]any)), h.Get("Link"))
	}
}

func TestFaultsAreConsumedInOrder(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	s.AddPR("o/r", fakegithub.PR{Number: 1, HeadSHA: "h"})
	c := newClient(t, s)
	s.Fail(fakegithub.RouteMerge, 2, fakegithub.FaultStatus(502, ""))
	s.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultRetryAfter(429, 7))

	merge := func() (int, http.Header) {
		st, h, _ := c.do("PUT", "repos/o/r/pulls/1/merge", "token "+c.token, map[string]string{"sha": "h"}, nil)
		return st, h
	}
	for i := 0; i < 2; i++ {
		if st, _ := merge(); st != 502 {
			t.Errorf("attempt %d: %d, want 502", i, st)
		}
	}
	if st, h := merge(); st != 429 || h.Get("Retry-After") != "7" {
		t.Errorf("third: %d retry-after %q", st, h.Get("Retry-After"))
	}
	if len(s.Merges()) != 0 {
		t.Error("a failed request changed state")
	}
	if st, _ := merge(); st != 200 {
		t.Errorf("fourth: %d, want 200", st)
	}
	faults := 0
	for _, call := range s.Calls() {
		if call.Fault {
			faults++
		}
	}
	if faults != 3 || s.CallCount(fakegithub.RouteMerge) != 4 {
		t.Errorf("faults %d, merge calls %d", faults, s.CallCount(fakegithub.RouteMerge))
	}
}

func TestFailUnknownRoutePanicsWithoutTB(t *testing.T) {
	s := fakegithub.New(nil)
	defer s.Close()
	defer func() {
		if recover() == nil {
			t.Error("Fail with an unknown route did not panic")
		}
	}()
	s.Fail("GET /nope", 1, fakegithub.FaultStatus(500, ""))
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	s := fakegithub.New(nil)
	s.AddRepo(tenant, "o/r", "main")
	c := newClient(t, s)
	s.Fail(fakegithub.RouteListPulls, 1, fakegithub.FaultTimeout())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("GET", s.URL()+"repos/o/r/pulls", nil)
		req.Header.Set("Authorization", "token "+c.token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(5 * time.Second); s.InFlight() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("request never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a hanging request")
	}
	<-done
}

func TestMergeAndUpdateBranchSemantics(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	s.SetRequired("o/r", "main", []string{"ci"}, true)
	s.AddPR("o/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
	s.AddPR("o/r", fakegithub.PR{Number: 2, HeadSHA: "b"})
	s.SetCheckRun("o/r", "a", "ci", "completed", "success")
	s.SetStatus("o/r", "b", "ci", "success")
	c := newClient(t, s)

	state := func(n int) string {
		t.Helper()
		_, v := c.get("repos/o/r/pulls/" + strconv.Itoa(n))
		return v.(map[string]any)["mergeable_state"].(string)
	}
	if state(1) != "clean" || state(2) != "clean" {
		t.Fatalf("states %s %s", state(1), state(2))
	}
	st, _, v := c.do("PUT", "repos/o/r/pulls/1/merge", "token "+c.token, map[string]string{"sha": "a", "merge_method": "rebase"}, nil)
	if st != 200 || v.(map[string]any)["merged"] != true {
		t.Fatalf("merge: %d %v", st, v)
	}
	// The base moved: GitHub recomputes PR 2's mergeability, and says so
	// on the first read.
	if got := state(2); got != "unknown" {
		t.Errorf("PR 2's first read after PR 1 merged: %s, want unknown", got)
	}
	if got := state(2); got != "behind" {
		t.Errorf("PR 2 after PR 1 merged: %s, want behind", got)
	}
	st, _, v = c.do("PUT", "repos/o/r/pulls/2/merge", "token "+c.token, map[string]string{"sha": "b"}, nil)
	if st != 405 || v.(map[string]any)["message"] != fakegithub.MsgNotMergeable {
		t.Errorf("merge behind: %d %v", st, v)
	}
	st, _, _ = c.do("PUT", "repos/o/r/pulls/2/update-branch", "token "+c.token, map[string]string{"expected_head_sha": "b"}, nil)
	if st != 202 {
		t.Fatalf("update-branch: %d", st)
	}
	pr, _ := s.PR("o/r", 2)
	if pr.HeadSHA != fakegithub.DeriveSHA("b", "update") || pr.Behind {
		t.Errorf("after update: %+v", pr)
	}
	if got := state(2); got != "unknown" {
		t.Errorf("first read of the new head: %s, want unknown", got)
	}
	if got := state(2); got != "blocked" {
		t.Errorf("new head without checks: %s, want blocked", got)
	}
	st, _, _ = c.do("PUT", "repos/o/r/pulls/2/update-branch", "token "+c.token, map[string]string{"expected_head_sha": pr.HeadSHA}, nil)
	if st != 422 {
		t.Errorf("update when not behind: %d, want 422", st)
	}
}

// SetBranchUpdateDelay: update-branch answers 202 and does its work
// later, as GitHub does; until then the pull request reads as it was. An
// update whose head moved meanwhile does nothing.
func TestBranchUpdateAfterTheAnswer(t *testing.T) {
	s := fakegithub.New(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	s.AddRepo(tenant, "o/r", "main")
	s.SetRequired("o/r", "main", []string{"ci"}, true)
	s.AddPR("o/r", fakegithub.PR{Number: 2, HeadSHA: "b"})
	s.AddPR("o/r", fakegithub.PR{Number: 3, HeadSHA: "c"})
	s.SetBehind("o/r", 2, true)
	s.SetBehind("o/r", 3, true)
	s.SetBranchUpdateDelay(30 * time.Second)
	c := newClient(t, s)
	for _, n := range []string{"2", "3"} {
		if st, _, v := c.do("PUT", "repos/o/r/pulls/"+n+"/update-branch", "token "+c.token, map[string]string{}, nil); st != 202 {
			t.Fatalf("update-branch of #%s: %d %v", n, st, v)
		}
	}
	head := func(n int) string {
		t.Helper()
		_, v := c.get("repos/o/r/pulls/" + strconv.Itoa(n))
		return v.(map[string]any)["head"].(map[string]any)["sha"].(string)
	}
	if head(2) != "b" || len(s.BranchUpdates()) != 0 {
		t.Fatalf("at once: head %s, updates %+v; want b and none", head(2), s.BranchUpdates())
	}
	if due, ok := s.NextCIDue(); !ok || !due.Equal(now.Add(30*time.Second)) {
		t.Errorf("NextCIDue = %v %v, want the updates' time", due, ok)
	}
	s.SetHead("o/r", 3, "c2") // pushed meanwhile: its update finds nothing to do
	now = now.Add(30 * time.Second)
	if got := head(2); got != fakegithub.DeriveSHA("b", "update") {
		t.Errorf("after 30 s: head %s, want the update's", got)
	}
	if ups := s.BranchUpdates(); len(ups) != 1 || ups[0].PRNumber != 2 {
		t.Errorf("updates = %+v, want #2's alone", ups)
	}
	if head(3) != "c2" {
		t.Errorf("#3's head = %s, want c2 (its author's push)", head(3))
	}
}

func TestConcurrentUse(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	c := newClient(t, s)
	var wg sync.WaitGroup
	for i := 1; i <= 20; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.AddPR("o/r", fakegithub.PR{Number: i})
			s.SetCheckRun("o/r", "sha", "ci", "completed", "success")
		}()
		go func() {
			defer wg.Done()
			c.get("repos/o/r/pulls")
			_ = s.Calls()
		}()
	}
	wg.Wait()
	if st, v := c.get("repos/o/r/pulls?per_page=100"); st != 200 || len(v.([]any)) != 20 {
		t.Errorf("%d, %d PRs", st, len(v.([]any)))
	}
}

// GitHub answers mergeable null on the first read after the base moved or
// the head changed; the list endpoint never has mergeable.
func TestMergeableNullWhileGitHubComputes(t *testing.T) {
	s := fakegithub.NewWithOptions(t, fakegithub.Options{MergeableUnknownReads: 2})
	s.AddRepo(tenant, "o/r", "main")
	s.AddPR("o/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
	s.AddPR("o/r", fakegithub.PR{Number: 2, HeadSHA: "b", BaseRef: "release"})
	c := newClient(t, s)
	read := func(n int) (any, any) {
		t.Helper()
		_, v := c.get("repos/o/r/pulls/" + strconv.Itoa(n))
		m := v.(map[string]any)
		return m["mergeable"], m["mergeable_state"]
	}
	if m, st := read(1); m != true || st != "clean" {
		t.Fatalf("a new PR: %v %v", m, st)
	}
	s.SetBaseHead("o/r", "main", "moved")
	for i := 0; i < 2; i++ {
		if m, st := read(1); m != nil || st != "unknown" {
			t.Errorf("read %d after the base moved: %v %v, want null, unknown", i+1, m, st)
		}
	}
	if m, st := read(1); m != true || st != "clean" {
		t.Errorf("third read: %v %v", m, st)
	}
	if m, _ := read(2); m != true {
		t.Errorf("a PR of another base: %v", m)
	}
	s.SetHead("o/r", 2, "b2")
	if m, _ := read(2); m != nil {
		t.Errorf("after a push to the head: %v, want null", m)
	}
	_, list := c.get("repos/o/r/pulls")
	for _, p := range list.([]any) {
		if _, ok := p.(map[string]any)["mergeable"]; ok {
			t.Errorf("the list has mergeable: %v", p)
		}
	}

	off := fakegithub.NewWithOptions(t, fakegithub.Options{MergeableUnknownReads: -1})
	off.AddRepo(tenant, "o/r", "main")
	off.AddPR("o/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
	off.SetBaseHead("o/r", "main", "moved")
	oc := newClient(t, off)
	if _, v := oc.get("repos/o/r/pulls/1"); v.(map[string]any)["mergeable"] != true {
		t.Errorf("turned off: %v", v.(map[string]any)["mergeable"])
	}
}

// SetCheckRun takes the conclusions GitHub sets itself; the API refuses
// them from an App.
func TestStaleOnlyFromGitHub(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	s.SetCheckRun("o/r", "a", "ci", "completed", "stale")
	c := newClient(t, s)
	_, v := c.get("repos/o/r/commits/a/check-runs")
	if runs := v.(map[string]any)["check_runs"].([]any); len(runs) != 1 || runs[0].(map[string]any)["conclusion"] != "stale" {
		t.Errorf("runs = %v", runs)
	}
	st, _, _ := c.do("POST", "repos/o/r/check-runs", "token "+c.token, map[string]any{"name": "x", "head_sha": "a", "conclusion": "stale"}, nil)
	if st != 422 {
		t.Errorf("an App setting stale: %d, want 422", st)
	}
}
