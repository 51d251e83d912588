-- cairnflow on MySQL / MariaDB: archived runs (Cap.ARCHIVE, Cap.RETENTION, #16) (one statement,
-- see 001). Pruning moves each finished run here with INSERT ... SELECT of the same columns, in
-- the transaction that deletes it from runs, so a run is in exactly one place. No claim, outcome
-- or reclaim reads this table. archived_runs reads it newest finish first, "ORDER BY finished_at
-- DESC, id DESC LIMIT n", backwards along the finished index.
CREATE TABLE IF NOT EXISTS {runs_archive} (
    seq          BIGINT         NOT NULL,                 -- the run's insertion order, as it was
    id           VARCHAR(64)    NOT NULL,
    workflow     VARCHAR(128)   NOT NULL,
    queue        VARCHAR(128)   NOT NULL,
    state        VARCHAR(16)    NOT NULL,                 -- the final status
    payload      LONGBLOB       NOT NULL,
    idem_key     VARBINARY(255),
    labels       LONGTEXT       NOT NULL,                 -- JSON object of str to str
    created_at   BIGINT         NOT NULL,
    run_at       BIGINT         NOT NULL,
    finished_at  BIGINT         NOT NULL,
    error        LONGTEXT,                                -- JSON of the error that failed the run
    archived_at  BIGINT,                                  -- when the pruner moved it (Unix ns)
    PRIMARY KEY (id),
    KEY `{p}runs_archive_finished` (finished_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
