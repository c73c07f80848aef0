package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/reconcile"
)

// DashboardConfig wires the dashboard.
type DashboardConfig struct {
	Store     *leasedo.Store
	Clock     leasedo.Clock // waiting times; default the wall clock
	GitHubURL string        // REST base URL; links go to its web host (WebURL)
	// Status, when set, says whether GitHub is in use and how the cron is.
	Status func() DashboardStatus
	Logger zerolog.Logger
	// Policies returns the repositories' policies; nil: none shown.
	Policies func() *reconcile.Policies
}

// DashboardStatus is the state of the whole process the pages show.
type DashboardStatus struct {
	GitHub             bool   `json:"github"` // App credentials in use
	Setup              bool   `json:"setup"`  // the set-up page is served on the public listener
	CronRuns           int    `json:"cronRuns"`
	CronLastSuccess    int64  `json:"cronLastSuccess,omitempty"` // epoch ms
	CronLastDurationMS int64  `json:"cronLastDurationMs"`
	CronStale          bool   `json:"cronStale"` // no successful pass for three periods
	CronLastText       string `json:"-"`
	// AuthFailures are the installations whose credentials GitHub refuses
	// even with a new token: their queues cannot move.
	AuthFailures []AuthFailureView `json:"authFailures,omitempty"`
	// WriteBudgets are the installations' write budgets (forge's pacer),
	// by installation id.
	WriteBudgets []WriteBudgetView `json:"writeBudgets,omitempty"`
}

// WriteBudgetView is one installation's write budget as the pages show it.
type WriteBudgetView struct {
	Tenant     string `json:"tenant"`
	PerMinute  int    `json:"perMinute,omitempty"` // 0: no bound
	PerHour    int    `json:"perHour,omitempty"`
	LastMinute int    `json:"lastMinute"`
	LastHour   int    `json:"lastHour"`
	HeldSince  int64  `json:"heldSince,omitempty"` // epoch ms: writes are held back since
	HeldBack   int    `json:"heldBack,omitempty"`
	HeldText   string `json:"-"`
}

// AuthFailureView is forge.AuthFailure as the pages show it.
type AuthFailureView struct {
	Tenant    string `json:"tenant"`
	Repo      string `json:"repo,omitempty"`
	Status    int    `json:"status"`
	Message   string `json:"message"`
	Since     int64  `json:"since"` // epoch ms
	SinceText string `json:"-"`
}

// overviewAudit is how many audit entries per repository GET / shows.
const overviewAudit = 5

// NewDashboard serves the dashboard on the admin listener (behind its
// token): GET / (every tracked repository) and GET /repos/{tenant}/{owner}/{name}
// (one repository: deliveries, audit and event logs). Each page has a JSON
// twin: ?format=json, or .json after the repository's path.
func NewDashboard(cfg DashboardConfig) http.Handler {
	if cfg.Clock == nil {
		cfg.Clock = leasedo.SystemClock{}
	}
	if cfg.Status == nil {
		cfg.Status = func() DashboardStatus { return DashboardStatus{} }
	}
	d := &dashboard{cfg: cfg, web: WebURL(cfg.GitHubURL)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.overview)
	mux.HandleFunc("GET /repos/{tenant}/{owner}/{name}", d.repo)
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		renderPage(w, http.StatusNotFound, "not_found", pageData{Title: "Not found", Admin: true, D: "There is no page at " + r.URL.Path + "."})
	})
	return mux
}

type dashboard struct {
	cfg DashboardConfig
	web string // GitHub's web host
}

// Overview is GET /'s JSON (and the HTML's data).
type Overview struct {
	Now        int64           `json:"now"`
	Status     DashboardStatus `json:"status"`
	Deliveries DeliveryCounts  `json:"deliveries"`
	Repos      []RepoView      `json:"repos"`
	Queued     int             `json:"queued"`
	// Stats are the pictures' figures over every tracked repository.
	Stats   *StatsView `json:"stats,omitempty"`
	NowText string     `json:"-"`
}

// DeliveryCounts counts unapplied deliveries.
type DeliveryCounts struct {
	Pending int `json:"pending"`
	Failed  int `json:"failed"`
}

