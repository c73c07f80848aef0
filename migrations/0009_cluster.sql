-- compatible: adds two tables and two columns with defaults, which an older mergegate neither reads nor needs to write
-- Several replicas of mergegate serve on one database (issue 22):
--   repos.reconciled_at/by: the cron's claim of a repository for one
--     period, so that each repository is reconciled once per period
--     across the replicas (0: never);
--   jobs: the singleton jobs (installation discovery, pruning, the
--     redelivery sweep): when each last ran, by whom, and what it left
--     for the other replicas (discovery's findings);
--   replicas: each replica's heartbeat, to share the per-installation
--     request limit among the live ones.
ALTER TABLE repos ADD COLUMN reconciled_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE repos ADD COLUMN reconciled_by TEXT NOT NULL DEFAULT '';
CREATE TABLE jobs (
    name   TEXT    PRIMARY KEY,
    ran_at INTEGER NOT NULL,
    ran_by TEXT    NOT NULL,
    state  TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE TABLE replicas (
    name       TEXT    PRIMARY KEY,
    seen_at    INTEGER NOT NULL,
    started_at INTEGER NOT NULL
) WITHOUT ROWID;
