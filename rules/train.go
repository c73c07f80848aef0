package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

// Modes of a base branch's queue (mode in .github/mergegate.yml).
const (
	// ModeSerial merges the head of the queue once its own head passed.
	ModeSerial = "serial"
	// ModeTrain tests groups of queued pull requests merged together on
	// the base's tip, and lands exactly what was tested (docs/trains.md).
	ModeTrain = "train"
)

// How a group that passed lands on its base (landing).
const (
	// LandFastForward moves the base to the group's tested commit; GitHub
	// then marks its pull requests merged. The App must be allowed to push
	// to the base.
	LandFastForward = "fast-forward"
	// LandReplay merges each pull request through the merge API, guarded
	// by its sha, then compares the base's tree with the tested tree.
	LandReplay = "replay"
)

// Train is how a train-mode base's train runs.
type Train struct {
	BatchSize int    // pull requests per group at most
	Parallel  int    // groups testing at once at most
	Retries   int    // runs of a failed group's CI again before it is split
	Landing   string // LandFastForward or LandReplay
	// BatchWait is how long a ready entry waits for an entry ahead of it
	// in the queue that still runs its own checks before a group is
	// built without it, and a group short of BatchSize for entries that
	// would fill it (0: DefaultBatchWait; NoBatchWait: not at all).
	BatchWait time.Duration
	// Speculate: an entry joins a group while its own checks still run,
	// once everything else would let it merge; a group lands only once
	// its pull requests' own checks passed (docs/trains.md).
	Speculate bool
}

// Train defaults.
const (
	DefaultBatchSize = 4
	// DefaultParallel: four groups of four test at once, sixteen pull
	// requests (GitHub's merge queue builds five by default, each with
	// those ahead of it).
	DefaultParallel = 4
	// DefaultBatchWait covers the spread of a ten-minute CI's results
	// (plus or minus a third): within it groups keep the queue's order,
	// and of two that break the base together the later is taken out.
	DefaultBatchWait = 10 * time.Minute
	// NoBatchWait is batch_wait 0: groups take whoever is ready.
	NoBatchWait = time.Duration(-1)
)

// WithDefaults fills t's zero fields with the defaults.
func (t Train) WithDefaults() Train {
	if t.BatchSize <= 0 {
		t.BatchSize = DefaultBatchSize
	}
	if t.Parallel <= 0 {
		t.Parallel = DefaultParallel
	}
	if t.Landing == "" {
		t.Landing = LandFastForward
	}
	if t.BatchWait == 0 {
		t.BatchWait = DefaultBatchWait
	}
	return t
}

// InTrain reports whether p runs its base as a merge train.
func (p Policy) InTrain() bool { return p.Mode == ModeTrain }

// ReadyReason is what an entry of a train-mode base waits for once its own
// gate passed: a group of the train.
const ReadyReason = "ready for the merge train"

// SpeculatingPrefix starts the reason of an entry of a train that
// speculates (Train.Speculate) whose own checks still run while nothing
// else keeps it from the train: it may join a group meanwhile. The rest
// is what its checks wait for.
const SpeculatingPrefix = "in the merge train while its own checks run: "

// Speculating reports whether it may join a group while its own checks
// still run (DecideTrainEntry said so when it was last read).
func Speculating(it lifecycle.Item) bool {
	return it.Status == lifecycle.StatusEvaluating && strings.HasPrefix(it.GateReason, SpeculatingPrefix)
}

// DecideTrainEntry decides for one entry of a train-mode base: the entry
// is judged as the head of a serial queue would be (its checks, its
// reviews, the policy's holds), every entry at once, but where a head
// would merge it is ready to join the train instead. With
// Train.Speculate, an entry whose own checks still run, and which would
// be ready were they passed, may join a group meanwhile
// (SpeculatingPrefix): its group lands only once they passed.
func DecideTrainEntry(f Facts, p Policy) Action {
	f.Head = true
	a := Decide(f, p)
	if ready(a) {
		// A group is built on the base's tip: a branch behind the base is
		// brought up to date by the group itself.
		return Action{Kind: Wait, Status: lifecycle.StatusGatePassed, Reason: ReadyReason}
	}
	if p.Train.Speculate && a.Kind == Wait && a.Status == lifecycle.StatusEvaluating && f.Refusal == nil {
		passed := f
		passed.Gate = lifecycle.Verdict{Result: lifecycle.GateSuccess}
		if ready(Decide(passed, p)) {
			a.Reason = SpeculatingPrefix + a.Reason
		}
	}
	return a
}

