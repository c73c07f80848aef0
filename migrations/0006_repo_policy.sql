-- 0006: each repository's own policy (.github/mergegate.yml), freezes,
-- priorities and comment commands.
--
-- repo_policy: the policy file in force per repository, kept so that a
-- restart knows it before GitHub is asked again (the webhook path decides
-- eligibility from it, and may not call GitHub), and so that a bad file
-- keeps the last good one. source: repository, organisation or defaults;
-- file: owner/name:path it was read from; sha: its blob sha; content: its
-- text (parsed again at start). bad_sha and problems (JSON): the latest
-- read's file when it had problems, shown on check runs and the
-- dashboard and logged once per change. stale = 1: a push touched the
-- file, read it again at the next sync.
CREATE TABLE repo_policy (
    tenant    TEXT    NOT NULL,
    repo      TEXT    NOT NULL,
    source    TEXT    NOT NULL,
    file      TEXT    NOT NULL DEFAULT '',
    sha       TEXT    NOT NULL DEFAULT '',
    content   TEXT    NOT NULL DEFAULT '',
    bad_sha   TEXT    NOT NULL DEFAULT '',
    problems  TEXT    NOT NULL DEFAULT '',
    read_at   INTEGER NOT NULL,
    stale     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, repo)
);

-- freezes: a repository (branch '') or one of its base branches frozen
-- from the admin API: its queue merges nothing until it is thawed. Who
-- froze it and why are in the audit log as well.
CREATE TABLE freezes (
    tenant     TEXT    NOT NULL,
    repo       TEXT    NOT NULL,
    branch     TEXT    NOT NULL,
    message    TEXT    NOT NULL,
    frozen_by  TEXT    NOT NULL,
    frozen_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, repo, branch)
);

-- priority: the entry's rank in its base's queue (higher first, then by
-- queued_at): from priority_labels or a @mergegate priority command;
-- priority_name says it on its check run ('' for normal).
ALTER TABLE queue ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue ADD COLUMN priority_name TEXT NOT NULL DEFAULT '';

-- commands: "@mergegate ..." commands from pull request comments, stored
-- with the delivery and carried out by the repository's next sync (which
-- checks the author's permission on GitHub first), then deleted.
CREATE TABLE commands (
    id          INTEGER PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    repo        TEXT    NOT NULL,
    pr_number   INTEGER NOT NULL,
    comment_id  INTEGER NOT NULL,
    author      TEXT    NOT NULL,
    command     TEXT    NOT NULL,
    arg         TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
);
CREATE INDEX commands_by_repo ON commands (tenant, repo, id);
