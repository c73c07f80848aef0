package app

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/procfs"
	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/reconcile"
	"github.com/mergegate/mergegate/webhook"
)

// Reconciler runs the cron's pass for one repository (POST /reconcile).
type Reconciler interface {
	Pass(ctx context.Context, k leasedo.Key) (leasedo.ReconcileAnswer, error)
}

// AdminConfig wires the admin listener.
type AdminConfig struct {
	Store      *leasedo.Store
	Engine     *Engine    // kicked after changes, so the queue moves at once
	Reconciler Reconciler // nil: reconcile without a GitHub resync
	Token      string     // "" only on a loopback listener
	Metrics    *Metrics
	Dashboard  http.Handler // GET / and its pages; nil: none
	Logger     zerolog.Logger
	// Addr is the admin listener's address (--admin-addr): its host is,
	// beside loopback names, the Host the API answers to.
	Addr string
	// Policies returns the repositories' policies (GET /queue, POST
	// /freeze, POST /thaw); nil or returning nil: none.
	Policies func() *reconcile.Policies
}

// maxAdminBody bounds an admin request body.
const maxAdminBody = 1 << 20

// NewAdminHandler serves the admin API (docs/lease-protocol.md) on the admin listener.
//
// Protections, outermost first: only Host names of the admin address or
// loopback are answered (421 otherwise: a page whose DNS name was rebound to
// 127.0.0.1 gets nothing); cross-origin browser requests other than GET,
// HEAD and OPTIONS are refused (403, net/http.CrossOriginProtection, from
// Sec-Fetch-Site and Origin: a web page cannot post to it); the admin
// token, when set; and a wrong method on a route answers 405 with Allow.
func NewAdminHandler(cfg AdminConfig) http.Handler {
	if cfg.Policies == nil {
		cfg.Policies = func() *reconcile.Policies { return nil }
	}
	a := &admin{cfg: cfg}
	mux := http.NewServeMux()
	route := func(method, path string, h http.HandlerFunc) {
		mux.HandleFunc(method+" "+path, h)
		mux.HandleFunc(path, methodNotAllowed(method)) // any other method
	}
	route(http.MethodPost, "/event", a.event)
	route(http.MethodPost, "/reconcile", a.reconcile)
	route(http.MethodGet, "/lease", a.lease)
	route(http.MethodPost, "/lease/acquire", a.acquire)
	route(http.MethodPost, "/lease/release", a.release)
	route(http.MethodGet, "/queue", a.queue)
	route(http.MethodPost, "/deliveries/retry", a.retry)
	route(http.MethodPost, "/freeze", a.freeze(true))
	route(http.MethodPost, "/thaw", a.freeze(false))
	route(http.MethodPost, "/queue/move", a.queueAction("move"))
	route(http.MethodPost, "/queue/remove", a.queueAction("remove"))
	route(http.MethodPost, "/queue/retry", a.queueAction("retry"))
	route(http.MethodGet, "/healthz", healthz(cfg.Store))
	if cfg.Metrics != nil {
		route(http.MethodGet, "/metrics", promhttp.HandlerFor(cfg.Metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP)
		route(http.MethodGet, "/deliveries/stats", a.stats)
	}
	if cfg.Dashboard != nil {
		mux.Handle("/", cfg.Dashboard) // its own routes are GET only: 405 otherwise
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "cross-origin request refused: the admin API takes requests from curl, scripts and its own pages, not from other sites"})
	}))
	return hostGuard(cfg.Addr, cop.Handler(a.auth(mux)))
}

// methodNotAllowed answers a route's other methods: 405 and Allow.
func methodNotAllowed(method string) http.HandlerFunc {
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("%s is not allowed here; use %s", r.Method, method)})
	}
}