func ready(a Action) bool { return a.Kind == Merge || a.Kind == UpdateBranch }

// TrainFacts are what the train of one base branch is decided on.
type TrainFacts struct {
	Base string
	// Tip is the base branch's commit now.
	Tip string
	// Landed is what mergegate left on the base after its last landing.
	Landed lifecycle.Landed
	// Groups are the base's groups in landing order; Gates[i] is the gate
	// of Groups[i] at its head (read for testing groups only).
	Groups []lifecycle.Group
	Gates  []lifecycle.Verdict
	// Entries are the base's queue entries by number; Ready those whose
	// own gate passed and that are in no group, in queue order.
	Entries map[int]lifecycle.Item
	Ready   []lifecycle.Item
	// Pending are the entries in no group whose own checks still run
	// (evaluating, not held), in queue order: a group waits for them
	// (Train.BatchWait).
	Pending []lifecycle.Item
	Now     time.Time
}

// TrainKind is the kind of a TrainAction.
type TrainKind int

const (
	// TrainWait: nothing to do until an event (or After).
	TrainWait TrainKind = iota
	// TrainDrop removes PRs from Group (their entries left the queue, got a
	// new head or are held); Group and every built group behind it are
	// built again.
	TrainDrop
	// TrainRebase: the base moved under the train (a push outside
	// mergegate); every built group is built again on Tip.
	TrainRebase
	// TrainPlan plans a new group of PRs at the train's end.
	TrainPlan
	// TrainBuild builds Group on Parent.
	TrainBuild
	// TrainPass records that Group's gate passed.
	TrainPass
	// TrainLand lands Group with Landing.
	TrainLand
	// TrainRetry builds Group again: its CI failed and a retry is left.
	TrainRetry
	// TrainSplit replaces Group, which failed, by a group of one per
	// member, in order, each tested at its own step of Group's build
	// (where CI ran as it was built: not built nor pushed again; the last
	// keeps Group's branch and result): the first of them that fails,
	// every one ahead passed, is the culprit, found in the round Group
	// failed in. The groups behind are built again once it is out.
	TrainSplit
	// TrainBounce takes Culprit out: a group of one failed. The groups
	// behind it are built again.
	TrainBounce
	// TrainDisband removes every group: the base is no longer a train
	// (its mode changed, or GitHub's merge queue took it over).
	TrainDisband
)

var trainKindNames = [...]string{"wait", "drop", "rebase", "plan", "build", "pass", "land", "retry", "split", "bounce", "disband"}

func (k TrainKind) String() string {
	if int(k) < len(trainKindNames) {
		return trainKindNames[k]
	}
	return fmt.Sprintf("train_kind(%d)", int(k))
}

// TrainAction is the one next thing to do about a base's train.
type TrainAction struct {
	Kind    TrainKind
	Group   lifecycle.Group
	Parent  string              // TrainBuild: the commit to build on
	PRs     []lifecycle.GroupPR // TrainPlan: the members; TrainDrop: those to remove
	Culprit lifecycle.GroupPR   // TrainBounce
	Bounced Bounced             // TrainBounce: what its author reads
	Landing string              // TrainLand
	// Through are the groups ahead of Group that land with it (TrainLand):
	// Group was built on them and passed, which proves them too.
	Through []lifecycle.Group
	// Reason says why, for the log and the groups' record.
	Reason string
}

