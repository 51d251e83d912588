-- cairnflow on PostgreSQL, schema version 16: each run's step history (Cap.STEP_HISTORY), the
-- table of the reference schema; the trigger that writes it is 014. One row per transition of a
-- step (claimed, succeeded, failed, retried, reclaimed, snoozed, sleeping, waiting, cancelled,
-- reopened), written in the transaction of the UPDATE that makes the transition. at is the
-- database's clock (clock_timestamp(), Unix ns); seq orders the rows.

CREATE TABLE {step_history} (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- recording order
    run_id       TEXT   NOT NULL,
    step         TEXT   NOT NULL,
    attempt      INTEGER    NOT NULL,                -- the step's attempt (claims so far)
    event        TEXT   NOT NULL,
    node         TEXT,                               -- the node of the attempt's claim
    at           BIGINT NOT NULL
);
-- Every read and every trim is one run's range of this index.
CREATE INDEX "{p}step_history_run" ON {step_history} (run_id, seq);