// hostGuard answers only requests whose Host is a name of the admin
// address or of loopback (localhost, 127.0.0.1, [::1], any port), so that
// DNS rebinding (a page on evil.example whose name then resolves to
// 127.0.0.1) reaches nothing. A listener on every address (0.0.0.0, ::)
// also answers to any IP literal: a literal cannot be rebound. Other names
// get 421 Misdirected Request saying which ones are answered.
func hostGuard(adminAddr string, next http.Handler) http.Handler {
	own, _, err := net.SplitHostPort(adminAddr)
	if err != nil {
		own = ""
	}
	own = strings.ToLower(strings.Trim(own, "[]"))
	anyIP := own == "" || net.ParseIP(own) != nil && net.ParseIP(own).IsUnspecified()
	names := "localhost, 127.0.0.1 or [::1]"
	if !anyIP && own != "localhost" && own != "127.0.0.1" && own != "::1" {
		names = "localhost, 127.0.0.1, [::1] or " + own
	} else if anyIP {
		names = "localhost or an IP address"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.Trim(host, "[]"))
		ip := net.ParseIP(host)
		switch {
		case host == "", host == "localhost", host == own, ip != nil && (ip.IsLoopback() || anyIP):
			next.ServeHTTP(w, r)
		default:
			writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": fmt.Sprintf("the admin API answers to the host names %s only, not %q (a guard against DNS rebinding)", names, clipString(r.Host, 100))})
		}
	})
}

// What an operator's action may say: who (the audit log's by) and why (a
// freeze's message, a move's or removal's why), which go to the store,
// the log, check runs and a pull request's comment.
const (
	maxAdminBy   = 100
	maxAdminText = 1000
)

// tooLong answers 400 when an operator's by or text is longer than it may
// be.
func tooLong(w http.ResponseWriter, by, text, textField string) bool {
	switch {
	case len(by) > maxAdminBy:
		badRequest(w, &leasedo.FieldError{Field: "by", Msg: fmt.Sprintf("is %d bytes, at most %d", len(by), maxAdminBy)})
		return true
	case len(text) > maxAdminText:
		badRequest(w, &leasedo.FieldError{Field: textField, Msg: fmt.Sprintf("is %d bytes, at most %d", len(text), maxAdminText)})
		return true
	}
	return false
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

type admin struct{ cfg AdminConfig }

// auth requires the admin token when one is set: as a bearer token (the
// scheme in any case, RFC 9110), or as the password of HTTP basic auth (so
// a browser can open the dashboard).
func (a *admin) auth(next http.Handler) http.Handler {
	if a.cfg.Token == "" {
		return next
	}
	want := []byte(a.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got string
		if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			got = strings.TrimLeft(cred, " ")
		} else if _, pw, ok := r.BasicAuth(); ok {
			got = pw
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="mergegate admin", charset="UTF-8"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized: send the admin token as a bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *admin) event(w http.ResponseWriter, r *http.Request) {
	var ev leasedo.Event
	if !decodeBody(w, r, &ev) {
		return
	}
	if err := ev.Validate(); err != nil {
		badRequest(w, err)
		return
	}
	if err := webhook.CheckRepoName(ev.Repo); err != nil {
		badRequest(w, &leasedo.FieldError{Field: "repo", Msg: err.Error()})
		return
	}
	// The /event vocabulary is GitHub's; the webhook package maps it. A
	// gate result in the body only makes the entry be read again: the
	// merge waits until mergegate has read the checks from GitHub itself.
	ev.Op = webhook.OpOf(ev.EventType, ev.Action)
	res, err := a.cfg.Store.ProcessEvent(r.Context(), ev, "worker")
	if err != nil {
		a.fail(w, err)
		return
	}
	// A repository fed through this API is tracked like one a webhook
	// named: the dashboard, /metrics and the cron list tracked ones only.
	// Tracking is idempotent; a failure here leaves the event applied and
	// the answer an error, and posting again tracks it.
	if err := a.cfg.Store.Track(r.Context(), ev.Key()); err != nil {
		a.fail(w, err)
		return
	}
	a.kick(ev.Key())
	writeJSON(w, http.StatusOK, res)
}

func (a *admin) reconcile(w http.ResponseWriter, r *http.Request) {
	var k leasedo.Key
	if !decodeBody(w, r, &k) || !validKey(w, k) {
		return
	}
	var ans leasedo.ReconcileAnswer
	var err error
	if a.cfg.Reconciler != nil {
		ans, err = a.cfg.Reconciler.Pass(r.Context(), k)
	} else {
		ans, err = a.cfg.Store.Reconcile(r.Context(), k, "cron", nil)
	}
	if err != nil && leasedo.IsLocked(err) {
		a.fail(w, err)
		return
	}
	if err != nil {
		// The answer still lists what was fixed before the error.
		a.cfg.Logger.Error().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("reconcile from the admin API failed part-way; the answer lists what it fixed, and the cron tries again")
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": err.Error(), "results": ans.Results, "queueLength": ans.QueueLength, "eventCount": ans.EventCount})
		return
	}
	a.kick(k)
	writeJSON(w, http.StatusOK, ans)
}

func (a *admin) lease(w http.ResponseWriter, r *http.Request) {
	k, ok := queryKey(w, r)
	if !ok {
		return
	}
	st, err := a.cfg.Store.Check(r.Context(), k)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *admin) acquire(w http.ResponseWriter, r *http.Request) {
	var k leasedo.Key
	if !decodeBody(w, r, &k) || !validKey(w, k) {
		return
	}
	if _, err := a.cfg.Store.Acquire(r.Context(), k, "admin"); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"acquired": true})
}