// DecideTrain returns the next action on one base's train. Its rules, in
// order:
//
//  1. A member whose entry left the queue, got a new head or is held is
//     dropped from its group (a group being landed is left to land).
//  2. A base that moved under the first built group rebuilds the train on
//     the new tip (after a replay landing, the base's new commits have the
//     tested tree: that is not a move).
//  3. Groups are judged in landing order: the first one lands once it
//     passed (not while the base is frozen), and no group lands before
//     its pull requests' own checks passed (with Train.Speculate they may
//     still run); a group whose checks passed
//     is marked passed; a group whose checks failed or timed out while
//     every group ahead of it passed is run again (retries), split into
//     its members (each tested at its step of the group's build), or,
//     alone, bounces its one pull request (once its own checks passed:
//     if they fail, it is taken out for them). A failure behind a group
//     not yet passed waits: that group may be the cause.
//     A group whose checks passed while groups ahead of it (it was built
//     on them, in a chain from the base) still test or failed proves them
//     too: with fast-forward landing they all land at its commit, without
//     waiting for their own results (skip intermediate results).
//  4. Planned groups are built in order on the group ahead's head (or the
//     tip) while fewer than Parallel are built, not behind a group whose
//     checks failed (it is built again once the culprit is out). The
//     pieces of a split group do not count: finding a culprit does not
//     take the room of the groups behind.
//  5. With room for another group, the ready entries (in queue order)
//     form a new one of at most BatchSize. A ready entry behind one that
//     still runs its own checks waits for it until BatchWait has passed
//     since it became ready; the ready entries ahead of one that may go
//     go with it (groups follow the queue, not the order entries became
//     ready in). A group short of BatchSize waits as long, from when its
//     first member became ready, while entries still run their own
//     checks: it is filled rather than taking another group's room.
//     With Train.Speculate, an entry whose own checks still run and that
//     would otherwise be ready (Speculating) is a ready entry here.
func DecideTrain(f TrainFacts, p Policy) TrainAction {
	t := p.Train.WithDefaults()
	if !p.InTrain() {
		if len(f.Groups) > 0 {
			return TrainAction{Kind: TrainDisband, Reason: "the base is no longer a merge train"}
		}
		return TrainAction{Kind: TrainWait}
	}
	// A group being landed, and the groups ahead of it (that it proved),
	// are left to land.
	landingAt := -1
	for i, g := range f.Groups {
		if g.State == lifecycle.GroupLanding {
			landingAt = i
		}
	}
	for i, g := range f.Groups {
		if i <= landingAt {
			continue
		}
		var drop []lifecycle.GroupPR
		var why []string
		for _, m := range g.PRs {
			if reason := memberGone(f.Entries, m); reason != "" {
				drop = append(drop, m)
				why = append(why, fmt.Sprintf("#%d %s", m.Number, reason))
			}
		}
		if len(drop) > 0 {
			return TrainAction{Kind: TrainDrop, Group: g, PRs: drop, Reason: strings.Join(why, "; ")}
		}
	}
	if landingAt > 0 {
		return TrainAction{Kind: TrainLand, Group: f.Groups[landingAt], Through: f.Groups[:landingAt:landingAt], Landing: t.Landing, Reason: "landing"}
	}
	if len(f.Groups) > 0 {
		// Only the first group is built on the base; the others on it.
		if g := f.Groups[0]; g.Built() && landingAt < 0 && !current(f, g.Parent) {
			return TrainAction{Kind: TrainRebase, Reason: fmt.Sprintf("%s moved to %s outside mergegate", f.Base, lifecycle.ShortSHA(f.Tip))}
		}
	}
	// A group lands only once its pull requests' own checks passed
	// (with Train.Speculate they may still run when its own pass).
	waitOwn, owner := ownChecksRun(f)
	if landingAt < 0 && t.Landing == LandFastForward && !p.Frozen {
		if j := provenThrough(f, waitOwn); j > 0 {
			return TrainAction{Kind: TrainLand, Group: f.Groups[j], Through: f.Groups[:j:j], Landing: t.Landing,
				Reason: fmt.Sprintf("its checks passed on the pull requests ahead of it (%s): they land with it", numbersOf(Ahead(f.Groups, f.Groups[j].ID)))}
		}
	}
	built, aheadPassed, failedAhead := 0, true, false
	for i, g := range f.Groups {
		parent := f.Tip
		if i > 0 {
			parent = f.Groups[i-1].Head
		}
		switch g.State {
		case lifecycle.GroupLanding:
			return TrainAction{Kind: TrainLand, Group: g, Landing: t.Landing, Reason: "landing"}
		case lifecycle.GroupPassed:
			if i == 0 && !p.Frozen && waitOwn > 0 {
				return TrainAction{Kind: TrainLand, Group: g, Landing: t.Landing, Reason: "its checks passed"}
			}
		case lifecycle.GroupBuilding:
			return TrainAction{Kind: TrainBuild, Group: g, Parent: parent, Reason: "building"}
		case lifecycle.GroupTesting:
			gate := gateAt(f, i)
			failed, why := gate.Result == lifecycle.GateFailure, gate.Reason
			// A timeout is seen when the engine's timer for the
			// deadline runs the sync (reconcile/deadline.go), as a
			// serial head's is.
			if !failed && gate.Result != lifecycle.GateSuccess && p.CheckTimeout > 0 && g.BuiltAt > 0 &&
				!f.Now.Before(time.UnixMilli(g.BuiltAt).Add(p.CheckTimeout)) {
				failed, why = true, fmt.Sprintf("its checks did not finish within %s", duration(p.CheckTimeout))
			}
			switch {
			case gate.Result == lifecycle.GateSuccess:
				return TrainAction{Kind: TrainPass, Group: g, Reason: gate.Reason}
			case failed && aheadPassed:
				return failedGroup(f, g, why, t)
			}
			failedAhead = failedAhead || failed
		case lifecycle.GroupPlanned:
			ahead := i == 0 || (f.Groups[i-1].Head != "" && f.Groups[i-1].State != lifecycle.GroupBuilding)
			if ahead && !failedAhead && (g.Split || built < t.Parallel) {
				return TrainAction{Kind: TrainBuild, Group: g, Parent: parent, Reason: "room in the train"}
			}
		}
		if g.Built() && !g.Split {
			built++
		}
		if g.State != lifecycle.GroupPassed {
			aheadPassed = false
		}
	}
	idle := TrainAction{Kind: TrainWait}
	if counted(f.Groups) < t.Parallel && len(f.Ready) > 0 {
		ready, _ := mayGroup(f, t)
		if len(ready) > 0 {
			n := min(t.BatchSize, len(ready))
			prs := make([]lifecycle.GroupPR, n)
			for i, it := range ready[:n] {
				prs[i] = lifecycle.GroupPR{Number: it.PRNumber, SHA: it.PRSha}
			}
			return TrainAction{Kind: TrainPlan, PRs: prs, Reason: "pull requests ready"}
		}
		idle.Reason = fmt.Sprintf("waiting for %s ahead in the queue to finish its checks", numbersOf([]int{f.Pending[0].PRNumber}))
		if !queueBefore(f.Pending[0], f.Ready[0]) {
			idle.Reason = fmt.Sprintf("waiting for %s to finish its checks: it would join the group", numbersOf([]int{f.Pending[0].PRNumber}))
		}
	}
	switch {
	case p.Frozen && len(f.Groups) > 0 && f.Groups[0].State == lifecycle.GroupPassed:
		idle.Reason = p.FrozenReason()
	case waitOwn < len(f.Groups) && idle.Reason == "":
		idle.Reason = fmt.Sprintf("waiting for %s's own checks before its group lands", numbersOf([]int{owner}))
	}
	return idle
}

