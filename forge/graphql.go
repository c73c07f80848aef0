package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
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
	Code    string `json:"code"`
	Message string `json:"message"`
}

// kind is the error's type, with GitHub's two spellings of a spent quota
// made one: its reference documents RATE_LIMITED, and it answers
// RATE_LIMIT with code graphql_rate_limit (octokit/plugin-throttling.js
// #824, githubkit #271, Kodiak #906).
func (e graphQLError) kind() string {
	t := strings.ToUpper(e.Type)
	if t == "RATE_LIMIT" || strings.EqualFold(e.Code, "graphql_rate_limit") {
		return "RATE_LIMITED"
	}
	return t
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
	resp, err := in.gh.Do(ctx, req, &out)
	if err != nil {
		return "", cl.classify(ctx, err, true)
	}
	if len(out.Errors) > 0 {
		return "", cl.fromGraphQL(out.Errors, resp)
	}
	if out.Data.UpdatePullRequestBranch == nil {
		return "", fmt.Errorf("github %s (installation %s, %s): updatePullRequestBranch answered no data and no errors", cl.op, cl.tenant, cl.repo)
	}
	return out.Data.UpdatePullRequestBranch.PullRequest.HeadRefOid, nil
}

// fromGraphQL sorts GraphQL errors (HTTP 200) like the REST statuses. A
// spent quota's answer (RATE_LIMITED, or RATE_LIMIT as GitHub sends it)
// whose headers say when the GraphQL quota resets is a *RateLimitError
// until then: retried sooner, it would only be refused again (and GitHub
// may answer a client that keeps trying with a secondary limit).
func (c call) fromGraphQL(errs []graphQLError, resp *github.Response) error {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Message)
	}
	msg := strings.Join(msgs, "; ")
	switch errs[0].kind() {
	case "NOT_FOUND":
		return &APIError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Status: http.StatusNotFound, Message: msg}
	case "FORBIDDEN":
		return &MergeError{Op: c.op, Repo: c.repo, Number: c.number, SHA: c.sha, Status: http.StatusForbidden, Message: msg}
	case "RATE_LIMITED":
		if resp != nil {
			if reset, err := strconv.ParseInt(resp.Header.Get(graphQLResetHeader), 10, 64); err == nil && reset > 0 {
				return &RateLimitError{Tenant: c.tenant, RetryAt: time.Unix(reset, 0), GraphQL: true, Status: http.StatusOK, Message: msg}
			}
		}
		fallthrough // no reset: transient, as GitHub's other passing errors
	case "INTERNAL", "SERVICE_UNAVAILABLE":
		return &TransientError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Status: http.StatusOK, Err: fmt.Errorf("graphql %s: %s", errs[0].Type, msg)}
	}
	return &MergeError{Op: c.op, Repo: c.repo, Number: c.number, SHA: c.sha, Status: http.StatusUnprocessableEntity, Message: msg}
}

const queueEntryFields = `position state mergeQueue { entries { totalCount } }`

// enqueueMutation is GitHub's enqueuePullRequest (input: pullRequestId,
// jump, expectedHeadOid; payload: mergeQueueEntry).
const enqueueMutation = `mutation($pullRequestId: ID!, $expectedHeadOid: GitObjectID) {
  enqueuePullRequest(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) {
    mergeQueueEntry { ` + queueEntryFields + ` }
  }
}`

// queueQuery reads a pull request's merge queue entry and its last merge
// queue event (the reason it left, when it did).
const queueQuery = `query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      mergeQueueEntry { ` + queueEntryFields + ` }
      timelineItems(last: 1, itemTypes: [ADDED_TO_MERGE_QUEUE_EVENT, REMOVED_FROM_MERGE_QUEUE_EVENT]) {
        nodes { __typename ... on RemovedFromMergeQueueEvent { createdAt reason } }
      }
    }
  }
}`

type queueEntryJSON struct {
	Position   int    `json:"position"`
	State      string `json:"state"`
	MergeQueue *struct {
		Entries struct {
			TotalCount int `json:"totalCount"`
		} `json:"entries"`
	} `json:"mergeQueue"`
}

func (q *queueEntryJSON) entry() QueueEntry {
	e := QueueEntry{Position: q.Position, State: q.State}
	if q.MergeQueue != nil {
		e.Size = q.MergeQueue.Entries.TotalCount
	}
	return e
}

