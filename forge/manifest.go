package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ManifestApp is what GitHub returns for a registered App at the end of
// the manifest flow: its id, key and webhook secret.
type ManifestApp struct {
	ID            int64
	Slug          string
	Name          string
	HTMLURL       string
	Owner         string
	PEM           string
	WebhookSecret string
}

// ConvertManifest exchanges the manifest flow's code for the new App's
// credentials: POST {base}/app-manifests/{code}/conversions, without
// authentication. client nil uses a client with a 30 s timeout.
func ConvertManifest(ctx context.Context, client *http.Client, baseURL, code string) (ManifestApp, error) {
	var app ManifestApp
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	u := strings.TrimRight(baseURL, "/") + "/app-manifests/" + url.PathEscape(code) + "/conversions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return app, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "mergegate")
	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error names the URL, and the URL holds the code, which is
		// worth the App's private key for an hour: say what failed
		// without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return app, fmt.Errorf("GitHub cannot be reached: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return app, fmt.Errorf("reading GitHub's answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		var e struct {
			Message string `json:"message"`
		}
		json.Unmarshal(body, &e) //nolint:errcheck // the status says enough
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		return app, fmt.Errorf("GitHub answered %d: %s", resp.StatusCode, e.Message)
	}
	var a struct {
		ID            int64  `json:"id"`
		Slug          string `json:"slug"`
		Name          string `json:"name"`
		HTMLURL       string `json:"html_url"`
		PEM           string `json:"pem"`
		WebhookSecret string `json:"webhook_secret"`
		Owner         struct {
			Login string `json:"login"`
		} `json:"owner"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return app, fmt.Errorf("GitHub's answer is not JSON: %w", err)
	}
	if a.ID <= 0 || a.PEM == "" || a.WebhookSecret == "" {
		return app, errors.New("GitHub's answer lacks the App id, key or webhook secret")
	}
	return ManifestApp{ID: a.ID, Slug: a.Slug, Name: a.Name, HTMLURL: a.HTMLURL, Owner: a.Owner.Login,
		PEM: a.PEM, WebhookSecret: a.WebhookSecret}, nil
}
