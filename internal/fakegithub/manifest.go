package fakegithub

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// The GitHub App manifest flow
// (https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
// a browser posts a form with a `manifest` field to GitHub's web page
// /settings/apps/new (or /organizations/{org}/settings/apps/new); GitHub
// creates the App and redirects to the manifest's redirect_url with
// ?code=...&state=...; the code is exchanged, unauthenticated, at
// POST /app-manifests/{code}/conversions for the App's id, key (pem) and
// webhook secret.
//
// The fake approves at once (GitHub shows a confirmation page first) and
// answers the conversion with its own App id and key, so that the
// registered App then works against the fake. The web routes are served
// at the root, outside Options.PathPrefix, like GitHub Enterprise Server's
// web pages beside /api/v3.

// Routes of the manifest flow.
const (
	RouteManifestConversion = "POST /app-manifests/{code}/conversions"
	RouteWebNewApp          = "POST /settings/apps/new"                     // web page, not API
	RouteWebNewOrgApp       = "POST /organizations/{org}/settings/apps/new" // web page, not API
)

// ManifestCodeTTL is how long a manifest code can be exchanged, as on GitHub.
const ManifestCodeTTL = time.Hour

// ManifestApp is one App registered through the manifest flow.
type ManifestApp struct {
	Code          string
	State         string         // the state the form was posted with
	Org           string         // "" for the user account
	Manifest      map[string]any // as posted
	Name          string
	Slug          string
	WebhookSecret string
	CreatedAt     time.Time
	Converted     bool
}

type manifestState struct {
	apps []*ManifestApp
	// secret, when set, is the webhook secret of the next registrations
	// (default: random).
	secret string
}

// ManifestApps returns the Apps registered through the manifest flow.
func (s *Server) ManifestApps() []ManifestApp {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ManifestApp{}
	for _, a := range s.manifest.apps {
		c := *a
		out = append(out, c)
	}
	return out
}

// SetManifestWebhookSecret makes the next manifest registrations answer
// this webhook secret.
func (s *Server) SetManifestWebhookSecret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.manifest.secret = secret
}

// WebURL is the fake's web root (where the manifest form posts), without a
// trailing slash.
func (s *Server) WebURL() string { return s.ts.URL }

func (s *Server) manifestRoutes() {
	s.mux.HandleFunc(RouteWebNewApp, s.newAppFromManifest)
	s.mux.HandleFunc(RouteWebNewOrgApp, s.newAppFromManifest)
	s.mux.HandleFunc("POST "+s.prefix+"/app-manifests/{code}/conversions", s.convertManifest)
}

// manifestNoAuth reports whether route is a manifest-flow route, which
// takes no App JWT nor installation token.
func manifestNoAuth(route string) bool {
	return route == RouteManifestConversion || route == RouteWebNewApp || route == RouteWebNewOrgApp
}

var slugUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// newAppFromManifest is GitHub's "Create GitHub App" page, approved at once.
func (s *Server) newAppFromManifest(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "Bad form")
		return
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.PostForm.Get("manifest")), &m); err != nil {
		writeError(w, http.StatusUnprocessableEntity, "Invalid GitHub App configuration: manifest is not JSON")
		return
	}
	redirect, _ := m["redirect_url"].(string)
	ru, err := url.Parse(redirect)
	if redirect == "" || err != nil || !ru.IsAbs() {
		writeError(w, http.StatusUnprocessableEntity, "Invalid GitHub App configuration: redirect_url is required")
		return
	}
	hook, _ := m["hook_attributes"].(map[string]any)
	if u, _ := hook["url"].(string); u == "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid GitHub App configuration: hook_attributes.url is required")
		return
	}
	name, _ := m["name"].(string)
	if name == "" {
		name = "app"
	}
	code := randomHex(16)
	secret := s.manifest.secret
	if secret == "" {
		secret = randomHex(20)
	}
	app := &ManifestApp{Code: code, State: r.URL.Query().Get("state"), Org: r.PathValue("org"), Manifest: m,
		Name: name, Slug: strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-"),
		WebhookSecret: secret, CreatedAt: s.now()}
	s.manifest.apps = append(s.manifest.apps, app)
	q := ru.Query()
	q.Set("code", code)
	if app.State != "" {
		q.Set("state", app.State)
	}
	ru.RawQuery = q.Encode()
	w.Header().Set("Location", ru.String())
	w.WriteHeader(http.StatusFound)
}

// convertManifest answers POST /app-manifests/{code}/conversions: 201 with
// the App, its pem and webhook secret; a code is good once, for an hour.
func (s *Server) convertManifest(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue("code")
	var app *ManifestApp
	for _, a := range s.manifest.apps {
		if a.Code == code {
			app = a
		}
	}
	if app == nil || app.Converted || !s.now().Before(app.CreatedAt.Add(ManifestCodeTTL)) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	app.Converted = true
	owner := app.Org
	ownerType := "Organization"
	if owner == "" {
		owner, ownerType = "octocat", "User"
	}
	desc, _ := app.Manifest["description"].(string)
	homepage, _ := app.Manifest["url"].(string)
	ts := app.CreatedAt.Format(time.RFC3339)
	writeJSON(w, http.StatusCreated, obj{
		"id": s.appID, "slug": app.Slug, "node_id": "MDM6QXBwNTk=", "name": app.Name,
		"owner":       obj{"login": owner, "id": 1, "type": ownerType},
		"description": desc, "external_url": homepage, "html_url": s.ts.URL + "/apps/" + app.Slug,
		"created_at": ts, "updated_at": ts,
		"permissions": app.Manifest["default_permissions"], "events": app.Manifest["default_events"],
		"client_id": "Iv1." + randomHex(8), "client_secret": randomHex(20),
		"webhook_secret": app.WebhookSecret, "pem": string(s.keyPEM),
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