// EnqueuePR adds the PR to its base's merge queue (GraphQL
// enqueuePullRequest), guarded by expectedHeadSHA: GitHub refuses it when
// the head moved. nodeID is the PR's node_id (PR.NodeID); "" reads the PR
// first. A PR already in the queue is success: its entry is read and
// returned.
//
// GitHub's refusals (GraphQL errors, HTTP 200) are *MergeError with Op
// "enqueue" (Status 403 for FORBIDDEN, 422 otherwise), sorted by
// RefusalOf: a moved head (RefusedHeadModified), checks or reviews GitHub
// does not count yet (RefusedChecks, RefusedReview), conflicts
// (RefusedConflict), no merge queue on the base (RefusedMergeQueue), an
// App that may not (RefusedNotAuthorized).
func (c *Client) EnqueuePR(ctx context.Context, tenant, repo string, number int, nodeID, expectedHeadSHA string) (QueueEntry, error) {
	if nodeID == "" {
		pr, err := c.GetPR(ctx, tenant, repo, number)
		if err != nil {
			return QueueEntry{}, err
		}
		if nodeID = pr.NodeID; nodeID == "" {
			return QueueEntry{}, fmt.Errorf("forge: %s#%d has no node_id to enqueue it by", repo, number)
		}
	}
	ctx2, in, _, _, cl, err := c.begin(ctx, "graphql.enqueue-pull-request", tenant, repo)
	if err != nil {
		return QueueEntry{}, err
	}
	cl.op, cl.number, cl.sha = "enqueue", number, expectedHeadSHA
	vars := map[string]any{"pullRequestId": nodeID}
	if expectedHeadSHA != "" {
		vars["expectedHeadOid"] = expectedHeadSHA
	}
	req, err := in.gh.NewRequest(http.MethodPost, GraphQLURL(c.base), map[string]any{"query": enqueueMutation, "variables": vars})
	if err != nil {
		return QueueEntry{}, err
	}
	var out struct {
		Data struct {
			EnqueuePullRequest *struct {
				MergeQueueEntry *queueEntryJSON `json:"mergeQueueEntry"`
			} `json:"enqueuePullRequest"`
		} `json:"data"`
		Errors []graphQLError `json:"errors"`
	}
	resp, err := in.gh.Do(ctx2, req, &out)
	if err != nil {
		return QueueEntry{}, cl.classify(ctx2, err, true)
	}
	if len(out.Errors) > 0 {
		err := cl.fromGraphQL(out.Errors, resp)
		if IsAlreadyQueued(err) {
			e, _, qerr := c.QueuePosition(ctx, tenant, repo, number)
			if qerr != nil {
				return QueueEntry{}, qerr
			}
			return e, nil
		}
		return QueueEntry{}, err
	}
	p := out.Data.EnqueuePullRequest
	if p == nil || p.MergeQueueEntry == nil {
		return QueueEntry{}, fmt.Errorf("github %s (installation %s, %s): enqueuePullRequest answered no entry and no errors", cl.op, cl.tenant, cl.repo)
	}
	return p.MergeQueueEntry.entry(), nil
}

// IsAlreadyQueued reports whether err is GitHub's refusal to enqueue a
// pull request that is in the merge queue already ("Pull request is
// already in the queue").
func IsAlreadyQueued(err error) bool {
	var me *MergeError
	if !errors.As(err, &me) || me.Op != "enqueue" {
		return false
	}
	m := strings.ToLower(me.Message)
	return strings.Contains(m, "already in the queue") || strings.Contains(m, "already queued") || strings.Contains(m, "already enqueued")
}

