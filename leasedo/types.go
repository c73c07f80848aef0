package leasedo

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

// Key names one (tenant, repo): one lease, queue, event log and audit log.
// Tenant is the GitHub App installation id as a decimal string; Repo is
// owner/name as in repository.full_name.
type Key struct {
	Tenant string `json:"tenant"`
	Repo   string `json:"repo"`
}

func (k Key) String() string { return k.Tenant + ":" + k.Repo }

// Clock is the injected time source: what time it is, and timers that
// fire when it has passed a deadline. Everything that reads the time or
// waits on it (TTLs, retries) takes it, so that tests and offline replay
// move time by hand instead of sleeping.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's one-shot timer.
type Timer interface {
	// C is the channel the timer's time is sent on.
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it had fired or stopped.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer is time.NewTimer.
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }

// Op is a typed transition of a queue entry, asked by an event. The webhook
// package maps GitHub's event types and actions (and the admin API's POST /event
// vocabulary) to these; nothing below it reads GitHub's action strings.
type Op string

const (
	OpJoin       Op = "join"       // enter the queue (details.sha: the head)
	OpLeave      Op = "leave"      // leave the queue (closed, no longer eligible)
	OpReevaluate Op = "reevaluate" // a new head (details.sha) or base (details.base)
	OpRecheck    Op = "recheck"    // GitHub reports something new about the head: read it again
	OpIgnore     Op = "ignore"     // logged, no queue action
	// OpLabels: a queued PR's labels changed and it stays eligible: take
	// its priority (details.priority) and read it again (a blocking label).
	OpLabels Op = "labels"
	// OpPolicy: a push touched the repository's policy file: read it
	// again at the next sync.
	OpPolicy Op = "policy"
	// OpCommand: a "@mergegate ..." command in a comment (details.command,
	// arg, by, commentId): stored, carried out by the next sync.
	OpCommand Op = "command"
)

// Audit actions (docs/lease-protocol.md).
const (
	AuditJoin        = "join"
	AuditLeave       = "leave"
	AuditReevaluate  = "reevaluate"
	AuditGateSuccess = "gate_success"
	AuditGateFailure = "gate_failure"
	AuditMerge       = "merge"
	AuditBounce      = "bounce"
	// AuditBlocked is ours: the operator must act (reason says what). It is
	// written when the reason changes, not on every try.
	AuditBlocked = "blocked"
)

// Results of ProcessEvent / Apply: POST /event's result.
const (
	ResultJoined        = "joined"
	ResultAlreadyQueued = "already_queued"
	ResultLeft          = "left"
	ResultReevaluated   = "reevaluated"
	ResultGateRecorded  = "gate_recorded"
	ResultIgnored       = "ignored"
	ResultPolicyStale   = "policy_stale"
	ResultCommand       = "command_stored"
)

// Event is the POST /event body (docs/lease-protocol.md).
type Event struct {
	EventType string   `json:"eventType"`
	Tenant    string   `json:"tenant"`
	Repo      string   `json:"repo"`
	Action    string   `json:"action"`
	PRNumber  int      `json:"prNumber"`
	Details   *Details `json:"details"`
	// Op is what the event asks of the queue, set by whoever translated
	// it (webhook.OpOf, webhook.Translate); the store applies only this.
	Op Op `json:"-"`
}

// Key returns the event's (tenant, repo).
func (e Event) Key() Key { return Key{Tenant: e.Tenant, Repo: e.Repo} }

