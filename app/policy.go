package app

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/reconcile"
)

// PolicyView is a repository's effective policy as GET /queue and the
// dashboard show it: where it comes from (its .github/mergegate.yml, its
// organisation's, or the defaults), every key with its value and source,
// what is wrong with the latest file (when it has problems, the policy in
// force is the last good one), and the admin API's freezes.
type PolicyView struct {
	Source   string           `json:"source"`
	File     string           `json:"file,omitempty"`
	SHA      string           `json:"sha,omitempty"`
	Problems []policy.Problem `json:"problems,omitempty"`
	Values   []policy.Value   `json:"values"`
	Freezes  []leasedo.Freeze `json:"freezes"`

	ProblemText  []string `json:"-"`
	Tenant, Repo string   `json:"-"` // the freeze and thaw forms'
}

func policyView(p *reconcile.Policies, k leasedo.Key) *PolicyView {
	if p == nil {
		return nil
	}
	e := p.Get(k)
	v := &PolicyView{Source: e.Source, File: e.File, SHA: e.SHA, Problems: e.Problems, Values: e.Values(), Freezes: p.Freezes(k),
		Tenant: k.Tenant, Repo: k.Repo}
	for _, pr := range e.Problems {
		v.ProblemText = append(v.ProblemText, pr.String())
	}
	return v
}

// freezeRequest is POST /freeze's and POST /thaw's body: who and why go
// to the audit log; branch "" is the whole repository.
type freezeRequest struct {
	leasedo.Key
	Branch  string `json:"branch"`
	Message string `json:"message"`
	By      string `json:"by"`
}

// freeze answers POST /freeze (frozen true) and POST /thaw: a JSON body,
// or the dashboard's form (same origin only: the admin handler's
// cross-origin protection), which is sent back to the repository's page.
func (a *admin) freeze(frozen bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req freezeRequest
		form := strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
		if form {
			r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
			if err := r.ParseForm(); err != nil {
				badRequest(w, &leasedo.FieldError{Field: "body", Msg: "is not a form: " + err.Error()})
				return
			}
			req = freezeRequest{Key: leasedo.Key{Tenant: r.PostForm.Get("tenant"), Repo: r.PostForm.Get("repo")},
				Branch: r.PostForm.Get("branch"), Message: r.PostForm.Get("message"), By: r.PostForm.Get("by")}
			if !validKey(w, req.Key) {
				return
			}
		} else if !decodeBody(w, r, &req) || !validKey(w, req.Key) {
			return
		}
		req.Branch = strings.TrimSpace(req.Branch)
		req.By, req.Message = strings.TrimSpace(req.By), strings.TrimSpace(req.Message)
		switch {
		case req.By == "":
			badRequest(w, &leasedo.FieldError{Field: "by", Msg: "is required: who freezes or thaws the queue goes to the audit log"})
			return
		case frozen && req.Message == "":
			badRequest(w, &leasedo.FieldError{Field: "message", Msg: "is required: every check run of the frozen queue shows it"})
			return
		case tooLong(w, req.By, req.Message, "message"):
			return
		}
		p := a.cfg.Policies()
		if p == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no policies yet (the App is being set up)"})
			return
		}
		changed, err := p.Freeze(r.Context(), req.Key, req.Branch, frozen, req.Message, req.By)
		if err != nil {
			a.fail(w, err)
			return
		}
		verb := "thawed"
		if frozen {
			verb = "frozen"
		}
		if changed {
			a.cfg.Logger.Info().Str("tenant", req.Tenant).Str("repo", req.Repo).Str("base", req.Branch).Str("by", req.By).
				Str("message", req.Message).Msg("queue " + verb + " from the admin API")
		}
		a.kick(req.Key) // every check run says it now
		if form {
			http.Redirect(w, r, "/repos/"+url.PathEscape(req.Tenant)+"/"+escapeRepo(req.Repo), http.StatusSeeOther)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"changed": changed, "freezes": p.Freezes(req.Key)})
	}
}
