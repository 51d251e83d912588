-- cairnflow on SQLite, schema version 8: each run's error history (Cap.ERROR_HISTORY). One row
-- per failed attempt, numbered per run (seq from 1), written in the transaction that records the
-- failure (one writer: two failures of one run never take one number); the same transaction
-- drops the run's rows older than its newest N (the client's error_history, default 20), so a
-- run never holds more than N. Every statement reads one run's range of the primary key.

CREATE TABLE {errors} (
    run_id       TEXT    NOT NULL,
    seq          INTEGER NOT NULL,                   -- the run's errors in recording order
    step         TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    node         TEXT,                               -- the node that ran the attempt
    at           INTEGER NOT NULL,                   -- when the failure was recorded (Unix ns)
    error        TEXT    NOT NULL,                   -- the ErrorInfo as JSON
    PRIMARY KEY (run_id, seq)
);
