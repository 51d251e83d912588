-- cairnflow on MySQL / MariaDB: the lifecycle outbox (Cap.LIFECYCLE, docs/lifecycle.md) (one
-- statement, see 001; its subscriptions are 031, its triggers 032 and 033). One row per run or
-- step event, written by the triggers in the transaction of the UPDATE that makes the
-- transition, only while a subscription wants the run's workflow. Channels: 'events' (the
-- Client.on_event subscribers of a fleet share its rows) and 'on_failure' (one run.failed row
-- per failed run of a workflow with an on_failure handler). A client leases a channel's free
-- rows (FOR UPDATE SKIP LOCKED on the channel index; token, lease_until on the lease clock,
-- deliveries counted) and deletes them by primary key with its token once handled. ids are not
-- in commit order, so nothing follows them as a cursor. at is the database's clock (Unix ns).
CREATE TABLE IF NOT EXISTS {lifecycle} (
    id           BIGINT        NOT NULL AUTO_INCREMENT,
    channel      VARCHAR(16)   NOT NULL,
    run_id       VARCHAR(64)   NOT NULL,
    workflow     VARCHAR(128)  NOT NULL,
    step         VARCHAR(128),                            -- NULL for a run's events
    attempt      INT           NOT NULL,
    kind         VARCHAR(32)   NOT NULL,
    node         VARCHAR(255),
    at           BIGINT        NOT NULL,
    error        LONGTEXT,                                -- JSON of the failure's error
    token        VARCHAR(64),                             -- the lease of the client handling it
    lease_until  BIGINT,                                  -- NULL: free; else free once passed
    deliveries   INT           NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    KEY `{p}lifecycle_channel` (channel, id)              -- the claim reads a channel's oldest
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
