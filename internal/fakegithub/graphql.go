package fakegithub

import (
	"net/http"
	"regexp"
	"strings"
)

// RouteGraphQL is GitHub's GraphQL endpoint (POST /graphql on github.com,
// POST /api/graphql on GitHub Enterprise Server, where the REST API is
// under /api/v3). The fake answers the mutations updatePullRequestBranch
// and enqueuePullRequest, and the query of a pull request's
// mergeQueueEntry (mergequeue.go).
const RouteGraphQL = "POST /graphql"

// GraphQL error messages of the fake's updatePullRequestBranch (GitHub's
// exact words for these are not documented; the types are GitHub's).
const (
	MsgGraphQLExpectedHeadOid = "expected head oid didn't match current head ref."
	MsgGraphQLNotFound        = "Could not resolve to a node with the global id of '%s'"
)

// graphQLPath is where the GraphQL route is served for the REST prefix.
func (s *Server) graphQLPath() string {
	if strings.HasSuffix(s.prefix, "/api/v3") {
		return strings.TrimSuffix(s.prefix, "/v3") + "/graphql"
	}
	return s.prefix + "/graphql"
}

var updateBranchMutation = regexp.MustCompile(`\bmutation\b[\s\S]*\bupdatePullRequestBranch\s*\(`)
var rebaseArg = regexp.MustCompile(`updateMethod\s*:\s*(\$?\w+)`)

// graphQL serves updatePullRequestBranch: HTTP 200 with data, or with
// data.updatePullRequestBranch null and an errors array, as GitHub does.
func (s *Server) graphQL(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	fail := func(typ, msg string) {
		writeJSON(w, http.StatusOK, obj{
			"data":   obj{"updatePullRequestBranch": nil},
			"errors": []obj{{"type": typ, "path": []string{"updatePullRequestBranch"}, "message": msg}},
		})
	}
	switch {
	case enqueueMutationRe.MatchString(body.Query):
		s.gqlEnqueue(w, r, body.Variables)
		return
	case queueQueryRe.MatchString(body.Query):
		s.gqlQueue(w, r, body.Variables)
		return
	case queueEntryQueryRe.MatchString(body.Query):
		s.gqlQueueEntry(w, r, body.Variables)
		return
	case !updateBranchMutation.MatchString(body.Query):
		writeJSON(w, http.StatusOK, obj{"errors": []obj{{"message": "fakegithub answers only updatePullRequestBranch, enqueuePullRequest and pullRequest.mergeQueueEntry"}}})
		return
	}
	str := func(name string) string {
		v, _ := body.Variables[name].(string)
		return v
	}
	method := "MERGE"
	if m := rebaseArg.FindStringSubmatch(body.Query); m != nil {
		method = m[1]
		if strings.HasPrefix(method, "$") {
			method = str(method[1:])
		}
	}
	id := str("pullRequestId")
	rp, pr := s.prByNodeID(id, tenantOf(r))
	if pr == nil {
		fail("NOT_FOUND", strings.Replace(MsgGraphQLNotFound, "%s", id, 1))
		return
	}
	expected := str("expectedHeadOid")
	kind := "update"
	if method == "REBASE" {
		kind = "rebase"
	}
	status, msg := s.branchUpdate(rp, pr, expected, kind)
	switch {
	case status == 0:
		writeJSON(w, http.StatusOK, obj{"data": obj{"updatePullRequestBranch": obj{"pullRequest": obj{"headRefOid": pr.HeadSHA}}}})
	case msg == MsgExpectedHeadSHA:
		fail("UNPROCESSABLE", MsgGraphQLExpectedHeadOid)
	case status == http.StatusForbidden:
		fail("FORBIDDEN", msg)
	default:
		fail("UNPROCESSABLE", msg)
	}
}

// prByNodeID finds the PR whose node_id (prJSON's) is id, in tenant's repos.
func (s *Server) prByNodeID(id, tenant string) (*repo, *PR) {
	for _, rp := range s.repos {
		if rp.tenant != tenant {
			continue
		}
		for _, pr := range rp.prs {
			if nodeID("PR", rp.id*100000+int64(pr.Number)) == id {
				return rp, pr
			}
		}
	}
	return nil, nil
}
