package rules_test

import (
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/mergegate/mergegate/rules"

	"github.com/mergegate/mergegate/lifecycle"
)

const (
	headSHA = "1111111111111111111111111111111111111111" // the entry's head, as queued
	newSHA  = "2222222222222222222222222222222222222222" // a head pushed since
)

// joined is when the entry's head joined: the check timeout counts from it.
var joined = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// situation is one row's input: the facts as the sync gathers them and
// the policy they are decided under.
type situation struct {
	f rules.Facts
	p rules.Policy
}

type mod func(*situation)

// given starts from the plainest case that merges: pull request #7 into
// main is the head of its queue, labelled, open, mergeable and clean; its
// one required check passed; the repository allows every method; the
// policy is the defaults (label and auto-merge triggers, --merge-method
// merge, a 1h check timeout). Each mod then changes one thing.
func given(mods ...mod) situation {
	it := lifecycle.Item{BaseRef: "main", HeadAt: joined.UnixMilli()}
	it.PRNumber, it.PRSha, it.Status = 7, headSHA, lifecycle.StatusGatePassed
	s := situation{
		f: rules.Facts{
			Entry: it,
			Head:  true,
			Gate:  lifecycle.Verdict{Result: lifecycle.GateSuccess, Reason: `required check "ci/build" passed`},
			Rules: lifecycle.Required{Contexts: []string{"ci/build"}, Configured: true},
			PR: &lifecycle.PR{
				Number: 7, State: "open", HeadSHA: headSHA, HeadRef: "feature", BaseRef: "main",
				Labels: []string{"automerge"}, Mergeable: ptr(true), MergeableState: "clean",
			},
			Methods: &lifecycle.MergeMethods{Merge: true, Squash: true, Rebase: true},
			Now:     joined.Add(time.Minute),
		},
		p: rules.Policy{Triggers: rules.DefaultOptions(), MergeMethod: lifecycle.MethodMerge, CheckTimeout: time.Hour},
	}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// The repository's policy.

func frozen(msg string) mod {
	return func(s *situation) { s.p.Frozen, s.p.FreezeMessage = true, msg }
}

func blocking(labels ...string) mod { return func(s *situation) { s.p.BlockingLabels = labels } }

func blockingTitle(pattern string) mod {
	return func(s *situation) { s.p.BlockingTitle = regexp.MustCompile(pattern) }
}

// What GitHub says of the pull request.

func onPR(change func(*lifecycle.PR)) mod { return func(s *situation) { change(s.f.PR) } }

func mergeableState(state string) mod {
	return onPR(func(pr *lifecycle.PR) { pr.MergeableState = state })
}

// mergeableNull: GitHub has not computed mergeable yet.
var mergeableNull = onPR(func(pr *lifecycle.PR) { pr.Mergeable, pr.MergeableState = nil, "unknown" })

// conflicts: mergeable false, as GitHub reports a conflict with the base.
var conflicts = onPR(func(pr *lifecycle.PR) { pr.Mergeable, pr.MergeableState = ptr(false), "dirty" })

func autoMerge(method string) mod {
	return onPR(func(pr *lifecycle.PR) { pr.AutoMerge, pr.AutoMergeMethod = true, method })
}

func fork(maintainerCanModify bool) mod {
	return onPR(func(pr *lifecycle.PR) { pr.Fork, pr.MaintainerCanModify = true, maintainerCanModify })
}

// The gate. The sync reads the pull request only for a head whose checks
// passed, so a gate that has not passed comes without it.

func checksFailed(reason string) mod {
	return func(s *situation) {
		s.f.Gate = lifecycle.Verdict{Result: lifecycle.GateFailure, Reason: reason}
		s.f.PR, s.f.Methods = nil, nil
	}
}

func checksPending(reason string, waiting ...string) mod {
	return func(s *situation) {
		s.f.Gate = lifecycle.Verdict{Result: lifecycle.GatePending, Reason: reason, Waiting: waiting}
		s.f.PR, s.f.Methods = nil, nil
	}
}

// concluded: deliveries said these checks concluded on the head moments
// ago (Facts.Concluded).
func concluded(names ...string) mod { return func(s *situation) { s.f.Concluded = names } }

// justApproved: a delivery said the pull request was approved moments ago,
// and the reviews as read count too few (Facts.JustApproved).
func justApproved(s *situation) { s.f.JustApproved = true }

// after sets the clock d after the head joined.
func after(d time.Duration) mod { return func(s *situation) { s.f.Now = joined.Add(d) } }

// behindHead: the entry is not the head of its queue; its PR is not read.
var behindHead mod = func(s *situation) { s.f.Head, s.f.PR, s.f.Methods = false, nil, nil }

// The base's rules and the repository's settings.

func base(change func(*lifecycle.Required)) mod { return func(s *situation) { change(&s.f.Rules) } }

var (
	strict        = base(func(r *lifecycle.Required) { r.Strict = true })
	linear        = base(func(r *lifecycle.Required) { r.LinearHistory = true })
	mergeQueue    = base(func(r *lifecycle.Required) { r.MergeQueue = true })
	codeOwners    = base(func(r *lifecycle.Required) { r.CodeOwners = true })
	conversations = base(func(r *lifecycle.Required) { r.Conversations = true })
)

// inGitHubQueue: GitHub reports the entry in its merge queue, at pos of
// size, in state.
func inGitHubQueue(pos, size int, state string) mod {
	return func(s *situation) {
		s.f.Queue, s.f.InQueue = &lifecycle.QueueEntry{Position: pos, Size: size, State: state}, true
	}
}

// removedFromGitHubQueue: mergegate had put the entry in GitHub's merge
// queue, and GitHub reports it out of it, removed for reason.
func removedFromGitHubQueue(reason string) mod {
	return func(s *situation) {
		s.f.Entry.GateReason = rules.QueueReason(lifecycle.QueueEntry{Position: 1, Size: 1})
		s.f.Queue, s.f.InQueue = &lifecycle.QueueEntry{Removed: reason, RemovedAt: joined}, false
	}
}

var enqueue = rules.Action{Kind: rules.Enqueue}

func requireReviews(n int) mod { return base(func(r *lifecycle.Required) { r.Reviews = n }) }

// reviews are what the pull request's reviews sum up to.
func reviews(approvals int, changesRequested ...string) mod {
	return func(s *situation) {
		s.f.Reviews = &lifecycle.Reviews{Approvals: approvals, ChangesRequested: changesRequested}
	}
}

// allows sets the repository's allow_merge_commit, allow_squash_merge and
// allow_rebase_merge.
func allows(merge, squash, rebase bool) mod {
	return func(s *situation) {
		s.f.Methods = &lifecycle.MergeMethods{Merge: merge, Squash: squash, Rebase: rebase}
	}
}

var methodsUnknown mod = func(s *situation) { s.f.Methods = nil }

func mergeMethod(m string) mod { return func(s *situation) { s.p.MergeMethod = m } }

// The entry.

// branchUpdateAsked: mergegate already asked GitHub to update this head.
// branchUpdateAsked: GitHub was asked to update the branch at the head, a
// moment ago (updateAskedAgo: a while ago).
var branchUpdateAsked = updateAskedAgo(time.Second)

func updateAskedAgo(d time.Duration) mod {
	return func(s *situation) {
		s.f.Entry.BranchUpdatedSha = s.f.Entry.PRSha
		s.f.Entry.BranchUpdatedAt = s.f.Now.Add(-d).UnixMilli()
	}
}

// refused: GitHub refused op ("merge" or "update-branch") just now, with
// message; the PR was read again since.
func refused(kind lifecycle.Refusal, op, message string) mod {
	return func(s *situation) {
		method := ""
		if op == "merge" {
			method = s.p.MergeMethod
		}
		s.f.Refusal = &rules.Refusal{Kind: kind, Op: op, Method: method, Message: message}
	}
}

// Actions.

func merge(method, note string) rules.Action {
	return rules.Action{Kind: rules.Merge, Method: method, MethodNote: note}
}

var updateBranch = rules.Action{Kind: rules.UpdateBranch}

// waitChecks: its checks have not passed (yet).
func waitChecks(reason string) rules.Action {
	return rules.Action{Kind: rules.Wait, Status: lifecycle.StatusEvaluating, Reason: reason}
}

// waitPassed: its checks passed; it waits for what reason says.
func waitPassed(reason string) rules.Action {
	return rules.Action{Kind: rules.Wait, Status: lifecycle.StatusGatePassed, Reason: reason}
}

// retry: GitHub settles this by itself; read again after a short pause.
func retry(reason string) rules.Action {
	return rules.Action{Kind: rules.Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: reason}
}

func bounce(problem string, b rules.Bounced) rules.Action {
	return rules.Action{Kind: rules.Bounce, Bounced: b, Problem: problem}
}

func leave(reason string) rules.Action { return rules.Action{Kind: rules.Leave, Reason: reason} }

func block(problem, reason string) rules.Action {
	return rules.Action{Kind: rules.Block, Problem: problem, Reason: reason}
}

func regateHead(sha, reason string) rules.Action {
	return rules.Action{Kind: rules.Regate, Sha: sha, Reason: reason}
}

func regateBase(base, reason string) rules.Action {
	return rules.Action{Kind: rules.Regate, Base: base, Reason: reason}
}

// TestDecide states the queue's rules (docs/queue.md), one row each: from what
// GitHub says about a queue entry, exactly one next action. A row fails
// when any field of the action changes.
func TestDecide(t *testing.T) {
	const (
		forkBehindReason = "its branch is behind main, and mergegate may not push to the fork: " +
			"update the branch, or allow edits by maintainers"
		computing = "GitHub is still working out whether it can be merged"
	)
	tests := []struct {
		name string
		s    situation
		want rules.Action
	}{
		// 1. What GitHub says of the pull request itself comes first.
		{"merged outside mergegate leaves",
			given(onPR(func(pr *lifecycle.PR) { pr.Merged, pr.State = true, "closed" })),
			leave("merged outside mergegate")},
		{"closed on GitHub leaves",
			given(onPR(func(pr *lifecycle.PR) { pr.State = "closed" })),
			leave("closed on GitHub")},
		{"turned back into a draft leaves, no longer eligible",
			given(onPR(func(pr *lifecycle.PR) { pr.Draft = true })),
			leave("no longer eligible: pull request is a draft")},
		{"trigger label removed leaves, no longer eligible",
			given(onPR(func(pr *lifecycle.PR) { pr.Labels = []string{"bug"} })),
			leave(`no longer eligible: no "automerge" label and auto-merge is not enabled`)},
		{"label trigger off: a labelled pull request without auto-merge leaves",
			given(func(s *situation) { s.p.Triggers.TriggerLabel = "" }),
			leave("no longer eligible: auto-merge is not enabled")},
		{"auto-merge alone keeps it eligible and merges",
			given(onPR(func(pr *lifecycle.PR) { pr.Labels = nil }), autoMerge("")),
			merge("merge", "")},
		{"closed while merging leaves, whatever GitHub refused",
			given(onPR(func(pr *lifecycle.PR) { pr.State = "closed" }), refused(lifecycle.RefusedOther, "merge", "Pull Request is not mergeable")),
			leave("closed on GitHub")},
		{"new head re-gates",
			given(onPR(func(pr *lifecycle.PR) { pr.HeadSHA = newSHA })),
			regateHead(newSHA, "new commits on GitHub")},
		{"another head read moments after its own was learnt reads again: a replica behind the push",
			given(onPR(func(pr *lifecycle.PR) { pr.HeadSHA = newSHA }), after(3*time.Second)),
			retry("GitHub's read of the pull request does not show its new head yet; reading it again")},
		{"another head read ReadLag after its own re-gates",
			given(onPR(func(pr *lifecycle.PR) { pr.HeadSHA = newSHA }), after(rules.ReadLag)),
			regateHead(newSHA, "new commits on GitHub")},
		{"another head read moments after its own, GitHub having refused for a moved head, re-gates",
			given(onPR(func(pr *lifecycle.PR) { pr.HeadSHA = newSHA }), after(3*time.Second),
				refused(lifecycle.RefusedHeadModified, "merge", "Head branch was modified. Review and try the merge again.")),
			regateHead(newSHA, "new commits on GitHub")},
		{"base changed re-gates",
			given(onPR(func(pr *lifecycle.PR) { pr.BaseRef = "release-1.x" })),
			regateBase("release-1.x", "base branch changed from main to release-1.x")},
		{"new head and new base re-gate the head first",
			given(onPR(func(pr *lifecycle.PR) { pr.HeadSHA, pr.BaseRef = newSHA, "release-1.x" })),
			regateHead(newSHA, "new commits on GitHub")},
		{"snapshot without a head sha is not a new head",
			given(onPR(func(pr *lifecycle.PR) { pr.HeadSHA = "" })),
			merge("merge", "")},
		{"entry whose base is not recorded yet is not re-gated for its base",
			given(func(s *situation) { s.f.Entry.BaseRef = "" }, onPR(func(pr *lifecycle.PR) { pr.BaseRef = "release-1.x" })),
			merge("merge", "")},

		// 2. The gate: a failure bounces; checks that have not concluded
		// wait, and bounce once --check-timeout has passed.
		{"failed gate bounces",
			given(checksFailed(`required check "ci/build" concluded failure`)),
			bounce("gate_failure", rules.Bounced{Kind: rules.BounceGateFailure, Detail: `required check "ci/build" concluded failure`})},
		{"failed gate bounces an entry behind the head too",
			given(behindHead, checksFailed(`required check "ci/build" concluded stale`)),
			bounce("gate_failure", rules.Bounced{Kind: rules.BounceGateFailure, Detail: `required check "ci/build" concluded stale`})},
		{"checks not concluded wait, saying which",
			given(checksPending(`waiting for required check "e2e", which has not reported yet`, "e2e")),
			waitChecks(`waiting for required check "e2e", which has not reported yet`)},
		{"a check read running that a delivery just said concluded is read again",
			given(checksPending(`waiting for required check "e2e"`, "ci/build", "e2e"), concluded("e2e")),
			retry(`GitHub's read of the checks does not show "e2e"'s result yet; reading them again`)},
		{"a delivery for another check than the ones waiting changes nothing",
			given(checksPending(`waiting for required check "e2e"`, "e2e"), concluded("lint")),
			waitChecks(`waiting for required check "e2e"`)},
		{"a check a delivery said concluded is read again before the check timeout bounces",
			given(checksPending(`waiting for required check "e2e"`, "e2e"), after(time.Hour), concluded("e2e")),
			retry(`GitHub's read of the checks does not show "e2e"'s result yet; reading them again`)},
		{"gate not read yet waits for checks",
			given(func(s *situation) { s.f.Gate, s.f.PR = lifecycle.Verdict{}, nil }),
			waitChecks("waiting for checks")},
		{"checks just inside the timeout still wait",
			given(checksPending(`waiting for required check "e2e"`, "e2e"), after(time.Hour-time.Second)),
			waitChecks(`waiting for required check "e2e"`)},
		{"check timeout bounces naming the checks that never concluded",
			given(checksPending(`waiting for required check "ci/build"`, "ci/build", "e2e"), after(time.Hour)),
			bounce("check_timeout", rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"ci/build", "e2e"}, After: time.Hour})},
		{"check timeout bounces an entry behind the head too",
			given(behindHead, checksPending(`waiting for required check "e2e"`, "e2e"), after(2*time.Hour)),
			bounce("check_timeout", rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"e2e"}, After: time.Hour})},
		{"check timeout counts from the head's arrival, not from the join",
			given(checksPending(`waiting for required check "e2e"`, "e2e"), after(3*time.Hour),
				func(s *situation) {
					s.f.Entry.QueuedAt, s.f.Entry.HeadAt = joined.UnixMilli(), joined.Add(150*time.Minute).UnixMilli()
				}),
			waitChecks(`waiting for required check "e2e"`)},
		{"check timeout 0 never bounces",
			given(checksPending(`waiting for required check "e2e"`, "e2e"), after(48*time.Hour), func(s *situation) { s.p.CheckTimeout = 0 }),
			waitChecks(`waiting for required check "e2e"`)},
		{"entry without a head time never times out",
			given(checksPending(`waiting for required check "e2e"`, "e2e"), after(48*time.Hour), func(s *situation) { s.f.Entry.HeadAt = 0 }),
			waitChecks(`waiting for required check "e2e"`)},
		{"no check reported at all still waits inside the timeout",
			given(checksPending("no checks reported yet"), after(59*time.Minute)),
			waitChecks("no checks reported yet")},
		// The head never waits forever, not even on a repository where no
		// check ever reports.
		{"no check reported at all bounces after the timeout",
			given(checksPending("no checks reported yet"), after(48*time.Hour)),
			bounce("check_timeout", rules.Bounced{Kind: rules.BounceCheckTimeout, After: time.Hour})},

		// 3. Behind the head, checks passed: wait its turn.
		{"entry behind the head waits with gate passed",
			given(behindHead),
			rules.Action{Kind: rules.Wait, Status: lifecycle.StatusGatePassed}},
		// The sync reads the pull request only after GitHub refused: the
		// guarded merge checks the rest.
		{"head not read from GitHub merges with --merge-method",
			given(func(s *situation) { s.f.PR = nil }),
			merge("merge", "")},
		{"head not read from GitHub merges with the method its author chose when it joined",
			given(func(s *situation) { s.f.PR, s.f.Entry.MergeMethod = nil, "rebase" }),
			merge("rebase", "the method chosen with auto-merge")},
		{"head not read from GitHub, reviews required and missing, waits",
			given(func(s *situation) {
				s.f.PR, s.f.Rules.Reviews, s.f.Reviews = nil, 1, &lifecycle.Reviews{}
			}),
			rules.Action{Kind: rules.Wait, Status: lifecycle.StatusGatePassed, Reason: "waiting for an approving review"}},

		// 5. The head, checks passed.
		{"clean head merges with --merge-method",
			given(),
			merge("merge", "")},

		// 3. A base that uses GitHub's merge queue: its entries go there.
		{"merge queue on the base: the head whose checks passed is enqueued",
			given(mergeQueue),
			enqueue},
		{"merge queue on the base: an entry behind the head is enqueued too, GitHub's queue orders them",
			given(mergeQueue, behindHead),
			enqueue},
		{"merge queue on the base: mergeable not computed yet is GitHub's to judge, enqueued",
			given(mergeQueue, mergeableNull),
			enqueue},
		{"merge queue on the base: checks pending wait, not enqueued",
			given(mergeQueue, checksPending(`waiting for required check "ci/build"`, "ci/build")),
			waitChecks(`waiting for required check "ci/build"`)},
		{"merge queue on the base: a failed check bounces, not enqueued",
			given(mergeQueue, behindHead, checksFailed(`required check "ci/build" concluded failure`)),
			bounce("gate_failure", rules.Bounced{Kind: rules.BounceGateFailure, Detail: `required check "ci/build" concluded failure`})},
		{"merge queue on the base: reviews required and missing wait",
			given(mergeQueue, requireReviews(2), reviews(1)),
			waitPassed("waiting for 2 approving reviews (1 so far)")},
		{"merge queue on the base: an approval the read does not count yet is read again",
			given(mergeQueue, requireReviews(2), reviews(1), justApproved),
			retry("GitHub's read of the reviews does not show the approval just given yet; reading them again")},
		{"merge queue on the base: changes requested wait",
			given(mergeQueue, requireReviews(1), reviews(1, "alice")),
			waitPassed("changes requested by @alice")},
		{"merge queue on the base: frozen waits, not enqueued",
			given(mergeQueue, frozen("release Friday")),
			waitPassed("frozen: release Friday")},
		{"merge queue on the base: a blocking label holds it, not enqueued",
			given(mergeQueue, blocking("do-not-merge"), onPR(func(pr *lifecycle.PR) { pr.Labels = append(pr.Labels, "do-not-merge") })),
			block("held", `held: the label "do-not-merge" keeps it from merging: remove the label to let it merge`)},
		{"in GitHub's merge queue: waits there, saying its place",
			given(mergeQueue, behindHead, inGitHubQueue(2, 3, lifecycle.QueueStateQueued)),
			waitPassed("in GitHub's merge queue (position 2 of 3)")},
		{"in GitHub's merge queue, first: says its group's checks run",
			given(mergeQueue, inGitHubQueue(1, 3, lifecycle.QueueStateAwaitingChecks)),
			waitPassed("in GitHub's merge queue (position 1 of 3, its merge group's checks running)")},
		{"in GitHub's merge queue and frozen: GitHub merges it, mergegate says its place",
			given(mergeQueue, frozen("release"), inGitHubQueue(1, 1, lifecycle.QueueStateMergeable)),
			waitPassed("in GitHub's merge queue (position 1 of 1, about to be merged)")},
		{"merged on a base with GitHub's merge queue, not by it, leaves (rule 1)",
			given(mergeQueue, onPR(func(pr *lifecycle.PR) { pr.Merged, pr.State = true, "closed" })),
			leave("merged outside mergegate")},
		{"merged by GitHub's merge queue, out of it without a removal, leaves (rule 1)",
			given(mergeQueue, removedFromGitHubQueue(""), onPR(func(pr *lifecycle.PR) { pr.Merged, pr.State = true, "closed" })),
			leave("merged by GitHub's merge queue")},
		{"removed from GitHub's merge queue for a failed merge group bounces with GitHub's reason",
			given(mergeQueue, removedFromGitHubQueue("CI_FAILURE")),
			bounce("merge_group_failed", rules.Bounced{Kind: rules.BounceMergeGroupFailed, Detail: "CI_FAILURE", Base: "main"})},
		{"removed from GitHub's merge queue by hand is taken out too, without blame",
			given(mergeQueue, behindHead, removedFromGitHubQueue("MANUAL")),
			bounce("dequeued", rules.Bounced{Kind: rules.BounceDequeued, Detail: "MANUAL", Base: "main"})},
		{"an old removal from GitHub's merge queue, before mergegate enqueued this head, enqueues",
			given(mergeQueue, removedFromGitHubQueue("CI_FAILURE"), func(s *situation) { s.f.Entry.GateReason = "" }),
			enqueue},
		// GitHub's refusals to enqueue (the pull request read again).
		{"enqueue refused, head moved: reads the pull request again",
			given(mergeQueue, refused(lifecycle.RefusedHeadModified, "enqueue", "expected head oid didn't match current head ref.")),
			retry("GitHub reported new commits; reading the pull request again")},
		{"enqueue refused, checks GitHub does not count yet: waits for checks",
			given(mergeQueue, refused(lifecycle.RefusedChecks, "enqueue", "Pull request Required workflow 'CI' is not satisfied")),
			waitChecks(`GitHub's merge queue does not count its required checks as passed yet: "Pull request Required workflow 'CI' is not satisfied"`)},
		{"enqueue refused for a code owner's review: waits",
			given(mergeQueue, refused(lifecycle.RefusedReview, "enqueue", "Pull request Waiting on code owner review from octo-org/core")),
			waitPassed(`waiting for reviews: GitHub says "Pull request Waiting on code owner review from octo-org/core"`)},
		{"enqueue refused, the App may not: blocks for the operator",
			given(mergeQueue, refused(lifecycle.RefusedNotAuthorized, "enqueue", "Resource not accessible by integration")),
			block("not_authorized", `mergegate may not add pull requests to GitHub's merge queue for main ("Resource not accessible by integration"): `+
				`give the App "Contents: read and write" and "Pull requests: read and write" on the installation`)},
		{"enqueue refused, no queue on the base after all: reads the rules again",
			given(mergeQueue, refused(lifecycle.RefusedMergeQueue, "enqueue", "No merge queue found for branch main")),
			retry(`GitHub says main has no merge queue ("No merge queue found for branch main"); reading its rules again`)},
		{"enqueue refused for conflicts the pull request reports: bounces for conflicts",
			given(mergeQueue, conflicts, refused(lifecycle.RefusedConflict, "enqueue", "Pull request has merge conflicts")),
			bounce("conflict", rules.Bounced{Kind: rules.BounceConflict, Base: "main"})},
		{"enqueue refused for a reason not sorted: bounces with GitHub's words",
			given(mergeQueue, refused(lifecycle.RefusedOther, "enqueue", "Pull request Something new.")),
			bounce("enqueue_refused", rules.Bounced{Kind: rules.BounceEnqueueRefused, Base: "main", Detail: "Pull request Something new"})},
		{"enqueue refused but closed since: leaves (rule 1)",
			given(mergeQueue, onPR(func(pr *lifecycle.PR) { pr.State = "closed" }), refused(lifecycle.RefusedClosed, "enqueue", "Pull request is closed")),
			leave("closed on GitHub")},
		{"--merge-method squash is used when allowed",
			given(mergeMethod("squash")),
			merge("squash", "")},
		{"squash-only repository merges with squash and says why",
			given(allows(false, true, false)),
			merge("squash", "squash, not merge (--merge-method): the repository does not allow it")},
		{"--merge-method not allowed takes the first allowed in GitHub's order",
			given(mergeMethod("rebase"), allows(true, true, false)),
			merge("merge", "merge, not rebase (--merge-method): the repository does not allow it")},
		{"auto-merge's chosen method wins when allowed",
			given(autoMerge("rebase")),
			merge("rebase", "the method chosen with auto-merge")},
		{"auto-merge's chosen method that is --merge-method's needs no note",
			given(autoMerge("merge")),
			merge("merge", "")},
		{"auto-merge's chosen method not allowed takes the first allowed, saying so",
			given(autoMerge("merge"), allows(false, true, true)),
			merge("squash", "squash, not merge (the method chosen with auto-merge): the repository does not allow it")},
		{"linear history forbids merge commits",
			given(linear),
			merge("squash", "squash, not merge (--merge-method): the base requires a linear history")},
		{"linear history forbids merge commits chosen with auto-merge",
			given(linear, autoMerge("merge"), allows(true, false, true)),
			merge("rebase", "rebase, not merge (the method chosen with auto-merge): the base requires a linear history")},
		{"merge methods not known: --merge-method is tried and GitHub's answer sorted",
			given(methodsUnknown, mergeMethod("rebase")),
			merge("rebase", "")},
		{"merge methods not known with linear history: no merge commit is tried",
			given(methodsUnknown, linear),
			merge("squash", "squash, not merge (--merge-method): the base requires a linear history")},
		{"no usable merge method blocks for the operator",
			given(allows(false, false, false)),
			block("merge_method", "the repository allows no merge method mergegate can use: allow squash or rebase merging in the repository's settings")},
		{"merge-commit-only repository with linear history blocks, saying why",
			given(allows(true, false, false), linear),
			block("merge_method", "the repository allows no merge method mergegate can use (the base requires a linear history, so no merge commits): "+
				"allow squash or rebase merging in the repository's settings")},
		{"mergeable null waits and reads again",
			given(mergeableNull),
			retry(computing)},
		{"mergeable_state unknown waits and reads again",
			given(mergeableState("unknown")),
			retry(computing)},
		{"mergeable null waits even while reviews are missing",
			given(mergeableNull, requireReviews(1), reviews(0)),
			retry(computing)},
		{"conflicts bounce",
			given(conflicts),
			bounce("conflict", rules.Bounced{Kind: rules.BounceConflict, Base: "main"})},
		{"mergeable_state dirty bounces for conflicts",
			given(mergeableState("dirty")),
			bounce("conflict", rules.Bounced{Kind: rules.BounceConflict, Base: "main"})},
		{"conflicts are the author's even while reviews are missing",
			given(conflicts, requireReviews(1), reviews(0)),
			bounce("conflict", rules.Bounced{Kind: rules.BounceConflict, Base: "main"})},
		{"behind a strict base updates the branch",
			given(mergeableState("behind"), strict),
			updateBranch},
		{"behind a strict base updates the branch while reviews are still missing",
			given(mergeableState("behind"), strict, requireReviews(1), reviews(0)),
			updateBranch},
		{"behind a base that does not require up-to-date branches merges",
			given(mergeableState("behind")),
			merge("merge", "")},
		{"branch already asked to update waits",
			given(mergeableState("behind"), strict, branchUpdateAsked),
			waitPassed("branch being updated from main")},
		{"branch asked to update a while ago, not updated yet, still waits",
			given(mergeableState("behind"), strict, updateAskedAgo(rules.UpdatePatience-time.Second)),
			waitPassed("branch being updated from main")},
		{"branch asked to update longer ago than GitHub takes is asked again (its update was lost)",
			given(mergeableState("behind"), strict, updateAskedAgo(rules.UpdatePatience)),
			updateBranch},
		{"branch asked to update by an earlier mergegate (no time kept) is asked again",
			given(mergeableState("behind"), strict, func(s *situation) { s.f.Entry.BranchUpdatedSha = s.f.Entry.PRSha }),
			updateBranch},
		{"branch asked to update for an older head is updated again",
			given(mergeableState("behind"), strict, func(s *situation) { s.f.Entry.BranchUpdatedSha = newSHA }),
			updateBranch},
		{"fork behind strict base without maintainer edits waits for its author",
			given(mergeableState("behind"), strict, fork(false)),
			waitPassed(forkBehindReason)},
		{"fork behind strict base that allows maintainer edits is updated",
			given(mergeableState("behind"), strict, fork(true)),
			updateBranch},
		{"changes requested waits and names the reviewer",
			given(mergeableState("blocked"), requireReviews(1), reviews(1, "alice")),
			waitPassed("changes requested by @alice")},
		{"changes requested by two wait and name both",
			given(mergeableState("blocked"), requireReviews(1), reviews(2, "alice", "bob")),
			waitPassed("changes requested by @alice, @bob")},
		{"required reviews missing waits, never bounces",
			given(mergeableState("blocked"), requireReviews(1), reviews(0)),
			waitPassed("waiting for an approving review")},
		{"two required reviews, one so far, waits and counts",
			given(mergeableState("blocked"), requireReviews(2), reviews(1)),
			waitPassed("waiting for 2 approving reviews (1 so far)")},
		{"an approval a delivery just told of and the read does not count is read again",
			given(mergeableState("blocked"), requireReviews(1), reviews(0), justApproved),
			retry("GitHub's read of the reviews does not show the approval just given yet; reading them again")},
		{"required reviews missing wait even when GitHub does not say blocked",
			given(requireReviews(1), reviews(0)),
			waitPassed("waiting for an approving review")},
		{"required reviews not read, blocked, waits for an approving review",
			given(mergeableState("blocked"), requireReviews(1)),
			waitPassed("waiting for an approving review")},
		{"code owner review pending waits",
			given(mergeableState("blocked"), requireReviews(1), codeOwners, reviews(1)),
			waitPassed("waiting for a code owner's approving review")},
		{"conversations unresolved waits",
			given(mergeableState("blocked"), conversations),
			waitPassed("waiting for every review conversation to be resolved")},
		{"approved as required merges",
			given(requireReviews(1), codeOwners, reviews(1)),
			merge("merge", "")},
		{"blocked for a reason mergegate cannot see merges and lets GitHub say",
			given(mergeableState("blocked")),
			merge("merge", "")},
		{"unstable (a check that is not required failed) merges",
			given(mergeableState("unstable")),
			merge("merge", "")},
		{"has_hooks merges",
			given(mergeableState("has_hooks")),
			merge("merge", "")},

		// 4. After GitHub refused a merge or an update of the branch.
		{"409 head moved on merge waits and reads again",
			given(refused(lifecycle.RefusedHeadModified, "merge", "Head branch was modified. Review and try the merge again.")),
			retry("GitHub reported new commits; reading the pull request again")},
		{"422 update-branch head moved re-gates the new head",
			given(refused(lifecycle.RefusedHeadModified, "update-branch", "expected head sha didn't match current head ref."),
				onPR(func(pr *lifecycle.PR) { pr.HeadSHA = newSHA })),
			regateHead(newSHA, "new commits on GitHub")},
		{"422 update-branch head moved, not yet seen on the pull request, waits and reads again",
			given(refused(lifecycle.RefusedHeadModified, "update-branch", "expected head sha didn't match current head ref.")),
			retry("GitHub reported new commits; reading the pull request again")},
		{"405 base modified waits and retries",
			given(refused(lifecycle.RefusedBaseModified, "merge", "Base branch was modified. Review and try the merge again.")),
			retry("main moved while merging; trying again")},
		{"405 head not up to date on merge updates the branch",
			given(strict, refused(lifecycle.RefusedBehind, "merge", "Head branch is not up to date with the base branch.")),
			updateBranch},
		{"405 head not up to date, update already asked, waits",
			given(strict, branchUpdateAsked, refused(lifecycle.RefusedBehind, "merge", "Head branch is not up to date with the base branch.")),
			waitPassed("branch being updated from main")},
		{"405 head not up to date on a fork without maintainer edits waits for its author",
			given(strict, fork(false), refused(lifecycle.RefusedBehind, "merge", "Head branch is not up to date with the base branch.")),
			waitPassed(forkBehindReason)},
		{"not up to date from update-branch itself bounces with GitHub's words",
			given(refused(lifecycle.RefusedBehind, "update-branch", "Head branch is out of date.")),
			bounce("update_refused", rules.Bounced{Kind: rules.BounceUpdateRefused, Base: "main", Detail: "Head branch is out of date"})},
		{"no new commits after update → merge",
			given(mergeableState("behind"), strict, refused(lifecycle.RefusedNoNewCommits, "update-branch", "There are no new commits on the base branch.")),
			merge("merge", "")},
		{"no new commits after update merges with a method the repository allows",
			given(allows(false, true, false), refused(lifecycle.RefusedNoNewCommits, "update-branch", "There are no new commits on the base branch.")),
			merge("squash", "squash, not merge (--merge-method): the repository does not allow it")},
		{"no new commits after update, no usable merge method, blocks for the operator",
			given(allows(true, false, false), linear, refused(lifecycle.RefusedNoNewCommits, "update-branch", "There are no new commits on the base branch.")),
			block("merge_method", "the repository allows no merge method mergegate can use (the base requires a linear history, so no merge commits): "+
				"allow squash or rebase merging in the repository's settings")},
		{"review required refusal waits, never bounces",
			given(refused(lifecycle.RefusedReview, "merge", "At least 1 approving review is required by reviewers with write access.")),
			waitPassed(`waiting for reviews: GitHub says "At least 1 approving review is required by reviewers with write access"`)},
		{"required status check refusal waits for the checks",
			given(refused(lifecycle.RefusedChecks, "merge", `Required status check "ci/build" is expected.`)),
			waitChecks(`GitHub does not count its required checks as passed yet: "Required status check "ci/build" is expected"`)},
		{"merge method refused blocks for the operator",
			given(refused(lifecycle.RefusedMethod, "merge", "Merge commits are not allowed on this repository.")),
			block("merge_method", `GitHub refused to merge with merge ("Merge commits are not allowed on this repository"): `+
				"allow it in the repository's settings, or set --merge-method to a method it allows")},
		{"405 changes must be made through the merge queue: its rules did not show the queue, enqueued",
			given(refused(lifecycle.RefusedMergeQueue, "merge", "Changes must be made through the merge queue")),
			enqueue},
		{"405 changes must be made through the merge queue, reviews missing: waits before it is enqueued",
			given(refused(lifecycle.RefusedMergeQueue, "merge", "Changes must be made through the merge queue"), requireReviews(1), reviews(0)),
			waitPassed("waiting for an approving review")},
		{"an entry mergegate put in GitHub's queue is read there even when its base's rules do not show the queue",
			given(behindHead, inGitHubQueue(1, 2, lifecycle.QueueStateQueued), func(s *situation) {
				s.f.Entry.GateReason = rules.QueueReason(lifecycle.QueueEntry{Position: 2, Size: 2})
			}),
			waitPassed("in GitHub's merge queue (position 1 of 2)")},
		{"enqueue refused, no queue on the base, again and again: blocks for the operator",
			given(mergeQueue, refused(lifecycle.RefusedMergeQueue, "enqueue", "No merge queue found for branch main"), func(s *situation) { s.f.Retries = rules.MaxRetries }),
			block("merge_queue", `GitHub refuses to add pull requests to a merge queue for main ("No merge queue found for branch main") though its ruleset has a merge queue rule: check the rule's settings for main`)},
		{"not authorized blocks",
			given(refused(lifecycle.RefusedNotAuthorized, "merge", "You're not authorized to push to this branch. Visit https://docs.github.com/articles/about-protected-branches/ for more information.")),
			block("not_authorized", `mergegate may not push to main ("You're not authorized to push to this branch. Visit https://docs.github.com/articles/about-protected-branches/ for more information"): `+
				"let the App push to it (the branch's push restrictions, or the ruleset's bypass list)")},
		{"workflows 403 blocks",
			given(refused(lifecycle.RefusedWorkflows, "merge", "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission")),
			block("workflows", "it changes files under .github/workflows, which GitHub lets an App merge or update only with the workflows permission: "+
				`give the App "Workflows: read and write" and accept the new permission on the installation`)},
		{"workflows 403 on update-branch blocks too",
			given(refused(lifecycle.RefusedWorkflows, "update-branch", "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission")),
			block("workflows", "updating its branch from main would change files under .github/workflows, which GitHub lets an App merge or update only with the workflows permission: "+
				`give the App "Workflows: read and write" and accept the new permission on the installation`)},
		// GitHub's "not mergeable" says no more than that: the PR read
		// again says why.
		{"405 not mergeable, the PR reporting conflicts, bounces for conflicts",
			given(conflicts, refused(lifecycle.RefusedConflict, "merge", "Pull Request is not mergeable")),
			bounce("conflict", rules.Bounced{Kind: rules.BounceConflict, Base: "main"})},
		{"405 not mergeable, the PR behind a strict base, updates the branch",
			given(mergeableState("behind"), strict, refused(lifecycle.RefusedConflict, "merge", "Pull Request is not mergeable")),
			rules.Action{Kind: rules.UpdateBranch}},
		{"405 not mergeable while GitHub computes mergeable waits and reads again",
			given(mergeableNull, refused(lifecycle.RefusedConflict, "merge", "Pull Request is not mergeable")),
			rules.Action{Kind: rules.Wait, Status: lifecycle.StatusQueued, Retry: true, Reason: "GitHub is still working out whether it can be merged"}},
		{"405 not mergeable though GitHub reports it clean tries again",
			given(refused(lifecycle.RefusedConflict, "merge", "Pull Request is not mergeable")),
			rules.Action{Kind: rules.Wait, Status: lifecycle.StatusQueued, Retry: true,
				Reason: `GitHub refused the merge ("Pull Request is not mergeable") but reports no conflict; trying again`}},
		{"405 not mergeable though clean, tried MaxRetries times, bounces with GitHub's words",
			given(refused(lifecycle.RefusedConflict, "merge", "Pull Request is not mergeable"), func(s *situation) { s.f.Retries = rules.MaxRetries }),
			bounce("merge_refused", rules.Bounced{Kind: rules.BounceMergeRefused, Detail: "Pull Request is not mergeable"})},
		{"422 merge conflict on update-branch bounces for conflicts",
			given(refused(lifecycle.RefusedConflict, "update-branch", "merge conflict between base and head")),
			bounce("conflict", rules.Bounced{Kind: rules.BounceConflict, Base: "main"})},
		{"refused as a draft leaves",
			given(refused(lifecycle.RefusedDraft, "merge", "Pull Request is still a draft")),
			leave("no longer eligible: pull request is a draft")},
		{"refused as closed leaves",
			given(refused(lifecycle.RefusedClosed, "merge", "Pull Request is closed")),
			leave("closed on GitHub")},
		{"unknown refusal bounces with GitHub's words",
			given(refused(lifecycle.RefusedOther, "merge", "Repository rule violations found: Commits must have verified signatures.")),
			bounce("merge_refused", rules.Bounced{Kind: rules.BounceMergeRefused, Detail: "Repository rule violations found: Commits must have verified signatures"})},
		{"unknown refusal of several lines bounces with GitHub's words on one line",
			given(refused(lifecycle.RefusedOther, "merge", "Repository rule violations found\n\nCommits must have verified signatures.\n\n")),
			bounce("merge_refused", rules.Bounced{Kind: rules.BounceMergeRefused, Detail: "Repository rule violations found: Commits must have verified signatures"})},
		// The repository's policy (.github/mergegate.yml).
		{"frozen: the head whose checks passed waits, saying the freeze's message",
			given(frozen("release Friday")),
			waitPassed("frozen: release Friday")},
		{"frozen: a branch behind a strict base is not updated either",
			given(frozen(""), mergeableState("behind"), strict),
			waitPassed("frozen")},
		{"frozen: checks are still read, and a failure still bounces",
			given(frozen("release"), checksFailed(`required check "ci/build" failed`)),
			bounce("gate_failure", rules.Bounced{Kind: rules.BounceGateFailure, Detail: `required check "ci/build" failed`})},
		{"frozen: pending checks still wait for checks",
			given(frozen("release"), checksPending("waiting for ci/build")),
			waitChecks("waiting for ci/build")},
		{"frozen: GitHub's no-new-commits answer does not merge",
			given(frozen("release"), refused(lifecycle.RefusedNoNewCommits, "update-branch", "There are no new commits on the base branch.")),
			waitPassed("frozen: release")},
		{"a blocking label keeps the head from merging, saying which",
			given(blocking("do-not-merge"), onPR(func(pr *lifecycle.PR) { pr.Labels = append(pr.Labels, "Do-Not-Merge") })),
			block("held", `held: the label "do-not-merge" keeps it from merging: remove the label to let it merge`)},
		{"a blocking label not on the pull request merges",
			given(blocking("do-not-merge")),
			merge("merge", "")},
		{"a title matching blocking_title waits",
			given(blockingTitle("^WIP"), onPR(func(pr *lifecycle.PR) { pr.Title = "WIP: half done" })),
			block("held", `held: its title matches blocking_title "^WIP": change the title to let it merge`)},
		{"a title not matching blocking_title merges",
			given(blockingTitle("^WIP"), onPR(func(pr *lifecycle.PR) { pr.Title = "Fix WIP detection" })),
			merge("merge", "")},
		{"the merge method from the file, not allowed, names the file in the note",
			given(func(s *situation) {
				s.p.MergeMethod, s.p.MethodFrom = "squash", "merge_method in .github/mergegate.yml"
				s.f.Methods = &lifecycle.MergeMethods{Merge: true}
			}),
			merge("merge", "merge, not squash (merge_method in .github/mergegate.yml): the repository does not allow it")},
		{"the check timeout from the file bounces sooner",
			given(checksPending("waiting for ci/build"), after(time.Minute), func(s *situation) { s.p.CheckTimeout = 30 * time.Second }),
			bounce("check_timeout", rules.Bounced{Kind: rules.BounceCheckTimeout, After: 30 * time.Second})},
		{"trigger_labels: a pull request with another of them stays eligible",
			given(func(s *situation) { s.p.Triggers.TriggerLabels = []string{"ship-it", "automerge"} }, onPR(func(pr *lifecycle.PR) { pr.Labels = []string{"ship-it"} })),
			merge("merge", "")},
		{"branches: a pull request moved to a base with no queue leaves",
			given(func(s *situation) { s.p.Triggers.Branches = []string{"main"} }, onPR(func(pr *lifecycle.PR) { pr.BaseRef = "dev" })),
			leave("no longer eligible: its base branch dev has no queue (branches: main)")},
		{"unknown refusal of update-branch bounces with GitHub's words",
			given(refused(lifecycle.RefusedOther, "update-branch", "Something went wrong updating the branch.")),
			bounce("update_refused", rules.Bounced{Kind: rules.BounceUpdateRefused, Base: "main", Detail: "Something went wrong updating the branch"})},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		if seen[tt.name] {
			t.Fatalf("two rows named %q: each rule is stated once", tt.name)
		}
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			got := rules.Decide(tt.s.f, tt.s.p)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide:\n got  %s %+v\n want %s %+v", got.Kind, got, tt.want.Kind, tt.want)
			}
		})
	}
}

// TestDecideIsPure: the same facts give the same action, and Decide
// changes nothing it is given.
func TestDecideIsPure(t *testing.T) {
	s := given(mergeableState("behind"), strict, requireReviews(1), reviews(0, "alice"), autoMerge("squash"))
	before := *s.f.PR
	rulesBefore := s.f.Rules
	first := rules.Decide(s.f, s.p)
	if again := rules.Decide(s.f, s.p); !reflect.DeepEqual(first, again) {
		t.Fatalf("Decide twice: %+v then %+v", first, again)
	}
	if !reflect.DeepEqual(*s.f.PR, before) || !reflect.DeepEqual(s.f.Rules, rulesBefore) {
		t.Fatal("Decide changed its facts")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[rules.Kind]string{
		rules.Wait: "wait", rules.UpdateBranch: "update_branch", rules.Merge: "merge", rules.Bounce: "bounce",
		rules.Leave: "leave", rules.Block: "block", rules.Regate: "regate", rules.Enqueue: "enqueue", rules.Kind(42): "kind(42)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}
