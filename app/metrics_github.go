package app

import (
	"net/http"
	"strconv"
	"strings"
)

// githubTransport counts every HTTP request sent to GitHub (conditional
// GETs answered 304 included) by endpoint and status. It sits at the
// bottom of forge's transport stack (forge.Config.Transport).
func (m *Metrics) githubTransport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if m == nil {
		return next
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		status := "error"
		if err == nil {
			status = strconv.Itoa(resp.StatusCode)
		}
		m.githubCalls.WithLabelValues(githubEndpoint(req.Method, req.URL.Path), status).Inc()
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// githubLiterals are the path segments of the REST endpoints mergegate
// calls; any other segment is a parameter. Keeping to this list bounds the
// label's values whatever the paths hold.
var githubLiterals = map[string]bool{
	"repos": true, "pulls": true, "merge": true, "update-branch": true, "branches": true,
	"protection": true, "required_status_checks": true, "rules": true, "commits": true,
	"check-runs": true, "check-suites": true, "status": true, "statuses": true, "issues": true,
	"comments": true, "labels": true, "events": true, "installation": true, "repositories": true,
	"app": true, "installations": true, "access_tokens": true, "rate_limit": true,
	"app-manifests": true, "conversions": true, "reviews": true, "files": true,
	"hook": true, "deliveries": true, "attempts": true,
}

// githubParams names the parameter after a segment.
var githubParams = map[string]string{
	"pulls": "{pull_number}", "issues": "{issue_number}", "check-runs": "{check_run_id}",
	"check-suites": "{check_suite_id}", "statuses": "{sha}", "commits": "{ref}", "labels": "{name}",
	"installations": "{installation_id}", "app-manifests": "{code}", "comments": "{comment_id}",
	"deliveries": "{delivery_id}",
}

// githubEndpoint is "METHOD /path/{template}" for a request path, e.g.
// GET /repos/{owner}/{repo}/pulls/{pull_number}. A GitHub Enterprise
// Server prefix (/api/v3) is dropped.
func githubEndpoint(method, path string) string {
	path = strings.TrimPrefix(path, "/api/v3")
	segs := strings.Split(strings.Trim(path, "/"), "/")
	out := make([]string, 0, len(segs))
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		switch {
		case s == "repos" && i == 0 && len(segs) >= 3:
			out = append(out, "repos", "{owner}", "{repo}")
			i += 2
		case s == "branches":
			// A branch name may hold slashes: it runs to the next literal.
			out = append(out, s, "{branch}")
			for i+1 < len(segs) && !githubLiterals[segs[i+1]] {
				i++
			}
		case githubLiterals[s]:
			out = append(out, s)
			if p := githubParams[s]; p != "" && i+1 < len(segs) && !githubLiterals[segs[i+1]] {
				out = append(out, p)
				i++
			}
		default:
			out = append(out, "{param}")
		}
	}
	return method + " /" + strings.Join(out, "/")
}
