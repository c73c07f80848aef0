// Package lifecycle is the vocabulary of a pull request's life in the
// queue: the words rules decides with, leasedo stores and forge reads from
// GitHub. It holds types and constants only (and the few functions that
// spell them), and imports nothing of ours, so that a reader of rules
// needs nothing below it to understand a decision. forge and leasedo keep
// aliases of these words (forge.PR, leasedo.StatusQueued) for their
// callers.
//
// Files:
//   - status.go: a queue entry's statuses (queued, evaluating,
//     gate_passed, blocked, bounced), Entry and Item, NoConsent.
//   - gate.go: gate results (success, failure, pending), Verdict,
//     Required (what a base requires), Reviews.
//   - pr.go: PR (the part of a pull request mergegate uses),
//     MergeMethods and the merge methods, QueueEntry and GitHub's merge
//     queue states, ShortSHA.
//   - refusal.go: Refusal, GitHub's refusal of a merge or an update
//     sorted by whose it is to fix (forge.RefusalOf sorts them).
//   - train.go: a merge train's Group, its members (GroupPR), its states
//     and branches, Landed.
//   - text.go: Inert, text someone else chose (a check's name) made
//     inert in GitHub's Markdown: no mention, link or reference.
package lifecycle