// RepoView is one repository: the overview's entries (Pending/Failed
// counted, the last few audit entries) and the repository page (every
// delivery, the whole audit and event logs).
type RepoView struct {
	Tenant    string             `json:"tenant"`
	Repo      string             `json:"repo"`
	Suspended bool               `json:"suspended"`
	TrackedAt int64              `json:"trackedAt,omitempty"`
	Lease     LeaseView          `json:"lease"`
	Queue     []QueueItemView    `json:"queue"`
	Counts    DeliveryCounts     `json:"deliveryCounts"`
	Pending   []DeliveryItemView `json:"pending,omitempty"`
	Failed    []DeliveryItemView `json:"failed,omitempty"`
	Audit     []AuditView        `json:"audit"`
	Events    []EventView        `json:"events,omitempty"`
	// Policy is its effective policy: what is wrong with its file, its
	// freezes, every key and where it came from.
	Policy *PolicyView `json:"policy,omitempty"`
	// Trains are its bases' merge train groups, in landing order.
	Trains []TrainView `json:"trains,omitempty"`
	// Stats are its pictures' figures (the repository's page).
	Stats *StatsView `json:"stats,omitempty"`

	Link        string          `json:"-"`
	GitHubURL   string          `json:"-"`
	Anchor      string          `json:"-"`
	PendingText string          `json:"-"`
	FailedText  string          `json:"-"`
	FailedCount int             `json:"-"`
	More        bool            `json:"-"`
	Status      DashboardStatus `json:"-"`
	NowText     string          `json:"-"`
}

// LeaseView is the lease's check answer (GET /lease) with display text.
type LeaseView struct {
	leasedo.LeaseState
	AgeText     string `json:"-"`
	ExpiresText string `json:"-"`
}

// TrainView is one base branch's merge train: how it lands, and its
// groups in landing order.
type TrainView struct {
	Base    string      `json:"base"`
	Landing string      `json:"landing"`
	Groups  []GroupView `json:"groups"`
}

// GroupView is one group of a train.
type GroupView struct {
	leasedo.Group
	Position  int    `json:"position"`
	Branch    string `json:"branch"`
	BranchURL string `json:"-"`
	// CommitURL links the group's tested commit: the branch's tip moves on
	// as later groups are merged onto the same train branch.
	CommitURL string `json:"-"`
	ShortHead string `json:"-"`
	PRText    string `json:"-"`
}

// QueueItemView is one queue entry: the stored item and how long it waited.
// Position and Head are within its base branch's queue.
type QueueItemView struct {
	leasedo.Item
	Position  int    `json:"position"`
	Head      bool   `json:"head"`
	BaseText  string `json:"-"`
	WaitingMS int64  `json:"waitingMs"`
	URL       string `json:"url"`

	// Group is its merge train group's place and state ("" outside one).
	Group string `json:"group,omitempty"`

	CommitURL  string `json:"-"`
	ShortSha   string `json:"-"`
	Waiting    string `json:"-"`
	BaseHint   string `json:"-"`
	QueuedText string `json:"-"`
	StatusText string `json:"-"`
}

// AuditView is one audit entry, newest first.
type AuditView struct {
	leasedo.AuditEntry
	// ReasonText is its reason, or what its action means when it has none.
	ReasonText string `json:"-"`
	URL        string `json:"-"`
	Ago        string `json:"-"`
	TimeText   string `json:"-"`
	ShortSha   string `json:"-"`
}

// EventView is one event-log entry, newest first.
type EventView struct {
	leasedo.LoggedEvent
	DetailsText string `json:"-"`
	URL         string `json:"-"`
	Ago         string `json:"-"`
	TimeText    string `json:"-"`
}

