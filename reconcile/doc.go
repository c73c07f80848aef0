// Package reconcile holds the sync of one repository, the heart of the
// engine, and what feeds it: each repository's policy, the comment
// commands, merge trains, and the cron's pass over every repository.
//
// Syncer.Sync (sync.go) is what every delivery, retry and pass ends in: it
// reads the queue and GitHub's facts about each entry (the head of each
// base's queue first), asks rules.Decide, and carries the action out
// (merge, update the branch, enqueue, bounce, block, leave), each step one
// typed leasedo transition under the repository's lease, with no
// transaction held across a GitHub call. The cron's Reconciler fixes what
// webhooks missed (the lease protocol's reconcile flow, then a resync of
// the queue from GitHub's open pull requests) and runs the same Syncer.
//
// Files:
//   - sync.go: Syncer, SyncConfig and Observer; Sync, one repository: its
//     steps (the heads first, then the entries to read), a policy change
//     acted on at once, an entry advanced: gather facts, decide, carry out.
//   - facts.go: what a decision needs, read from GitHub (the base's rules,
//     the checks, the pull request and its reviews where needed) and what
//     the sync keeps of it for a while (rules, merge methods, a base it
//     just merged into).
//   - carry.go: a decision carried out: wait, gate again, leave, bounce,
//     block, update the branch, merge at the tested commit; GitHub's
//     refusals sorted; the pause before reading an entry again.
//   - checkrun.go: each entry's mergegate check run, titled by its stage
//     (never its place), and the check-run outbox sent.
//   - commands.go: "@mergegate ..." comment commands, carried out before
//     the queue moves, for users who may write; the head moves a webhook
//     stored, judged by who made them.
//   - deadline.go: check_timeout: when an entry's or a train group's checks
//     are overdue, and the timer that reads them again then.
//   - mergequeue.go: a base that uses GitHub's own merge queue: enqueue, and
//     the entry's place and state in it.
//   - train.go: merge trains: rules.DecideTrain's actions carried out (plan,
//     build, test, land, retry, split, bounce), each group stored before
//     the GitHub call that depends on it.
//   - policy.go: Policies, each repository's .github/mergegate.yml read,
//     cached, the last good one kept; the admin's freezes.
//   - reconciler.go: Config, Reconciler and Pass, one repository now (what
//     POST /reconcile and `mergegate reconcile` run).
//   - resync.go: the resync that compares the queue with GitHub's open pull
//     requests: missing eligible PRs join (in GitHub's label or auto-merge
//     order), closed or ineligible ones leave, moved heads are
//     reevaluated. A lost queue is rebuilt by the same rule.
//   - runall.go: RunAll, one pass over every repository: bounded
//     concurrency, each installation's rate-limit budget, and its
//     "reconcile run" summary.
//   - discovery.go: the App's installations and their repositories, read
//     each pass: new ones tracked, suspended and removed ones set aside.
//   - ratefloor.go: the rate-limit floor checked just before each request
//     (the bound on requests in flight per installation is forge's).
//   - cron.go: Cron, the schedule around RunAll (every 5 minutes, and at
//     start-up), with its deadline.
//   - cron_before.go: Cron.Before, what runs first in each pass (the
//     redelivery sweep).
//
// The lease protocol is leasedo's (docs/lease-protocol.md): a lease older
// than --lease-dead is force-released and reported in staleLeases, a held
// one answers *leasedo.LockedError (the repository is skipped until the
// next pass), and resync runs under the cron's lease with no SQLite
// transaction open.
package reconcile
