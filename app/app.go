package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/reconcile"
	"github.com/mergegate/mergegate/webhook"
)

// Config is everything `mergegate serve` is told (SPEC §1).
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
	RecordDir      string
	Clock          leasedo.Clock
}

// Validate refuses a configuration that would be unsafe or cannot work.
func (c Config) Validate() error {
	if c.AdminToken == "" && !IsLoopback(c.AdminAddr) {
		return fmt.Errorf("--admin-addr %s is not a loopback address and no --admin-token is set: anyone who reaches it could drive the queue; set MERGEGATE_ADMIN_TOKEN or listen on 127.0.0.1", c.AdminAddr)
	}
	switch c.MergeMethod {
	case forge.MethodMerge, forge.MethodSquash, forge.MethodRebase:
	default:
		return fmt.Errorf("--merge-method %q: want merge, squash or rebase", c.MergeMethod)
	}
	if c.LeaseTTL <= 0 || c.LeaseDead < c.LeaseTTL {
		return fmt.Errorf("--lease-ttl %s and --lease-dead %s: want 0 < ttl <= dead", c.LeaseTTL, c.LeaseDead)
	}
	if c.ReconcileEvery < time.Second {
		return fmt.Errorf("--reconcile-every %s: want at least 1s", c.ReconcileEvery)
	}
	if (c.AppID == 0) != (c.PrivateKeyPath == "") {
		return errors.New("--app-id and --private-key go together: set both (or neither, to run without GitHub)")
	}
	return nil
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
}

// New opens the database (migrating it) and builds every part; Start runs them.
func New(ctx context.Context, cfg Config, log zerolog.Logger) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = leasedo.SystemClock{}
	}
	a := &App{cfg: cfg, log: log, Metrics: NewMetrics()}
	db, err := leasedo.Open(ctx, cfg.DB, leasedo.Options{Sync: cfg.Sync})
	if err != nil {
		return nil, err
	}
	a.DB = db
	a.Store = leasedo.NewStore(db, leasedo.Config{TTL: cfg.LeaseTTL, Dead: cfg.LeaseDead, Clock: cfg.Clock})
	a.Inbox = a.Store.NewInbox(0)

	if cfg.AppID != 0 {
		key, err := os.ReadFile(cfg.PrivateKeyPath)
		if err != nil {
			a.closeStore()
			return nil, fmt.Errorf("read --private-key: %w", err)
		}
		a.Forge, err = forge.New(forge.Config{BaseURL: cfg.GitHubURL, AppID: cfg.AppID, PrivateKey: key,
			Clock: cfg.Clock.Now})
		if err != nil {
			a.closeStore()
			return nil, fmt.Errorf("GitHub App: %w", err)
		}
	} else {
		log.Warn().Msg("no GitHub App id and key: deliveries are stored and applied to queues, but gates wait and nothing merges")
	}
	opts := webhook.Options{TriggerLabel: cfg.TriggerLabel, AutoMergeTrigger: cfg.AutoMerge}
	a.Reconciler = reconcile.New(reconcile.Config{
		Store: a.Store, Forge: a.Forge, Options: opts, Logger: log,
		OnChange: func(k leasedo.Key) { a.Engine.Kick(k) },
	})
	a.Engine = NewEngine(EngineConfig{
		Store: a.Store, Forge: a.Forge, Options: opts, MergeMethod: cfg.MergeMethod,
		Clock: cfg.Clock, Logger: log, Metrics: a.Metrics,
		OnTracked: func(keys []leasedo.Key) {
			for _, k := range keys {
				go func() {
					if _, err := a.Reconciler.Pass(context.Background(), k); err != nil && !leasedo.IsLocked(err) {
						log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("resync of a newly tracked repository")
					}
				}()
			}
		},
	})
	a.Cron, err = reconcile.NewCron(a.Reconciler, cfg.ReconcileEvery, log)
	if err != nil {
		a.closeStore()
		return nil, err
	}
	return a, nil
}

// PublicHandler is the public listener: /webhook and /healthz.
func (a *App) PublicHandler() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz(a.Store))
	if a.cfg.WebhookSecret == "" {
		a.log.Warn().Msg("no webhook secret: POST /webhook is not served until one is set")
		return mux, nil
	}
	secrets, err := webhook.ParseSecrets(a.cfg.WebhookSecret)
	if err != nil {
		return nil, fmt.Errorf("--webhook-secret: %w", err)
	}
	var rec *Recorder
	if a.cfg.RecordDir != "" {
		if rec, err = NewRecorder(a.cfg.RecordDir); err != nil {
			return nil, err
		}
	}
	h := webhook.NewHandler(webhook.HandlerConfig{
		Secrets: secrets, Inbox: a.Inbox, Clock: a.cfg.Clock, Logger: a.log,
		OnStored: func(d leasedo.Delivery) {
			if rec != nil {
				if err := rec.Record(d); err != nil {
					a.log.Error().Err(err).Str("delivery", d.ID).Msg("record delivery")
				}
			}
			a.Engine.Kick(leasedo.Key{Tenant: d.Tenant, Repo: d.Repo})
		},
	})
	mux.Handle("/webhook", a.Metrics.instrumentWebhook(h))
	return mux, nil
}

// AdminHandler is the admin listener.
func (a *App) AdminHandler() http.Handler {
	return NewAdminHandler(AdminConfig{
		Store: a.Store, Engine: a.Engine, Reconciler: a.Reconciler, Token: a.cfg.AdminToken,
		Metrics: a.Metrics, Logger: a.log, Dashboard: NewDashboard(a.Store, a.Metrics),
	})
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
	a.public = &http.Server{Handler: pub, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second}
	a.admin = &http.Server{Handler: a.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	if err := a.Engine.Start(); err != nil {
		return err
	}
	a.Cron.Start()
	go a.serve(a.public, a.publicLn, "public")
	go a.serve(a.admin, a.adminLn, "admin")
	a.log.Info().Str("addr", a.publicLn.Addr().String()).Str("admin_addr", a.adminLn.Addr().String()).
		Str("db", a.cfg.DB).Bool("github", a.Forge != nil).Msg("mergegate listening")
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
	if a.Cron != nil {
		a.Cron.Stop(ctx)
	}
	a.Engine.Stop()
	a.closeStore()
	a.log.Info().Msg("mergegate stopped")
	return errors.Join(errs...)
}

func (a *App) closeStore() {
	a.closeOnce.Do(func() {
		a.Inbox.Close()
		if err := a.DB.Close(); err != nil {
			a.log.Error().Err(err).Msg("close database")
		}
	})
}
