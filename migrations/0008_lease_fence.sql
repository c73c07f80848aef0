-- The lease's fencing tokens become numbers from one counter that only
-- grows: a token is never given twice, even after a repository's lease
-- row is deleted (forgotten, released) and taken again, so a holder's
-- token is always older than its successor's. Tokens already in leases
-- (random strings) stay valid until their lease is released.
CREATE TABLE lease_fence (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO lease_fence (id, n) VALUES (1, 0);
