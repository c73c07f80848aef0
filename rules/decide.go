package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

// Policy is how a repository's queue is run.
type Policy struct {
	Triggers Options
	// MergeMethod is the method to merge with when the repository allows
	// it (merge, squash or rebase); else the first one it allows.
	MergeMethod string
	// CheckTimeout bounces a head whose required checks have not all
	// concluded this long after it joined or was pushed (0: never).
	CheckTimeout time.Duration
	// MethodFrom names where MergeMethod was set, in notes ("" reads
	// --merge-method).
	MethodFrom string
	// BlockingLabels: a pull request carrying one of them waits, keeping
	// its place, until the label is removed (e.g. do-not-merge).
	BlockingLabels []string
	// BlockingTitle: a pull request whose title matches waits (e.g. ^WIP).
	BlockingTitle *regexp.Regexp
	// Frozen: the base's queue merges nothing and updates no branch; its
	// entries' gates are still read. FreezeMessage says why.
	Frozen        bool
	FreezeMessage string
	// ReadPR: the head's pull request must be read before it is merged
	// (blocking labels or a title pattern need its labels and title).
	ReadPR bool

	// How the sync carries out a merge or an update (not decisions).
	//
	// UpdateMethod is how a branch behind a strict base is brought up to
	// date: merge (GitHub's update-branch, the default) or rebase.
	UpdateMethod string
	// CommitTitle and CommitMessage are the merge commit's templates
	// (package policy renders them); "" leaves GitHub's.
	CommitTitle, CommitMessage string
	// DeleteBranch deletes the head branch after the merge (never a
	// fork's, never one another open pull request is based on).
	DeleteBranch bool
	// LabelRequiresWrite: the trigger label counts only when the person
	// who added it may write to the repository.
	LabelRequiresWrite bool
	// PriorityLabels rank pull requests, highest first.
	PriorityLabels []string

	// Mode is how the base's queue runs: ModeSerial ("" too) or ModeTrain;
	// Train its train's settings.
	Mode  string
	Train Train
}

// NeedsPR reports whether p decides on the pull request's labels or
// title, or merges with its title and body (templates) or deletes its
// branch: the sync then reads the head's pull request before merging it.
func (p Policy) NeedsPR() bool {
	return p.ReadPR || len(p.BlockingLabels) > 0 || p.BlockingTitle != nil ||
		p.CommitTitle != "" || p.CommitMessage != "" || p.DeleteBranch
}

// ReadLag is how long after GitHub told mergegate of a change (a
// delivery) a read that does not show it yet is taken for one of GitHub's
// replicas lagging the change, and made again (1 s, doubling), rather
// than believed (rocq-prover/bot#1, JasonEtco/todo#169, which waits a
// second before every read for it):
//   - a read of the pull request that shows another head than the one a
//     push's synchronize named: gated again at it, the entry would be
//     merged or built into a train at the commit its author replaced, or
//     held for a consent given to the new one. A newer push the read shows
//     first is gated again this much later, or at its own synchronize;
//     after GitHub refused a merge or an update (the head moved, as GitHub
//     says), at once;
//   - a read of the checks that shows one running that a check run's or
//     status's delivery said concluded (Facts.Concluded), or of the
//     reviews that does not count an approval a review's delivery told of
//     (Facts.JustApproved): believed, the entry would wait for an event
//     that has already come, until the cron's next read.
const ReadLag = 10 * time.Second

// reviewsLag: a read of the reviews that does not count an approval a
// delivery just told of (Facts.JustApproved) is made again.
var reviewsLag = Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true,
	Reason: "GitHub's read of the reviews does not show the approval just given yet; reading them again"}

// FrozenReason is what a frozen queue's entries wait for.
func (p Policy) FrozenReason() string {
	if p.FreezeMessage == "" {
		return "frozen"
	}
	return "frozen: " + p.FreezeMessage
}

// HeldPrefix starts the reason of an entry the policy holds back (a
// blocking label or title): it keeps its place as a blocked entry does,
// and the entries behind it go on.
const HeldPrefix = "held: "

// UpdatingPrefix starts the reason of a head whose branch GitHub is
// updating from its base.
const UpdatingPrefix = "branch being updated from "

