-- cairnflow on MySQL / MariaDB: which lifecycle channels want which workflows (Cap.LIFECYCLE)
-- (one statement, see 001). workflow '' subscribes to every workflow. The triggers (032, 033)
-- probe its primary key at each transition: without a subscriber they write nothing.
CREATE TABLE IF NOT EXISTS {lifecycle_subs} (
    channel      VARCHAR(16)   NOT NULL,
    workflow     VARCHAR(128)  NOT NULL,
    since        BIGINT        NOT NULL,
    PRIMARY KEY (channel, workflow)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