func (a *admin) release(w http.ResponseWriter, r *http.Request) {
	var k leasedo.Key
	if !decodeBody(w, r, &k) || !validKey(w, k) {
		return
	}
	if err := a.cfg.Store.ReleaseAny(r.Context(), k); err != nil {
		a.fail(w, err)
		return
	}
	a.kick(k) // deliveries that waited for the lease go now
	writeJSON(w, http.StatusOK, map[string]bool{"released": true})
}

// QueueView is GET /queue's answer: queue, events, audit, the lease, and the
// deliveries not yet applied (pending) or given up on (failed). Each queue
// entry carries, beside the protocol's fields, its base branch (baseRef: one
// queue per base) and what it waits for (gateReason: for a blocked entry,
// what the operator must change).
type QueueView struct {
	Queue      []leasedo.Item        `json:"queue"`
	Events     []leasedo.LoggedEvent `json:"events"`
	Audit      []leasedo.AuditEntry  `json:"audit"`
	Lease      leasedo.LeaseState    `json:"lease"`
	Deliveries DeliveryView          `json:"deliveries"`
	// Policy is the repository's effective policy and where each value
	// came from (absent without GitHub).
	Policy *PolicyView `json:"policy,omitempty"`
}

// DeliveryView lists a repository's unapplied deliveries.
type DeliveryView struct {
	Pending []leasedo.Delivery `json:"pending"`
	Failed  []leasedo.Delivery `json:"failed"`
}

// LoadQueueView reads everything GET /queue shows for k.
func LoadQueueView(ctx context.Context, s *leasedo.Store, k leasedo.Key) (QueueView, error) {
	var v QueueView
	var err error
	if v.Queue, err = s.Items(ctx, k); err != nil {
		return v, err
	}
	if v.Events, err = s.Events(ctx, k); err != nil {
		return v, err
	}
	if v.Audit, err = s.Audit(ctx, k); err != nil {
		return v, err
	}
	if v.Lease, err = s.Check(ctx, k); err != nil {
		return v, err
	}
	if v.Deliveries.Pending, err = s.Deliveries(ctx, k, leasedo.DeliveryPending, 100); err != nil {
		return v, err
	}
	if v.Deliveries.Failed, err = s.Deliveries(ctx, k, leasedo.DeliveryFailed, 100); err != nil {
		return v, err
	}
	return v, nil
}

func (a *admin) queue(w http.ResponseWriter, r *http.Request) {
	k, ok := queryKey(w, r)
	if !ok {
		return
	}
	v, err := LoadQueueView(r.Context(), a.cfg.Store, k)
	if err != nil {
		a.fail(w, err)
		return
	}
	v.Policy = policyView(a.cfg.Policies(), k)
	writeJSON(w, http.StatusOK, v)
}