// QueuePosition reads the PR's entry in GitHub's merge queue (GraphQL
// pullRequest.mergeQueueEntry, with its queue's size); queued is false when
// it is not in the queue, and the entry then says why it last left it, if
// it did (Removed).
func (c *Client) QueuePosition(ctx context.Context, tenant, repo string, number int) (QueueEntry, bool, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "graphql.merge-queue-entry", tenant, repo)
	if err != nil {
		return QueueEntry{}, false, err
	}
	cl.number = number
	vars := map[string]any{"owner": owner, "name": name, "number": number}
	req, err := in.gh.NewRequest(http.MethodPost, GraphQLURL(c.base), map[string]any{"query": queueQuery, "variables": vars})
	if err != nil {
		return QueueEntry{}, false, err
	}
	var out struct {
		Data struct {
			Repository *struct {
				PullRequest *struct {
					MergeQueueEntry *queueEntryJSON `json:"mergeQueueEntry"`
					TimelineItems   struct {
						Nodes []struct {
							Typename  string    `json:"__typename"`
							CreatedAt time.Time `json:"createdAt"`
							Reason    string    `json:"reason"`
						} `json:"nodes"`
					} `json:"timelineItems"`
				} `json:"pullRequest"`
			} `json:"repository"`
		} `json:"data"`
		Errors []graphQLError `json:"errors"`
	}
	resp, err := in.gh.Do(ctx, req, &out)
	if err != nil {
		return QueueEntry{}, false, cl.classify(ctx, err, false)
	}
	if len(out.Errors) > 0 {
		err := cl.fromGraphQL(out.Errors, resp)
		var me *MergeError
		if errors.As(err, &me) { // a query refused is the operator's, not a refusal to sort
			return QueueEntry{}, false, &APIError{Op: cl.op, Tenant: cl.tenant, Repo: cl.repo, Status: me.Status, Message: me.Message}
		}
		return QueueEntry{}, false, err
	}
	if out.Data.Repository == nil || out.Data.Repository.PullRequest == nil {
		return QueueEntry{}, false, &APIError{Op: cl.op, Tenant: cl.tenant, Repo: cl.repo, Status: http.StatusNotFound, Message: "pull request not found"}
	}
	pr := out.Data.Repository.PullRequest
	if pr.MergeQueueEntry != nil {
		return pr.MergeQueueEntry.entry(), true, nil
	}
	var e QueueEntry
	if n := pr.TimelineItems.Nodes; len(n) > 0 && n[len(n)-1].Typename == "RemovedFromMergeQueueEvent" {
		e.Removed, e.RemovedAt = n[len(n)-1].Reason, n[len(n)-1].CreatedAt
	}
	return e, false, nil
}

// queueEntriesQuery reads a base's merge queue: every entry's place.
const queueEntriesQuery = `query($owner: String!, $name: String!, $branch: String!) {
  repository(owner: $owner, name: $name) {
    mergeQueue(branch: $branch) {
      entries(first: 100) { totalCount nodes { position state pullRequest { number } } }
    }
  }
}`

// MergeQueueEntries reads the entries of branch's merge queue on GitHub in
// one query (repository.mergeQueue(branch)), by pull request number: what
// the check runs say of each. A branch without a queue has none.
func (c *Client) MergeQueueEntries(ctx context.Context, tenant, repo, branch string) (map[int]QueueEntry, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "graphql.merge-queue", tenant, repo)
	if err != nil {
		return nil, err
	}
	vars := map[string]any{"owner": owner, "name": name, "branch": branch}
	req, err := in.gh.NewRequest(http.MethodPost, GraphQLURL(c.base), map[string]any{"query": queueEntriesQuery, "variables": vars})
	if err != nil {
		return nil, err
	}
	var out struct {
		Data struct {
			Repository *struct {
				MergeQueue *struct {
					Entries struct {
						TotalCount int `json:"totalCount"`
						Nodes      []struct {
							Position    int    `json:"position"`
							State       string `json:"state"`
							PullRequest *struct {
								Number int `json:"number"`
							} `json:"pullRequest"`
						} `json:"nodes"`
					} `json:"entries"`
				} `json:"mergeQueue"`
			} `json:"repository"`
		} `json:"data"`
		Errors []graphQLError `json:"errors"`
	}
	resp, err := in.gh.Do(ctx, req, &out)
	if err != nil {
		return nil, cl.classify(ctx, err, false)
	}
	if len(out.Errors) > 0 {
		err := cl.fromGraphQL(out.Errors, resp)
		var me *MergeError
		if errors.As(err, &me) {
			return nil, &APIError{Op: cl.op, Tenant: cl.tenant, Repo: cl.repo, Status: me.Status, Message: me.Message}
		}
		return nil, err
	}
	entries := map[int]QueueEntry{}
	if r := out.Data.Repository; r != nil && r.MergeQueue != nil {
		for _, n := range r.MergeQueue.Entries.Nodes {
			if n.PullRequest != nil {
				entries[n.PullRequest.Number] = QueueEntry{Position: n.Position, State: n.State, Size: r.MergeQueue.Entries.TotalCount}
			}
		}
	}
	return entries, nil
}
