-- cairnflow on MySQL / MariaDB: the steps of archived runs, outputs included (Cap.ARCHIVE, #16)
-- (one statement, see 001). Copied with INSERT ... SELECT in the transaction that deletes them
-- from steps; a run's steps are one range of the primary key.
CREATE TABLE IF NOT EXISTS {steps_archive} (
    run_id        VARCHAR(64)   NOT NULL,
    position      INT           NOT NULL,                 -- definition order
    name          VARCHAR(128)  NOT NULL,
    kind          VARCHAR(16)   NOT NULL,
    status        VARCHAR(16)   NOT NULL,
    parents       LONGTEXT      NOT NULL,                 -- JSON list of step names
    attempt       INT           NOT NULL,
    failures      INT           NOT NULL,
    reclaims      INT           NOT NULL,
    output        LONGBLOB,
    error         LONGTEXT,
    node          VARCHAR(255),
    progress      LONGBLOB,
    signal_name   VARCHAR(128),
    due_at        BIGINT,
    started_at    BIGINT,
    finished_at   BIGINT,
    heartbeat_at  BIGINT,
    PRIMARY KEY (run_id, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
