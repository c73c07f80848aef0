-- compatible: adds a train_landed column with a default, which an older mergegate neither reads nor writes; its landings leave it as it was
-- recent: the pull requests mergegate's train landed on the base lately,
-- a JSON array of {"n": number, "at": epoch ms}, the last 50: a pull
-- request taken out because it breaks the base together with one that
-- landed since its own checks passed is told which landed since (issue
-- 32).
ALTER TABLE train_landed ADD COLUMN recent TEXT NOT NULL DEFAULT '[]';