// Details carries the fields the queue actions read. Sha is the head sha for
// join/reevaluate and the sha a check or review event is about. GateResult
// (lifecycle.GateSuccess, lifecycle.GateFailure or empty) is kept in the event log and only ever
// starts a reading of the gate: mergegate merges on what it read from
// GitHub itself, never on a result someone posted. Reason is free text kept
// in the event log (why an event was ignored, why an entry left).
type Details struct {
	Sha        string `json:"sha,omitempty"`
	GateResult string `json:"gateResult,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// QueuedAt, when set (epoch ms), is used instead of the clock for a join:
	// the cron rebuilds a lost queue in GitHub's order (label or auto-merge time).
	QueuedAt int64 `json:"queuedAt,omitempty"`
	// Base is the PR's base branch, when the sender knows it (webhooks do).
	Base string `json:"base,omitempty"`
	// MergeMethod, for a join, is the method the author chose when enabling
	// GitHub auto-merge (merge, squash or rebase); "" otherwise.
	MergeMethod string `json:"mergeMethod,omitempty"`
	// Priority, when set, is the PR's rank by its labels (priority_labels)
	// and PriorityName the label; a join of a PR already queued takes it.
	Priority     *int   `json:"priority,omitempty"`
	PriorityName string `json:"priorityName,omitempty"`
	// Command, Arg, By and CommentID: a comment command (OpCommand), or,
	// By alone, who added the trigger label (label_requires_write).
	Command   string `json:"command,omitempty"`
	Arg       string `json:"arg,omitempty"`
	By        string `json:"by,omitempty"`
	CommentID int64  `json:"commentId,omitempty"`
	// CommentedAt, for a comment's command, is when the comment was
	// written (epoch ms, GitHub's time): a command's consent is for a head
	// its writer could have seen (rules.QueueConsents).
	CommentedAt int64 `json:"commentedAt,omitempty"`
	// Consent, for a join: ConsentGiven, a writer's act that covers Sha
	// even for a pull request already queued (a trigger label added,
	// auto-merge enabled, @mergegate queue); ConsentPending, an act that
	// gives none (reopened, ready for review) until the sync knows who
	// did it; "": a new entry's consent covers Sha.
	Consent string `json:"consent,omitempty"`
	// Check, for a check run's or a status's delivery, is the check it
	// says concluded on Sha (the run's name, the status's context): the
	// sync's read of the checks should show it. Only a hint to read
	// again: the gate is never taken from a delivery.
	Check string `json:"check,omitempty"`
	// Approved, for a review's delivery, says it approves: the sync's read
	// of the reviews should count it. A hint to read again, as Check.
	Approved bool `json:"approved,omitempty"`
}

// Details.Consent values.
const (
	ConsentGiven   = "given"
	ConsentPending = "pending"
)

// Validate checks the fields POST /event requires and names the first one missing.
func (e Event) Validate() error {
	switch {
	case e.EventType == "":
		return &FieldError{Field: "eventType", Msg: "is required"}
	case e.Tenant == "":
		return &FieldError{Field: "tenant", Msg: "is required"}
	case e.Repo == "":
		return &FieldError{Field: "repo", Msg: "is required"}
	case e.PRNumber < 0:
		return &FieldError{Field: "prNumber", Msg: "must not be negative"}
	}
	if e.Details != nil && e.Details.GateResult != "" && e.Details.GateResult != lifecycle.GateSuccess && e.Details.GateResult != lifecycle.GateFailure {
		return &FieldError{Field: "details.gateResult", Msg: `must be "success", "failure" or absent`}
	}
	return nil
}

// FieldError is a bad request body: it names the field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s %s", e.Field, e.Msg) }

// LoggedEvent is one row of the event log (last 100) as GET /queue shows it.
type LoggedEvent struct {
	TS        int64           `json:"ts"`
	EventType string          `json:"eventType"`
	Action    string          `json:"action"`
	PRNumber  int             `json:"prNumber"`
	Details   json.RawMessage `json:"details"`
}

// AuditEntry is one row of the audit log (last 200) as GET /queue shows it.
// Reason is our addition: why a bounce or leave happened.
type AuditEntry struct {
	TS       int64  `json:"ts"`
	Action   string `json:"action"`
	PRNumber int    `json:"prNumber"`
	PRSha    string `json:"prSha"`
	Reason   string `json:"reason,omitempty"`
}

// Caps of the event and audit logs per repository (docs/lease-protocol.md).
const (
	EventCap = 100
	AuditCap = 200
)

// Delivery is one webhook delivery in the durable inbox.
type Delivery struct {
	Seq        int64     `json:"seq"`
	ID         string    `json:"delivery"` // X-GitHub-Delivery
	Event      string    `json:"event"`    // X-GitHub-Event
	Action     string    `json:"action"`
	Tenant     string    `json:"tenant"`
	Repo       string    `json:"repo"` // "" for installation-level events
	Body       []byte    `json:"-"`
	ReceivedAt time.Time `json:"receivedAt"`
	State      string    `json:"state"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"lastError,omitempty"`
	NextTryAt  time.Time `json:"nextTryAt"`
}

// Delivery states.
const (
	DeliveryPending = "pending"
	DeliveryDone    = "done"
	DeliveryFailed  = "failed"
)
