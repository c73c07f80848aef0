package forge_test

import (
	"errors"
	"testing"

	"github.com/mergegate/mergegate/forge"
)

// GitHub's own messages, as bots quoting them report them (see the fake's
// messages.go for where each was confirmed).
func TestRefusalOf(t *testing.T) {
	merge := func(status int, msg string) error {
		return &forge.MergeError{Op: "merge", Repo: "o/r", Number: 1, SHA: "abc", Status: status, Message: msg}
	}
	update := func(status int, msg string) error {
		return &forge.MergeError{Op: "update-branch", Repo: "o/r", Number: 1, SHA: "abc", Status: status, Message: msg}
	}
	enqueue := func(status int, msg string) error {
		return &forge.MergeError{Op: "enqueue", Repo: "o/r", Number: 1, SHA: "abc", Status: status, Message: msg}
	}
	cases := []struct {
		err  error
		want forge.Refusal
	}{
		{merge(405, "Pull Request is not mergeable"), forge.RefusedConflict},
		{update(422, "merge conflict between base and head"), forge.RefusedConflict},
		{merge(405, `Required status check "ci/build" is expected.`), forge.RefusedChecks},
		{merge(405, "Pull Request is still a draft"), forge.RefusedDraft},
		{update(422, "Pull request is closed"), forge.RefusedClosed},
		{merge(409, "Head branch was modified. Review and try the merge again."), forge.RefusedHeadModified},
		{update(422, "expected head sha didn't match current head ref."), forge.RefusedHeadModified},
		{merge(405, "Base branch was modified. Review and try the merge again."), forge.RefusedBaseModified},
		{update(422, "rebase not prepared"), forge.RefusedBaseModified}, // the GraphQL rebase, right after a push
		{merge(405, "Head branch is not up to date with the base branch"), forge.RefusedBehind},
		{merge(405, "At least 1 approving review is required by reviewers with write access."), forge.RefusedReview},
		{merge(405, "At least 2 approving reviews are required by reviewers with write access."), forge.RefusedReview},
		{merge(405, "Changes requested by reviewers with write access."), forge.RefusedReview},
		// A ruleset's pull_request rule (microsoft/winget-pkgs#379724).
		{merge(405, "Repository rule violations found\n\nWaiting on 1 more approval from a reviewer with write access.\n\n"), forge.RefusedReview},
		{update(422, "There are no new commits on the base branch."), forge.RefusedNoNewCommits},
		{merge(405, "Merge commits are not allowed on this repository."), forge.RefusedMethod},
		{merge(405, "Squash merges are not allowed on this repository."), forge.RefusedMethod},
		{merge(405, "Rebase merges are not allowed on this repository."), forge.RefusedMethod},
		{merge(405, "This branch must not contain merge commits."), forge.RefusedMethod},
		{merge(405, "Changes must be made through the merge queue"), forge.RefusedMergeQueue},
		{merge(405, "You're not authorized to push to this branch. Visit https://docs.github.com/articles/about-protected-branches/ for more information."), forge.RefusedNotAuthorized},
		{update(403, "user doesn't have permission to update head repository"), forge.RefusedNotAuthorized},
		{merge(403, "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission"), forge.RefusedWorkflows},
		{update(403, "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission"), forge.RefusedWorkflows},
		{&forge.APIError{Op: "merge", Status: 403, Message: "Resource not accessible by integration"}, forge.RefusedNotAuthorized},
		// enqueuePullRequest's GraphQL errors (HTTP 200, sorted like the
		// REST statuses: FORBIDDEN 403, otherwise 422), as its users
		// quote them (devantler-tech/platform#3138, github/app#93,
		// ClickHouse/ClickHouse#109183) and the fake's for the rest.
		{enqueue(422, "Pull request Required workflow '✅ Validate Go Project' is not satisfied"), forge.RefusedChecks},
		{enqueue(422, "Pull request Waiting on code owner review from octo-org/core"), forge.RefusedReview},
		{enqueue(422, `Pull request Required status check "ci/build" is expected.`), forge.RefusedChecks},
		{enqueue(422, "Pull request is not ready for the merge queue"), forge.RefusedChecks},
		{enqueue(422, "expected head oid didn't match current head ref."), forge.RefusedHeadModified},
		{enqueue(422, "No merge queue found for branch main"), forge.RefusedMergeQueue},
		{enqueue(422, "Pull request has merge conflicts"), forge.RefusedConflict},
		{enqueue(422, "Pull request is still a draft"), forge.RefusedDraft},
		{enqueue(403, "Resource not accessible by integration"), forge.RefusedNotAuthorized},
		{merge(405, "Something GitHub has not said before"), forge.RefusedOther},
	}
	for _, c := range cases {
		var msg string
		var me *forge.MergeError
		var ae *forge.APIError
		if errors.As(c.err, &me) {
			msg = me.Message
		} else if errors.As(c.err, &ae) {
			msg = ae.Message
		}
		got, gotMsg, ok := forge.RefusalOf(c.err)
		if !ok || got != c.want || gotMsg != msg {
			t.Errorf("RefusalOf(%v) = %d, %q, %v; want %d, %q, true", c.err, got, gotMsg, ok, c.want, msg)
		}
	}
	for _, err := range []error{
		&forge.APIError{Op: "pulls.get", Status: 403, Message: "Resource not accessible by integration"},
		&forge.APIError{Op: "merge", Status: 404, Message: "Not Found"},
		&forge.RateLimitError{Tenant: "1", Status: 403},
		&forge.TransientError{Op: "merge", Status: 502},
		errors.New("anything"),
	} {
		if r, msg, ok := forge.RefusalOf(err); ok {
			t.Errorf("RefusalOf(%v) = %d, %q, true; want not a refusal", err, r, msg)
		}
	}
}