// DeliveryItemView is one unapplied delivery (its body is never shown).
type DeliveryItemView struct {
	leasedo.Delivery
	Ago          string `json:"-"`
	ReceivedText string `json:"-"`
	NextTry      string `json:"-"`
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func wantJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

func (d *dashboard) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := d.cfg.Clock.Now()
	tracked, err := d.cfg.Store.Tracked(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	ov := Overview{Now: now.UnixMilli(), NowText: timeText(now), Status: d.status(now), Repos: []RepoView{}}
	counts, err := d.cfg.Store.DeliveryCounts(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	ov.Deliveries = DeliveryCounts{Pending: counts[leasedo.DeliveryPending], Failed: counts[leasedo.DeliveryFailed]}
	for _, t := range tracked {
		v, err := d.load(ctx, t, now, false)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		ov.Queued += len(v.Queue)
		ov.Repos = append(ov.Repos, v)
	}
	keys := make([]leasedo.Key, len(tracked))
	for i, t := range tracked {
		keys[i] = t.Key
	}
	if ov.Stats, err = d.loadStats(ctx, keys, now); err != nil {
		d.fail(w, r, err)
		return
	}
	if wantJSON(r) {
		writeJSON(w, http.StatusOK, ov)
		return
	}
	renderPage(w, http.StatusOK, "dashboard", pageData{Title: "Merge queues", Nav: "all queues",
		Refresh: 30, JSON: "/?format=json", Admin: true, DBSize: d.dbSize(), D: ov})
}

func (d *dashboard) repo(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("name")
	asJSON := wantJSON(r)
	if n, ok := strings.CutSuffix(name, ".json"); ok && n != "" {
		name, asJSON = n, true
	}
	k := leasedo.Key{Tenant: r.PathValue("tenant"), Repo: r.PathValue("owner") + "/" + name}
	tracked, err := d.cfg.Store.Tracked(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	i := slices.IndexFunc(tracked, func(t leasedo.Tracked) bool { return t.Key == k })
	if i < 0 {
		if asJSON {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "not tracked: " + k.String()})
			return
		}
		renderPage(w, http.StatusNotFound, "not_found", pageData{Title: "Not found", Admin: true,
			D: "Repository " + k.Repo + " of installation " + k.Tenant + " is not tracked."})
		return
	}
	now := d.cfg.Clock.Now()
	v, err := d.load(ctx, tracked[i], now, true)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if v.Stats, err = d.loadStats(ctx, []leasedo.Key{k}, now); err != nil {
		d.fail(w, r, err)
		return
	}
	if asJSON {
		writeJSON(w, http.StatusOK, v)
		return
	}
	renderPage(w, http.StatusOK, "repo", pageData{Title: k.Repo, Nav: "installation " + k.Tenant,
		Refresh: 30, JSON: v.Link + ".json", Admin: true, DBSize: d.dbSize(), D: v})
}

// trains lists k's merge trains: every base with groups, and every train
// base with entries, with how it lands.
func (d *dashboard) trains(ctx context.Context, k leasedo.Key, items []leasedo.Item) ([]TrainView, error) {
	groups, err := d.cfg.Store.Groups(ctx, k)
	if err != nil {
		return nil, err
	}
	var out []TrainView
	find := func(base string) *TrainView {
		for i := range out {
			if out[i].Base == base {
				return &out[i]
			}
		}
		landing := ""
		if d.cfg.Policies != nil {
			p := d.cfg.Policies().Get(k).For(base)
			if !p.InTrain() && len(groups) == 0 {
				return nil
			}
			landing = p.Train.WithDefaults().Landing
		}
		out = append(out, TrainView{Base: base, Landing: landing, Groups: []GroupView{}})
		return &out[len(out)-1]
	}
	for _, g := range groups {
		t := find(g.Base)
		if t == nil {
			continue
		}
		var prs []string
		for _, n := range g.Numbers() {
			prs = append(prs, fmt.Sprintf("#%d", n))
		}
		t.Groups = append(t.Groups, GroupView{Group: g, Position: len(t.Groups) + 1, Branch: g.Branch(),
			BranchURL: d.web + "/" + k.Repo + "/tree/" + g.Branch(), CommitURL: d.web + "/" + k.Repo + "/commit/" + g.Head, ShortHead: forge.ShortSHA(g.Head), PRText: strings.Join(prs, ", ")})
	}
	for _, it := range items {
		if it.BaseRef != "" && d.cfg.Policies != nil && d.cfg.Policies().Get(k).For(it.BaseRef).InTrain() {
			find(it.BaseRef)
		}
	}
	return out, nil
}

// load reads one repository; full adds every delivery and the event log,
// else only counts and the last few audit entries.
func (d *dashboard) load(ctx context.Context, t leasedo.Tracked, now time.Time, full bool) (RepoView, error) {
	s, k := d.cfg.Store, t.Key
	v := RepoView{Tenant: k.Tenant, Repo: k.Repo, Suspended: t.Suspended, TrackedAt: t.TrackedAt,
		Link:      "/repos/" + url.PathEscape(k.Tenant) + "/" + escapeRepo(k.Repo),
		GitHubURL: d.web + "/" + k.Repo, Anchor: "r-" + k.Tenant + "-" + strings.ReplaceAll(k.Repo, "/", "-"),
		Status: d.status(now), NowText: timeText(now), Queue: []QueueItemView{}, Audit: []AuditView{}}
	items, err := s.Items(ctx, k)
	if err != nil {
		return v, err
	}
	if d.cfg.Policies != nil {
		v.Policy = policyView(d.cfg.Policies(), k)
	}
	// Each base branch has its own queue and head: the first entry that is
	// neither bounced nor blocked (reconcile's sync has the same rule).
	positions, headSeen := map[string]int{}, map[string]bool{}
	for _, it := range items {
		positions[it.BaseRef]++
		q := QueueItemView{Item: it, Position: positions[it.BaseRef], URL: d.prURL(k, it.PRNumber), BaseText: orDash(it.BaseRef),
			CommitURL: d.web + "/" + k.Repo + "/commit/" + it.PRSha, ShortSha: forge.ShortSHA(it.PRSha),
			QueuedText: timeText(msTime(it.QueuedAt)), StatusText: strings.ReplaceAll(it.Status, "_", " ")}
		if it.BaseRef == "" {
			q.BaseText, q.BaseHint = "not given", "fed through POST /event without details.base"
		}
		waited := now.Sub(msTime(it.QueuedAt))
		q.WaitingMS, q.Waiting = max(waited.Milliseconds(), 0), since(waited)
		if !headSeen[it.BaseRef] && it.Status != leasedo.StatusBounced && it.Status != leasedo.StatusBlocked {
			q.Head, headSeen[it.BaseRef] = true, true
		}
		v.Queue = append(v.Queue, q)
	}
	if v.Trains, err = d.trains(ctx, k, items); err != nil {
		return v, err
	}
	inGroup := map[int]string{}
	for _, t := range v.Trains {
		for _, g := range t.Groups {
			for _, n := range g.Numbers() {
				inGroup[n] = fmt.Sprintf("group %d of %d (%s)", g.Position, len(t.Groups), g.State)
			}
		}
	}
	for i := range v.Queue {
		v.Queue[i].Group = inGroup[v.Queue[i].PRNumber]
	}
	ls, err := s.Check(ctx, k)
	if err != nil {
		return v, err
	}
	v.Lease = LeaseView{LeaseState: ls}
	if age, held := leaseAge(ls, s.TTL()); held {
		v.Lease.AgeText = since(age)
	}
	if ls.ExpiresIn != nil {
		v.Lease.ExpiresText = since(time.Duration(*ls.ExpiresIn) * time.Millisecond)
	}
	limit := 100
	pending, err := s.Deliveries(ctx, k, leasedo.DeliveryPending, limit)
	if err != nil {
		return v, err
	}
	failed, err := s.Deliveries(ctx, k, leasedo.DeliveryFailed, limit)
	if err != nil {
		return v, err
	}
	v.Counts = DeliveryCounts{Pending: len(pending), Failed: len(failed)}
	v.PendingText, v.FailedText, v.FailedCount = countText(len(pending), limit), countText(len(failed), limit), len(failed)
	n := leasedo.AuditCap
	if !full {
		n = overviewAudit
	}
	audit, err := s.AuditTail(ctx, k, n)
	if err != nil {
		return v, err
	}
	slices.Reverse(audit) // newest first
	for _, a := range audit {
		at := msTime(a.TS)
		v.Audit = append(v.Audit, AuditView{AuditEntry: a, ReasonText: auditReason(a), URL: d.prURL(k, a.PRNumber), Ago: since(now.Sub(at)),
			TimeText: timeText(at), ShortSha: forge.ShortSHA(a.PRSha)})
	}
	v.More = !full
	if !full {
		return v, nil
	}
	for _, dl := range pending {
		v.Pending = append(v.Pending, deliveryView(dl, now))
	}
	for _, dl := range failed {
		v.Failed = append(v.Failed, deliveryView(dl, now))
	}
	events, err := s.Events(ctx, k)
	if err != nil {
		return v, err
	}
	slices.Reverse(events)
	for _, e := range events {
		at := msTime(e.TS)
		v.Events = append(v.Events, EventView{LoggedEvent: e, DetailsText: string(e.Details), URL: d.prURL(k, e.PRNumber), Ago: since(now.Sub(at)), TimeText: timeText(at)})
	}
	return v, nil
}

// leaseAge is how long a lease has been held: check() gives the age of a
// stale lease, and the time left of an active one (age = TTL - left).
func leaseAge(ls leasedo.LeaseState, ttl time.Duration) (time.Duration, bool) {
	switch {
	case ls.AgeMS != nil:
		return time.Duration(*ls.AgeMS) * time.Millisecond, true
	case ls.Locked && ls.ExpiresIn != nil:
		return max(ttl-time.Duration(*ls.ExpiresIn)*time.Millisecond, 0), true
	case ls.Locked || ls.Stale:
		return 0, true
	}
	return 0, false
}

func deliveryView(dl leasedo.Delivery, now time.Time) DeliveryItemView {
	dl.Body = nil
	v := DeliveryItemView{Delivery: dl, Ago: since(now.Sub(dl.ReceivedAt)), ReceivedText: timeText(dl.ReceivedAt), NextTry: "—"}
	if dl.State == leasedo.DeliveryPending {
		if wait := dl.NextTryAt.Sub(now); wait > 0 {
			v.NextTry = "in " + since(wait)
		} else {
			v.NextTry = "now"
		}
	}
	return v
}

func countText(n, limit int) string {
	if n >= limit {
		return strconv.Itoa(limit) + "+"
	}
	return strconv.Itoa(n)
}

// dbSize is the database's size on disk as the footer shows it, "" when
// it cannot be read.
func (d *dashboard) dbSize() string {
	n, err := d.cfg.Store.DB().Size()
	if err != nil {
		return ""
	}
	if n < 1_000_000 {
		return fmt.Sprintf("%d kB", (n+999)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

func (d *dashboard) prURL(k leasedo.Key, pr int) string {
	if pr <= 0 {
		return ""
	}
	return d.web + "/" + k.Repo + "/pull/" + strconv.Itoa(pr)
}

func (d *dashboard) status(now time.Time) DashboardStatus {
	st := d.cfg.Status()
	if st.CronLastSuccess > 0 {
		st.CronLastText = timeText(msTime(st.CronLastSuccess))
	}
	for i := range st.AuthFailures {
		st.AuthFailures[i].SinceText = timeText(msTime(st.AuthFailures[i].Since))
	}
	return st
}

func escapeRepo(repo string) string {
	owner, name, _ := strings.Cut(repo, "/")
	return url.PathEscape(owner) + "/" + url.PathEscape(name)
}

func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	d.cfg.Logger.Error().Err(err).Str("path", r.URL.Path).Msg("a dashboard page failed and answered 500")
	if wantJSON(r) || strings.HasSuffix(r.URL.Path, ".json") {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error; see the server log"})
		return
	}
	http.Error(w, "internal error; see the server log", http.StatusInternalServerError)
}

// auditReason is an audit row's reason, or what its action means when it
// was written without one (a join, a gate that passed).
func auditReason(a leasedo.AuditEntry) string {
	if a.Reason != "" {
		return a.Reason
	}
	switch a.Action {
	case leasedo.AuditJoin:
		return "joined the queue (trigger label, GitHub auto-merge or @mergegate queue)"
	case leasedo.AuditGateSuccess:
		return "its required checks passed"
	case leasedo.AuditReevaluate:
		return "a new head or base: read again"
	case leasedo.AuditMerge:
		return "merged"
	case leasedo.AuditLeave:
		return "left the queue"
	}
	return a.Action
}