// Holding says why the policy holds the pull request back ("" when it
// does not): a blocking label, a title that matches.
func Holding(pr *PRText, p Policy) string {
	if pr == nil {
		return ""
	}
	for _, l := range p.BlockingLabels {
		if HasLabel(pr.Labels, l) {
			return fmt.Sprintf("the label %q keeps it from merging: remove the label to let it merge", l)
		}
	}
	if re := p.BlockingTitle; re != nil && re.MatchString(pr.Title) {
		return fmt.Sprintf("its title matches blocking_title %q: change the title to let it merge", re.String())
	}
	return ""
}

// hold is the action for a head the policy holds back: frozen, it waits
// at the head (the whole queue waits); held by a label or its title, it
// steps aside like a blocked entry, keeping its place.
func hold(pr *lifecycle.PR, p Policy) (Action, bool) {
	if p.Frozen {
		return waitPassed(p.FrozenReason()), true
	}
	if why := Holding(textOf(pr), p); why != "" {
		return Action{Kind: Block, Problem: "held", Reason: HeldPrefix + why}, true
	}
	return Action{}, false
}

// PRText is what the blocking rules read of a pull request.
type PRText struct {
	Title  string
	Labels []string
}

func textOf(pr *lifecycle.PR) *PRText {
	if pr == nil {
		return nil
	}
	return &PRText{Title: pr.Title, Labels: pr.Labels}
}

// Facts are what GitHub says about one queue entry, as the sync gathered
// them. The sync reads the pull request itself (PR) only once GitHub
// refused a merge or an update of it: the guarded merge is GitHub's own
// check of everything else, and what it refuses is sorted then, with the
// pull request read again. Entries behind the head are judged on their
// gate alone.
type Facts struct {
	Entry lifecycle.Item
	// Head: the entry is the first of its base branch's queue that is not
	// bounced or blocked; only a head is merged or updated.
	Head bool
	// Gate is the entry's checks at its head sha, read from GitHub.
	Gate lifecycle.Verdict
	// Rules are what the entry's base branch requires.
	Rules lifecycle.Required
	// PR is the pull request as GetPR reports it; nil when not read.
	PR *lifecycle.PR
	// Methods are the merge methods the repository allows; nil: not known
	// (then the Policy's method is tried and GitHub's answer sorted).
	Methods *lifecycle.MergeMethods
	// Reviews are read when the base requires reviews; nil otherwise.
	Reviews *lifecycle.Reviews
	// Refusal is GitHub's answer to the merge or branch update just tried
	// (the PR was read again after it).
	Refusal *Refusal
	// Concluded are the checks that deliveries said concluded on the
	// entry's head less than ReadLag ago (a check run's name, a status's
	// context): a read that shows one of them still running lags.
	Concluded []string
	// JustApproved: Reviews count fewer approvals than the base requires,
	// and a delivery said the pull request was approved less than ReadLag
	// ago: the read lags.
	JustApproved bool
	// Queue is the entry's place in GitHub's merge queue, read for an
	// entry whose checks passed on a base that uses it (Rules.MergeQueue);
	// InQueue: GitHub reports it in the queue (else Queue says why it last
	// left it, if it did). nil: not read.
	Queue   *lifecycle.QueueEntry
	InQueue bool
	// Retries is how many short pauses in a row this entry has had
	// (waits with Retry): a refusal GitHub keeps giving for no reason it
	// reports is the author's after MaxRetries.
	Retries int
	Now     time.Time
}

// MaxRetries is how many times in a row a merge GitHub refuses as "not
// mergeable", while it reports the pull request mergeable, is tried again.
const MaxRetries = 5

// Refusal is GitHub's refusal of a merge or an update of the branch.
type Refusal struct {
	Kind    lifecycle.Refusal
	Op      string // "merge" or "update-branch"
	Method  string // the merge method tried
	Message string // GitHub's own words
}

// Kind is the kind of an Action.
type Kind int

