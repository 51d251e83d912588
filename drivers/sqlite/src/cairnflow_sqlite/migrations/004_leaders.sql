-- cairnflow on SQLite, schema version 4: leadership leases (leader election).
-- One row per role, written by claim_leadership in one write transaction (SQLite has one
-- writer, so the read-then-write of a claim needs no row lock). lease_until is on the lease
-- clock, an INTEGER of Unix nanoseconds as in 001.

CREATE TABLE {leaders} (
    role         TEXT    PRIMARY KEY,                -- one holder per role, whoever inserts first
    node         TEXT    NOT NULL,                   -- the node that holds (or last held) it
    term         INTEGER NOT NULL,                   -- grows by one on every handover: a fencing token
    lease_until  INTEGER NOT NULL                    -- expired before the claim's lease_now: free; 0 once resigned
);
