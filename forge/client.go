package forge

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	jwt "github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"
)

// DefaultBaseURL is GitHub.com's REST API.
const DefaultBaseURL = "https://api.github.com/"

// DefaultMergeTimeout bounds a merge or a branch update (Config.MergeTimeout).
const DefaultMergeTimeout = 60 * time.Second

// Config configures a Client.
type Config struct {
	// BaseURL is the REST base: DefaultBaseURL when empty,
	// "https://host/api/v3/" for GitHub Enterprise Server, a fake's URL in tests.
	BaseURL    string
	AppID      int64
	PrivateKey []byte // the App's private key, PEM (PKCS#1 or PKCS#8)
	// Transport is the base transport below the cache layer (default
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Clock is used for rate-limit decisions (default time.Now).
	// Installation token expiry is ghinstallation's and uses the wall clock.
	Clock func() time.Time
	// Timeout bounds each HTTP request, token refresh included (default
	// 10s), counted from when the request gets one of its installation's
	// slots (InstallationConcurrency).
	Timeout time.Duration
	// MergeTimeout replaces Timeout for merges and branch updates (default
	// DefaultMergeTimeout, 60s). GitHub gives a request 10 s itself and may
	// still finish a merge it answered late: a client that gave up at 10 s
	// and sent the merge again raced the first one.
	MergeTimeout time.Duration
	// InstallationConcurrency bounds the requests one installation has in
	// flight, whoever sends them (default DefaultInstallationConcurrency,
	// 4): GitHub asks integrators not to send a token's requests
	// concurrently (secondary rate limits). Others wait their turn.
	InstallationConcurrency int
	// WritesPerMinute and WritesPerHour bound each installation's
	// content-generating requests (budget.go), below GitHub's secondary
	// limits of 80 and 500: 0 means DefaultWritesPerMinute and
	// DefaultWritesPerHour, a negative value no bound on that window
	// (GitHub Enterprise Server has none unless its administrator set
	// them). Replicas share them (SetReplicas).
	WritesPerMinute int
	WritesPerHour   int
	// CacheEntries bounds the conditional-request cache (default 10000).
	CacheEntries int
	// CacheBytes bounds the conditional-request cache's memory (default
	// 32 MiB; see cache.go).
	CacheBytes int64
	// UserAgent is sent with every request (default "mergegate").
	UserAgent string
	// Logger gets one line when GitHub starts refusing an installation's
	// credentials and one when it accepts them again (AuthFailure); the
	// zero value logs nothing.
	Logger zerolog.Logger
}

// Client calls GitHub as the App's installations. It is safe for concurrent
// use.
type Client struct {
	cfg   Config
	base  *url.URL
	key   *rsa.PrivateKey
	cache *etagCache

	// unprotected remembers branches without classic protection (see
	// unprotectedTTL): tenant/repo@branch → when GitHub said so.
	unprotected sync.Map

	mu       sync.Mutex
	insts    map[int64]*installation
	replicas int           // SetReplicas: the replicas sharing each installation's bound (0: alone)
	app      *installation // the App itself (JWT), built on first use; see installations.go
}

// installation is one tenant's go-github client, rate-limit state and
// request slots (nil for the App's own client).
type installation struct {
	gh     *github.Client
	lim    *limiter
	slots  *inflight
	budget *writeBudget
	auth   *authTransport // nil for the App's own client
}

