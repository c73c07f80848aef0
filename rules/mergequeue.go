package rules

import (
	"fmt"
	"strings"

	"github.com/mergegate/mergegate/lifecycle"
)

// A base that uses GitHub's own merge queue (a ruleset's merge_queue rule)
// refuses direct merges. mergegate does not fight it: a pull request whose
// own gate passed is added to GitHub's queue (Enqueue), at the head sha
// that passed, and then waits there while GitHub tests and merges it.
// Entries on such a base do not wait for one another: GitHub's queue
// orders them; mergegate's order is the order it enqueues them in.

// Why GitHub's merge queue let a pull request go, or would not take it.
const (
	BounceMergeGroupFailed BounceKind = "merge_group_failed" // GitHub's merge queue removed it: its merge group failed
	BounceDequeued         BounceKind = "dequeued"           // someone removed it from GitHub's merge queue by hand
	BounceEnqueueRefused   BounceKind = "enqueue_refused"    // GitHub's merge queue would not take it
)

// mergeQueueBecause is Because for the merge queue's kinds.
func (b Bounced) mergeQueueBecause(detail string) string {
	switch b.Kind {
	case BounceMergeGroupFailed:
		return "GitHub's merge queue removed it: " + mergeGroupWhy(b.Detail, b.Base)
	case BounceDequeued:
		return "someone removed it from GitHub's merge queue by hand"
	}
	return "GitHub's merge queue would not take it" + inParens(detail)
}

// InGitHubQueuePrefix starts the reason of an entry mergegate added to
// GitHub's merge queue (its check run's title says its place there).
const InGitHubQueuePrefix = "in GitHub's merge queue"

// QueueReason is what an entry in GitHub's merge queue waits for:
// "in GitHub's merge queue (position 2 of 3)", with what GitHub says of
// its entry when that says more.
func QueueReason(e lifecycle.QueueEntry) string {
	place := fmt.Sprintf("position %d", e.Position)
	if e.Size > 0 {
		place += fmt.Sprintf(" of %d", e.Size)
	}
	switch e.State {
	case lifecycle.QueueStateAwaitingChecks:
		place += ", its merge group's checks running"
	case lifecycle.QueueStateMergeable:
		place += ", about to be merged"
	case lifecycle.QueueStateLocked:
		place += ", being merged"
	case lifecycle.QueueStateUnmergeable:
		place += ", GitHub reports it cannot be merged"
	}
	return InGitHubQueuePrefix + " (" + place + ")"
}

// InGitHubQueue: mergegate added the entry to GitHub's merge queue (and
// nothing has reset its reason since: a new head or base gates it
// again). Its place there is read even when the base's rules, as read, do
// not show the queue.
func InGitHubQueue(e lifecycle.Item) bool {
	return strings.HasPrefix(e.GateReason, InGitHubQueuePrefix)
}

// decideMergeQueue decides for an entry on a base that uses GitHub's
// merge queue, its checks passed:
//
//   - after GitHub refused to enqueue it: see decideEnqueueRefusal;
//   - in GitHub's queue: it waits there, saying its place;
//   - out of it after mergegate put it there: GitHub removed it. A failed
//     merge group (its checks, a conflict with the entries ahead, a
//     timeout) bounces it with GitHub's reason; removed by hand, it is
//     taken out too (its label removed), without blame: leaving it queued
//     with its label would make mergegate enqueue it again and fight the
//     person who removed it;
//   - frozen, held by a label or its title, or missing reviews the base
//     requires: it waits, as a head would;
//   - otherwise it is enqueued.
func decideMergeQueue(f Facts, p Policy) Action {
	if f.Refusal != nil && f.Refusal.Op == "enqueue" && f.PR != nil {
		return decideEnqueueRefusal(f, p)
	}
	if f.Queue != nil && f.InQueue {
		return waitPassed(QueueReason(*f.Queue))
	}
	if InGitHubQueue(f.Entry) && f.Queue != nil && f.Queue.Removed != "" {
		if removedByHand(f.Queue.Removed) {
			return bounce(Bounced{Kind: BounceDequeued, Detail: f.Queue.Removed, Base: f.Entry.BaseRef})
		}
		return bounce(Bounced{Kind: BounceMergeGroupFailed, Detail: f.Queue.Removed, Base: f.Entry.BaseRef})
	}
	if a, held := hold(f.PR, p); held {
		return a
	}
	if r := f.Reviews; r != nil {
		if len(r.ChangesRequested) > 0 {
			return waitPassed("changes requested by " + logins(r.ChangesRequested))
		}
		if r.Approvals < f.Rules.Reviews {
			if f.JustApproved {
				return reviewsLag
			}
			return waitPassed(approvals(f.Rules.Reviews, r.Approvals))
		}
	}
	return Action{Kind: Enqueue}
}

