package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/progress"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/reconcile"
	"github.com/mergegate/mergegate/rules"
	"github.com/mergegate/mergegate/webhook"
)

// Config is everything `mergegate serve` is told (README, Configuration).
type Config struct {
	Addr           string
	AdminAddr      string
	DB             string
	Sync           string // normal or full
	WebhookSecret  string // comma-separated
	AppID          int64
	PrivateKeyPath string
	GitHubURL      string
	AdminToken     string
	ReconcileEvery time.Duration
	LeaseTTL       time.Duration
	LeaseDead      time.Duration
	TriggerLabel   string
	AutoMerge      bool // GitHub auto-merge is a trigger
	MergeMethod    string
	// CheckTimeout bounces a head whose required checks have not concluded
	// this long after its push (0: the default hour; negative: never).
	CheckTimeout time.Duration
	RecordDir    string
	// Replica names this process among several on one database: leases
	// it holds say "<replica>/worker" (held_by), the start line says it,
	// and GitHub's User-Agent names it. Default: host name and process id.
	Replica   string
	Retention time.Duration // processed deliveries kept this long (0: 72h)
	// BodyRetention: the payloads of applied deliveries are kept this long
	// (0: 24h; at most Retention); their rows, events and audit stay.
	BodyRetention time.Duration
	Clock         leasedo.Clock

	// RedeliverBudget is the most redeliveries the sweep asks GitHub for
	// in one cron pass (redeliver.go); 0 turns the sweep off.
	RedeliverBudget int

	// WritesPerMinute and WritesPerHour bound each installation's
	// content-generating requests, shared by the replicas (forge's write
	// budget): 0 is forge's default (60 and 450), negative no bound.
	WritesPerMinute, WritesPerHour int
	// DashboardURL is where people reach the dashboard; check runs link
	// their repository's page there ("": no link).
	DashboardURL string

	// Version and Commit name the build on the start line.
	Version, Commit string

	// The listeners' timeouts; zero: publicTimeouts and adminTimeouts.
	publicTimeouts, adminTimeouts listenerTimeouts
}

// listenerTimeouts are an http.Server's timeouts. net/http counts
// ReadTimeout from the connection's accept to the end of the body, and
// WriteTimeout from the end of the request's headers to the end of the
// answer, so WriteTimeout must leave room for the body to arrive first.
type listenerTimeouts struct {
	readHeader, read, write, idle time.Duration
}

var (
	// publicTimeouts: a delivery's body may take up to 60 s to arrive (25
	// MiB on a slow link); storing and answering it takes milliseconds,
	// and GitHub gives up after 10 s anyway.
	publicTimeouts = listenerTimeouts{readHeader: 10 * time.Second, read: 60 * time.Second, write: 75 * time.Second, idle: 60 * time.Second}
	// adminTimeouts: bodies are at most 1 MiB; POST /reconcile resyncs a
	// repository from GitHub (several pages at GitHub's pace), so the
	// answer may take a while.
	adminTimeouts = listenerTimeouts{readHeader: 10 * time.Second, read: 30 * time.Second, write: 2 * time.Minute, idle: 2 * time.Minute}
)

func (t listenerTimeouts) or(def listenerTimeouts) listenerTimeouts {
	if t == (listenerTimeouts{}) {
		return def
	}
	return t
}

// maxHeaderBytes bounds a request's headers on both listeners (Go's
// default is 1 MiB): GitHub's delivery headers are about 1 KiB. Over it,
// 431 before anything is read.
const maxHeaderBytes = 32 << 10

func (t listenerTimeouts) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle,
		MaxHeaderBytes: maxHeaderBytes}
}

// MinAdminToken is the shortest admin token accepted on an admin listener
// off loopback, which anyone on the network can try tokens against.
const MinAdminToken = 16

