package forge

import "github.com/mergegate/mergegate/lifecycle"

// The words of a pull request's life that forge reads from GitHub and
// rules decides on live in lifecycle, which imports nothing of ours; these
// aliases keep forge's callers as they were.
type (
	PR           = lifecycle.PR
	MergeMethods = lifecycle.MergeMethods
	QueueEntry   = lifecycle.QueueEntry
	Verdict      = lifecycle.Verdict
	Required     = lifecycle.Required
	Reviews      = lifecycle.Reviews
	Refusal      = lifecycle.Refusal
)

// Merge methods accepted by Merge.
const (
	MethodMerge  = lifecycle.MethodMerge
	MethodSquash = lifecycle.MethodSquash
	MethodRebase = lifecycle.MethodRebase
)

// Merge queue entry states (GraphQL MergeQueueEntryState).
const (
	QueueStateQueued         = lifecycle.QueueStateQueued
	QueueStateAwaitingChecks = lifecycle.QueueStateAwaitingChecks
	QueueStateMergeable      = lifecycle.QueueStateMergeable
	QueueStateUnmergeable    = lifecycle.QueueStateUnmergeable
	QueueStateLocked         = lifecycle.QueueStateLocked
)

// Gate results (lifecycle.GateSuccess): EvaluateGate returns them.
const (
	GateSuccess = lifecycle.GateSuccess
	GateFailure = lifecycle.GateFailure
	GatePending = lifecycle.GatePending
)

// Refusals, by whose they are to fix (lifecycle.Refusal).
const (
	RefusedOther         = lifecycle.RefusedOther
	RefusedConflict      = lifecycle.RefusedConflict
	RefusedChecks        = lifecycle.RefusedChecks
	RefusedDraft         = lifecycle.RefusedDraft
	RefusedClosed        = lifecycle.RefusedClosed
	RefusedHeadModified  = lifecycle.RefusedHeadModified
	RefusedBaseModified  = lifecycle.RefusedBaseModified
	RefusedBehind        = lifecycle.RefusedBehind
	RefusedReview        = lifecycle.RefusedReview
	RefusedNoNewCommits  = lifecycle.RefusedNoNewCommits
	RefusedMethod        = lifecycle.RefusedMethod
	RefusedMergeQueue    = lifecycle.RefusedMergeQueue
	RefusedNotAuthorized = lifecycle.RefusedNotAuthorized
	RefusedWorkflows     = lifecycle.RefusedWorkflows
)

// ShortSHA is lifecycle.ShortSHA: a commit sha as GitHub shows it.
func ShortSHA(sha string) string { return lifecycle.ShortSHA(sha) }
