package app

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mergegate/mergegate"
	"github.com/mergegate/mergegate/forge"
)

// The set-up flow (docs/operations.md, "Register the GitHub App"): on a first start without credentials the
// public listener serves a page whose "Register GitHub App" button posts
// app.yml, as JSON, to GitHub's App manifest flow. GitHub creates the App
// and sends the browser back to /setup/callback?code=...&state=...; the
// code is exchanged (POST /app-manifests/{code}/conversions) for the App's
// id, key and webhook secret, which are stored beside the database and put
// to use at once. From then on the set-up pages answer 404.
//
// Against cross-site request forgery the state is random, single-use,
// expires, is kept server-side, and must match a cookie set on the browser
// that opened the page: a callback with a code obtained by someone else is
// refused. When an admin token is set, the set-up pages also ask for it
// (HTTP basic auth, any user name), since the public listener may be
// reachable by anyone before the App exists.

const (
	setupStateTTL   = time.Hour // GitHub's codes live one hour too
	setupMaxStates  = 64
	setupCookie     = "mergegate_setup_state"
	setupCallback   = "/setup/callback"
	exchangeTimeout = 30 * time.Second
)

var (
	orgName  = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	codeChar = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)
)

type setupFlow struct {
	a      *App
	client *http.Client // the code exchange

	mu     sync.Mutex
	done   bool
	states map[string]time.Time // state -> expiry
}

func newSetupFlow(a *App) *setupFlow {
	return &setupFlow{a: a, client: &http.Client{Timeout: exchangeTimeout}, states: map[string]time.Time{}}
}

func (f *setupFlow) routes(mux *http.ServeMux) {
	mux.Handle("GET /{$}", f.guard(f.page))
	mux.Handle("GET /setup", f.guard(f.page))
	mux.Handle("GET "+setupCallback, f.guard(f.callback))
}

