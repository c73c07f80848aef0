package fakegithub

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// TB is the part of testing.TB the server uses; *testing.T satisfies it.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Options configure a Server. The zero value is usable.
type Options struct {
	// PathPrefix serves the API under a prefix, like GitHub Enterprise
	// Server's "/api/v3".
	PathPrefix string
	AppID      int64           // default 4242
	PrivateKey *rsa.PrivateKey // default: a key generated once per process
	Clock      func() time.Time
	RateLimit  int // per installation per hour; default GitHub's: 5,000, 50 more per repository past 20, at most 12,500
	// MergeableUnknownReads is how many GET /pulls/{n} answer "mergeable":
	// null, "mergeable_state": "unknown" after the PR's base branch moved
	// (a merge into it, SetBaseHead) or its head changed: GitHub computes
	// mergeability in the background and the first read after a move is
	// null. 0 means the default, 1; a negative value turns it off (see
	// also SetMergeableUnknownReads).
	MergeableUnknownReads int
	// StaleRefReads is how many reads of a branch after a write to it
	// still see the branch as it was before (its old sha, or no branch):
	// GitHub serves reads from replicas that lag its writes (a merge
	// into a branch created a moment before can answer 404 "Base does not
	// exist"; a GET of a ref just moved can answer its old sha). Reads are
	// GET /git/ref/{ref} and the base of POST /merges. 0 means the
	// default, 1; a negative value turns it off (see also
	// SetStaleRefReads).
	StaleRefReads int
	// WorkflowsPermission gives the App the workflows permission: PRs that
	// touch .github/workflows can be merged and updated.
	WorkflowsPermission bool
}

// Server is the fake GitHub.
type Server struct {
	ts     *httptest.Server
	prefix string
	mux    *http.ServeMux
	appID  int64
	key    *rsa.PrivateKey
	keyPEM []byte
	done   chan struct{}
	close  sync.Once
	tb     TB
	mqs    mqState // GitHub's merge queues (mergequeue.go), guarded by mu

	inFlight atomic.Int64

	busyMu     sync.Mutex
	tenantBusy map[string]int // installation -> requests not answered yet
	tenantPeak map[string]int // installation -> the most at once

	mu            sync.Mutex
	clock         func() time.Time
	latency       time.Duration
	rateLimit     int
	rateByRepos   bool // the quota grows with the installation's repositories, as GitHub's does
	nextID        int64
	tokens        map[string]*token
	tenants       map[string]*tenant
	graphQLQuota  map[string]*tenant // each installation's GraphQL quota, apart from tenants'
	installations map[string]bool
	suspended     map[string]time.Time // installation -> suspended_at
	repos         map[string]*repo
	unknownReads  int  // Options.MergeableUnknownReads, resolved
	staleReads    int  // Options.StaleRefReads, resolved
	workflows     bool // the App has the workflows permission
	faults        []*faultRule
	rec           records
	muts          mutationLog   // its own lock: written after s.mu is given back
	manifest      manifestState // the App manifest flow (manifest.go)
	hooks         deliveryState // the App's webhook deliveries (deliveries.go)
	ciPending     []*ciRun      // simulated check runs in progress (ci.go)
	updateDelay   time.Duration // SetBranchUpdateDelay
	updatesDue    []dueUpdate   // branch updates accepted and not made yet (handlers.go)
	sec           secondaryState
}

var (
	sharedKeyOnce sync.Once
	sharedKey     *rsa.PrivateKey
)

func defaultKey() *rsa.PrivateKey {
	sharedKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic("fakegithub: generating RSA key: " + err.Error())
		}
		sharedKey = k
	})
	return sharedKey
}

// New starts a fake GitHub with default options. When t is not nil the
// server is closed at the end of the test.
func New(t TB) *Server { return NewWithOptions(t, Options{}) }

