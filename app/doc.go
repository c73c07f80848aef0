// Package app composes the store, the webhook inbox and GitHub into the
// merge engine, and serves mergegate's HTTP surface. New is the one
// wiring, for `serve` and offline replay alike.
//
// Files:
//   - app.go: Config (everything `mergegate serve` is told), App and New,
//     Start and Shutdown, the public and admin listeners.
//   - engine.go: Engine, one worker per repository: drain its inbox, then
//     sync; retries and their backoff.
//   - inbox.go: a worker's drain: its pending deliveries translated, then
//     applied in one short transaction each batch.
//   - admin.go: the admin API (POST /event, /reconcile, the lease protocol,
//     GET /queue, /deliveries/stats, /metrics, retries of failed deliveries).
//   - admin_queue.go: the operator's queue actions (POST /queue/move,
//     /queue/remove, /queue/retry), each audited with who and why.
//   - policy.go: the admin API's view of a repository's policy, and its
//     freeze and thaw (POST /freeze, /thaw).
//   - cluster.go: this replica's part among several on one database:
//     heartbeat, its share of each installation's request bound, the
//     schema versions of the replicas.
//   - dblock.go, dblock_unix.go, dblock_other.go: one process per SQLite
//     file (an advisory lock beside it; none off Unix).
//   - health.go, health_unix.go, health_other.go: /healthz, the database
//     writable and its filesystem not full (free space read on Unix).
//   - dashboard.go: the dashboard's pages and what they show.
//   - dashboard_app.go: the App's dashboard: its store, clock and GitHub.
//   - dashboard_render.go: the embedded templates and their rendering.
//   - dashboard_stats.go: the pictures' numbers (queue length, merges, time
//     to merge, bounces, train CI time), from the audit, as inline SVG.
//   - metrics.go: Metrics, the Prometheus counters and histograms the
//     engine and the sync report to.
//   - metrics_app.go: the gauges read from the store at each scrape.
//   - metrics_github.go: GitHub requests counted as they go.
//   - record.go: Recorded and Recorder, `serve --record`'s deliveries, as
//     replay and `mergegate export` read them.
//   - redeliver.go: the redelivery sweep: deliveries GitHub could not hand
//     over, asked for again.
//   - setup.go: the set-up flow: the GitHub App made from the manifest,
//     then installed.
//   - setup_credentials.go: Credentials, the App's id, key and secrets,
//     read and written beside the database.
package app