// ownChecksRun returns the first of f's groups with a pull request whose
// own checks have not passed (len(f.Groups): none), and that pull request.
func ownChecksRun(f TrainFacts) (int, int) {
	for i, g := range f.Groups {
		for _, m := range g.PRs {
			if it, ok := f.Entries[m.Number]; ok && it.Status != lifecycle.StatusGatePassed {
				return i, m.Number
			}
		}
	}
	return len(f.Groups), 0
}

// BatchWaitUntil is when a ready entry that waits for one ahead of it
// (Train.BatchWait) may go without it: the train is decided again then
// (zero: none waits).
func BatchWaitUntil(f TrainFacts, p Policy) time.Time {
	t := p.Train.WithDefaults()
	if !p.InTrain() || counted(f.Groups) >= t.Parallel {
		return time.Time{}
	}
	ready, after := mayGroup(f, t)
	if len(ready) > 0 || after <= 0 {
		return time.Time{}
	}
	return f.Now.Add(after)
}

// counted is how many of groups count against Train.Parallel: the pieces
// of a split group do not.
func counted(groups []lifecycle.Group) int {
	n := 0
	for _, g := range groups {
		if !g.Split {
			n++
		}
	}
	return n
}

// mayGroup returns the ready entries a new group may take, in queue
// order: a ready entry behind an entry still running its own checks
// waits for it until t.BatchWait has passed since it became ready, and
// the ready entries ahead of one that may go go with it. A group short
// of t.BatchSize waits as long, from when the first of them became
// ready, while entries still run their own checks: those that finish in
// time fill it, instead of taking another group's room. With none, after
// is when the first of them may go.
func mayGroup(f TrainFacts, t Train) (ready []lifecycle.Item, after time.Duration) {
	wait := t.BatchWait
	if wait < 0 || len(f.Pending) == 0 {
		return f.Ready, 0
	}
	cut := 0
	for i, r := range f.Ready {
		if !queueBefore(f.Pending[0], r) {
			cut = i + 1 // nobody still testing ahead of it
			continue
		}
		due := readySince(r).Add(wait)
		if !f.Now.Before(due) {
			cut = i + 1
		} else if d := due.Sub(f.Now); after == 0 || d < after {
			after = d
		}
	}
	if cut == 0 {
		return nil, after
	}
	if cut < t.BatchSize {
		first := readySince(f.Ready[0])
		for _, r := range f.Ready[1:cut] {
			if since := readySince(r); since.Before(first) {
				first = since
			}
		}
		if due := first.Add(wait); f.Now.Before(due) {
			return nil, due.Sub(f.Now)
		}
	}
	return f.Ready[:cut], 0
}

