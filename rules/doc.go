// Package rules is the one place that decides a pull request's life in the
// merge queue. It is pure: from what GitHub says about a pull request and
// its base (Facts) it returns exactly one Action: wait, update the branch,
// merge, enqueue (in GitHub's own merge queue, on a base that uses it),
// bounce, leave, block or re-gate. It sends nothing and stores
// nothing; the sync of a repository (package reconcile) gathers the facts,
// asks Decide, and carries the action out.
//
// Whose problem a refusal is decides what happens to it:
//
//   - the author's (a failed check, a conflict): bounce, with one sentence
//     they can act on (BounceMessage);
//   - GitHub's own, settled by itself (mergeable still being computed, "Base
//     branch was modified", a moved head): wait a moment, or re-gate;
//   - missing but coming (a review, an update of the branch): wait, and say
//     for what on the pull request's check run;
//   - the operator's (permissions, the App's right to enqueue in GitHub's
//     merge queue): block, with what to change; nobody is bounced.
//
// Its words (statuses, gate results, PR, Refusal, a train's Group) are
// package lifecycle's, its only import of ours.
//
// Files:
//   - decide.go: Facts, Policy, Action and Decide, the one decision of a
//     pull request's life in the queue.
//   - eligibility.go: Options and the eligibility rule (trigger label,
//     auto-merge, base branches) that says which pull requests join.
//   - consent.go: whose consent covers a head, and what a push, a new base
//     or a reopening does to it.
//   - bounce.go: BounceMessage and Bounced, the one sentence a bounced
//     author reads.
//   - mergequeue.go: a base that uses GitHub's own merge queue: when to
//     enqueue, and what its entry's state means.
//   - train.go: merge trains: DecideTrainEntry for each entry and
//     DecideTrain, the next action on a base's groups.
package rules