// Validate refuses a configuration that would be unsafe or cannot work.
func (c Config) Validate() error {
	if c.AdminToken == "" && !IsLoopback(c.AdminAddr) {
		return fmt.Errorf("--admin-addr %s is not a loopback address and no --admin-token is set: anyone who reaches it could drive the queue; set MERGEGATE_ADMIN_TOKEN or listen on 127.0.0.1", c.AdminAddr)
	}
	if n := len(c.AdminToken); n < MinAdminToken && !IsLoopback(c.AdminAddr) {
		return fmt.Errorf("--admin-token (MERGEGATE_ADMIN_TOKEN) is %d characters long: an admin listener off loopback (--admin-addr %s) needs one of at least %d (openssl rand -hex 16)", n, c.AdminAddr, MinAdminToken)
	}
	if err := forge.CheckMergeMethod(c.MergeMethod); err != nil {
		return fmt.Errorf("--merge-method %q: %w", c.MergeMethod, err)
	}
	if c.LeaseTTL <= 0 || c.LeaseDead < c.LeaseTTL {
		return fmt.Errorf("--lease-ttl %s and --lease-dead %s: want 0 < ttl <= dead", c.LeaseTTL, c.LeaseDead)
	}
	if c.ReconcileEvery < time.Second {
		return fmt.Errorf("--reconcile-every %s: want at least 1s", c.ReconcileEvery)
	}
	if strings.ContainsFunc(c.Replica, func(r rune) bool { return r < 0x21 || r > 0x7e }) || len(c.Replica) > 64 {
		return fmt.Errorf("--replica %q: want at most 64 printable ASCII characters without spaces (it is in leases, logs and GitHub's User-Agent)", c.Replica)
	}
	if c.RedeliverBudget < 0 {
		return fmt.Errorf("--redeliver-budget %d: want 0 (off) or more", c.RedeliverBudget)
	}
	if c.DashboardURL != "" {
		if u, err := url.Parse(c.DashboardURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("--dashboard-url %q: want an http(s) URL, like https://mergegate.example.com", c.DashboardURL)
		}
	}
	if (c.AppID == 0) != (c.PrivateKeyPath == "") {
		return errors.New("--app-id and --private-key go together: set both (or neither, to run without GitHub)")
	}
	return nil
}

// DefaultReplica is a process's name when --replica is not set: the host
// name and the process id, unique among processes on one database.
func DefaultReplica() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "mergegate"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// App is a running mergegate: store, inbox, engine, cron and listeners.
type App struct {
	cfg        Config
	log        zerolog.Logger
	DB         *leasedo.DB
	Store      *leasedo.Store
	Inbox      *leasedo.Inbox
	Forge      *forge.Client
	Engine     *Engine
	Reconciler *reconcile.Reconciler
	Cron       *reconcile.Cron
	Metrics    *Metrics

	public, admin     *http.Server
	publicLn, adminLn net.Listener
	closeOnce         sync.Once
	unlock            func() // gives back the SQLite file's lock (dblock.go)

	// policies are the repositories' own policies (wire builds them; the
	// set-up flow's wire replaces them).
	policies atomic.Pointer[reconcile.Policies]

	// resyncs counts the resyncs of newly tracked repositories under way
	// (see wire's OnTracked): work that Busy reports beside the engine's.
	resyncs atomic.Int64

	// The set-up flow (setup.go) replaces Forge, Engine, Reconciler and
	// Cron at run time, under mu; the listeners serve through swappable
	// handlers so the new ones take over without a restart.
	mu       sync.Mutex
	started  bool
	stopped  bool
	cluster  *cluster    // this replica among those on the database (cluster.go)
	secrets  string      // webhook secrets in use (flags, env or credentials file)
	rec      *Recorder   // --record
	setup    *setupFlow  // nil when the App had credentials at start
	webhookH swapHandler // POST /webhook; 404 while there is no secret
	adminH   swapHandler
}

