package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mergegate/mergegate/leasedo"
)

// queueActionRequest is the body of POST /queue/move, /queue/remove and
// /queue/retry: the entry (its pull request's number), who acts and why
// (both go to the audit log; a removal's comment says them), and for a
// move where to ("front" or "back").
type queueActionRequest struct {
	leasedo.Key
	PR  int    `json:"pr"`
	To  string `json:"to,omitempty"`
	By  string `json:"by"`
	Why string `json:"why,omitempty"`
}

// readQueueAction reads a queue action's JSON body, or the dashboard's
// form (same origin only: the admin handler's cross-origin protection).
func readQueueAction(w http.ResponseWriter, r *http.Request) (req queueActionRequest, form, ok bool) {
	form = strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
	if form {
		r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
		if err := r.ParseForm(); err != nil {
			badRequest(w, &leasedo.FieldError{Field: "body", Msg: "is not a form: " + err.Error()})
			return req, form, false
		}
		f := r.PostForm
		req = queueActionRequest{Key: leasedo.Key{Tenant: f.Get("tenant"), Repo: f.Get("repo")}, To: f.Get("to"), By: f.Get("by"), Why: f.Get("why")}
		if s := f.Get("pr"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				badRequest(w, &leasedo.FieldError{Field: "pr", Msg: "must be a number"})
				return req, form, false
			}
			req.PR = n
		}
	} else if !decodeBody(w, r, &req) {
		return req, form, false
	}
	if !validKey(w, req.Key) {
		return req, form, false
	}
	req.By, req.Why, req.To = strings.TrimSpace(req.By), strings.TrimSpace(req.Why), strings.TrimSpace(req.To)
	switch {
	case req.PR <= 0:
		badRequest(w, &leasedo.FieldError{Field: "pr", Msg: "is required: the pull request's number"})
		return req, form, false
	case req.By == "":
		badRequest(w, &leasedo.FieldError{Field: "by", Msg: "is required: who acts goes to the audit log"})
		return req, form, false
	case tooLong(w, req.By, req.Why, "why"):
		return req, form, false
	}
	return req, form, true
}

// queueAction answers one of the operator's queue actions: it takes the
// repository's lease as "admin" (409 locked while a sync holds it: try
// again in a moment), acts, and kicks the repository's worker.
func (a *admin) queueAction(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, form, ok := readQueueAction(w, r)
		if !ok {
			return
		}
		if verb == "move" && req.To != "front" && req.To != "back" {
			badRequest(w, &leasedo.FieldError{Field: "to", Msg: fmt.Sprintf("must be front or back, not %q", req.To)})
			return
		}
		ctx := r.Context()
		s := a.cfg.Store
		l, err := s.Acquire(ctx, req.Key, "admin")
		if err != nil {
			a.fail(w, err)
			return
		}
		// Released whatever happens: a client that hangs up or an action
		// that panics would otherwise hold the repository's deliveries
		// and syncs back for a lease TTL.
		release := func() error {
			_, err := s.Release(context.WithoutCancel(ctx), l)
			l = nil
			return err
		}
		defer func() {
			if l != nil {
				release() //nolint:errcheck // a panic is on its way
			}
		}()
		changed := true
		switch verb {
		case "move":
			changed, err = s.MoveEntry(ctx, l, req.PR, req.To == "front", req.By, req.Why)
		case "remove":
			err = s.RemoveEntry(ctx, l, req.PR, req.By, req.Why, a.removal(ctx, req))
		case "retry":
			err = s.RetryBlocked(ctx, l, req.PR, req.By)
		}
		if rerr := release(); rerr != nil && err == nil {
			err = rerr
		}
		if errors.Is(err, leasedo.ErrNotQueued) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error(), "field": "pr"})
			return
		}
		if err != nil {
			a.fail(w, err)
			return
		}
		a.cfg.Logger.Info().Str("tenant", req.Tenant).Str("repo", req.Repo).Int("pr", req.PR).Str("by", req.By).
			Str("reason", req.Why).Str("to", req.To).Bool("changed", changed).Msg("queue " + verb + " from the admin API")
		a.kick(req.Key)
		if form {
			http.Redirect(w, r, "/repos/"+url.PathEscape(req.Tenant)+"/"+escapeRepo(req.Repo), http.StatusSeeOther)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"changed": changed})
	}
}

// removal is how a taken-out entry's check run ends: a comment on the
// pull request saying who took it out and why, and its base's trigger
// labels taken off so that it does not rejoin by itself. They wait in the
// outbox and go out through the write budget, as a bounce's do.
func (a *admin) removal(ctx context.Context, req queueActionRequest) leasedo.CheckRunEnd {
	msg := "Taken out of the merge queue by " + req.By
	if req.Why != "" {
		msg += ": " + req.Why
	}
	msg += "."
	var labels []string
	if p := a.cfg.Policies(); p != nil {
		base := ""
		if its, err := a.cfg.Store.Items(ctx, req.Key); err == nil {
			for _, it := range its {
				if it.PRNumber == req.PR {
					base = it.BaseRef
				}
			}
		}
		labels = p.Get(req.Key).For(base).Triggers.Labels()
	}
	if len(labels) > 0 {
		msg += fmt.Sprintf(" Add the `%s` label again to rejoin it.", labels[0])
	}
	return leasedo.CheckRunEnd{Conclusion: "neutral", Title: "Taken out of the merge queue", Summary: msg, Comment: msg, Unlabel: labels}
}
