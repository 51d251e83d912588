-- cairnflow on MySQL / MariaDB, each run's error history (Cap.ERROR_HISTORY) (one statement,
-- see 001). One row per failed attempt, numbered per run (seq from 1), written in the
-- transaction that records the failure (the run row locked, so two failures of one run never
-- take one number); the same transaction drops the run's rows older than its newest N (the
-- client's error_history, default 20), so a run never holds more than N. Every statement reads
-- one run's range of the primary key.
CREATE TABLE IF NOT EXISTS {errors} (
    run_id       VARCHAR(64)   NOT NULL,
    seq          INT           NOT NULL,                  -- the run's errors in recording order
    step         VARCHAR(128)  NOT NULL,
    attempt      INT           NOT NULL,
    node         VARCHAR(255),                            -- the node that ran the attempt
    at           BIGINT        NOT NULL,                  -- when the failure was recorded
    error        LONGTEXT      NOT NULL,                  -- the ErrorInfo as JSON
    PRIMARY KEY (run_id, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
