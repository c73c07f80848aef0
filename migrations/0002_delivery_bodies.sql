-- 0002: delivery bodies in a table of their own.
-- Marking a delivery done (or failed) rewrote its whole record, the 24 KB
-- body included, so every body went to the WAL twice. Now the small row
-- changes alone; the body is written once and deleted with the row by Prune.
CREATE TABLE delivery_bodies (
    seq  INTEGER PRIMARY KEY,   -- deliveries.seq
    body BLOB    NOT NULL
);
INSERT INTO delivery_bodies (seq, body) SELECT seq, body FROM deliveries;
ALTER TABLE deliveries DROP COLUMN body;