const (
	// Wait: nothing to do until an event, the next pass or, with Retry, a
	// short pause; Status and Reason are recorded.
	Wait Kind = iota
	// UpdateBranch asks GitHub to bring the head branch up to date with
	// its base: merged in, or rebased onto it (Policy.UpdateMethod).
	UpdateBranch
	// Merge merges the head at its tested sha with Method.
	Merge
	// Bounce takes the PR out of the queue; Bounced says why, for its author.
	Bounce
	// Leave takes the PR out of the queue quietly (Reason): closed, merged
	// elsewhere, no longer eligible.
	Leave
	// Block waits for the operator: Reason says what to change.
	Block
	// Regate takes a new head (Sha) or base (Base) from GitHub: the gate is
	// read again from the start.
	Regate
	// Enqueue adds the pull request, at its tested sha, to GitHub's own
	// merge queue, on a base that uses it (rules/mergequeue.go).
	Enqueue
)

var kindNames = [...]string{"wait", "update_branch", "merge", "bounce", "leave", "block", "regate", "enqueue"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Action is the one thing to do next about an entry.
type Action struct {
	Kind Kind
	// Status (Wait): lifecycle.StatusEvaluating while its checks have not
	// passed, StatusGatePassed once they have, StatusQueued to be read
	// again after a short pause (Retry).
	Status string
	// Reason: Wait, what it waits for, shown on its check run; Leave and
	// Regate, why; Block, what the operator must change.
	Reason string
	// Retry (Wait): GitHub settles this by itself; read again soon.
	Retry bool
	// Method (Merge) and MethodNote: why not the Policy's method, if not.
	Method, MethodNote string
	// Bounced (Bounce): what the author reads.
	Bounced Bounced
	// Sha and Base (Regate): the new head or base ("" when unchanged).
	Sha, Base string
	// Problem names the kind of a Bounce or Block for metrics and logs:
	// gate_failure, check_timeout, conflict, merge_refused, update_refused,
	// merge_queue, not_authorized, workflows, merge_method; held and
	// consent (ProblemConsent) for the holds.
	Problem string
}

// Decide returns the one next action for f under p. Its rules, in order:
//
//  1. What GitHub says of the pull request itself (when read): merged or
//     closed elsewhere, or no longer eligible, leaves; a new head or base
//     is gated again.
//  2. An entry whose head no writer consented to (Unconsented: pushed,
//     reopened or moved to a new base by someone who may not write) is
//     held, keeping its place, whatever its checks say.
//  3. The gate: a failed required check bounces; checks that have not
//     concluded wait, and bounce once CheckTimeout has passed.
//  4. On a base that uses GitHub's merge queue, every entry whose checks
//     passed is decided by decideMergeQueue (GitHub's queue orders them).
//  5. An entry behind the head whose checks passed waits its turn.
//  6. After GitHub refused a merge or an update: see decideRefusal.
//  7. The head: see decideHead.
func Decide(f Facts, p Policy) Action {
	e := f.Entry
	if pr := f.PR; pr != nil {
		switch {
		case pr.Merged && InGitHubQueue(e):
			return Action{Kind: Leave, Reason: "merged by GitHub's merge queue"}
		case pr.Merged:
			return Action{Kind: Leave, Reason: "merged outside mergegate"}
		case pr.State != "open":
			return Action{Kind: Leave, Reason: "closed on GitHub"}
		}
		if why := Ineligibility(Eligibility{State: pr.State, Draft: pr.Draft, Base: pr.BaseRef, Labels: pr.Labels, AutoMerge: pr.AutoMerge}, p.Triggers); why != "" {
			return Action{Kind: Leave, Reason: "no longer eligible: " + why}
		}
		if pr.HeadSHA != "" && pr.HeadSHA != e.PRSha {
			if f.Refusal == nil && e.HeadAt > 0 && f.Now.Sub(time.UnixMilli(e.HeadAt)) < ReadLag {
				// Likelier one of GitHub's replicas behind the push that
				// told of e's head than a newer push: read it again. (A
				// refusal says GitHub itself saw the head move: believed.)
				return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "GitHub's read of the pull request does not show its new head yet; reading it again"}
			}
			return Action{Kind: Regate, Sha: pr.HeadSHA, Reason: "new commits on GitHub"}
		}
		if e.BaseRef != "" && pr.BaseRef != "" && pr.BaseRef != e.BaseRef {
			return Action{Kind: Regate, Base: pr.BaseRef, Reason: fmt.Sprintf("base branch changed from %s to %s", e.BaseRef, pr.BaseRef)}
		}
	}
	if why := Unconsented(e); why != "" {
		return Action{Kind: Block, Problem: ProblemConsent, Reason: HeldPrefix + why}
	}
	switch f.Gate.Result {
	case lifecycle.GateFailure:
		return bounce(Bounced{Kind: BounceGateFailure, Detail: f.Gate.Reason})
	case lifecycle.GateSuccess:
	default:
		for _, name := range f.Gate.Waiting {
			if slices.Contains(f.Concluded, name) {
				return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true,
					Reason: fmt.Sprintf("GitHub's read of the checks does not show %q's result yet; reading them again", name)}
			}
		}
		if timedOut(f, p) {
			return bounce(Bounced{Kind: BounceCheckTimeout, Checks: f.Gate.Waiting, After: p.CheckTimeout,
				Unrequired: !f.Rules.Configured || len(f.Rules.Contexts) == 0})
		}
		reason := f.Gate.Reason
		if reason == "" {
			reason = "waiting for checks"
		}
		return Action{Kind: Wait, Status: lifecycle.StatusEvaluating, Reason: reason}
	}
	if f.Rules.MergeQueue || InGitHubQueue(e) || (f.Refusal != nil && f.Refusal.Op == "enqueue") {
		return decideMergeQueue(f, p)
	}
	if !f.Head {
		return Action{Kind: Wait, Status: lifecycle.StatusGatePassed}
	}
	if f.Refusal != nil && f.PR != nil {
		return decideRefusal(f, p)
	}
	return decideHead(f, p)
}

