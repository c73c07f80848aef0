-- compatible: a new table, which an older mergegate neither reads nor writes; its `@mergegate queue` consents as it did
-- head_seen: the heads of pull requests not in the queue that a delivery
-- told of (a push, a reopening, a base change), who moved each and when
-- mergegate learnt of it (epoch ms). A writer's `@mergegate queue`
-- consents only to a head they could have seen: one mergegate learnt of
-- after the comment was written, moved by someone who may not write, is
-- not consented to (rules.QueueConsents). Rows older than ten minutes are
-- deleted as new ones come.
CREATE TABLE head_seen (
    tenant TEXT NOT NULL,
    repo TEXT NOT NULL,
    pr_number INTEGER NOT NULL,
    sha TEXT NOT NULL,
    moved_by TEXT NOT NULL,
    seen_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, repo, pr_number, sha)
);
