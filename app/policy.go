package app

import (
	"net/http"
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

	ProblemText []string `json:"-"`
}

func policyView(p *reconcile.Policies, k leasedo.Key) *PolicyView {
	if p == nil {
		return nil
	}
	e := p.Get(k)
	v := &PolicyView{Source: e.Source, File: e.File, SHA: e.SHA, Problems: e.Problems, Values: e.Values(), Freezes: p.Freezes(k)}
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

// freeze answers POST /freeze (frozen true) and POST /thaw.
func (a *admin) freeze(frozen bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req freezeRequest
		if !decodeBody(w, r, &req) || !validKey(w, req.Key) {
			return
		}
		req.By, req.Message = strings.TrimSpace(req.By), strings.TrimSpace(req.Message)
		switch {
		case req.By == "":
			badRequest(w, &leasedo.FieldError{Field: "by", Msg: "is required: who freezes or thaws the queue goes to the audit log"})
			return
		case frozen && req.Message == "":
			badRequest(w, &leasedo.FieldError{Field: "message", Msg: "is required: every check run of the frozen queue shows it"})
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
			a.cfg.Logger.Info().Str("tenant", req.Tenant).Str("repo", req.Repo).Str("branch", req.Branch).Str("by", req.By).
				Str("message", req.Message).Msg("queue " + verb + " from the admin API")
		}
		a.kick(req.Key) // every check run says it now
		writeJSON(w, http.StatusOK, map[string]any{"changed": changed, "freezes": p.Freezes(req.Key)})
	}
}
