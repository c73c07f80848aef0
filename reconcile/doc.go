// Package reconcile is mergegate's cron: the lease protocol's reconcile
// flow for every tracked (tenant, repo), followed by a resync of the queue
// from the GitHub API.
//
//   - reconciler.go: Config, Reconciler and Pass, one repository now (what
//     POST /reconcile and `mergegate reconcile` run).
//   - resync.go: the leasedo.ResyncFunc that compares the queue with
//     GitHub's open pull requests: missing eligible PRs join (in GitHub's
//     label or auto-merge order), closed or ineligible ones leave, moved
//     heads are reevaluated. A lost queue is rebuilt by the same rule.
//   - runall.go: RunAll, one pass over every repository: discovery from the
//     App's installations, bounded concurrency, rate-limit budget.
//   - ratefloor.go: the rate-limit floor checked just before each request
//     (the bound on requests in flight per installation is forge's).
//   - cron.go: Cron, the robfig/cron schedule around RunAll.
//
// The lease protocol is leasedo's (docs/lease-protocol.md): a lease older than --lease-dead is
// force-released and reported in staleLeases, a held one answers
// *leasedo.LockedError (the repository is skipped until the next pass), and
// resync runs under the cron's lease with no SQLite transaction open.
package reconcile
