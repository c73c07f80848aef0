package forge

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// GraphQLURL is the GraphQL endpoint that goes with a REST base URL:
// https://api.github.com/graphql for github.com, https://HOST/api/graphql
// for GitHub Enterprise Server (REST at https://HOST/api/v3/), and
// base + "graphql" for any other base (a test server).
func GraphQLURL(base *url.URL) string {
	u := *base
	u.RawQuery, u.Fragment = "", ""
	if strings.EqualFold(u.Host, "api.github.com") {
		return "https://api.github.com/graphql"
	}
	p := strings.TrimRight(u.Path, "/")
	if strings.HasSuffix(p, "/api/v3") {
		u.Path = strings.TrimSuffix(p, "/v3") + "/graphql"
		return u.String()
	}
	u.Path = p + "/graphql"
	return u.String()
}

// rebaseMutation is GitHub's updatePullRequestBranch with updateMethod REBASE.
const rebaseMutation = `mutation($pullRequestId: ID!, $expectedHeadOid: GitObjectID) {
  updatePullRequestBranch(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid, updateMethod: REBASE}) {
    pullRequest { headRefOid }
  }
}`

type graphQLError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// RebaseBranch asks GitHub to rebase the PR's head branch onto its base
// (GraphQL updatePullRequestBranch with updateMethod REBASE; the REST
// update-branch only merges). nodeID is the PR's node_id (PR.NodeID); ""
// reads the PR first. expectedHeadSHA guards against a head that moved.
// It returns the head GitHub reports after the call ("" when it did not
// say). A rebase rewrites the branch's commits: the new head's checks run
// again, and a pull_request synchronize event follows.
//
// Errors are UpdateBranch's: GitHub's refusals (GraphQL errors, which come
// with HTTP 200) are *MergeError with Op "update-branch" (Status 403 for
// FORBIDDEN, 422 otherwise), sorted by RefusalOf; NOT_FOUND is a 404
// *APIError.
func (c *Client) RebaseBranch(ctx context.Context, tenant, repo string, number int, nodeID, expectedHeadSHA string) (string, error) {
	if nodeID == "" {
		pr, err := c.GetPR(ctx, tenant, repo, number)
		if err != nil {
			return "", err
		}
		if nodeID = pr.NodeID; nodeID == "" {
			return "", fmt.Errorf("forge: %s#%d has no node_id to rebase it by", repo, number)
		}
	}
	ctx, in, _, _, cl, err := c.begin(ctx, "graphql.update-pull-request-branch", tenant, repo)
	if err != nil {
		return "", err
	}
	cl.op, cl.number, cl.sha = "update-branch", number, expectedHeadSHA
	vars := map[string]any{"pullRequestId": nodeID}
	if expectedHeadSHA != "" {
		vars["expectedHeadOid"] = expectedHeadSHA
	}
	req, err := in.gh.NewRequest(http.MethodPost, GraphQLURL(c.base), map[string]any{"query": rebaseMutation, "variables": vars})
	if err != nil {
		return "", err
	}
	var out struct {
		Data struct {
			UpdatePullRequestBranch *struct {
				PullRequest struct {
					HeadRefOid string `json:"headRefOid"`
				} `json:"pullRequest"`
			} `json:"updatePullRequestBranch"`
		} `json:"data"`
		Errors []graphQLError `json:"errors"`
	}
	if _, err := in.gh.Do(ctx, req, &out); err != nil {
		return "", cl.classify(ctx, err, true)
	}
	if len(out.Errors) > 0 {
		return "", cl.fromGraphQL(out.Errors)
	}
	if out.Data.UpdatePullRequestBranch == nil {
		return "", fmt.Errorf("github %s (installation %s, %s): updatePullRequestBranch answered no data and no errors", cl.op, cl.tenant, cl.repo)
	}
	return out.Data.UpdatePullRequestBranch.PullRequest.HeadRefOid, nil
}

// fromGraphQL sorts GraphQL errors (HTTP 200) like the REST statuses.
func (c call) fromGraphQL(errs []graphQLError) error {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Message)
	}
	msg := strings.Join(msgs, "; ")
	switch strings.ToUpper(errs[0].Type) {
	case "NOT_FOUND":
		return &APIError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Status: http.StatusNotFound, Message: msg}
	case "FORBIDDEN":
		return &MergeError{Op: c.op, Repo: c.repo, Number: c.number, SHA: c.sha, Status: http.StatusForbidden, Message: msg}
	case "RATE_LIMITED", "INTERNAL", "SERVICE_UNAVAILABLE":
		return &TransientError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Status: http.StatusOK, Err: fmt.Errorf("graphql %s: %s", errs[0].Type, msg)}
	}
	return &MergeError{Op: c.op, Repo: c.repo, Number: c.number, SHA: c.sha, Status: http.StatusUnprocessableEntity, Message: msg}
}