// Done reports whether the App was registered through the flow.
func (f *setupFlow) Done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// guard answers 404 once the App is registered, and asks for the admin
// token when one is set.
func (f *setupFlow) guard(h http.HandlerFunc) http.Handler {
	token := []byte(f.a.cfg.AdminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.Done() {
			http.NotFound(w, r)
			return
		}
		if len(token) > 0 {
			_, pw, _ := r.BasicAuth()
			if subtle.ConstantTimeCompare([]byte(pw), token) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="mergegate set-up (password: the admin token)", charset="UTF-8"`)
				http.Error(w, "the set-up page needs the admin token as the password", http.StatusUnauthorized)
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("X-Frame-Options", "DENY")
		h(w, r)
	})
}

// setupPage is setup.html's data.
type setupPage struct {
	Title        string
	Action       string // GitHub's "new App from manifest" URL, with the state
	Manifest     string // JSON, the form field GitHub reads
	PublicURL    string
	WebhookURL   string
	Org          string
	Name         string
	GitHubWeb    string
	Credentials  string
	Permissions  []kv
	Events       []string
	InsecureHook bool
	Error        string
}

type kv struct{ Key, Value string }

// postgresRefusal is what the set-up pages answer on PostgreSQL: the
// credentials file sits beside a SQLite file, and a connection string
// names no folder to put it in.
const postgresRefusal = "On PostgreSQL pass --app-id, --private-key and --webhook-secret " +
	"(GITHUB_APP_ID, GITHUB_PRIVATE_KEY_PATH, GITHUB_WEBHOOK_SECRET) and restart mergegate: " +
	"the set-up page stores credentials only beside a SQLite file. Create the App on GitHub by hand " +
	"(docs/operations.md, \"Register the GitHub App\"), or register it with a first start on SQLite and move with mergegate migrate-store."

// refusePostgres answers the set-up pages on PostgreSQL; true when it did.
func (f *setupFlow) refusePostgres(w http.ResponseWriter) bool {
	if !f.a.DB.Postgres() {
		return false
	}
	setupRender(w, http.StatusNotImplemented, "setup_error", setupMessage{Title: "The set-up page cannot store credentials on PostgreSQL",
		Message: postgresRefusal})
	return true
}

func (f *setupFlow) page(w http.ResponseWriter, r *http.Request) {
	if f.refusePostgres(w) {
		return
	}
	q := r.URL.Query()
	p := setupPage{Title: "Set up mergegate", GitHubWeb: WebURL(f.a.cfg.GitHubURL),
		Credentials: CredentialsPath(f.a.cfg.DB)}
	p.PublicURL = strings.TrimRight(q.Get("url"), "/")
	if p.PublicURL == "" {
		p.PublicURL = requestBaseURL(r)
	}
	if u, err := url.Parse(p.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		p.Error = "The public URL must be an http:// or https:// address such as https://mergegate.example.com."
		p.PublicURL = requestBaseURL(r)
	} else {
		p.InsecureHook = u.Scheme == "http" && !isLocalHost(u.Hostname())
	}
	p.Org = strings.TrimSpace(q.Get("org"))
	if p.Org != "" && !orgName.MatchString(p.Org) {
		p.Error = "That is not an organisation name (letters, digits and dashes)."
		p.Org = ""
	}
	manifest, err := buildManifest(p.PublicURL, strings.TrimSpace(q.Get("name")))
	if err != nil {
		f.a.log.Error().Err(err).Msg("set-up: app.yml")
		setupRender(w, http.StatusInternalServerError, "setup_error", setupMessage{Title: "Set-up failed", Message: "app.yml cannot be read; see the server log."})
		return
	}
	p.Name, _ = manifest["name"].(string)
	p.WebhookURL = p.PublicURL + "/webhook"
	p.Permissions, p.Events = manifestSummary(manifest)
	b, err := json.Marshal(manifest)
	if err != nil {
		setupRender(w, http.StatusInternalServerError, "setup_error", setupMessage{Title: "Set-up failed", Message: err.Error()})
		return
	}
	p.Manifest = string(b)
	state, err := f.newState()
	if err != nil {
		setupRender(w, http.StatusInternalServerError, "setup_error", setupMessage{Title: "Set-up failed", Message: "no randomness: " + err.Error()})
		return
	}
	p.Action = manifestAction(p.GitHubWeb, p.Org, state)
	http.SetCookie(w, &http.Cookie{Name: setupCookie, Value: state, Path: "/setup", MaxAge: int(setupStateTTL / time.Second),
		HttpOnly: true, Secure: strings.HasPrefix(p.PublicURL, "https://"), SameSite: http.SameSiteLaxMode})
	if u, err := url.Parse(p.Action); err == nil {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'; form-action 'self' "+u.Scheme+"://"+u.Host)
	}
	setupRender(w, http.StatusOK, "setup", p)
}

// setupMessage is the data of the pages after the callback.
type setupMessage struct {
	Title      string
	Message    string
	AppName    string
	AppURL     string
	InstallURL string
	File       string
	Restart    bool // the App works but its credentials are not on disk
}

func (f *setupFlow) callback(w http.ResponseWriter, r *http.Request) {
	if f.refusePostgres(w) {
		return
	}
	log := f.a.log
	q := r.URL.Query()
	code, state := q.Get("code"), q.Get("state")
	cookie, _ := r.Cookie(setupCookie)
	if state == "" || cookie == nil || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(state)) != 1 || !f.takeState(state) {
		log.Warn().Msg("set-up callback refused: its state is unknown, expired, used, or not this browser's")
		setupRender(w, http.StatusBadRequest, "setup_error", setupMessage{Title: "This link is not from a set-up started here",
			Message: "The state parameter is unknown, expired or already used, or the set-up was started in another browser. Open the set-up page and register again."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: setupCookie, Value: "", Path: "/setup", MaxAge: -1, HttpOnly: true})
	if !codeChar.MatchString(code) {
		setupRender(w, http.StatusBadRequest, "setup_error", setupMessage{Title: "GitHub sent no code",
			Message: "The callback has no valid code parameter. Open the set-up page and register again."})
		return
	}
	// One exchange at a time, and none after success.
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), exchangeTimeout)
	defer cancel()
	creds, err := exchangeManifestCode(ctx, f.client, f.a.cfg.GitHubURL, code)
	if err != nil {
		log.Error().Err(err).Msg("set-up: exchanging the manifest code failed")
		setupRender(w, http.StatusBadGateway, "setup_error", setupMessage{Title: "GitHub did not give the App's credentials",
			Message: err.Error() + ". Codes are valid for one hour and once; open the set-up page and register again."})
		return
	}
	creds.GitHubURL = f.a.cfg.GitHubURL
	creds.CreatedAt = f.a.cfg.Clock.Now().UTC()
	path := CredentialsPath(f.a.cfg.DB)
	msg := setupMessage{Title: "GitHub App registered", AppName: creds.Name, AppURL: creds.HTMLURL, File: path}
	if creds.HTMLURL != "" {
		msg.InstallURL = strings.TrimRight(creds.HTMLURL, "/") + "/installations/new"
	}
	if err := WriteCredentials(path, creds); err != nil {
		// Still use them now; the operator must act before a restart.
		log.Error().Err(err).Str("file", path).Int64("app_id", creds.AppID).
			Msg("set-up: could not store the credentials; they are in memory only and lost on restart: generate a private key on GitHub and pass --app-id, --private-key and --webhook-secret")
		msg.Restart = true
	} else {
		log.Info().Str("file", path).Int64("app_id", creds.AppID).Str("slug", creds.Slug).Msg("set-up: GitHub App registered; credentials stored")
	}
	if err := f.a.activate(creds); err != nil {
		log.Error().Err(err).Msg("set-up: switching to the GitHub App failed; restart mergegate to use the stored credentials")
		setupRender(w, http.StatusInternalServerError, "setup_error", setupMessage{Title: "Registered, but not switched",
			Message: "The App was registered and its credentials stored in " + path + ", but mergegate could not start using them: " + err.Error() + ". Restart mergegate."})
		return
	}
	f.done = true
	f.states = nil
	setupRender(w, http.StatusOK, "setup_done", msg)
}

// setupRender renders a set-up page; d is a setupPage or a setupMessage.
func setupRender(w http.ResponseWriter, status int, name string, d any) {
	title := "Set up mergegate"
	switch v := d.(type) {
	case setupPage:
		title = v.Title
	case setupMessage:
		title = v.Title
	}
	renderPage(w, status, name, pageData{Title: title, Nav: "set-up", D: d})
}

func (f *setupFlow) newState() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	s := hex.EncodeToString(b)
	now := f.a.cfg.Clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, exp := range f.states {
		if !now.Before(exp) {
			delete(f.states, k)
		}
	}
	for len(f.states) >= setupMaxStates { // drop the oldest
		var oldest string
		var at time.Time
		for k, exp := range f.states {
			if oldest == "" || exp.Before(at) {
				oldest, at = k, exp
			}
		}
		delete(f.states, oldest)
	}
	if f.states == nil {
		f.states = map[string]time.Time{}
	}
	f.states[s] = now.Add(setupStateTTL)
	return s, nil
}

// takeState consumes state: true when it was issued here and has not
// expired.
func (f *setupFlow) takeState(state string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	exp, ok := f.states[state]
	delete(f.states, state)
	return ok && f.a.cfg.Clock.Now().Before(exp)
}

// buildManifest is app.yml with this installation's URLs filled in.
func buildManifest(publicURL, name string) (map[string]any, error) {
	var m map[string]any
	if err := yaml.Unmarshal(mergegate.AppManifest, &m); err != nil {
		return nil, fmt.Errorf("app.yml: %w", err)
	}
	hook, _ := m["hook_attributes"].(map[string]any)
	if hook == nil {
		hook = map[string]any{"active": true}
	}
	hook["url"] = publicURL + "/webhook"
	m["hook_attributes"] = hook
	m["redirect_url"] = publicURL + setupCallback
	if name != "" {
		m["name"] = name
	}
	return m, nil
}

func manifestSummary(m map[string]any) ([]kv, []string) {
	var perms []kv
	if p, ok := m["default_permissions"].(map[string]any); ok {
		for k, v := range p {
			perms = append(perms, kv{k, fmt.Sprint(v)})
		}
	}
	sort.Slice(perms, func(i, j int) bool { return perms[i].Key < perms[j].Key })
	var events []string
	if e, ok := m["default_events"].([]any); ok {
		for _, v := range e {
			events = append(events, fmt.Sprint(v))
		}
	}
	return perms, events
}

// manifestAction is where the manifest form posts: the account's or the
// organisation's "new GitHub App" page.
func manifestAction(web, org, state string) string {
	p := "/settings/apps/new"
	if org != "" {
		p = "/organizations/" + url.PathEscape(org) + "/settings/apps/new"
	}
	return web + p + "?state=" + url.QueryEscape(state)
}

// WebURL is GitHub's web address for a REST base URL:
// https://api.github.com/ → https://github.com,
// https://HOST/api/v3/ → https://HOST (GitHub Enterprise Server),
// https://api.SUB.ghe.com/ → https://SUB.ghe.com; anything else (a fake in
// tests) is the base URL itself, without its trailing slash.
func WebURL(apiURL string) string {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return "https://github.com"
	}
	path := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(path, "/api/v3"):
		u.Path = strings.TrimSuffix(path, "/api/v3")
	case path == "" && strings.HasPrefix(u.Host, "api."):
		u.Host = strings.TrimPrefix(u.Host, "api.")
		u.Path = ""
	default:
		u.Path = path
	}
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimRight(u.String(), "/")
}

// requestBaseURL is how the browser reached this listener (behind a
// reverse proxy: X-Forwarded-Proto and X-Forwarded-Host).
func requestBaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := firstHeader(r, "X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	host := r.Host
	if h := firstHeader(r, "X-Forwarded-Host"); h != "" && !strings.ContainsAny(h, "/\\ @") {
		host = h
	}
	return scheme + "://" + host
}

func firstHeader(r *http.Request, name string) string {
	v, _, _ := strings.Cut(r.Header.Get(name), ",")
	return strings.ToLower(strings.TrimSpace(v))
}

func isLocalHost(h string) bool {
	return h == "localhost" || IsLoopback(h+":0")
}

// exchangeManifestCode converts the manifest flow's code into the App's
// credentials (forge speaks to GitHub).
func exchangeManifestCode(ctx context.Context, client *http.Client, apiURL, code string) (Credentials, error) {
	a, err := forge.ConvertManifest(ctx, client, apiURL, code)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{AppID: a.ID, Slug: a.Slug, Name: a.Name, HTMLURL: a.HTMLURL, Owner: a.Owner,
		PrivateKey: a.PEM, WebhookSecret: a.WebhookSecret}, nil
}