// New opens the database (migrating it) and builds every part; Start runs them.
func New(ctx context.Context, cfg Config, log zerolog.Logger) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = leasedo.SystemClock{}
	}
	if cfg.Replica == "" {
		cfg.Replica = DefaultReplica()
	}
	a := &App{cfg: cfg, log: log, Metrics: NewMetrics()}
	unlock, err := lockDB(cfg.DB, cfg.Replica)
	if err != nil {
		return nil, err
	}
	a.unlock = unlock
	db, err := leasedo.Open(ctx, cfg.DB, leasedo.Options{Sync: cfg.Sync, OnConvert: LogConversion(log, cfg.DB)})
	if err != nil {
		unlock()
		return nil, err
	}
	a.DB = db
	a.Store = leasedo.NewStore(db, leasedo.Config{TTL: cfg.LeaseTTL, Dead: cfg.LeaseDead, Clock: cfg.Clock})
	a.Inbox = a.Store.NewInbox(0)

	creds, err := a.resolveCredentials()
	if err != nil {
		a.closeStore()
		return nil, err
	}
	a.secrets = creds.WebhookSecret
	if creds.AppID != 0 {
		if a.Forge, err = a.newForge(creds.AppID, []byte(creds.PrivateKey)); err != nil {
			a.closeStore()
			return nil, err
		}
	} else {
		if db.Postgres() {
			log.Warn().Msg("no GitHub App id and key: deliveries are stored and applied to queues, but gates wait and nothing merges. " + postgresRefusal)
		} else {
			log.Warn().Msg("no GitHub App id and key: deliveries are stored and applied to queues, but gates wait and nothing merges; the public listener serves the set-up page")
		}
		a.setup = newSetupFlow(a)
	}
	if a.Engine, a.Reconciler, a.Cron, err = a.wire(a.Forge); err != nil {
		a.closeStore()
		return nil, err
	}
	a.Metrics.attach(a)
	return a, nil
}

// LogConversion logs the one rewrite of a database created before
// incremental auto-vacuum (leasedo.Conversion), before and after.
func LogConversion(log zerolog.Logger, path string) func(leasedo.Conversion) {
	return logConversion(log, path, time.Now)
}

// logConversion is LogConversion on the clock now: while the rewrite
// runs, a line every 5 s with the bytes written of the file's and an
// estimate of the time left.
func logConversion(log zerolog.Logger, path string, now func() time.Time) func(leasedo.Conversion) {
	var meter *progress.Meter
	off := false
	return func(c leasedo.Conversion) {
		switch {
		case c.Running:
			if meter != nil {
				meter.Set(c.Written)
			}
		case !c.Done:
			meter = progress.New(logLines{log: log, db: path}, "rewriting the database (VACUUM)", c.Bytes, progress.Bytes, progress.Options{TTY: &off, Now: now})
			log.Warn().Str("db", path).Int64("bytes", c.Bytes).
				Msg("rewriting the database once so that free space goes back to the filesystem from now on (VACUUM): it takes about 20 s per GB and needs as much free space as the database takes")
		case c.Err != nil:
			log.Error().Err(c.Err).Str("db", path).Int64("took_ms", c.Took.Milliseconds()).Msg("rewriting the database failed; it is as it was")
		default:
			log.Warn().Str("db", path).Int64("bytes_before", c.Bytes).Int64("bytes", c.BytesAfter).
				Int64("took_ms", c.Took.Milliseconds()).Msg("database rewritten: free pages are given back from now on")
		}
	}
}

// logLines logs each line a progress.Meter writes.
type logLines struct {
	log zerolog.Logger
	db  string
}

func (l logLines) Write(b []byte) (int, error) {
	l.log.Warn().Str("db", l.db).Msg(strings.TrimSpace(string(b)))
	return len(b), nil
}

