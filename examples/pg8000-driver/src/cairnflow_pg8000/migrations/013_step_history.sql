-- The reference schema of cairnflow's SQL layer, version 13: each run's step history
-- (Cap.STEP_HISTORY). One row per transition of a step, numbered in recording order (seq,
-- ascending per run), read by run_id. The rows are written by the database itself, a trigger
-- on the steps' status (see the SQLite, PostgreSQL and MySQL drivers' migrations for the three
-- spellings); a driver that ships this table without a trigger keeps it empty and must not
-- declare Cap.STEP_HISTORY (deleting a run deletes its rows here all the same). at is BIGINT
-- Unix nanoseconds.

CREATE TABLE {step_history} (
    run_id       TEXT   NOT NULL,
    seq          BIGINT NOT NULL,                   -- recording order
    step         TEXT   NOT NULL,
    attempt      INTEGER    NOT NULL,
    event        TEXT   NOT NULL,
    node         TEXT,
    at           BIGINT NOT NULL,
    CONSTRAINT "{p}step_history_pkey" PRIMARY KEY (run_id, seq)
);
