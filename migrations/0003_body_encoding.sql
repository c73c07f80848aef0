-- 0003: delivery bodies may be stored compressed.
-- A payload is 20-30 KB of JSON that compresses about 7x (S2): stored raw,
-- each body was six or seven 4 KiB pages written to the WAL, copied back
-- by the checkpoints and later freed. encoding says how body is stored:
-- '' raw (every row before this migration), 's2' an S2 block.
ALTER TABLE delivery_bodies ADD COLUMN encoding TEXT NOT NULL DEFAULT '';
