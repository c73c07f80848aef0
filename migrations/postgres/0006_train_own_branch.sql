-- compatible: adds a train_groups column with a default, which an older mergegate neither reads nor writes; it deletes each group's own branch as it did
-- own: the group's head was pushed to a branch of its own,
-- mergegate/<base>/<id>, because CI had nothing to say of it on the
-- base's train branch (its run there cancelled by the next push); the
-- branch is deleted with the group. 0: the group's commits are on the
-- train branch, mergegate/<base>/train, shared by the groups of a base.
-- A group an earlier mergegate built has its head on its own branch.
ALTER TABLE train_groups ADD COLUMN own BIGINT NOT NULL DEFAULT 0;
UPDATE train_groups SET own = 1 WHERE state <> 'planned';