// removedByHand: GitHub's reason says a person took it out of the queue.
func removedByHand(reason string) bool {
	r := strings.ToLower(reason)
	return r == "manual" || strings.Contains(r, "manual") || strings.Contains(r, "removed by")
}

// decideEnqueueRefusal sorts GitHub's refusal to add the pull request to
// its merge queue (the pull request was read again since: rule 1 of
// Decide has seen it closed, merged or pushed to).
func decideEnqueueRefusal(f Facts, p Policy) Action {
	r, base := f.Refusal, f.PR.BaseRef
	msg := oneLine(r.Message)
	switch r.Kind {
	case lifecycle.RefusedHeadModified:
		return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "GitHub reported new commits; reading the pull request again"}
	case lifecycle.RefusedBaseModified:
		return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "GitHub is settling; adding it to its merge queue again"}
	case lifecycle.RefusedChecks:
		return Action{Kind: Wait, Status: lifecycle.StatusEvaluating, Reason: "GitHub's merge queue does not count its required checks as passed yet: " + quote(msg)}
	case lifecycle.RefusedReview:
		return waitPassed("waiting for reviews: GitHub says " + quote(msg))
	case lifecycle.RefusedMergeQueue:
		// The rules said it has a queue, GitHub says it has none: they
		// are read again (the cache was dropped with the refusal).
		if f.Retries < MaxRetries {
			return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: fmt.Sprintf(
				"GitHub says %s has no merge queue (%s); reading its rules again", base, quote(msg))}
		}
		return Action{Kind: Block, Problem: "merge_queue", Reason: fmt.Sprintf(
			"GitHub refuses to add pull requests to a merge queue for %s (%s) though its ruleset has a merge queue rule: check the rule's settings for %s", base, quote(msg), base)}
	case lifecycle.RefusedNotAuthorized:
		return Action{Kind: Block, Problem: "not_authorized", Reason: fmt.Sprintf(
			"mergegate may not add pull requests to GitHub's merge queue for %s (%s): give the App \"Contents: read and write\" and \"Pull requests: read and write\" on the installation", base, quote(msg))}
	case lifecycle.RefusedWorkflows:
		return Action{Kind: Block, Problem: "workflows", Reason: "it changes files under .github/workflows, which GitHub lets an App merge only with the workflows permission: " +
			"give the App \"Workflows: read and write\" and accept the new permission on the installation"}
	case lifecycle.RefusedConflict:
		switch pr := f.PR; {
		case pr.Mergeable != nil && (!*pr.Mergeable || pr.MergeableState == "dirty"):
			return bounce(Bounced{Kind: BounceConflict, Base: base})
		case pr.Mergeable == nil || pr.MergeableState == "unknown":
			return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "GitHub is still working out whether it can be merged"}
		case f.Retries < MaxRetries:
			return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: fmt.Sprintf(
				"GitHub's merge queue refused it (%s) but GitHub reports no conflict; trying again", quote(msg))}
		}
	case lifecycle.RefusedDraft:
		return Action{Kind: Leave, Reason: "no longer eligible: pull request is a draft"}
	case lifecycle.RefusedClosed:
		return Action{Kind: Leave, Reason: "closed on GitHub"}
	}
	return bounce(Bounced{Kind: BounceEnqueueRefused, Base: base, Detail: msg})
}

// mergeGroupWhy is what GitHub's reason for removing a pull request from
// its merge queue means, for its author. GitHub documents the reason as a
// string without listing its values; the ones it is known to send are
// spelled out, any other is quoted.
func mergeGroupWhy(reason, base string) string {
	if base == "" {
		base = "its base"
	}
	group := "its merge group (its changes merged into " + base + " together with those ahead of it in the queue)"
	switch strings.ToUpper(strings.TrimSpace(reason)) {
	case "CI_FAILURE", "FAILED_CHECKS", "CHECKS_FAILED":
		return "a required check failed on " + group
	case "CI_TIMEOUT", "TIMEOUT":
		return "the required checks of " + group + " did not finish in time"
	case "MERGE_CONFLICT", "CONFLICT":
		return "it conflicts with " + base + " or with a pull request ahead of it in the queue"
	case "":
		return "GitHub gave no reason"
	}
	return "GitHub says " + quote(oneLine(reason))
}
