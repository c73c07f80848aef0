// Package leasedo holds mergegate's state, in one SQLite file or in a
// PostgreSQL database shared by several replicas: for each (tenant, repo),
// its lease (with a fencing token), its merge queues (one per base
// branch), its train groups, its event log (last 100) and audit log (last
// 200); the durable inbox of webhook deliveries; the check-run outbox; the
// tracked repositories and installations. Every method is one short
// transaction, and every change to a repository's queue is made under its
// lease. The protocol is docs/lease-protocol.md; the name is the design it
// came from, a lease Durable Object ("LeaseDO") per repository. The words
// of a pull request's life (statuses, Item, Group) are package lifecycle's,
// kept here as aliases (vocabulary.go).
//
// Files:
//   - types.go: Key, Clock, Op (the typed transitions events ask), the
//     protocol's request and answer types.
//   - store.go: Config and Store; an event (ProcessEvent, Apply) applied
//     to the queue: join, leave, reevaluate, recheck.
//   - lease.go: Lease: Acquire, Release, Renew, Hold, the fencing token,
//     LockedError.
//   - queue.go: the queue read (Items, Queue, Events, Audit) and its typed
//     transitions (gate passed, blocked, bounced, merged, left).
//   - train.go: merge train groups: planned, saved, split, landed.
//   - outbox.go: the check-run outbox: the endings of runs still to send.
//   - operator.go: the operator's queue actions: move to the front or back,
//     take out, retry now; each one transaction under the admin lease.
//   - policy.go: each repository's stored policy file, and its freezes.
//   - reconcile.go: the lease protocol's reconcile flow under the cron's
//     lease, and the resync's fixes.
//   - repos.go: the tracked repositories and installations.
//   - inbox.go: the durable inbox: deliveries stored in group commits
//     before the 202.
//   - drain.go: Drain, a repository's pending deliveries applied in order,
//     in one write transaction that takes and gives back the lease.
//   - known.go: which delivery ids are stored (the redelivery sweep).
//   - body.go: payloads stored compressed (S2).
//   - db.go: DB, one writer connection, WAL, the background checkpoint;
//     storage errors noted.
//   - stmtcache.go: the writer's prepared statements, cached.
//   - space.go: incremental auto-vacuum: free pages given back in steps.
//   - progress.go: what long operations and the dashboard's pictures count:
//     CountKeptDeliveries (export's progress), ActivitySince (the audit's
//     joins, merges and bounces over a window).
//   - probe.go: ProbeWrite, whether the database can be written now.
//   - clock.go: ManualClock, for tests and offline replay.
//   - dbclock.go: the PostgreSQL server's clock, as a replica reads it.
//   - dialect.go: PostgreSQL: opened, and SQLite's statements rewritten.
//   - pgfaults.go, pgfaults_linux.go, pgfaults_other.go: PostgreSQL going
//     away: timeouts, lost connections, TCP_USER_TIMEOUT on Linux.
//   - notify.go: a released lease NOTIFYed to every replica, which wakes
//     its worker waiting for it.
//   - cluster.go: what replicas share: the cron's repositories claimed per
//     period, singleton jobs (RunJob), the replica registry.
//   - replicas_join.go: the live replicas that have not counted a new one
//     yet.
//   - redact.go: RedactDSN, a connection string without its password.
//   - vocabulary.go: aliases of lifecycle's words (Item, Group,
//     StatusQueued, ...).
package leasedo
