package forge

import (
	"context"
	"errors"
)

// errNotYet marks a read whose implementation is being written.
var errNotYet = errors.New("forge: not implemented yet")

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
	return nil, errNotYet
}

// Reviews sums up a pull request's reviews: each reviewer's latest
// APPROVED, CHANGES_REQUESTED or DISMISSED review counts (COMMENTED ones
// do not change a reviewer's state).
type Reviews struct {
	Approvals        int
	ChangesRequested []string // logins whose latest review requests changes
}

// Reviews reads PR number's reviews (GET .../pulls/{n}/reviews, all pages).
func (c *Client) Reviews(ctx context.Context, tenant, repo string, number int) (Reviews, error) {
	return Reviews{}, errNotYet
}

// MergeMethods reads the merge methods repo allows (GET /repos/{o}/{r}).
func (c *Client) MergeMethods(ctx context.Context, tenant, repo string) (MergeMethods, error) {
	return MergeMethods{}, errNotYet
}

// Refusal sorts GitHub's refusal of a merge or a branch update by whose it
// is to fix: the author's, GitHub's own (retry), or the operator's.
type Refusal int

const (
	// RefusedOther is a refusal not recognised: the author's, with
	// GitHub's message.
	RefusedOther Refusal = iota
	// The author's.
	RefusedConflict // 405 "Pull Request is not mergeable" (conflicts), 422 merge conflict on update-branch
	RefusedChecks   // 405 "Required status check ... is expected / failing"
	RefusedDraft    // 405 "Pull Request is still a draft"
	RefusedClosed   // 405/422 the pull request is closed
	// GitHub settles these by itself, or a re-read does.
	RefusedHeadModified // 409 on merge, 422 "expected head sha didn't match" on update-branch
	RefusedBaseModified // 405 "Base branch was modified. Review and try the merge again."
	RefusedBehind       // 405 "Head branch is not up to date with the base branch"
	RefusedReview       // 405 approving review required, changes requested, code owner review
	RefusedNoNewCommits // 422 "There are no new commits on the base branch."
	RefusedMethod       // 405 "Merge commits are not allowed on this repository." (squash, rebase alike)
	// The operator's.
	RefusedMergeQueue    // 405 "Changes must be made through the merge queue"
	RefusedNotAuthorized // 405 "You're not authorized to push to this branch..." / 403 not accessible
	RefusedWorkflows     // 403 a change under .github/workflows without the workflows permission
)

// RefusalOf sorts err when it is GitHub's refusal of a merge or an
// update-branch (a *MergeError, or a 403 *APIError of those calls) and
// returns GitHub's message; ok is false for any other error.
func RefusalOf(err error) (r Refusal, message string, ok bool) {
	return RefusedOther, "", false
}