// timedOut: checks that have not concluded (or none that reported at all)
// CheckTimeout after the head joined (or was pushed): the head never waits
// forever.
func timedOut(f Facts, p Policy) bool {
	if p.CheckTimeout <= 0 || f.Entry.HeadAt <= 0 {
		return false
	}
	return f.Now.Sub(time.UnixMilli(f.Entry.HeadAt)) >= p.CheckTimeout
}

// decideHead decides for the head of its base's queue, checks passed:
//
//   - a repository that allows no usable method blocks (a base on GitHub's
//     own merge queue never gets here: decideMergeQueue);
//   - with the pull request read: mergeable not yet computed waits a moment
//     (GitHub computes it in the background, notably right after a merge
//     moved the base); conflicts bounce; a branch behind a base that
//     requires up-to-date branches is updated (once per head), or, for a
//     fork that does not let maintainers push, waits for its author;
//   - changes requested, approvals missing (from the reviews, read when the
//     base requires them), a code owner's review or unresolved
//     conversations wait, saying which;
//   - otherwise it merges; whatever else GitHub objects to comes back as a
//     refusal and is sorted then.
func decideHead(f Facts, p Policy) Action {
	pr, base := f.PR, f.Entry.BaseRef
	if pr != nil && pr.BaseRef != "" {
		base = pr.BaseRef
	}
	if a, held := hold(pr, p); held {
		return a
	}
	method, note, ok := chooseMethod(authorMethod(f), f.Methods, f.Rules, p.MergeMethod, p.MethodFrom)
	if !ok {
		return noMethod(f.Rules)
	}
	if pr != nil {
		switch {
		case pr.Mergeable == nil || pr.MergeableState == "unknown":
			return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "GitHub is still working out whether it can be merged"}
		case !*pr.Mergeable || pr.MergeableState == "dirty":
			return bounce(Bounced{Kind: BounceConflict, Base: base})
		case pr.MergeableState == "behind" && f.Rules.Strict:
			return behind(f)
		}
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
	if pr != nil && pr.MergeableState == "blocked" {
		switch {
		case f.Rules.Reviews > 0 && f.Reviews == nil:
			return waitPassed(approvals(f.Rules.Reviews, 0))
		case f.Rules.CodeOwners:
			return waitPassed("waiting for a code owner's approving review")
		case f.Rules.Conversations:
			return waitPassed("waiting for every review conversation to be resolved")
		}
	}
	return Action{Kind: Merge, Method: method, MethodNote: note}
}

