package lifecycle

// Queue entry statuses: queued, evaluating, gate_passed, bounced and blocked. What each means and
// who moves an entry between them is drawn in ARCHITECTURE.md.
const (
	// StatusQueued: joined, or something changed (a new head, a check or
	// review event, a retry that is due): the next sync reads it again.
	StatusQueued = "queued"
	// StatusEvaluating: read; waits on its checks, a review or GitHub, as
	// its GateReason says, until the next event or pass.
	StatusEvaluating = "evaluating"
	// StatusGatePassed: its checks passed; it waits its turn, or (the head)
	// what GateReason says.
	StatusGatePassed = "gate_passed"
	// StatusBlocked: the operator must change something (GateReason says
	// what); the pull request keeps its place and its label, and entries
	// behind it go on. Each cron pass tries it again.
	StatusBlocked = "blocked"
	// StatusBounced: out of the queue until its author asks again.
	StatusBounced = "bounced"
)

// Entry is one queue entry as GET /queue shows it.
type Entry struct {
	PRNumber      int    `json:"prNumber"`
	PRSha         string `json:"prSha"`
	QueuedAt      int64  `json:"queuedAt"`
	Status        string `json:"status"`
	ReevaluatedAt *int64 `json:"reevaluatedAt,omitempty"`
	GateResult    string `json:"gateResult,omitempty"`
	GateResultAt  *int64 `json:"gateResultAt,omitempty"`
}

// Item is a queue entry with what the sync keeps beside the entry's
// fields of POST /event's protocol (docs/lease-protocol.md).
type Item struct {
	Entry
	GateReason       string `json:"gateReason,omitempty"`
	BaseRef          string `json:"baseRef,omitempty"`
	BranchUpdatedSha string `json:"branchUpdatedSha,omitempty"`
	// BranchUpdatedAt is when mergegate asked GitHub to update the
	// branch at BranchUpdatedSha (epoch ms; 0: not known).
	BranchUpdatedAt int64  `json:"branchUpdatedAt,omitempty"`
	CheckRunID      int64  `json:"checkRunId,omitempty"`
	CheckTitle      string `json:"checkTitle,omitempty"`
	// HeadAt is when its current head joined or was seen (epoch ms): the
	// check timeout counts from it.
	HeadAt int64 `json:"headAt,omitempty"`
	// MergeMethod is the method its author chose with GitHub auto-merge.
	MergeMethod string `json:"mergeMethod,omitempty"`
	// Priority ranks it in its base's queue (higher first, then by
	// queuedAt); PriorityName says it in words ("" for normal).
	Priority     int    `json:"priority,omitempty"`
	PriorityName string `json:"priorityName,omitempty"`
	// ConsentSha is the head a writer's consent covers (the trigger
	// label, @mergegate queue, GitHub auto-merge): it merges, or joins a
	// merge train group, only while that is PRSha. NoConsent: none yet;
	// "": written by an older mergegate, its head. ConsentNote says why it
	// does not cover PRSha, when known.
	ConsentSha  string `json:"consentSha,omitempty"`
	ConsentNote string `json:"consentNote,omitempty"`
}

// NoConsent is the ConsentSha of an entry no writer consented to yet (a
// pull request reopened or made ready for review by someone who may not
// write, until the sync knows who): GitHub's null sha, no head's.
const NoConsent = "0000000000000000000000000000000000000000"