func (a *admin) retry(w http.ResponseWriter, r *http.Request) {
	var k leasedo.Key
	if !decodeBody(w, r, &k) || !validKey(w, k) {
		return
	}
	n, err := a.cfg.Store.RetryFailed(r.Context(), k)
	if err != nil {
		a.fail(w, err)
		return
	}
	a.kick(k)
	writeJSON(w, http.StatusOK, map[string]int64{"retried": n})
}

// DeliveryStats is GET /deliveries/stats: whether mergegate has caught up
// with what GitHub sent, for the whole install, cheaply (one count of the
// unapplied deliveries, two counters, the RSS). It is what an operator, a
// deploy script or a probe polls after a restart, an outage or a
// redelivery sweep; GET /queue answers per repository, and a /metrics
// scrape reads every repository's queue and lease to answer it. The load
// tool polls it too while it sends, so as not to weigh on what it measures.
type DeliveryStats struct {
	Pending           int   `json:"pending"`           // stored, not applied yet
	Failed            int   `json:"failed"`            // kept failed (POST /deliveries/retry)
	AppliedSinceStart int64 `json:"appliedSinceStart"` // mergegate_deliveries_total, outcomes other than failed
	FailedSinceStart  int64 `json:"failedSinceStart"`  // mergegate_deliveries_total{outcome="failed"}
	RSSBytes          int64 `json:"rssBytes"`          // resident memory; 0 where /proc is not there
}

func (a *admin) stats(w http.ResponseWriter, r *http.Request) {
	counts, err := a.cfg.Store.DeliveryCounts(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	st := DeliveryStats{
		Pending: counts[leasedo.DeliveryPending], Failed: counts[leasedo.DeliveryFailed],
		AppliedSinceStart: a.cfg.Metrics.applied.Load(), FailedSinceStart: a.cfg.Metrics.failed.Load(),
	}
	if p, err := procfs.Self(); err == nil {
		if ps, err := p.Stat(); err == nil {
			st.RSSBytes = int64(ps.ResidentMemory())
		}
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *admin) kick(k leasedo.Key) {
	if a.cfg.Engine != nil {
		a.cfg.Engine.Kick(k)
	}
}

// fail answers an error: 409 locked ({error, held_by}), 400 for a bad
// field, 500 otherwise (logged; the client gets no internals).
func (a *admin) fail(w http.ResponseWriter, err error) {
	var le *leasedo.LockedError
	var fe *leasedo.FieldError
	switch {
	case errors.As(err, &le):
		writeJSON(w, http.StatusConflict, map[string]string{"error": "locked", "held_by": le.HeldBy})
	case errors.As(err, &fe):
		badRequest(w, err)
	default:
		a.cfg.Logger.Error().Err(err).Msg("admin request failed")
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error; see the server log"})
	}
}

// decodeBody reads a JSON body; a bad one is answered 400 naming the field.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "body too large"})
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			badRequest(w, &leasedo.FieldError{Field: field, Msg: fmt.Sprintf("must be a JSON %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)})
			return false
		}
		badRequest(w, &leasedo.FieldError{Field: "body", Msg: "is not valid JSON: " + err.Error()})
		return false
	}
	return true
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64", "float64":
		return "number"
	case "struct", "map", "ptr":
		return "object"
	case "slice":
		return "array"
	}
	return goKind
}

func badRequest(w http.ResponseWriter, err error) {
	out := map[string]string{"error": err.Error()}
	var fe *leasedo.FieldError
	if errors.As(err, &fe) {
		out["field"] = fe.Field
	}
	writeJSON(w, http.StatusBadRequest, out)
}

func validKey(w http.ResponseWriter, k leasedo.Key) bool {
	switch {
	case k.Tenant == "":
		badRequest(w, &leasedo.FieldError{Field: "tenant", Msg: "is required"})
		return false
	case k.Repo == "":
		badRequest(w, &leasedo.FieldError{Field: "repo", Msg: "is required"})
		return false
	}
	return true
}

func queryKey(w http.ResponseWriter, r *http.Request) (leasedo.Key, bool) {
	k := leasedo.Key{Tenant: r.URL.Query().Get("tenant"), Repo: r.URL.Query().Get("repo")}
	return k, validKey(w, k)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck // the client went away
}

// IsLoopback reports whether a listen address binds only to loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
