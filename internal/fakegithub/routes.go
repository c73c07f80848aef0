package fakegithub

import (
	"net/http"
	"strings"
)

// Routes, as "METHOD path-template" with GitHub's OpenAPI parameter names.
// They name calls in Calls and select requests in Fail.
const (
	RouteCreateToken        = "POST /app/installations/{installation_id}/access_tokens"
	RouteInstallationRepos  = "GET /installation/repositories"
	RouteRateLimit          = "GET /rate_limit"
	RouteListPulls          = "GET /repos/{owner}/{repo}/pulls"
	RouteGetPull            = "GET /repos/{owner}/{repo}/pulls/{pull_number}"
	RouteMerge              = "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"
	RouteUpdateBranch       = "PUT /repos/{owner}/{repo}/pulls/{pull_number}/update-branch"
	RouteGetProtection      = "GET /repos/{owner}/{repo}/branches/{branch}/protection"
	RouteGetRequiredChecks  = "GET /repos/{owner}/{repo}/branches/{branch}/protection/required_status_checks"
	RouteGetBranchRules     = "GET /repos/{owner}/{repo}/rules/branches/{branch}"
	RouteListCheckRuns      = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"
	RouteCombinedStatus     = "GET /repos/{owner}/{repo}/commits/{ref}/status"
	RouteCreateComment      = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments"
	RouteRemoveLabel        = "DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}"
	RouteCreateCheckRun     = "POST /repos/{owner}/{repo}/check-runs"
	RouteUpdateCheckRun     = "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}"
	RouteCreateCommitStatus = "POST /repos/{owner}/{repo}/statuses/{sha}"
	RouteListInstallations  = "GET /app/installations"
	RouteIssueEvents        = "GET /repos/{owner}/{repo}/issues/{issue_number}/events"
	RouteGetRepo            = "GET /repos/{owner}/{repo}"
	RouteListReviews        = "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews"
	RouteListCheckSuites    = "GET /repos/{owner}/{repo}/commits/{ref}/check-suites"
	RouteGetContent         = "GET /repos/{owner}/{repo}/contents/{path}"
	RouteGetPermission      = "GET /repos/{owner}/{repo}/collaborators/{username}/permission"
	RouteCreateReaction     = "POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"
	RouteDeleteRef          = "DELETE /repos/{owner}/{repo}/git/refs/{ref}"
	RouteAddLabels          = "POST /repos/{owner}/{repo}/issues/{issue_number}/labels"
	RouteListPullCommits    = "GET /repos/{owner}/{repo}/pulls/{pull_number}/commits"
	// RouteGetApp is "Get the authenticated app" (a JWT): its slug names
	// the App's installations when they act, "<slug>[bot]" (AppBotLogin).
	RouteGetApp = "GET /app"
)

// Routes lists every route the server answers.
func Routes() []string {
	return []string{
		RouteCreateToken, RouteInstallationRepos, RouteRateLimit, RouteListPulls, RouteGetPull,
		RouteMerge, RouteUpdateBranch, RouteGetProtection, RouteGetRequiredChecks, RouteGetBranchRules,
		RouteListCheckRuns, RouteCombinedStatus, RouteCreateComment, RouteRemoveLabel,
		RouteCreateCheckRun, RouteUpdateCheckRun, RouteCreateCommitStatus,
		RouteListInstallations, RouteIssueEvents, RouteGetRepo, RouteListReviews, RouteListCheckSuites,
		RouteManifestConversion, RouteWebNewApp, RouteWebNewOrgApp,
		RouteListDeliveries, RouteRedeliver,
		RouteGetContent, RouteGetPermission, RouteCreateReaction, RouteDeleteRef, RouteAddLabels,
		RouteListPullCommits, RouteGraphQL,
		RouteGetRef, RouteMatchingRefs, RouteCreateRef, RouteUpdateRef, RouteMergeBranch, RouteGetCommit,
		RouteGetApp,
	}
}

func (s *Server) routes() {
	handlers := map[string]http.HandlerFunc{
		RouteCreateToken:        s.createToken,
		RouteInstallationRepos:  s.installationRepos,
		RouteRateLimit:          s.getRateLimit,
		RouteListPulls:          s.listPulls,
		RouteGetPull:            s.getPull,
		RouteMerge:              s.mergePull,
		RouteUpdateBranch:       s.updateBranch,
		RouteGetProtection:      s.getProtection,
		RouteGetRequiredChecks:  s.getRequiredChecks,
		RouteGetBranchRules:     s.getBranchRules,
		RouteListCheckRuns:      s.listCheckRuns,
		RouteCombinedStatus:     s.combinedStatus,
		RouteCreateComment:      s.createComment,
		RouteRemoveLabel:        s.removeLabel,
		RouteCreateCheckRun:     s.createCheckRun,
		RouteUpdateCheckRun:     s.updateCheckRun,
		RouteCreateCommitStatus: s.createCommitStatus,
		RouteListInstallations:  s.listInstallations,
		RouteIssueEvents:        s.listIssueEvents,
		RouteGetRepo:            s.getRepo,
		RouteListReviews:        s.listReviews,
		RouteListCheckSuites:    s.listCheckSuites,
		RouteListDeliveries:     s.listDeliveries,
		RouteRedeliver:          s.redeliver,
		RouteGetContent:         s.getContent,
		RouteGetPermission:      s.getPermission,
		RouteCreateReaction:     s.createReaction,
		RouteDeleteRef:          s.deleteRef,
		RouteAddLabels:          s.addLabels,
		RouteListPullCommits:    s.listPullCommits,
		RouteGraphQL:            s.graphQL,
		RouteGetRef:             s.getRef,
		RouteMatchingRefs:       s.matchingRefs,
		RouteCreateRef:          s.createRef,
		RouteUpdateRef:          s.updateRef,
		RouteMergeBranch:        s.mergeBranch,
		RouteGetCommit:          s.getCommit,
		RouteGetApp:             s.getApp,
	}
	for route, h := range handlers {
		method, path, _ := strings.Cut(route, " ")
		// Branch names, paths and refs may hold slashes, sent unescaped.
		switch route {
		case RouteGetBranchRules:
			path = strings.Replace(path, "{branch}", "{branch...}", 1)
		case RouteGetContent:
			path = strings.Replace(path, "{path}", "{path...}", 1)
		case RouteDeleteRef, RouteGetRef, RouteUpdateRef, RouteMatchingRefs:
			path = strings.Replace(path, "{ref}", "{ref...}", 1)
		case RouteGraphQL:
			s.mux.HandleFunc(method+" "+s.graphQLPath(), h)
			continue
		}
		s.mux.HandleFunc(method+" "+s.prefix+path, h)
	}
	s.manifestRoutes()
}

// routeOf maps a registered mux pattern back to its route constant ("" when
// no route matched).
func (s *Server) routeOf(pattern string) string {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		return ""
	}
	if method+" "+path == "POST "+s.graphQLPath() {
		return RouteGraphQL
	}
	path = strings.TrimPrefix(path, s.prefix)
	for _, p := range []string{"branch", "path", "ref"} {
		path = strings.Replace(path, "{"+p+"...}", "{"+p+"}", 1)
	}
	return method + " " + path
}

func knownRoute(route string) bool {
	for _, r := range Routes() {
		if r == route {
			return true
		}
	}
	return false
}
