-- cairnflow on MySQL / MariaDB, schema version 1, file 3 of 3: signals kept for their waits
-- (one statement, see 001).
CREATE TABLE IF NOT EXISTS {signals} (
    seq         BIGINT        NOT NULL AUTO_INCREMENT,    -- arrival order: a wait takes the oldest
    run_id      VARCHAR(64)   NOT NULL,
    name        VARCHAR(128)  NOT NULL,
    payload     LONGBLOB      NOT NULL,
    created_at  BIGINT        NOT NULL,
    PRIMARY KEY (seq),
    KEY `{p}signals_run` (run_id, name, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
