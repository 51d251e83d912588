-- cairnflow on MySQL / MariaDB, schema version 1, file 1 of 3: runs.
-- MySQL commits DDL implicitly, so a migration file cannot be a transaction: each file is ONE
-- statement, and IF NOT EXISTS makes it safe to run again if a migrator died between this
-- statement and its ledger row. Indexes are declared inside CREATE TABLE for the same reason
-- (MySQL 8 has no CREATE INDEX IF NOT EXISTS).
-- Every time is a BIGINT of Unix nanoseconds: no session time zone can shift it.
-- Names, ids and statuses are utf8mb4_bin (case-sensitive: 'Key-A' is not 'key-a'); idempotency
-- keys are VARBINARY, compared byte for byte (utf8mb4_bin pads, so 'k' would equal 'k ').
CREATE TABLE IF NOT EXISTS {runs} (
    seq          BIGINT         NOT NULL AUTO_INCREMENT,  -- insertion order: listings, cursors
    id           VARCHAR(64)    NOT NULL,
    workflow     VARCHAR(128)   NOT NULL,
    queue        VARCHAR(128)   NOT NULL,
    priority     BIGINT         NOT NULL DEFAULT 0,
    state        VARCHAR(16)    NOT NULL,                 -- 'active', or the final status
    payload      LONGBLOB       NOT NULL,
    idem_key     VARBINARY(255),                          -- the idempotency key, kept for history
    active_key   VARBINARY(255),                          -- the key while unfinished, NULL after
    labels       LONGTEXT       NOT NULL,                 -- JSON object of str to str
    steps_left   INT            NOT NULL,                 -- steps not yet succeeded
    created_at   BIGINT         NOT NULL,
    run_at       BIGINT         NOT NULL,
    finished_at  BIGINT,
    error        LONGTEXT,                                -- JSON of the error that failed the run
    PRIMARY KEY (seq),
    UNIQUE KEY `{p}runs_id` (id),
    -- An idempotency key is held by at most one unfinished run of a workflow: there are no
    -- partial indexes, so finished runs set active_key to NULL, and NULLs never collide.
    UNIQUE KEY `{p}runs_active_key` (workflow, active_key),
    KEY `{p}runs_workflow` (workflow, seq),
    KEY `{p}runs_state` (state, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