// NewWithOptions starts a fake GitHub.
func NewWithOptions(t TB, o Options) *Server {
	if o.AppID == 0 {
		o.AppID = 4242
	}
	if o.PrivateKey == nil {
		o.PrivateKey = defaultKey()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	byRepos := o.RateLimit <= 0
	if byRepos {
		o.RateLimit = 5000
	}
	switch {
	case o.MergeableUnknownReads == 0:
		o.MergeableUnknownReads = 1
	case o.MergeableUnknownReads < 0:
		o.MergeableUnknownReads = 0
	}
	switch {
	case o.StaleRefReads == 0:
		o.StaleRefReads = 1
	case o.StaleRefReads < 0:
		o.StaleRefReads = 0
	}
	s := &Server{
		prefix: "/" + strings.Trim(o.PathPrefix, "/"),
		mux:    http.NewServeMux(),
		appID:  o.AppID,
		key:    o.PrivateKey,
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(o.PrivateKey)}),
		done:   make(chan struct{}),
		tb:     t,

		tenantBusy: map[string]int{},
		tenantPeak: map[string]int{},

		clock:         o.Clock,
		rateLimit:     o.RateLimit,
		rateByRepos:   byRepos,
		nextID:        1000,
		tokens:        map[string]*token{},
		tenants:       map[string]*tenant{},
		installations: map[string]bool{},
		suspended:     map[string]time.Time{},
		repos:         map[string]*repo{},
		unknownReads:  o.MergeableUnknownReads,
		staleReads:    o.StaleRefReads,
		workflows:     o.WorkflowsPermission,
	}
	if s.prefix == "/" {
		s.prefix = ""
	}
	s.routes()
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// URL is the REST base URL, with a trailing slash (forge.Config.BaseURL).
func (s *Server) URL() string { return s.ts.URL + s.prefix + "/" }

// AppID is the App id the server accepts in JWTs.
func (s *Server) AppID() int64 { return s.appID }

// PrivateKeyPEM is the App's private key (PKCS#1 PEM), for forge.Config.
func (s *Server) PrivateKeyPEM() []byte { return append([]byte(nil), s.keyPEM...) }

// Close releases hanging requests and stops the server.
func (s *Server) Close() {
	s.close.Do(func() {
		close(s.done)
		s.ts.Close()
	})
}

// InFlight returns how many requests are being served right now (e.g. one
// hanging on FaultTimeout).
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// PeakInFlight returns the most requests of installation tenant that were
// being served at once (from authentication until the answer starts): the
// concurrency GitHub's secondary rate limits look at.
func (s *Server) PeakInFlight(tenant string) int {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	return s.tenantPeak[tenant]
}

// busy counts a request of tenant as being served until its answer starts
// (the returned writer's first WriteHeader or Write) or done is called:
// a client may send its next request as soon as it has read the answer.
func (s *Server) busy(tenant string, w http.ResponseWriter) (http.ResponseWriter, func()) {
	s.busyMu.Lock()
	s.tenantBusy[tenant]++
	s.tenantPeak[tenant] = max(s.tenantPeak[tenant], s.tenantBusy[tenant])
	s.busyMu.Unlock()
	done := sync.OnceFunc(func() {
		s.busyMu.Lock()
		s.tenantBusy[tenant]--
		s.busyMu.Unlock()
	})
	return &answerWriter{ResponseWriter: w, started: done}, done
}

// answerWriter calls started when the answer starts.
type answerWriter struct {
	http.ResponseWriter
	started func()
}

