package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/go-github/v62/github"
)

// CheckSuite is one App's check suite on a commit.
type CheckSuite struct {
	AppID   int64
	AppSlug string
	Status  string // queued, in_progress, completed
	// Conclusion is set once completed: success, failure, neutral, ...
	Conclusion string
	// Runs is latest_check_runs_count: a suite with no runs stays queued
	// forever on GitHub and says nothing about the commit.
	Runs int
}

// CheckSuites lists the check suites on sha of every App but this one
// (GET /repos/{o}/{r}/commits/{ref}/check-suites, all pages).
func (c *Client) CheckSuites(ctx context.Context, tenant, repo, sha string) ([]CheckSuite, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "checks.list-suites-for-ref", tenant, repo)
	if err != nil {
		return nil, err
	}
	cl.sha = sha
	// go-github's CheckSuite has no latest_check_runs_count.
	type suite struct {
		Status     string `json:"status"`
		Conclusion string `json:"conclusion"`
		Runs       int    `json:"latest_check_runs_count"`
		App        struct {
			ID   int64  `json:"id"`
			Slug string `json:"slug"`
		} `json:"app"`
	}
	var out []CheckSuite
	for page := 1; ; {
		u := fmt.Sprintf("repos/%s/%s/commits/%s/check-suites?per_page=100&page=%d", owner, name, sha, page)
		hreq, err := in.gh.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		var res struct {
			Suites []suite `json:"check_suites"`
		}
		resp, err := in.gh.Do(ctx, hreq, &res)
		if err != nil {
			return nil, cl.classify(ctx, err, false)
		}
		for _, s := range res.Suites {
			if s.App.ID == c.cfg.AppID {
				continue
			}
			out = append(out, CheckSuite{AppID: s.App.ID, AppSlug: s.App.Slug, Status: s.Status, Conclusion: s.Conclusion, Runs: s.Runs})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		page = resp.NextPage
	}
}

// Reviews reads PR number's reviews (GET .../pulls/{n}/reviews, all pages).
func (c *Client) Reviews(ctx context.Context, tenant, repo string, number int) (Reviews, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "pulls.list-reviews", tenant, repo)
	if err != nil {
		return Reviews{}, err
	}
	cl.number = number
	// GitHub lists reviews oldest first: a later review replaces the
	// reviewer's state.
	latest := map[string]string{}
	opts := &github.ListOptions{PerPage: 100}
	for {
		page, resp, err := in.gh.PullRequests.ListReviews(ctx, owner, name, number, opts)
		if err != nil {
			return Reviews{}, cl.classify(ctx, err, false)
		}
		for _, r := range page {
			login := r.GetUser().GetLogin()
			switch state := r.GetState(); {
			case login == "": // a deleted account (ghost)
			case state == "APPROVED", state == "CHANGES_REQUESTED":
				latest[login] = state
			case state == "DISMISSED":
				delete(latest, login)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	var out Reviews
	for login, state := range latest {
		if state == "APPROVED" {
			out.Approvals++
		} else {
			out.ChangesRequested = append(out.ChangesRequested, login)
		}
	}
	sort.Strings(out.ChangesRequested)
	return out, nil
}

// MergeMethods reads the merge methods repo allows (GET /repos/{o}/{r}).
func (c *Client) MergeMethods(ctx context.Context, tenant, repo string) (MergeMethods, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "repos.get", tenant, repo)
	if err != nil {
		return MergeMethods{}, err
	}
	r, _, err := in.gh.Repositories.Get(ctx, owner, name)
	if err != nil {
		return MergeMethods{}, cl.classify(ctx, err, false)
	}
	if r.AllowMergeCommit == nil && r.AllowSquashMerge == nil && r.AllowRebaseMerge == nil {
		// GitHub did not say (a token that may not see the settings):
		// every method is tried, and a refusal sorted as usual.
		return MergeMethods{Merge: true, Squash: true, Rebase: true}, nil
	}
	return MergeMethods{Merge: r.GetAllowMergeCommit(), Squash: r.GetAllowSquashMerge(), Rebase: r.GetAllowRebaseMerge()}, nil
}

// RefusalOf sorts err when it is GitHub's refusal of a merge, an
// update-branch or an enqueue in its merge queue (a *MergeError, or a 403
// *APIError of those calls) and
// returns GitHub's message; ok is false for any other error.
func RefusalOf(err error) (r Refusal, message string, ok bool) {
	var status int
	var me *MergeError
	var ae *APIError
	switch {
	case errors.As(err, &me):
		status, message = me.Status, me.Message
	case errors.As(err, &ae) && ae.Status == http.StatusForbidden && isMergeOp(ae.Op):
		status, message = ae.Status, ae.Message
	default:
		return RefusedOther, "", false
	}
	m := strings.ToLower(message)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(m, s) {
				return true
			}
		}
		return false
	}
	// The order matters where messages share words: "workflow" before
	// "permission", "merge queue" before "not mergeable", "Base branch was
	// modified" before "Head branch was modified".
	switch {
	case has("workflow") && has("permission", "scope"):
		return RefusedWorkflows, message, true
	case has("not ready for the merge queue"):
		// enqueuePullRequest for a pull request whose requirements (its
		// checks, its reviews) are not met yet.
		return RefusedChecks, message, true
	case has("merge queue"):
		return RefusedMergeQueue, message, true
	case has("not authorized to push", "resource not accessible", "permission to update head repository", "head repository does not exist"):
		return RefusedNotAuthorized, message, true
	case has("base branch was modified", "rebase not prepared"):
		// GitHub is still settling: after a push, the GraphQL rebase can
		// answer "rebase not prepared" for a moment (cli/cli's users quote
		// it); both are tried again shortly.
		return RefusedBaseModified, message, true
	case status == http.StatusConflict, has("expected head sha", "expected head oid", "head branch was modified"):
		return RefusedHeadModified, message, true
	case has("merges are not allowed", "merge commits are not allowed", "must not contain merge commits"):
		return RefusedMethod, message, true
	case has("no new commits"):
		return RefusedNoNewCommits, message, true
	case has("not up to date", "out of date", "out-of-date"):
		return RefusedBehind, message, true
	case has("approving review", "review required", "review is required", "code owner", "changes requested",
		"more approval"): // a ruleset's "Waiting on 1 more approval from a reviewer with write access"
		return RefusedReview, message, true
	case has("draft"):
		return RefusedDraft, message, true
	case has("status check", "required workflow"):
		// "Required workflow '...' is not satisfied": GitHub's answer to
		// enqueuePullRequest for a head a required workflow never ran on.
		return RefusedChecks, message, true
	case has("is closed", "pull request closed", "already merged"):
		return RefusedClosed, message, true
	case has("not mergeable", "merge conflict"):
		return RefusedConflict, message, true
	}
	return RefusedOther, message, true
}

// isMergeOp: the operations whose refusals RefusalOf sorts.
func isMergeOp(op string) bool {
	switch op {
	case "merge", "update-branch", "enqueue", "pulls.merge", "pulls.update-branch":
		return true
	}
	return false
}
