-- 0001: the seed's four entities per (tenant, repo), the durable inbox of
-- webhook deliveries, and the set of tracked repositories.
-- Times are epoch milliseconds, as in the seed.

CREATE TABLE leases (
    tenant TEXT    NOT NULL,
    repo   TEXT    NOT NULL,
    ts     INTEGER NOT NULL,          -- when acquired (or last renewed by its holder)
    held_by TEXT   NOT NULL,          -- the seed's "by"
    token  TEXT    NOT NULL,          -- fencing token: only its holder may release or write under it
    PRIMARY KEY (tenant, repo)
) WITHOUT ROWID;

-- No UNIQUE (tenant, repo, pr_number): the seed's reconcile detects and
-- removes duplicates (restored backups, hand edits); join itself never adds one.
CREATE TABLE queue (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         TEXT    NOT NULL,
    repo           TEXT    NOT NULL,
    pr_number      INTEGER NOT NULL,
    pr_sha         TEXT    NOT NULL,
    queued_at      INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    reevaluated_at INTEGER,
    gate_result    TEXT,
    gate_result_at INTEGER,
    gate_reason    TEXT    NOT NULL DEFAULT '',  -- why the gate waits or failed, for the PR's author
    base_ref       TEXT    NOT NULL DEFAULT '',
    branch_updated_sha TEXT NOT NULL DEFAULT '', -- head sha we last asked GitHub to update (update once)
    check_run_id   INTEGER NOT NULL DEFAULT 0,   -- our "mergegate" check run on pr_sha
    check_title    TEXT    NOT NULL DEFAULT ''   -- its last title sent (update only on change)
);
CREATE INDEX queue_by_repo ON queue (tenant, repo, queued_at, id);
CREATE INDEX queue_by_sha ON queue (tenant, repo, pr_sha);

CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant     TEXT    NOT NULL,
    repo       TEXT    NOT NULL,
    ts         INTEGER NOT NULL,
    event_type TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    pr_number  INTEGER NOT NULL,
    details    TEXT                        -- JSON or NULL
);
CREATE INDEX events_by_repo ON events (tenant, repo, id);

CREATE TABLE audit (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant    TEXT    NOT NULL,
    repo      TEXT    NOT NULL,
    ts        INTEGER NOT NULL,
    action    TEXT    NOT NULL,
    pr_number INTEGER NOT NULL,
    pr_sha    TEXT    NOT NULL,
    reason    TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_by_repo ON audit (tenant, repo, id);

-- The durable inbox: a delivery is committed here before GitHub gets its 202,
-- and stays until processed (then pruned after the retention period).
CREATE TABLE deliveries (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id TEXT    NOT NULL UNIQUE,
    event       TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    tenant      TEXT    NOT NULL,
    repo        TEXT    NOT NULL,
    body        BLOB    NOT NULL,
    received_at INTEGER NOT NULL,
    state       TEXT    NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT    NOT NULL DEFAULT '',
    next_try_at INTEGER NOT NULL DEFAULT 0,
    processed_at INTEGER
);
CREATE INDEX deliveries_pending ON deliveries (state, tenant, repo, seq);
CREATE INDEX deliveries_processed ON deliveries (state, processed_at);

CREATE TABLE repos (
    tenant     TEXT    NOT NULL,
    repo       TEXT    NOT NULL,
    tracked_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, repo)
) WITHOUT ROWID;

CREATE TABLE installations (
    tenant    TEXT    PRIMARY KEY,
    suspended INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