// New validates cfg (App id, PEM key, base URL) and returns a Client. No
// request is sent until the first call.
func New(cfg Config) (*Client, error) {
	if cfg.AppID <= 0 {
		return nil, errors.New("forge: GitHub App id must be a positive number")
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("forge: the GitHub App private key is not a PEM RSA key: %w", err)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("forge: invalid GitHub API base URL %q", cfg.BaseURL)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MergeTimeout <= 0 {
		cfg.MergeTimeout = DefaultMergeTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "mergegate"
	}
	if cfg.WritesPerMinute == 0 {
		cfg.WritesPerMinute = DefaultWritesPerMinute
	}
	if cfg.WritesPerHour == 0 {
		cfg.WritesPerHour = DefaultWritesPerHour
	}
	return &Client{
		cfg:   cfg,
		base:  base,
		key:   key,
		cache: newETagCache(cfg.CacheEntries, cfg.CacheBytes),
		insts: map[int64]*installation{},
	}, nil
}

// parseTenant is tenant's installation id, 0 when it is not one.
func parseTenant(tenant string) int64 {
	id, err := strconv.ParseInt(tenant, 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// installation returns the cached per-installation client for tenant.
func (c *Client) installation(tenant string) (*installation, error) {
	id, err := strconv.ParseInt(tenant, 10, 64)
	if err != nil || id <= 0 {
		return nil, fmt.Errorf("forge: tenant %q is not an installation id", tenant)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.insts[id]; ok {
		return in, nil
	}
	lim := &limiter{tenant: tenant, clock: c.cfg.Clock}
	below := newInflight(c.perInstallationLocked(), c.cfg.Timeout, c.cfg.MergeTimeout,
		&rateGuard{lim: lim, next: &cacheTransport{inst: tenant, cache: c.cache, next: c.cfg.Transport}})
	below.budget = newWriteBudget(tenant, c.cfg.Clock, c.cfg.WritesPerMinute, c.cfg.WritesPerHour, c.cfg.Logger)
	below.budget.setReplicas(c.replicas)
	baseNoSlash := strings.TrimRight(c.base.String(), "/")
	// One AppsTransport per ghinstallation transport: ghinstallation
	// mutates it while refreshing a token, so it must not be shared (and
	// authTransport builds a new pair to drop a refused token).
	fresh := func() http.RoundTripper {
		atr := ghinstallation.NewAppsTransportFromPrivateKey(withUserAgent(below, c.cfg.UserAgent), c.cfg.AppID, c.key)
		atr.BaseURL = baseNoSlash
		itr := ghinstallation.NewFromAppsTransport(atr, id)
		itr.BaseURL = baseNoSlash
		return itr
	}
	auth := newAuthTransport(tenant, fresh, c.cfg.Clock, c.cfg.Logger)

	// No Client.Timeout: it would count the wait for a slot; inflight
	// times each request from when it is sent.
	gh := github.NewClient(&http.Client{Transport: auth})
	gh.BaseURL = c.base
	gh.UploadURL = c.base
	gh.UserAgent = c.cfg.UserAgent
	in := &installation{gh: gh, lim: lim, slots: below, budget: below.budget, auth: auth}
	c.insts[id] = in
	return in, nil
}

// SetReplicas shares each installation's request bound
// (InstallationConcurrency) among n replicas of mergegate on one database,
// which GitHub's secondary limits count as one client per installation:
// each replica's bound becomes max(1, InstallationConcurrency / n), at once
// for the installations already in use (requests in flight finish; the
// waiting ones go by the new bound). n < 1 counts as 1.
func (c *Client) SetReplicas(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max(n, 1) == max(c.replicas, 1) {
		return
	}
	c.replicas = n
	per := c.perInstallationLocked()
	for _, in := range c.insts {
		in.slots.slots.setLimit(per)
		in.budget.setReplicas(n)
	}
}

// InstallationLimit is the bound on each installation's requests in
// flight from this Client now (InstallationConcurrency, shared by
// SetReplicas).
func (c *Client) InstallationLimit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.perInstallationLocked()
}

func (c *Client) perInstallationLocked() int {
	per := c.cfg.InstallationConcurrency
	if per <= 0 {
		per = DefaultInstallationConcurrency
	}
	return max(1, per/max(c.replicas, 1))
}

// RateRemaining returns the installation's remaining quota and its reset
// time, from the last response headers; known is false before any answer.
func (c *Client) RateRemaining(tenant string) (remaining int, reset time.Time, known bool) {
	in, err := c.installation(tenant)
	if err != nil {
		return 0, time.Time{}, false
	}
	return in.lim.rate()
}

// Waits returns how many of the installation's requests had to wait for
// one of its slots (InstallationConcurrency) and their time waiting, in
// all, since the Client started.
func (c *Client) Waits(tenant string) (waited int64, total time.Duration) {
	in, err := c.installation(tenant)
	if err != nil {
		return 0, 0
	}
	return in.slots.waited.Load(), time.Duration(in.slots.waitNS.Load())
}

// Stats returns how many requests were sent and how many of the GETs were
// answered 304 Not Modified (free of rate-limit cost), over all
// installations.
func (c *Client) Stats() (requests, notModified int64) {
	return c.cache.requests.Load(), c.cache.notModified.Load()
}

// EndpointStats returns Stats per operation ("pulls.get", "pulls.list",
// "checks.list-for-ref", "apps.create-installation-access-token", ...).
func (c *Client) EndpointStats() map[string]EndpointStats {
	return c.cache.endpointStats()
}

// begin resolves tenant and repo for one operation.
func (c *Client) begin(ctx context.Context, op, tenant, repo string) (context.Context, *installation, string, string, call, error) {
	cl := call{op: op, tenant: tenant, repo: repo}
	in, err := c.installation(tenant)
	if err != nil {
		return ctx, nil, "", "", cl, err
	}
	var owner, name string
	if repo != "" {
		var ok bool
		owner, name, ok = strings.Cut(repo, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return ctx, nil, "", "", cl, fmt.Errorf("forge: repo %q is not owner/name", repo)
		}
	}
	if repo != "" {
		ctx = context.WithValue(ctx, repoKey{}, repo)
	}
	return withOp(ctx, op), in, owner, name, cl, nil
}
