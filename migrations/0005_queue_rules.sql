-- 0005: what the queue's rules need beside the seed's fields.
--
-- head_at: when the entry's current head (pr_sha) joined or was seen, in
-- epoch ms: a required check that has not concluded --check-timeout after
-- it bounces the pull request. queued_at cannot serve: a queue rebuilt
-- from GitHub takes the label's time, which may be days old.
ALTER TABLE queue ADD COLUMN head_at INTEGER NOT NULL DEFAULT 0;
UPDATE queue SET head_at = max(queued_at, coalesce(reevaluated_at, 0));

-- merge_method: the method its author chose with GitHub auto-merge, from
-- the pull request as it joined ('' when it joined by label).
ALTER TABLE queue ADD COLUMN merge_method TEXT NOT NULL DEFAULT '';

-- check_outbox: mergegate check runs to complete. Leaving the queue,
-- merging, bouncing or moving to a new head ends the entry's check run;
-- the transition writes the row in its own transaction and the next sync
-- of the repository sends it to GitHub and deletes it, so a run is ended
-- even when GitHub was down at that moment. check_run_id 0: none was
-- created yet; the run is created completed (a bounce still says why).
CREATE TABLE check_outbox (
    id           INTEGER PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    repo         TEXT    NOT NULL,
    pr_number    INTEGER NOT NULL,
    sha          TEXT    NOT NULL,
    check_run_id INTEGER NOT NULL,
    conclusion   TEXT    NOT NULL,  -- success, failure, neutral
    title        TEXT    NOT NULL,
    summary      TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE INDEX check_outbox_by_repo ON check_outbox (tenant, repo, id);
