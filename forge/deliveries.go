package forge

import (
	"context"
	"strconv"
	"time"

	"github.com/google/go-github/v62/github"
)

// HookDelivery is one attempt of GitHub to deliver a webhook to the App, as
// GET /app/hook/deliveries lists it. A redelivery is an attempt of its own
// (its own ID) with the same GUID.
type HookDelivery struct {
	ID          int64     // this attempt; POST .../deliveries/{ID}/attempts redelivers it
	GUID        string    // the delivery's id: the X-GitHub-Delivery header
	DeliveredAt time.Time // when GitHub sent this attempt
	Redelivery  bool      // this attempt is a redelivery
	Status      string    // "OK" when the receiver accepted it, else GitHub's reason
	StatusCode  int       // the receiver's HTTP status; 0 when no answer came
	Event       string
	Action      string
	Tenant      string // installation_id as a decimal string; "" when none
	RepoID      int64  // repository_id; 0 when none
}

// OK reports whether GitHub handed this attempt over: a 2xx answer that
// GitHub itself calls "OK".
func (d HookDelivery) OK() bool {
	return d.StatusCode >= 200 && d.StatusCode < 300 && d.Status == "OK"
}

// DeliveriesPerPage is the page size of ListHookDeliveries (GitHub's
// maximum).
const DeliveriesPerPage = 100

// ListHookDeliveries lists the App's webhook deliveries newest first,
// page by page (cursor paging), calling visit for each until visit returns
// false or the list ends. It authenticates with the App's JWT: it costs no
// installation's rate-limit points.
func (c *Client) ListHookDeliveries(ctx context.Context, visit func(HookDelivery) bool) error {
	in := c.appClient()
	cl := call{op: "apps.list-webhook-deliveries", tenant: appTenant}
	ctx = withOp(ctx, cl.op)
	opts := &github.ListCursorOptions{PerPage: DeliveriesPerPage}
	for {
		res, resp, err := in.gh.Apps.ListHookDeliveries(ctx, opts)
		if err != nil {
			return cl.classify(ctx, err, false)
		}
		for _, d := range res {
			hd := HookDelivery{
				ID: d.GetID(), GUID: d.GetGUID(), DeliveredAt: d.GetDeliveredAt().Time,
				Redelivery: d.GetRedelivery(), Status: d.GetStatus(), StatusCode: d.GetStatusCode(),
				Event: d.GetEvent(), Action: d.GetAction(), RepoID: d.GetRepositoryID(),
			}
			if id := d.GetInstallationID(); id != 0 {
				hd.Tenant = strconv.FormatInt(id, 10)
			}
			if !visit(hd) {
				return nil
			}
		}
		if resp.Cursor == "" || len(res) == 0 {
			return nil
		}
		opts.Cursor = resp.Cursor
	}
}

// RedeliverHookDelivery asks GitHub to send delivery attempt id again
// (202: GitHub queued it; the new attempt shows in ListHookDeliveries with
// Redelivery set). It authenticates with the App's JWT.
func (c *Client) RedeliverHookDelivery(ctx context.Context, id int64) error {
	in := c.appClient()
	cl := call{op: "apps.redeliver-webhook-delivery", tenant: appTenant}
	ctx = withOp(ctx, cl.op)
	// go-github answers GitHub's 202 with an *AcceptedError, which
	// classify turns into success.
	_, _, err := in.gh.Apps.RedeliverHookDelivery(ctx, id)
	return cl.classify(ctx, err, false)
}