// behind: the head's branch lacks commits of a base that requires
// up-to-date branches.
func behind(f Facts) Action {
	e, pr := f.Entry, f.PR
	switch {
	case pr.Fork && !pr.MaintainerCanModify:
		return waitPassed(fmt.Sprintf("its branch is behind %s, and mergegate may not push to the fork: update the branch, or allow edits by maintainers", pr.BaseRef))
	case e.BranchUpdatedSha == e.PRSha && f.Now.Sub(time.UnixMilli(e.BranchUpdatedAt)) < UpdatePatience:
		return waitPassed(UpdatingPrefix + pr.BaseRef)
	}
	return Action{Kind: UpdateBranch}
}

// UpdatePatience is how long after asking GitHub to update a branch
// mergegate waits for the new head before it asks again. GitHub answers
// 202 and does the update later, in seconds; one that has not come by
// then is taken as lost. An ask whose time is not known (an earlier
// mergegate's) is made again at once.
const UpdatePatience = 10 * time.Minute

// decideRefusal sorts GitHub's refusal of the merge or the update just
// tried (the PR was read again since, so rule 1 of Decide has seen a new
// head). It never merges or updates again at once, but for the two
// answers that ask for the other call.
func decideRefusal(f Facts, p Policy) Action {
	r, base := f.Refusal, f.PR.BaseRef
	msg := oneLine(r.Message)
	switch r.Kind {
	case lifecycle.RefusedHeadModified:
		return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "GitHub reported new commits; reading the pull request again"}
	case lifecycle.RefusedBaseModified:
		return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: base + " moved while merging; trying again"}
	case lifecycle.RefusedBehind:
		if r.Op == "merge" {
			return behind(f)
		}
	case lifecycle.RefusedNoNewCommits:
		// The branch is up to date after all: merge, as decideHead would,
		// with a method the repository allows (settings are read again
		// after a refusal) or not at all.
		if a, held := hold(f.PR, p); held {
			return a
		}
		method, note, ok := chooseMethod(authorMethod(f), f.Methods, f.Rules, p.MergeMethod, p.MethodFrom)
		if !ok {
			return noMethod(f.Rules)
		}
		return Action{Kind: Merge, Method: method, MethodNote: note}
	case lifecycle.RefusedReview:
		return waitPassed("waiting for reviews: GitHub says " + quote(msg))
	case lifecycle.RefusedChecks:
		return Action{Kind: Wait, Status: lifecycle.StatusEvaluating, Reason: "GitHub does not count its required checks as passed yet: " + quote(msg)}
	case lifecycle.RefusedMethod:
		// Tried before the repository's settings were known: now they are.
		if method, _, ok := chooseMethod(authorMethod(f), f.Methods, f.Rules, p.MergeMethod, p.MethodFrom); ok && method != r.Method {
			return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "merging with " + method + ", a method the repository allows"}
		}
		return Action{Kind: Block, Problem: "merge_method", Reason: fmt.Sprintf("GitHub refused to merge with %s (%s): allow it in the repository's settings, or set %s to a method it allows", r.Method, quote(msg), methodFrom(p.MethodFrom))}
	case lifecycle.RefusedMergeQueue:
		// GitHub says the base uses its merge queue though its rules, as
		// read, did not (read before the rule was added, or a classic
		// branch protection's "require merge queue"): to GitHub's queue.
		return decideMergeQueue(f, p)
	case lifecycle.RefusedNotAuthorized:
		branch := base
		if r.Op == "update-branch" {
			branch = "the pull request's branch"
		}
		return Action{Kind: Block, Problem: "not_authorized", Reason: fmt.Sprintf(
			"mergegate may not push to %s (%s): let the App push to it (the branch's push restrictions, or the ruleset's bypass list)", branch, quote(msg))}
	case lifecycle.RefusedWorkflows:
		what := "it changes files under .github/workflows"
		if r.Op == "update-branch" {
			what = "updating its branch from " + base + " would change files under .github/workflows"
		}
		return Action{Kind: Block, Problem: "workflows", Reason: what + ", which GitHub lets an App merge or update only with the workflows permission: " +
			"give the App \"Workflows: read and write\" and accept the new permission on the installation"}
	case lifecycle.RefusedConflict:
		// "Pull Request is not mergeable" is GitHub's answer to a merge for
		// conflicts, for a head behind a strict base and while it
		// computes: what the pull request reports now says which. On an
		// update of the branch it is a conflict.
		if r.Op == "update-branch" {
			return bounce(Bounced{Kind: BounceConflict, Base: base})
		}
		if a := decideHead(f, p); a.Kind != Merge {
			return a
		}
		if f.Retries < MaxRetries {
			return Action{Kind: Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: fmt.Sprintf(
				"GitHub refused the merge (%s) but reports no conflict; trying again", quote(msg))}
		}
	case lifecycle.RefusedDraft:
		return Action{Kind: Leave, Reason: "no longer eligible: pull request is a draft"}
	case lifecycle.RefusedClosed:
		return Action{Kind: Leave, Reason: "closed on GitHub"}
	}
	if r.Op == "update-branch" {
		return bounce(Bounced{Kind: BounceUpdateRefused, Base: base, Detail: msg})
	}
	return bounce(Bounced{Kind: BounceMergeRefused, Detail: msg})
}

