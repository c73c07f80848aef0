-- compatible: adds two columns with defaults; an older mergegate ends the check run of a row and drops the row without them, as it did
-- What a bounce tells its author goes out through the write budget
-- (forge's pacer), so it waits in the outbox with the check run's ending
-- rather than being sent, or lost, in the bounce's own pass:
--   comment: the bounce's comment, '' once posted (or none);
--   unlabel: the trigger labels to take off, one a line, '' once done.
ALTER TABLE check_outbox ADD COLUMN comment TEXT NOT NULL DEFAULT '';
ALTER TABLE check_outbox ADD COLUMN unlabel TEXT NOT NULL DEFAULT '';
