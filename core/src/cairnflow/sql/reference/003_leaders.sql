-- The reference schema of cairnflow's SQL layer, version 3: leadership leases (Cap.LEADER_ELECTION).
-- One row per role; claim_leadership locks it (SELECT ... FOR UPDATE), so renewals and takeovers
-- of one role queue on it. lease_until is on the lease clock, $bigint Unix nanoseconds.

CREATE TABLE {leaders} (
    role         $text   NOT NULL,
    node         $text   NOT NULL,                   -- the node that holds (or last held) it
    term         $bigint NOT NULL,                   -- grows by one on every handover: a fencing token
    lease_until  $bigint NOT NULL,                   -- expired before the claim's lease_now: free; 0 once resigned
    -- One holder per role: of two first claimers inserting at once, the second is refused here
    -- and claims again, against the row the first wrote.
    CONSTRAINT "{p}leaders_pkey" PRIMARY KEY (role)
);
