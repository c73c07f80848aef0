-- compatible: adds a queue column with a default, which an older mergegate neither reads nor writes; it waits for a branch update as it did
-- branch_updated_at: when mergegate last asked GitHub to update the head
-- branch_updated_sha names (epoch ms). GitHub answers update-branch 202
-- and does the work later; an update that has not come after a while is
-- asked again. 0: asked by an earlier mergegate, or never.
ALTER TABLE queue ADD COLUMN branch_updated_at BIGINT NOT NULL DEFAULT 0;
