// Command mergegate is a self-hosted GitHub App that keeps a merge queue per
// repository and merges pull requests whose required checks passed, one at
// a time, at the commit that was tested.
//
// Files:
//   - main.go: the commands (serve, migrate, reconcile, replay, ...), the
//     usage, exit codes; serve's start and shutdown.
//   - config.go: every flag with its environment variable and config-file
//     key, and the checks of each value (alone, then against the others).
//   - help.go: `mergegate help NAME` and `NAME -h`, in one format.
//   - dbpath.go: a --db that names no file refused (only serve creates
//     one).
//   - backup.go: `mergegate backup`, a consistent copy while it runs.
//   - export.go: `mergegate export`, a repository's stored deliveries as a
//     recording.
//   - replay.go: `mergegate replay`, offline or against a running server.
//   - validate.go: `mergegate validate`, policy files checked as the server
//     reads them, each problem as FILE:LINE:COLUMN.
//   - healthcheck.go: `mergegate healthcheck`, for a container's
//     HEALTHCHECK.
//   - migratestore.go: `mergegate migrate-store`, a SQLite database copied
//     into PostgreSQL.
//   - reconcile_remote.go: `mergegate reconcile` asks a running server
//     first (POST /reconcile), then acts on the database.
//   - redact.go: no printed error names a connection string's password.
package main