// authorMethod is the method the author chose with GitHub auto-merge: as
// GitHub reports it now, else as it was when the pull request joined.
func authorMethod(f Facts) string {
	if f.PR != nil {
		if f.PR.AutoMerge {
			return f.PR.AutoMergeMethod
		}
		return ""
	}
	return f.Entry.MergeMethod
}

// chooseMethod picks the merge method: the one the author chose with
// GitHub auto-merge, else the preferred one, when the repository allows it
// (and a linear-history rule does not forbid merge commits); else the
// first it allows. ok is false when none is left. Unknown methods (known
// nil) are taken to be allowed: GitHub's refusal teaches them.
func chooseMethod(author string, known *lifecycle.MergeMethods, req lifecycle.Required, preferred, from string) (method, note string, ok bool) {
	allowed := lifecycle.MergeMethods{Merge: true, Squash: true, Rebase: true}
	if known != nil {
		allowed = *known
	}
	if req.LinearHistory {
		allowed.Merge = false
	}
	want, whose := preferred, methodFrom(from)
	if author != "" {
		want, whose = author, "the method chosen with auto-merge"
	}
	if allowed.Allows(want) {
		if author != "" && want != preferred {
			return want, "the method chosen with auto-merge", true
		}
		return want, "", true
	}
	list := allowed.List()
	if len(list) == 0 {
		return "", "", false
	}
	why := "the repository does not allow it"
	if req.LinearHistory && want == lifecycle.MethodMerge {
		why = "the base requires a linear history"
	}
	return list[0], fmt.Sprintf("%s, not %s (%s): %s", list[0], want, whose, why), true
}

// methodFrom names the setting of the merge method.
func methodFrom(from string) string {
	if from == "" {
		return "--merge-method"
	}
	return from
}

// noMethod blocks for the operator: no merge method is left to use.
func noMethod(req lifecycle.Required) Action {
	return Action{Kind: Block, Problem: "merge_method", Reason: "the repository allows no merge method mergegate can use" +
		linearNote(req) + ": allow squash or rebase merging in the repository's settings"}
}

func linearNote(req lifecycle.Required) string {
	if req.LinearHistory {
		return " (the base requires a linear history, so no merge commits)"
	}
	return ""
}

func bounce(b Bounced) Action {
	return Action{Kind: Bounce, Bounced: b, Problem: string(b.Kind)}
}

func waitPassed(reason string) Action {
	return Action{Kind: Wait, Status: lifecycle.StatusGatePassed, Reason: reason}
}

func approvals(want, have int) string {
	if want <= 1 {
		return "waiting for an approving review"
	}
	return fmt.Sprintf("waiting for %d approving reviews (%d so far)", want, have)
}

func logins(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "@" + n
	}
	return strings.Join(out, ", ")
}

// quote shows GitHub's words as such.
func quote(msg string) string { return `"` + msg + `"` }
