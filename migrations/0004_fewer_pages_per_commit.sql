-- 0004: fewer pages written per commit.
-- In WAL mode a commit writes every page it touched, whole, and the
-- checkpoints copy them again; at 1,000 deliveries/s those writes are most
-- of what the disk does, and the flushes show in the acknowledgements' p99.
-- Two kinds of page were written by nearly every commit for nothing:
--
--  * sqlite_sequence: AUTOINCREMENT records each table's highest id there,
--    so every insert into deliveries, events, audit or queue rewrote that
--    page. A plain INTEGER PRIMARY KEY already takes the highest id + 1, so
--    new rows still sort after every row present (arrival order holds);
--    only the id of a row deleted while it was the newest can come back,
--    and nothing refers to deleted rows by id.
--  * index entries no query reads: a new (pending) delivery went into
--    deliveries_processed with a NULL time, and a processed one into
--    deliveries_pending under 'done'. The indexes are now partial: pending
--    deliveries in one, failed ones in another (the operator's list), and
--    processed ones by time (pruning).
--
-- Storing a delivery went from 8.4 pages to 6.3, applying one from 7.7 to
-- 5.7 (leasedo's TestCommitsWriteFewPages). The tables are rebuilt, once:
-- 3.7 s for a million kept deliveries (a 4 GB database), 0.4 s for 71,000.

CREATE TABLE queue_new (
    id             INTEGER PRIMARY KEY,
    tenant         TEXT    NOT NULL,
    repo           TEXT    NOT NULL,
    pr_number      INTEGER NOT NULL,
    pr_sha         TEXT    NOT NULL,
    queued_at      INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    reevaluated_at INTEGER,
    gate_result    TEXT,
    gate_result_at INTEGER,
    gate_reason    TEXT    NOT NULL DEFAULT '',
    base_ref       TEXT    NOT NULL DEFAULT '',
    branch_updated_sha TEXT NOT NULL DEFAULT '',
    check_run_id   INTEGER NOT NULL DEFAULT 0,
    check_title    TEXT    NOT NULL DEFAULT ''
);
INSERT INTO queue_new (id, tenant, repo, pr_number, pr_sha, queued_at, status, reevaluated_at, gate_result,
        gate_result_at, gate_reason, base_ref, branch_updated_sha, check_run_id, check_title)
    SELECT id, tenant, repo, pr_number, pr_sha, queued_at, status, reevaluated_at, gate_result,
        gate_result_at, gate_reason, base_ref, branch_updated_sha, check_run_id, check_title FROM queue;
DROP TABLE queue;
ALTER TABLE queue_new RENAME TO queue;
CREATE INDEX queue_by_repo ON queue (tenant, repo, queued_at, id);
CREATE INDEX queue_by_sha ON queue (tenant, repo, pr_sha);

CREATE TABLE events_new (
    id         INTEGER PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    repo       TEXT    NOT NULL,
    ts         INTEGER NOT NULL,
    event_type TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    pr_number  INTEGER NOT NULL,
    details    TEXT
);
INSERT INTO events_new (id, tenant, repo, ts, event_type, action, pr_number, details)
    SELECT id, tenant, repo, ts, event_type, action, pr_number, details FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_by_repo ON events (tenant, repo, id);

CREATE TABLE audit_new (
    id        INTEGER PRIMARY KEY,
    tenant    TEXT    NOT NULL,
    repo      TEXT    NOT NULL,
    ts        INTEGER NOT NULL,
    action    TEXT    NOT NULL,
    pr_number INTEGER NOT NULL,
    pr_sha    TEXT    NOT NULL,
    reason    TEXT    NOT NULL DEFAULT ''
);
INSERT INTO audit_new (id, tenant, repo, ts, action, pr_number, pr_sha, reason)
    SELECT id, tenant, repo, ts, action, pr_number, pr_sha, reason FROM audit;
DROP TABLE audit;
ALTER TABLE audit_new RENAME TO audit;
CREATE INDEX audit_by_repo ON audit (tenant, repo, id);

CREATE TABLE deliveries_new (
    seq          INTEGER PRIMARY KEY,
    delivery_id  TEXT    NOT NULL UNIQUE,
    event        TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    tenant       TEXT    NOT NULL,
    repo         TEXT    NOT NULL,
    received_at  INTEGER NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending',
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    next_try_at  INTEGER NOT NULL DEFAULT 0,
    processed_at INTEGER
);
INSERT INTO deliveries_new (seq, delivery_id, event, action, tenant, repo, received_at, state, attempts,
        last_error, next_try_at, processed_at)
    SELECT seq, delivery_id, event, action, tenant, repo, received_at, state, attempts,
        last_error, next_try_at, processed_at FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
-- state leads each index although it is fixed within it: the planner then
-- serves "state = 'pending'" (and the counts) with a SEARCH of the index.
CREATE INDEX deliveries_pending ON deliveries (state, tenant, repo, seq) WHERE state = 'pending';
CREATE INDEX deliveries_failed ON deliveries (state, tenant, repo, seq) WHERE state = 'failed';
CREATE INDEX deliveries_processed ON deliveries (state, processed_at) WHERE processed_at IS NOT NULL;