// queueBefore reports whether a is ahead of b in the queue: a higher
// priority, then an earlier arrival.
func queueBefore(a, b lifecycle.Item) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.QueuedAt != b.QueuedAt {
		return a.QueuedAt < b.QueuedAt
	}
	return a.PRNumber < b.PRNumber
}

// readySince is when it became ready: its gate's result, else when its
// head joined.
func readySince(it lifecycle.Item) time.Time {
	switch {
	case it.GateResultAt != nil:
		return time.UnixMilli(*it.GateResultAt)
	case it.HeadAt > 0:
		return time.UnixMilli(it.HeadAt)
	}
	return time.UnixMilli(it.QueuedAt)
}

// provenThrough returns the last group whose checks passed among the
// groups built in a chain from the base's tip (each on the head of the one
// ahead), or -1: that group's commit holds every group ahead of it. Only
// the groups before the limit'th are looked at.
func provenThrough(f TrainFacts, limit int) int {
	last := -1
	for i, g := range f.Groups[:limit] {
		if g.State != lifecycle.GroupTesting && g.State != lifecycle.GroupPassed {
			break
		}
		if i > 0 && (g.Parent == "" || g.Parent != f.Groups[i-1].Head) {
			break
		}
		if g.State == lifecycle.GroupPassed || gateAt(f, i).Result == lifecycle.GateSuccess {
			last = i
		}
	}
	return last
}

// numbersOf is ns as "#1, #2".
func numbersOf(ns []int) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprintf("#%d", n)
	}
	return strings.Join(out, ", ")
}