func (a *answerWriter) WriteHeader(code int) {
	a.started()
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(p []byte) (int, error) {
	a.started()
	return a.ResponseWriter.Write(p)
}

// SetClock replaces the server's clock (token expiry, rate-limit resets,
// timestamps).
func (s *Server) SetClock(clock func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = clock
}

// SetLatency delays every request by d.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

func (s *Server) now() time.Time { return s.clock().UTC().Truncate(time.Second) }

func (s *Server) newID() int64 {
	s.nextID++
	return s.nextID
}

// ctxKey carries the authenticated tenant to handlers.
type ctxKey struct{}

func tenantOf(r *http.Request) string {
	t, _ := r.Context().Value(ctxKey{}).(string)
	return t
}

// serve is the middleware every request goes through: routing,
// authentication, latency, faults, rate limit, handler, ETag.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)

	_, pattern := s.mux.Handler(r)
	route := s.routeOf(pattern)
	w, tracked := s.track(w, r, route)
	defer tracked()
	if route == "" {
		s.mu.Lock()
		s.record(r, "", "", http.StatusNotFound, false, false)
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}

	s.mu.Lock()
	tenant, status, msg := s.authenticate(r, route)
	if status != 0 {
		s.record(r, route, tenant, status, false, false)
		s.mu.Unlock()
		writeError(w, status, msg)
		return
	}
	fault := s.takeFault(route)
	latency := s.latency
	s.mu.Unlock()
	if tenant != "" {
		var done func()
		w, done = s.busy(tenant, w)
		defer done()
		s.busyMu.Lock()
		busy := s.tenantBusy[tenant]
		s.busyMu.Unlock()
		s.mu.Lock()
		after, content, limited := s.secondaryLimit(r, route, tenant, busy)
		if limited {
			s.record(r, route, tenant, http.StatusForbidden, false, false)
			if route == RouteGraphQL { // GitHub's rate headers come on every answer
				graphQLRateHeaders(w.Header(), s.graphQLRate(tenant))
			} else {
				s.rateHeaders(w.Header(), tenant)
			}
			s.mu.Unlock()
			writeSecondary(w, after, content)
			return
		}
		s.mu.Unlock()
	}
	if latency > 0 && !s.sleep(r.Context(), latency) {
		return
	}
	// Rate-limit points are per installation token; App (JWT) requests and
	// GET /rate_limit cost nothing here, and GraphQL has a quota of its own
	// (graphQLRateHeaders).
	rateTenant := tenant
	if route == RouteCreateToken || route == RouteGraphQL {
		rateTenant = ""
	}

	if fault != nil {
		if fault.Delay > 0 && !s.sleep(r.Context(), fault.Delay) {
			return
		}
		if fault.Hang {
			select {
			case <-r.Context().Done():
			case <-s.done:
			}
			s.mu.Lock()
			s.record(r, route, tenant, 0, false, true)
			s.mu.Unlock()
			return
		}
		if fault.Status != 0 && !fault.AfterServe {
			s.mu.Lock()
			s.rateHeaders(w.Header(), rateTenant)
			s.record(r, route, tenant, fault.Status, false, true)
			s.mu.Unlock()
			for k, v := range fault.Header {
				w.Header().Set(k, v)
			}
			writeError(w, fault.Status, fault.Message)
			return
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if route == RouteGraphQL && tenant != "" {
		if q := s.graphQLRate(tenant); q.used >= q.limit {
			graphQLRateHeaders(w.Header(), q)
			s.record(r, route, tenant, http.StatusOK, false, false)
			writeJSON(w, http.StatusOK, obj{"data": nil, "errors": []obj{{
				"type": "RATE_LIMIT", "code": "graphql_rate_limit", "message": fmt.Sprintf(MsgGraphQLRateLimited, tenant)}}})
			return
		}
	}
	counted := rateTenant != "" && route != RouteRateLimit
	if counted {
		if rl := s.rate(tenant); rl.used >= rl.limit {
			s.rateHeaders(w.Header(), rateTenant)
			s.record(r, route, tenant, http.StatusForbidden, false, false)
			writeError(w, http.StatusForbidden, "API rate limit exceeded for installation ID "+tenant+".")
			return
		}
	}
	s.settleCI() // simulated check runs that are due read as completed
	s.settleUpdates()
	rec := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
	s.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), ctxKey{}, tenant)))

	if r.Method == http.MethodGet && rec.status == http.StatusOK {
		sum := sha256.Sum256(rec.body.Bytes())
		etag := `"` + hex.EncodeToString(sum[:16]) + `"`
		rec.header.Set("ETag", etag)
		if etagMatch(r.Header.Get("If-None-Match"), etag) {
			// Not modified: GitHub does not count it against the rate limit.
			s.rateHeaders(w.Header(), rateTenant)
			w.Header().Set("ETag", etag)
			s.record(r, route, tenant, http.StatusNotModified, true, false)
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	if counted {
		s.rate(tenant).used++
	}
	if fault != nil && fault.AfterServe {
		s.rateHeaders(w.Header(), rateTenant)
		s.record(r, route, tenant, fault.Status, false, true)
		writeError(w, fault.Status, fault.Message)
		return
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	s.rateHeaders(w.Header(), rateTenant)
	if route == RouteGraphQL && tenant != "" {
		q := s.graphQLRate(tenant)
		q.used++ // a point: the fake's queries are small (GitHub's minimum cost)
		graphQLRateHeaders(w.Header(), q)
	}
	s.record(r, route, tenant, rec.status, false, false)
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// sleep waits d; false when the request or the server ended first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

func etagMatch(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == etag {
			return true
		}
	}
	return false
}

// bufferedWriter holds a handler's answer until the middleware decides
// between 200 and 304.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (b *bufferedWriter) Header() http.Header { return b.header }
func (b *bufferedWriter) WriteHeader(code int) {
	if !b.wrote {
		b.status, b.wrote = code, true
	}
}
func (b *bufferedWriter) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}

// tenant is one installation's rate-limit window.
type tenant struct {
	id    string
	limit int
	used  int
	reset time.Time
}

// rate returns tenant's window, opening a new one when the last has reset.
func (s *Server) rate(id string) *tenant {
	t := s.tenants[id]
	if t == nil {
		t = &tenant{id: id, limit: s.rateLimit}
		s.tenants[id] = t
	}
	if now := s.now(); t.reset.IsZero() || !now.Before(t.reset) {
		t.used, t.reset = 0, now.Add(time.Hour)
		if s.rateByRepos {
			t.limit = s.installationLimit(id)
		}
	}
	return t
}

// installationLimit is GitHub's hourly quota of an installation: 5,000
// requests, 50 more for each repository past 20, at most 12,500 ("Rate
// limits for GitHub Apps": installation access tokens; the 50 per user
// past 20 of an organisation is not modelled).
func (s *Server) installationLimit(id string) int {
	repos := 0
	for _, rp := range s.repos {
		if rp.tenant == id {
			repos++
		}
	}
	return min(5000+50*max(repos-20, 0), 12500)
}

func (s *Server) rateHeaders(h http.Header, tenant string) {
	if tenant == "" {
		return
	}
	t := s.rate(tenant)
	h.Set("X-Ratelimit-Limit", strconv.Itoa(t.limit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(max(t.limit-t.used, 0)))
	h.Set("X-Ratelimit-Used", strconv.Itoa(t.used))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(t.reset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
}

// GraphQLPointsPerHour is an installation's GraphQL quota: 5,000 points
// an hour, apart from the REST quota ("Rate limits and query limits for
// the GraphQL API"; the more an installation of many repositories gets is
// not modelled). Each of the fake's requests costs 1 point, GitHub's
// least: its queries ask for no connection of more than a few nodes.
const GraphQLPointsPerHour = 5000

// MsgGraphQLRateLimited is GitHub's message on a GraphQL answer past the
// quota (%s the installation's id). The answer is HTTP 200, its error of
// type RATE_LIMIT and code graphql_rate_limit: GitHub's GraphQL reference
// documents RATE_LIMITED, and GitHub sends RATE_LIMIT (octokit's
// plugin-throttling #824, githubkit #271, Kodiak #906).
const MsgGraphQLRateLimited = "API rate limit already exceeded for installation ID %s."

// graphQLRate returns tenant's GraphQL window, opening a new one when the
// last has reset. Called with s.mu held.
func (s *Server) graphQLRate(id string) *tenant {
	if s.graphQLQuota == nil {
		s.graphQLQuota = map[string]*tenant{}
	}
	t := s.graphQLQuota[id]
	if t == nil {
		t = &tenant{id: id, limit: GraphQLPointsPerHour}
		s.graphQLQuota[id] = t
	}
	if now := s.now(); t.reset.IsZero() || !now.Before(t.reset) {
		t.used, t.reset = 0, now.Add(time.Hour)
	}
	return t
}

// graphQLRateHeaders are GitHub's rate headers on a GraphQL answer: the
// GraphQL quota ("graphql"), apart from the REST one ("core").
func graphQLRateHeaders(h http.Header, t *tenant) {
	h.Set("X-Ratelimit-Limit", strconv.Itoa(t.limit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(max(t.limit-t.used, 0)))
	h.Set("X-Ratelimit-Used", strconv.Itoa(t.used))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(t.reset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", "graphql")
}

// SetGraphQLRateLimit sets tenant's GraphQL quota and what is left of it
// in the current window (an hour of the server's clock). With remaining 0
// every GraphQL request answers RATE_LIMIT until the window resets.
func (s *Server) SetGraphQLRateLimit(tenant string, limit, remaining int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.graphQLRate(tenant)
	t.limit, t.used = limit, max(limit-remaining, 0)
}

// GraphQLRateRemaining returns tenant's GraphQL points left in the window.
func (s *Server) GraphQLRateRemaining(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.graphQLRate(tenant)
	return max(t.limit-t.used, 0)
}

// RateLimitUsed returns the rate-limit points spent in the current window,
// summed over installations.
func (s *Server) RateLimitUsed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range s.tenants {
		n += s.rate(id).used
	}
	return n
}

// RateLimitRemaining returns tenant's remaining points in the current window.
func (s *Server) RateLimitRemaining(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.rate(tenant)
	return max(t.limit-t.used, 0)
}

// SetRateLimit sets tenant's quota and what is left of it in the current
// window. With remaining 0 every counted request answers 403 until the
// window resets (one hour of the server's clock).
func (s *Server) SetRateLimit(tenant string, limit, remaining int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.rate(tenant)
	t.limit, t.used = limit, max(limit-remaining, 0)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakegithub: encoding answer: %v", err))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

// writeError answers with GitHub's error shape {message, documentation_url}.
func writeError(w http.ResponseWriter, status int, msg string) {
	if msg == "" {
		msg = http.StatusText(status)
	}
	writeJSON(w, status, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}
