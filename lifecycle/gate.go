package lifecycle

// Gate results: the one spelling of a gate's outcome. forge.EvaluateGate returns
// them, rules.Decide acts on them, and leasedo stores GateSuccess and
// GateFailure in queue.gate_result and accepts them in POST /event's
// details.gateResult; the strings are in stored rows and replay goldens, so
// they do not change.
const (
	GateSuccess = "success"
	GateFailure = "failure"
	GatePending = "pending"
)

// Verdict is the result of a gate evaluation, with one sentence a developer
// understands.
type Verdict struct {
	Result string // GateSuccess, GateFailure or GatePending
	Reason string
	// Waiting names, while pending, every required check (or App suite)
	// that has not concluded, in the order of the requirement.
	Waiting []string
}

// Required is what a base branch requires before a merge.
type Required struct {
	Contexts []string // required check names (check run names or status contexts)
	// AppIDs binds a required check to the one GitHub App whose check run
	// satisfies it (branch protection's checks[].app_id, a ruleset's
	// integration_id); a context not in the map may come from anyone.
	AppIDs map[string]int64
	Strict bool // "require branches to be up to date before merging"
	// Configured is true when branch protection or a ruleset declares
	// required status checks for the branch (even an empty list).
	Configured bool
	// Reviews is the number of approving reviews required (0: none).
	Reviews int
	// CodeOwners: a code owner must approve.
	CodeOwners bool
	// Conversations: every review conversation must be resolved.
	Conversations bool
	// LinearHistory: merge commits are refused; squash or rebase only.
	LinearHistory bool
	// MergeQueue: the branch uses GitHub's own merge queue (a ruleset's
	// merge_queue rule); the merge API refuses direct merges, and pull
	// requests go through forge.EnqueuePR.
	MergeQueue bool
}

// Reviews sums up a pull request's reviews: each reviewer's latest
// APPROVED, CHANGES_REQUESTED or DISMISSED review counts (COMMENTED ones
// do not change a reviewer's state).
type Reviews struct {
	Approvals        int
	ChangesRequested []string // logins whose latest review requests changes
}
