-- cairnflow on MySQL / MariaDB, each run's step history (Cap.STEP_HISTORY) (one statement, see
-- 001; its trigger is 021). One row per transition of a step, written by a trigger on the
-- steps' status, in the transaction of the UPDATE that makes the transition. Keyed by run, then
-- recording order: the trim the trigger makes deletes a range of the primary key only (on
-- InnoDB a DELETE over a secondary range takes gap locks that deadlock), and the run's newest
-- rows, where claims append, stay outside the range it locks.
CREATE TABLE IF NOT EXISTS {step_history} (
    run_id       VARCHAR(64)   NOT NULL,
    seq          BIGINT        NOT NULL AUTO_INCREMENT,   -- recording order
    step         VARCHAR(128)  NOT NULL,
    attempt      INT           NOT NULL,                  -- the step's attempt (claims so far)
    event        VARCHAR(16)   NOT NULL,
    node         VARCHAR(255),                            -- the node of the attempt's claim
    at           BIGINT        NOT NULL,
    PRIMARY KEY (run_id, seq),
    KEY `{p}step_history_seq` (seq)                      -- InnoDB's AUTO_INCREMENT needs it first
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
