package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mergegate/mergegate/forge"
)

// Credentials are what the App manifest flow gives: the App's id, private
// key and webhook secret. They are stored in a file of mode 0600 beside the
// SQLite database (CredentialsPath; on PostgreSQL, nowhere: the flags give
// them) and never logged.
type Credentials struct {
	AppID         int64     `json:"app_id"`
	Slug          string    `json:"slug,omitempty"`
	Name          string    `json:"name,omitempty"`
	Owner         string    `json:"owner,omitempty"`
	HTMLURL       string    `json:"html_url,omitempty"`
	GitHubURL     string    `json:"github_url,omitempty"` // the REST base it was registered on
	PrivateKey    string    `json:"pem"`
	WebhookSecret string    `json:"webhook_secret"`
	CreatedAt     time.Time `json:"created_at"`
}

// String never shows the key or the secret, so that a stray %v cannot
// leak them.
func (c Credentials) String() string {
	return fmt.Sprintf("GitHub App %d (%s)", c.AppID, c.Slug)
}

// CredentialsPath is the credentials file beside the database:
// /var/lib/mergegate/mergegate.db → /var/lib/mergegate/mergegate.credentials.json.
func CredentialsPath(db string) string {
	dir, base := filepath.Split(db)
	if ext := filepath.Ext(base); ext != "" && ext != base {
		base = strings.TrimSuffix(base, ext)
	}
	return filepath.Join(dir, base+".credentials.json")
}

// ReadCredentials reads a credentials file and checks it is complete.
func ReadCredentials(path string) (Credentials, error) {
	var c Credentials
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("credentials file %s: not valid JSON: %w", path, err)
	}
	switch {
	case c.AppID <= 0:
		return c, fmt.Errorf("credentials file %s: app_id missing", path)
	case c.PrivateKey == "":
		return c, fmt.Errorf("credentials file %s: pem missing", path)
	case c.WebhookSecret == "":
		return c, fmt.Errorf("credentials file %s: webhook_secret missing", path)
	}
	return c, nil
}

// WriteCredentials writes c to path with mode 0600, atomically (a
// temporary file in the same folder, synced, renamed into place). An
// existing file is never overwritten: it holds an App's only copy of its
// key.
func WriteCredentials(path string, c Credentials) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("credentials file %s already exists; not overwriting it", path)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".mergegate-credentials-*.tmp") // mode 0600
	if err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) //nolint:errcheck // gone after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write credentials: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write credentials: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck // best effort: the rename is durable on most filesystems anyway
		d.Close()
	}
	return nil
}

// resolveCredentials picks the App's credentials: flags and environment
// first, then the credentials file for what they leave unset (the App id
// and key together, the webhook secret alone).
func (a *App) resolveCredentials() (Credentials, error) {
	c := Credentials{AppID: a.cfg.AppID, WebhookSecret: a.cfg.WebhookSecret}
	if c.AppID != 0 {
		key, err := os.ReadFile(a.cfg.PrivateKeyPath)
		if err != nil {
			return c, fmt.Errorf("read --private-key: %w", err)
		}
		c.PrivateKey = string(key)
	}
	if (c.AppID != 0 && c.WebhookSecret != "") || a.DB.Postgres() {
		return c, nil // on PostgreSQL there is no file: --db is a connection string, not a path
	}
	path := CredentialsPath(a.cfg.DB)
	f, err := ReadCredentials(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		a.log.Warn().Str("file", path).Str("mode", st.Mode().Perm().String()).
			Msg("the credentials file can be read by other users: chmod 600 it")
	}
	var using []string
	if c.AppID == 0 {
		c.AppID, c.PrivateKey = f.AppID, f.PrivateKey
		using = append(using, "app id", "private key")
	}
	if c.WebhookSecret == "" {
		c.WebhookSecret = f.WebhookSecret
		using = append(using, "webhook secret")
	}
	c.Slug, c.Name, c.HTMLURL = f.Slug, f.Name, f.HTMLURL
	a.log.Info().Str("file", path).Int64("app_id", c.AppID).Strs("using", using).
		Msg("GitHub App credentials loaded from the credentials file (flags and environment win)")
	if f.GitHubURL != "" && strings.TrimRight(f.GitHubURL, "/") != strings.TrimRight(a.cfg.GitHubURL, "/") {
		a.log.Warn().Str("file", path).Str("registered_on", f.GitHubURL).Str("github_url", a.cfg.GitHubURL).
			Msg("the credentials were registered on another GitHub than --github-url")
	}
	return c, nil
}

// newForge is the GitHub client of App appID, its calls counted by the
// metrics.
func (a *App) newForge(appID int64, key []byte) (*forge.Client, error) {
	fc, err := forge.New(forge.Config{BaseURL: a.cfg.GitHubURL, AppID: appID, PrivateKey: key,
		Clock: a.cfg.Clock.Now, UserAgent: "mergegate (replica " + a.cfg.Replica + ")", Transport: a.Metrics.githubTransport(nil), Logger: a.log,
		WritesPerMinute: a.cfg.WritesPerMinute, WritesPerHour: a.cfg.WritesPerHour})
	if err != nil {
		return nil, fmt.Errorf("GitHub App: %w", err)
	}
	return fc, nil
}

// activate switches a running App from "no GitHub" to the App c, without
// a restart: a new forge client, engine, reconciler and cron replace the
// old ones (which are stopped first, releasing only their own leases), and
// the listeners' /webhook and admin handlers are swapped. Deliveries that
// arrive meanwhile are stored as usual and picked up by the new engine's
// Start.
func (a *App) activate(c Credentials) error {
	fc, err := a.newForge(c.AppID, []byte(c.PrivateKey))
	if err != nil {
		return err
	}
	secrets := c.WebhookSecret
	if a.cfg.WebhookSecret != "" {
		secrets = a.cfg.WebhookSecret + "," + c.WebhookSecret // both verify
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return errors.New("mergegate is shutting down")
	}
	eng, rec, cron, err := a.wire(fc)
	if err != nil {
		return err
	}
	wh, err := a.webhookHandler(secrets, eng)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if a.Cron != nil {
		if err := a.Cron.Stop(ctx); err != nil {
			a.log.Warn().Err(err).Msg("stop the reconcile cron before switching to the GitHub App")
		}
	}
	a.Engine.Stop()
	a.Forge, a.Engine, a.Reconciler, a.Cron, a.secrets = fc, eng, rec, cron, secrets
	a.webhookH.set(wh)
	a.adminH.set(a.adminHandler(eng, rec))
	if a.started {
		if err := eng.Start(); err != nil {
			a.log.Error().Err(err).Msg("start the engine; pending deliveries wait for the next sweep")
		}
		cron.Start()
	}
	a.log.Info().Int64("app_id", c.AppID).Str("slug", c.Slug).Msg("GitHub App credentials in use: serving webhooks, gates and merges")
	return nil
}

// current returns the parts the set-up flow may replace.
func (a *App) current() (*forge.Client, *Engine, cronStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var cs cronStatus
	if a.Cron != nil {
		cs = a.Cron
	}
	return a.Forge, a.Engine, cs
}

// cronStatus is what the metrics and the dashboard read of the cron.
type cronStatus interface {
	LastSuccess() time.Time
	LastDuration() time.Duration
	Runs() int
}

// swapHandler serves through a handler that can be replaced at run time;
// none (404) until one is set.
type swapHandler struct{ p atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) {
	if h == nil {
		s.p.Store(nil)
		return
	}
	s.p.Store(&h)
}

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := s.p.Load()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	(*h).ServeHTTP(w, r)
}