// wire builds the engine, the reconciler and the cron over fc (nil: no
// GitHub). The callbacks capture the new parts, not the App's fields, so
// that parts built by the set-up flow never call the ones they replace.
func (a *App) wire(fc *forge.Client) (*Engine, *reconcile.Reconciler, *reconcile.Cron, error) {
	cfg, log := a.cfg, a.log
	opts := rules.Options{TriggerLabel: cfg.TriggerLabel, AutoMergeTrigger: cfg.AutoMerge}
	timeout := cfg.CheckTimeout
	switch {
	case timeout == 0:
		timeout = reconcile.DefaultCheckTimeout
	case timeout < 0:
		timeout = 0
	}
	defaults := rules.Policy{Triggers: opts, MergeMethod: cfg.MergeMethod, CheckTimeout: timeout}
	// Each repository's own .github/mergegate.yml over the flags; known
	// from the store at once, so that the webhook path (which may not call
	// GitHub) decides each repository's joins under its own triggers.
	policies := reconcile.NewPolicies(a.Store, fc, defaults, cfg.Clock, log)
	if err := policies.Load(context.Background()); err != nil {
		return nil, nil, nil, err
	}
	opts.For = policies.Options
	a.policies.Store(policies)
	var syncer *reconcile.Syncer
	var eng *Engine
	if fc != nil {
		syncer = reconcile.NewSyncer(reconcile.SyncConfig{
			Store: a.Store, Forge: fc, Clock: cfg.Clock, Logger: log, Observer: a.Metrics, DashboardURL: cfg.DashboardURL,
			Policy: defaults, Policies: policies,
			// The engine syncs a repository again at its nearest
			// check_timeout deadline; the cron's start-up pass reports
			// every repository's, after a restart too.
			OnDeadline: func(k leasedo.Key, at time.Time) { eng.Deadline(k, at) },
		})
	}
	rec := reconcile.New(reconcile.Config{
		Store: a.Store, Forge: fc, Syncer: syncer, Options: opts, Logger: log, Clock: a.cfg.Clock,
		By:       cfg.Replica + "/cron",
		OnChange: func(k leasedo.Key) { eng.Kick(k) },
	})
	eng = NewEngine(EngineConfig{
		Store: a.Store, Syncer: syncer, Options: opts, By: cfg.Replica + "/worker",
		Clock: cfg.Clock, Logger: log, Metrics: a.Metrics, Retention: cfg.Retention,
		BodyRetention: cfg.BodyRetention,
		OnTracked: func(keys []leasedo.Key) {
			for _, k := range keys {
				a.resyncs.Add(1)
				go func() {
					defer a.resyncs.Add(-1)
					if _, err := rec.Pass(context.Background(), k); err != nil && !leasedo.IsLocked(err) {
						log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("resync of a newly tracked repository")
					}
				}()
			}
		},
	})
	cron, err := reconcile.NewCron(rec, cfg.ReconcileEvery, log)
	if err != nil {
		return nil, nil, nil, err
	}
	if rd := newRedeliverer(fc, a.Store, cfg, log, a.Metrics); rd != nil {
		cron.Before(rd.run)
	}
	return eng, rec, cron, nil
}

// PublicHandler is the public listener: /webhook, /healthz, and the
// set-up page while the App has no credentials.
func (a *App) PublicHandler() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", publicHealthz(a.Store)) // the reason is on the admin listener
	if a.cfg.RecordDir != "" && a.rec == nil {
		var err error
		if a.rec, err = NewRecorder(a.cfg.RecordDir); err != nil {
			return nil, err
		}
	}
	a.mu.Lock()
	secrets, eng := a.secrets, a.Engine
	a.mu.Unlock()
	h, err := a.webhookHandler(secrets, eng)
	if err != nil {
		return nil, err
	}
	if h == nil {
		a.log.Warn().Msg("no webhook secret: POST /webhook is not served until one is set")
	}
	a.webhookH.set(h)
	mux.Handle("/webhook", &a.webhookH)
	if a.setup != nil {
		a.setup.routes(mux)
	}
	return mux, nil
}

// webhookHandler is POST /webhook verified with secrets, kicking eng; nil
// when there is no secret.
func (a *App) webhookHandler(secrets string, eng *Engine) (http.Handler, error) {
	if secrets == "" {
		return nil, nil
	}
	parsed, err := webhook.ParseSecrets(secrets)
	if err != nil {
		return nil, fmt.Errorf("--webhook-secret: %w", err)
	}
	rec := a.rec
	h := webhook.NewHandler(webhook.HandlerConfig{
		Secrets: parsed, Inbox: a.Inbox, Clock: a.cfg.Clock, Logger: a.log,
		OnStored: func(d leasedo.Delivery) {
			if rec != nil {
				if err := rec.Record(d); err != nil {
					a.log.Error().Err(err).Str("delivery", d.ID).Msg("writing the delivery to the --record folder failed; it is stored and applied all the same")
				}
			}
			eng.Kick(leasedo.Key{Tenant: d.Tenant, Repo: d.Repo})
		},
	})
	return a.Metrics.instrumentWebhook(h), nil
}

// AdminHandler is the admin listener.
func (a *App) AdminHandler() http.Handler {
	a.mu.Lock()
	eng, rec := a.Engine, a.Reconciler
	a.mu.Unlock()
	return a.adminHandler(eng, rec)
}

