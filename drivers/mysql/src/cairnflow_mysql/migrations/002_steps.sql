-- cairnflow on MySQL / MariaDB, schema version 1, file 2 of 3: steps (one statement, see 001).
-- There are no partial indexes, so every index that serves a status lookup leads with status:
-- the rows of the other statuses sit in other ranges of the same index.
CREATE TABLE IF NOT EXISTS {steps} (
    id            VARCHAR(64)   NOT NULL,
    run_id        VARCHAR(64)   NOT NULL,
    workflow      VARCHAR(128)  NOT NULL,                 -- copied from the run: the claim filters on it
    queue         VARCHAR(128)  NOT NULL,
    priority      BIGINT        NOT NULL,
    name          VARCHAR(128)  NOT NULL,
    kind          VARCHAR(16)   NOT NULL,                 -- task, sleep or wait
    position      INT           NOT NULL,                 -- definition order
    parents       LONGTEXT      NOT NULL,                 -- JSON list of step names
    children      LONGTEXT      NOT NULL,                 -- JSON list of step names
    parents_left  INT           NOT NULL,                 -- parents not yet succeeded; 0 makes it ready
    status        VARCHAR(16)   NOT NULL,
    due_at        BIGINT,                                 -- when a scheduled, sleeping or waiting step is due
    attempt       INT           NOT NULL,                 -- claims so far
    failures      INT           NOT NULL,
    reclaims      INT           NOT NULL,                 -- takeovers of the current attempt
    lease_token   CHAR(32),                               -- the secret of the current lease
    lease_until   BIGINT,                                 -- on the lease clock
    node          VARCHAR(255),                           -- the node of the latest claim
    signal_name   VARCHAR(128),                           -- what a waiting step waits for
    output        LONGBLOB,
    error         LONGTEXT,
    progress      LONGBLOB,
    started_at    BIGINT,
    finished_at   BIGINT,
    heartbeat_at  BIGINT,
    PRIMARY KEY (id),
    -- Fan-in, children and a run's steps: by run, then name.
    UNIQUE KEY `{p}steps_run_name` (run_id, name),
    -- The claim: status = 'ready', most urgent first (ORDER BY priority DESC, due_at, id). Read
    -- in this order the claim stops after LIMIT rows and sorts nothing, so its locking read locks
    -- only the rows it returns. MariaDB honours DESC here from 10.8 (see MySQLDialect.claim).
    -- Steps due later are 'scheduled', not 'ready': the 'ready' range holds only claimable work.
    KEY `{p}steps_claim` (status, priority DESC, due_at, id),
    -- The reclaimer: status = 'running' AND lease_until < ? ORDER BY lease_until.
    KEY `{p}steps_lease` (status, lease_until),
    -- Housekeeping: status IN ('scheduled', 'sleeping', 'waiting') AND due_at <= ?
    -- ORDER BY due_at (delayed starts and retries falling due, sleeps, wait deadlines).
    KEY `{p}steps_due` (status, due_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
