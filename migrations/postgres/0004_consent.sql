-- compatible: adds two queue columns with defaults, which an older mergegate neither reads nor writes; its rows ('' consent) read as consent for the head they hold, as it decided
-- A writer's consent (the trigger label, @mergegate queue, GitHub
-- auto-merge) is for the head it was given on (issue 30):
--   consent_sha: the head sha the consent covers; the entry merges, or
--     joins a merge train group, only while it is pr_sha. A push by
--     someone who may not write leaves it on the old head; a pull request
--     brought back (reopened, ready for review) by such a user has
--     40 zeros until a writer consents. '' (rows an older mergegate
--     wrote): the head it holds, pinned at the next new head;
--   consent_note: why the consent does not cover pr_sha, for its check
--     run ("@eve, who may not write to the repository, pushed new
--     commits"); '' when it does or nobody knows who moved it.
ALTER TABLE queue ADD COLUMN consent_sha TEXT NOT NULL DEFAULT '';
ALTER TABLE queue ADD COLUMN consent_note TEXT NOT NULL DEFAULT '';
UPDATE queue SET consent_sha = pr_sha;