func (a *App) adminHandler(eng *Engine, rec *reconcile.Reconciler) http.Handler {
	return NewAdminHandler(AdminConfig{
		Store: a.Store, Engine: eng, Reconciler: rec, Token: a.cfg.AdminToken,
		Metrics: a.Metrics, Logger: a.log, Dashboard: a.dashboard(), Addr: a.cfg.AdminAddr,
		Policies: a.policies.Load,
	})
}

// StartEngine starts the engine alone: no listener, no cron. Deliveries
// are handed to PublicHandler in-process and applied as `serve` applies
// them, and nothing runs on a timer of the App's own (offline replay).
// Shutdown stops it.
func (a *App) StartEngine() error {
	a.mu.Lock()
	a.started = true
	eng := a.Engine
	a.mu.Unlock()
	return eng.Start()
}

// Busy is the work under way: engine workers with a pass running or a
// wake-up pending, and resyncs of newly tracked repositories. 0 with no
// delivery pending means the App has finished with what it was given.
func (a *App) Busy() int {
	a.mu.Lock()
	eng := a.Engine
	a.mu.Unlock()
	return eng.Busy() + int(a.resyncs.Load())
}

// Start listens on both addresses and starts the engine and the cron.
func (a *App) Start() error {
	pub, err := a.PublicHandler()
	if err != nil {
		return err
	}
	if a.publicLn, err = net.Listen("tcp", a.cfg.Addr); err != nil {
		return fmt.Errorf("listen --addr %s: %w", a.cfg.Addr, err)
	}
	if a.adminLn, err = net.Listen("tcp", a.cfg.AdminAddr); err != nil {
		a.publicLn.Close()
		return fmt.Errorf("listen --admin-addr %s: %w", a.cfg.AdminAddr, err)
	}
	a.adminH.set(a.AdminHandler())
	a.public = a.cfg.publicTimeouts.or(publicTimeouts).server(pub)
	a.admin = a.cfg.adminTimeouts.or(adminTimeouts).server(&a.adminH)
	a.mu.Lock()
	a.started = true
	eng, cron, github := a.Engine, a.Cron, a.Forge != nil
	a.mu.Unlock()
	a.cluster = a.startCluster()
	if err := eng.Start(); err != nil {
		return err
	}
	cron.Start()
	go a.serve(a.public, a.publicLn, "public")
	go a.serve(a.admin, a.adminLn, "admin")
	// The start line says which build runs, where, on which database and,
	// with --record, into which folder it records (no record key: it does
	// not record).
	start := withNonEmpty(a.log.With(), "version", a.cfg.Version, "commit", a.cfg.Commit).
		Str("addr", a.publicLn.Addr().String()).Str("admin_addr", a.adminLn.Addr().String()).Str("db", a.Store.DB().Describe()).Str("replica", a.cfg.Replica)
	start = withNonEmpty(start, "record", a.cfg.RecordDir)
	slog := start.Logger()
	slog.Info().Bool("github", github).Bool("setup", a.setup != nil).Msg("mergegate listening")
	return nil
}

// Addrs are the bound addresses (useful with port 0).
func (a *App) Addrs() (public, admin string) {
	return a.publicLn.Addr().String(), a.adminLn.Addr().String()
}

func (a *App) serve(s *http.Server, ln net.Listener, name string) {
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error().Err(err).Str("listener", name).Msg("listener stopped")
	}
}

// Shutdown stops taking requests, lets in-flight deliveries commit, stops
// the cron and the engine (which release only the leases they hold), and
// closes the database.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range []*http.Server{a.public, a.admin} {
		if s != nil {
			if err := s.Shutdown(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	a.mu.Lock() // waits for a set-up switch under way; none starts after
	a.stopped = true
	eng, cron := a.Engine, a.Cron
	a.mu.Unlock()
	if cron != nil {
		cron.Stop(ctx)
	}
	eng.Stop()
	a.cluster.stop(ctx)
	a.closeStore()
	a.log.Info().Msg("mergegate stopped")
	return errors.Join(errs...)
}

func (a *App) closeStore() {
	a.closeOnce.Do(func() {
		a.Inbox.Close()
		if err := a.DB.Close(); err != nil {
			a.log.Error().Err(err).Msg("closing the database failed")
		}
		a.unlock()
	})
}
