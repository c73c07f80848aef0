-- 0007: merge trains (docs/trains.md).
--
-- train_groups: the groups of a base branch's train, in landing order
-- (seq). A group is a set of queued pull requests (prs: JSON
-- [{"n":12,"sha":"..."}], in merge order) tested together on the branch
-- mergegate/<base>/<id>. state: planned (members chosen, not built),
-- building (its branch is being made: started from parent_sha), testing
-- (built at head_sha; CI runs since built_at), passed (its gate passed;
-- lands when every group ahead has), landing (being landed: read back from
-- GitHub after a restart). attempt: failed runs so far (retries); split:
-- made by bisection; reason: why it was last rebuilt or failed.
CREATE TABLE train_groups (
    id          INTEGER PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    repo        TEXT    NOT NULL,
    base        TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    state       TEXT    NOT NULL,
    prs         TEXT    NOT NULL,
    parent_sha  TEXT    NOT NULL DEFAULT '',
    head_sha    TEXT    NOT NULL DEFAULT '',
    attempt     INTEGER NOT NULL DEFAULT 0,
    split       INTEGER NOT NULL DEFAULT 0,
    built_at    INTEGER NOT NULL DEFAULT 0,
    reason      TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
);
CREATE INDEX train_groups_by_base ON train_groups (tenant, repo, base, seq);

-- train_landed: per base branch, the tip mergegate left after its last
-- landing (tip) and the tested commit whose tree it has (tested): equal
-- for a fast-forward; for a replay landing the base's new commits have the
-- tested tree, so a group built on the tested commit still tests what
-- lands.
CREATE TABLE train_landed (
    tenant  TEXT NOT NULL,
    repo    TEXT NOT NULL,
    base    TEXT NOT NULL,
    tip     TEXT NOT NULL,
    tested  TEXT NOT NULL,
    PRIMARY KEY (tenant, repo, base)
);
