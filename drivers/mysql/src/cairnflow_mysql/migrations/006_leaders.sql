-- cairnflow on MySQL / MariaDB, leadership leases (leader election) (one statement, see 001).
-- One row per role; claim_leadership locks it (SELECT ... FOR UPDATE), so renewals and
-- takeovers of one role queue on it. lease_until is on the lease clock, BIGINT nanoseconds.
CREATE TABLE IF NOT EXISTS {leaders} (
    role         VARCHAR(128)  NOT NULL,
    node         VARCHAR(255)  NOT NULL,                  -- the node that holds (or last held) it
    term         BIGINT        NOT NULL,                  -- grows by one on every handover: a fencing token
    lease_until  BIGINT        NOT NULL,                  -- expired before the claim's lease_now: free; 0 once resigned
    -- One holder per role: of two first claimers inserting at once, the second is refused
    -- with a duplicate key and claims again, against the row the first wrote.
    PRIMARY KEY (role)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
