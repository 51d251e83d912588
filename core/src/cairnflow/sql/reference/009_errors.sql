-- The reference schema of cairnflow's SQL layer, version 9: each run's error history
-- (Cap.ERROR_HISTORY). One row per failed attempt, numbered per run (seq from 1), written in the
-- transaction that records the failure (the run row locked, so two failures of one run never
-- take one number); the same transaction drops the run's rows older than its newest N (the
-- client's error_history, default 20), so a run never holds more than N. Every statement reads
-- one run's range of the primary key. at is $bigint Unix nanoseconds; error is the ErrorInfo as
-- JSON text (type, message, traceback, step, attempt).

CREATE TABLE {errors} (
    run_id       $text   NOT NULL,
    seq          $int    NOT NULL,                   -- the run's errors in recording order
    step         $text   NOT NULL,
    attempt      $int    NOT NULL,
    node         $text,                              -- the node that ran the attempt
    at           $bigint NOT NULL,                   -- when the failure was recorded
    error        $text   NOT NULL,
    CONSTRAINT "{p}errors_pkey" PRIMARY KEY (run_id, seq)
);
