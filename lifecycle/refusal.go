package lifecycle

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
