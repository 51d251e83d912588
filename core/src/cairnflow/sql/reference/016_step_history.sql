-- The reference schema of cairnflow's SQL layer, version 16: each run's step history
-- (Cap.STEP_HISTORY). One row per transition of a step, numbered in recording order (seq),
-- read and trimmed by (run_id, seq). The rows are written by the database itself, a trigger
-- on the steps' status (see the SQLite, PostgreSQL and MySQL drivers' migrations for the three
-- spellings); a driver that ships this table without a trigger keeps it empty and must not
-- declare Cap.STEP_HISTORY (deleting a run deletes its rows here all the same). at is $bigint
-- Unix nanoseconds.

CREATE TABLE {step_history} (
    seq          $identity,                          -- recording order
    run_id       $text   NOT NULL,
    step         $text   NOT NULL,
    attempt      $int    NOT NULL,
    event        $text   NOT NULL,
    node         $text,
    at           $bigint NOT NULL
);
CREATE INDEX "{p}step_history_run" ON {step_history} (run_id, seq);
