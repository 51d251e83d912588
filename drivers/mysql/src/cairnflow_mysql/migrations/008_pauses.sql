-- cairnflow on MySQL / MariaDB, paused queues and workflows (Cap.PAUSE_QUEUE,
-- Cap.PAUSE_WORKFLOW) (one statement, see 001). One row per pause; resuming deletes it. Every
-- claim reads the table by its primary key (a plain read inside the claim's locking read: a
-- locking clause does not lock the rows of a nested subquery), so a pause holds every client
-- the moment it commits.
CREATE TABLE IF NOT EXISTS {pauses} (
    kind         VARCHAR(16)   NOT NULL,                  -- 'queue' or 'workflow'
    name         VARCHAR(128)  NOT NULL,                  -- the queue's or the workflow's name
    paused_at    BIGINT        NOT NULL,
    -- One pause per queue or workflow: of two pausers inserting at once, the second is refused
    -- with a duplicate key, and reports it paused already.
    PRIMARY KEY (kind, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
