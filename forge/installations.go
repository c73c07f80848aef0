package forge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
)

// appTenant names the App's own (JWT) requests in the conditional-request
// cache and in rate-limit errors. It is not an installation id.
const appTenant = "app"

// Installation is one installation of the App, as GET /app/installations
// lists it.
type Installation struct {
	Tenant    string // the installation id, decimal
	Account   string // the user or organisation login it is installed on
	Suspended bool   // suspended_at is set: no token can be minted for it
}

// appClient returns the go-github client that authenticates as the App
// itself (a JWT signed with the App key) rather than as an installation.
// Its GETs are conditional too; its rate limit is the App's own.
func (c *Client) appClient() *installation {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.app != nil {
		return c.app
	}
	lim := &limiter{tenant: appTenant, clock: c.cfg.Clock}
	below := &rateGuard{lim: lim, next: &cacheTransport{inst: appTenant, cache: c.cache, next: c.cfg.Transport}}
	atr := ghinstallation.NewAppsTransportFromPrivateKey(below, c.cfg.AppID, c.key)
	atr.BaseURL = strings.TrimRight(c.base.String(), "/")
	gh := github.NewClient(&http.Client{Transport: atr, Timeout: c.cfg.Timeout})
	gh.BaseURL = c.base
	gh.UploadURL = c.base
	gh.UserAgent = c.cfg.UserAgent
	c.app = &installation{gh: gh, lim: lim}
	return c.app
}

// ListInstallations lists every installation of the App (all pages),
// suspended ones included (Suspended says so). It authenticates with the
// App's JWT, so it costs no installation's rate-limit points.
func (c *Client) ListInstallations(ctx context.Context) ([]Installation, error) {
	in := c.appClient()
	cl := call{op: "apps.list-installations", tenant: appTenant}
	ctx = withOp(ctx, cl.op)
	opts := &github.ListOptions{PerPage: 100}
	var out []Installation
	for {
		res, resp, err := in.gh.Apps.ListInstallations(ctx, opts)
		if err != nil {
			return nil, cl.classify(ctx, err, false)
		}
		for _, i := range res {
			out = append(out, Installation{
				Tenant:    strconv.FormatInt(i.GetID(), 10),
				Account:   i.GetAccount().GetLogin(),
				Suspended: i.SuspendedAt != nil,
			})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// AppLogin is the login GitHub gives the App's installations when they
// act, "<slug>[bot]": the sender of the webhook a label the App added or a
// branch it updated causes. It reads the App's slug (GET /app, with the
// App's JWT: no installation's rate-limit points).
func (c *Client) AppLogin(ctx context.Context) (string, error) {
	in := c.appClient()
	cl := call{op: "apps.get-authenticated", tenant: appTenant}
	ctx = withOp(ctx, cl.op)
	app, _, err := in.gh.Apps.Get(ctx, "")
	if err != nil {
		return "", cl.classify(ctx, err, false)
	}
	if app.GetSlug() == "" {
		return "", fmt.Errorf("forge: GET /app: GitHub's answer has no slug")
	}
	return app.GetSlug() + "[bot]", nil
}
