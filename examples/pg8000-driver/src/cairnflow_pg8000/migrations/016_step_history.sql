-- The reference schema of cairnflow's SQL layer, version 16: each run's step history
-- (Cap.STEP_HISTORY). One row per transition of a step, numbered in recording order (seq),
-- read and trimmed by (run_id, seq). The rows are written by the database itself, a trigger
-- on the steps' status (see the SQLite, PostgreSQL and MySQL drivers' migrations for the three
-- spellings); a driver that ships this table without a trigger keeps it empty and must not
-- declare Cap.STEP_HISTORY (deleting a run deletes its rows here all the same). at is BIGINT
-- Unix nanoseconds.

CREATE TABLE {step_history} (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,                          -- recording order
    run_id       TEXT   NOT NULL,
    step         TEXT   NOT NULL,
    attempt      INTEGER    NOT NULL,
    event        TEXT   NOT NULL,
    node         TEXT,
    at           BIGINT NOT NULL
);
CREATE INDEX "{p}step_history_run" ON {step_history} (run_id, seq);
