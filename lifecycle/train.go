package lifecycle

import "strconv"

// The states of a train group (docs/trains.md).
const (
	GroupPlanned  = "planned"  // members chosen, branch not built
	GroupBuilding = "building" // its branch is being made from Parent
	GroupTesting  = "testing"  // built at Head; CI runs on it
	GroupPassed   = "passed"   // its gate passed; lands when every group ahead has
	GroupLanding  = "landing"  // being landed on the base
)

// GroupPR is one member of a group: a pull request at the head that
// passed its own gate. Once the group is built, Onto is the commit its
// head was merged onto and Merged the merge's result: a group built
// again on Onto takes Merged instead of merging again (the pieces of a
// split group are tested at their steps, not built).
type GroupPR struct {
	Number int    `json:"n"`
	SHA    string `json:"sha"`
	Onto   string `json:"onto,omitempty"`
	Merged string `json:"merged,omitempty"`
}

// Group is one group of a base branch's merge train: pull requests tested
// together, built from Parent (the base's tip, or the head of the group
// ahead) with each member's head merged in, in order, on the base's train
// branch, where the groups ahead of it were built; CI runs on each
// member's step, Head is the last. The pieces of a split group are tested
// at their steps. A group has a branch of its own (Own) only when its
// head had to be pushed again for CI to run on it.
type Group struct {
	ID      int64     `json:"id"`
	Base    string    `json:"base"`
	Seq     int       `json:"seq"`
	State   string    `json:"state"`
	PRs     []GroupPR `json:"prs"`
	Parent  string    `json:"parentSha,omitempty"`
	Head    string    `json:"headSha,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Split   bool      `json:"split,omitempty"`
	// Own: Head was pushed to OwnBranch, because CI had nothing to say
	// of it on the train branch (its run there cancelled by the next
	// push, or never started).
	Own bool `json:"own,omitempty"`
	// BuiltAt is when CI started on Head (epoch ms): check_timeout counts
	// from it.
	BuiltAt int64  `json:"builtAt,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Branches mergegate makes: a base's train branch, where CI runs on every
// merge (each member's step), a group's own branch when its head is
// pushed again, and the branch a train's first merge is made on, where CI
// must not run (it would test the commit the train is built on again).
const (
	BranchPrefix      = "mergegate/"
	BuildBranchPrefix = "mergegate-build/"
)

// Branch is where the group's head was pushed: its own branch, or the
// base's train branch.
func (g Group) Branch() string {
	if g.Own {
		return g.OwnBranch()
	}
	return g.TrainBranch()
}

// TrainBranch is the base's train branch, mergegate/<base>/train: every
// group of the base is merged onto it, each on the one ahead, so that a
// group built on the head of the group ahead costs its merges and nothing
// else. It is reset (through BuildBranch) when the train is built again
// on another commit, and deleted when the train is empty.
func (g Group) TrainBranch() string {
	return BranchPrefix + g.Base + "/train"
}

// OwnBranch is the group's own branch, mergegate/<base>/<id>.
func (g Group) OwnBranch() string {
	return BranchPrefix + g.Base + "/" + strconv.FormatInt(g.ID, 10)
}

// BuildBranch is the branch a train's first merge is made on, when the
// train branch does not end where the group is built: the train branch is
// then set to that merge's commit. mergegate-build/<base>/train, one per
// base (only one group of a base builds at a time).
func (g Group) BuildBranch() string {
	return BuildBranchPrefix + g.Base + "/train"
}

// Numbers lists the members' numbers, in order.
func (g Group) Numbers() []int {
	out := make([]int, len(g.PRs))
	for i, p := range g.PRs {
		out[i] = p.Number
	}
	return out
}

// Built reports whether the group is built (building or later).
func (g Group) Built() bool { return g.State != GroupPlanned }

// Landed is what mergegate left on a base after its last landing: the
// base's tip, and the tested commit whose tree that tip has.
type Landed struct {
	Tip    string `json:"tip"`
	Tested string `json:"tested"`
	// Recent are the pull requests the train landed on the base lately,
	// oldest first (at most RecentLanded).
	Recent []LandedPR `json:"recent,omitempty"`
}

// LandedPR is a pull request a train landed, and when (epoch ms).
type LandedPR struct {
	Number int   `json:"n"`
	At     int64 `json:"at"`
}

// RecentLanded is how many landed pull requests Landed.Recent keeps.
const RecentLanded = 50
