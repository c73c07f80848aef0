package app

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"time"
)

//go:embed templates/*.html
var templatesFS embed.FS

// pages holds every page; each is a named template of templates/.
var pages = template.Must(template.New("").ParseFS(templatesFS, "templates/*.html"))

// pageData is what every page gets: the layout's fields and the page's
// own data in D.
type pageData struct {
	Title   string
	Nav     string
	Refresh int    // seconds; 0: no reload
	JSON    string // link to the JSON twin
	Admin   bool   // on the admin listener (links to /metrics)
	DBSize  string // the database's size on disk, for the footer ("" leaves it out)
	D       any
}

// renderPage renders into a buffer first, so that a template error is a
// clean 500 rather than half a page.
func renderPage(w http.ResponseWriter, status int, name string, p pageData) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, p); err != nil {
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if h.Get("Content-Security-Policy") == "" {
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	}
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

// since is a short human duration: 45s, 3m12s, 2h05m, 3d4h.
func since(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func timeText(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }
