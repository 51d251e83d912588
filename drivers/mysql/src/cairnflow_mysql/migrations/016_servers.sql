-- cairnflow on MySQL / MariaDB: servers (Cap.SERVERS, #17) (one statement, see 001). One
-- heartbeat row per started client, updated by its primary key every third of a lease and
-- marked stopped when the client stops; listed and pruned by the seen_at index.
CREATE TABLE IF NOT EXISTS {servers} (
    node         VARCHAR(128)  NOT NULL,
    host         VARCHAR(255)  NOT NULL,
    pid          BIGINT        NOT NULL,
    queues       LONGTEXT      NOT NULL,                  -- JSON list of the queues it serves
    workers      INT           NOT NULL,
    version      VARCHAR(64)   NOT NULL,                  -- its cairnflow's
    started_at   BIGINT        NOT NULL,
    seen_at      BIGINT        NOT NULL,                  -- its last heartbeat
    beat_every   BIGINT        NOT NULL,                  -- its heartbeat interval, nanoseconds
    stopped_at   BIGINT,                                  -- set by a clean stop
    PRIMARY KEY (node),
    KEY `{p}servers_seen` (seen_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