// memberGone says why a group's member can no longer be in it ("" when it
// can): its entry left, has a new head, or waits for its author or the
// operator.
func memberGone(entries map[int]lifecycle.Item, m lifecycle.GroupPR) string {
	it, ok := entries[m.Number]
	switch {
	case !ok:
		return "left the queue"
	case it.PRSha != m.SHA:
		return "has new commits"
	case it.Status == lifecycle.StatusBounced:
		return "was taken out of the queue"
	case it.Status == lifecycle.StatusBlocked:
		return "is blocked"
	case strings.HasPrefix(it.GateReason, HeldPrefix):
		return "is " + strings.TrimSuffix(it.GateReason, ":")
	}
	return ""
}

// current reports whether a group built on parent still tests what would
// land: parent is the base's tip, or the tested commit whose tree the tip
// has (the base after a replay landing).
func current(f TrainFacts, parent string) bool {
	return parent == f.Tip || (f.Landed.Tip == f.Tip && f.Landed.Tested == parent && parent != "")
}

func gateAt(f TrainFacts, i int) lifecycle.Verdict {
	if i < len(f.Gates) {
		return f.Gates[i]
	}
	return lifecycle.Verdict{Result: lifecycle.GatePending}
}

// failedGroup decides for a group whose checks failed (why) with every
// group ahead of it passed.
func failedGroup(f TrainFacts, g lifecycle.Group, why string, t Train) TrainAction {
	switch {
	case g.Attempt < t.Retries:
		return TrainAction{Kind: TrainRetry, Group: g, Reason: "failed (" + why + "); running it again"}
	case len(g.PRs) == 1 && f.Entries[g.PRs[0].Number].Status != lifecycle.StatusGatePassed:
		// Its own checks still run (Train.Speculate): if they fail, it is
		// taken out for them; if they pass, for this.
		return TrainAction{Kind: TrainWait, Group: g, Reason: fmt.Sprintf("%s failed merged on the pull requests ahead (%s); waiting for its own checks before it is taken out", numbersOf([]int{g.PRs[0].Number}), why)}
	case len(g.PRs) == 1:
		ahead := Ahead(f.Groups, g.ID)
		return TrainAction{Kind: TrainBounce, Group: g, Culprit: g.PRs[0], Reason: why,
			Bounced: Bounced{Kind: BounceTrainFailure, Detail: why, Base: f.Base, At: g.Parent, Ahead: ahead,
				Since: landedSince(f, f.Entries[g.PRs[0].Number], ahead, t.Speculate), SinceQueued: t.Speculate}}
	}
	return TrainAction{Kind: TrainSplit, Group: g, Reason: "failed (" + why + "); testing each of its pull requests at its step to find the cause"}
}

// landedSince lists the pull requests the train landed on the base after
// its own checks passed (after it joined, when that is unknown; with
// queued, after its head joined: a train that speculates lands others
// while its own checks run), those ahead of it left out: they are named
// already.
func landedSince(f TrainFacts, it lifecycle.Item, ahead []int, queued bool) []int {
	since := readySince(it).UnixMilli()
	if queued {
		since = it.QueuedAt
		if it.HeadAt > 0 {
			since = it.HeadAt
		}
	}
	var out []int
	for _, l := range f.Landed.Recent {
		if l.At >= since && !slices.Contains(ahead, l.Number) && l.Number != it.PRNumber {
			out = append(out, l.Number)
		}
	}
	return out
}

// TrainMethod is the method a replay landing merges each member with:
// the policy's where the repository allows it, else one it allows.
func TrainMethod(methods lifecycle.MergeMethods, req lifecycle.Required, p Policy) (method, note string, ok bool) {
	return chooseMethod("", &methods, req, p.MergeMethod, p.MethodFrom)
}

// Ahead lists the members of the groups ahead of group id, in order: what
// its pull requests are merged onto besides the base.
func Ahead(groups []lifecycle.Group, id int64) []int {
	var out []int
	for _, g := range groups {
		if g.ID == id {
			break
		}
		out = append(out, g.Numbers()...)
	}
	return out
}
