package fakegithub

// GitHub's messages for refused merges and branch updates, as GitHub
// sends them and as the bots that quote them report them (issue threads
// of Mergify, Kodiak, pascalgn/automerge-action, nixpkgs-merge-bot,
// claroline/Distribution, gitea-backporter...). The fake answers with
// these, and forge.RefusalOf sorts them.
const (
	// 405 on merge when the base moved while GitHub was merging: retrying
	// works. Not produced by the fake's own rules; inject it with
	// Fail(RouteMerge, 1, FaultBaseModified()).
	MsgBaseModified = "Base branch was modified. Review and try the merge again."
	// 409 on merge when the sha guard is not the head.
	MsgHeadModified = "Head branch was modified. Review and try the merge again."
	// 405 on merge: conflicts, or a closed pull request.
	MsgNotMergeable = "Pull Request is not mergeable"
	MsgDraft        = "Pull Request is still a draft"
	// 405 on merge when a ruleset requires GitHub's merge queue.
	MsgMergeQueue = "Changes must be made through the merge queue"
	// 405 on merge when the branch restricts who may push (the App is not
	// in the list).
	MsgNotAuthorized = "You're not authorized to push to this branch. Visit https://docs.github.com/articles/about-protected-branches/ for more information."
	// 405 on merge with a method the repository does not allow.
	MsgMergeCommitsNotAllowed = "Merge commits are not allowed on this repository."
	MsgSquashNotAllowed       = "Squash merges are not allowed on this repository."
	MsgRebaseNotAllowed       = "Rebase merges are not allowed on this repository."
	// 405 on a merge commit into a branch that requires linear history.
	MsgLinearHistory = "This branch must not contain merge commits."
	// MsgBehind is what GitHub's merge box says of a head behind a strict
	// base. The merge API answers MsgNotMergeable then (see mergePull);
	// mergegate still sorts this text as behind should GitHub send it.
	MsgBehind = "Head branch is not up to date with the base branch"
	// 405 on merge while reviews are missing: GitHub's merge box sentence
	// ("At least 2 approving reviews are required by reviewers with write
	// access." for more).
	MsgOneApprovalRequired = "At least 1 approving review is required by reviewers with write access."
	// 405 on merge while a reviewer's latest review requests changes. Not
	// confirmed from a quoted GitHub answer.
	MsgChangesRequested = "Changes requested by reviewers with write access."
	// 403 on merge and update-branch when the change touches
	// .github/workflows and the App lacks the workflows permission
	// (the path is the first workflow file changed).
	MsgWorkflowsFormat = "refusing to allow a GitHub App to create or update workflow `%s` without `workflows` permission"
	// 403 on update-branch of a fork's pull request whose author did not
	// allow edits from maintainers.
	MsgHeadRepoPermission = "user doesn't have permission to update head repository"
	// 422 on update-branch.
	MsgExpectedHeadSHA = "expected head sha didn't match current head ref."
	MsgNoNewCommits    = "There are no new commits on the base branch."
	MsgUpdateConflict  = "merge conflict between base and head"
	MsgUpdateClosed    = "Pull request is closed"
	// 403 on any request the installation's permissions do not cover
	// (FaultMissingPermission).
	MsgNotAccessible = "Resource not accessible by integration"
)

// FaultBaseModified is GitHub's 405 when the base branch moved during the
// merge (MsgBaseModified).
func FaultBaseModified() Fault { return FaultStatus(405, MsgBaseModified) }
