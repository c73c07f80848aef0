package lifecycle

import "time"

// PR is the part of a GitHub pull request mergegate uses.
type PR struct {
	Number int
	// NodeID is the PR's GraphQL id (node_id), for forge.RebaseBranch.
	NodeID  string
	Title   string
	Body    string
	State   string // "open" or "closed"
	Draft   bool
	Merged  bool
	HeadSHA string
	HeadRef string
	BaseRef string
	Author  string // login
	HTMLURL string
	Labels  []string
	// AutoMerge is true when GitHub auto-merge is enabled on the PR.
	AutoMerge bool
	// MergeableState is GitHub's mergeable_state: clean, behind, blocked,
	// dirty, draft, has_hooks, unknown, unstable. Only forge.GetPR fills it (and
	// Mergeable); the list endpoint does not return them.
	MergeableState string
	Mergeable      *bool // nil while GitHub is still computing it
	// BaseSHA is the base branch's head as GitHub reported it with the PR.
	BaseSHA string
	// Fork is true when the head branch lives in another repository.
	Fork bool
	// MaintainerCanModify: the fork's author lets the base repository's
	// maintainers (and so mergegate) push to the head branch.
	MaintainerCanModify bool
	// AutoMergeMethod is the method the author chose when enabling GitHub
	// auto-merge (merge, squash or rebase), "" otherwise.
	AutoMergeMethod string
	// Methods are the merge methods the base repository allows, as forge.GetPR's
	// base.repo reports them; nil when GitHub did not say (the list
	// endpoint, or a token that may not see them): use forge.MergeMethods.
	Methods   *MergeMethods
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MergeMethods are the merge methods a repository allows
// (allow_merge_commit, allow_squash_merge, allow_rebase_merge).
type MergeMethods struct {
	Merge, Squash, Rebase bool
}

// Allows reports whether method (merge, squash or rebase) is allowed.
func (m MergeMethods) Allows(method string) bool {
	switch method {
	case MethodMerge:
		return m.Merge
	case MethodSquash:
		return m.Squash
	case MethodRebase:
		return m.Rebase
	}
	return false
}

// List returns the allowed methods in GitHub's order: merge, squash, rebase.
func (m MergeMethods) List() []string {
	var out []string
	for _, method := range [...]string{MethodMerge, MethodSquash, MethodRebase} {
		if m.Allows(method) {
			out = append(out, method)
		}
	}
	return out
}

// Merge methods accepted by forge.Merge.
const (
	MethodMerge  = "merge"
	MethodSquash = "squash"
	MethodRebase = "rebase"
)

// QueueEntry is a pull request's place in GitHub's own merge queue
// (GraphQL MergeQueueEntry), or, when it is not in the queue, how it
// last left it.
type QueueEntry struct {
	// Position is the entry's place, 1 for the first; State is GitHub's
	// MergeQueueEntryState: QUEUED, AWAITING_CHECKS, MERGEABLE,
	// UNMERGEABLE or LOCKED.
	Position int
	State    string
	// Size is how many entries the base's queue holds (0: not known).
	Size int
	// Removed is GitHub's reason (RemovedFromMergeQueueEvent.reason) when
	// the pull request's last merge queue event is its removal, at
	// RemovedAt; "" when it is in the queue or never left it.
	Removed   string
	RemovedAt time.Time
}

// Merge queue entry states (GraphQL MergeQueueEntryState).
const (
	QueueStateQueued         = "QUEUED"
	QueueStateAwaitingChecks = "AWAITING_CHECKS"
	QueueStateMergeable      = "MERGEABLE"
	QueueStateUnmergeable    = "UNMERGEABLE"
	QueueStateLocked         = "LOCKED"
)

// ShortSHA is a commit sha as GitHub shows it to people: its first 7
// characters. Every log line, message and page of mergegate uses it.
func ShortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
