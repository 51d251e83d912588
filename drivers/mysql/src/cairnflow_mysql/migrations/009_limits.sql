-- cairnflow on MySQL / MariaDB, global queue limits (Cap.QUEUE_LIMIT_GLOBAL, docs/claim.md, 3)
-- (one statement, see 001). A claim of a queue with a global limit locks the queue's limiter
-- row (SELECT ... FOR UPDATE), counts the queue's running steps and takes at most the limit
-- minus that count: two claimers of the queue serialise on the row, and at READ COMMITTED the
-- count after the lock sees every claim committed before it. The count reads the claim index
-- (status, queue, ...) of 007, whose (status = 'running', queue = ?) range holds the queue's
-- running steps only: no index of its own.
CREATE TABLE IF NOT EXISTS {limits} (
    kind         VARCHAR(16)   NOT NULL,                  -- 'queue'
    name         VARCHAR(128)  NOT NULL,                  -- the queue's name
    -- One limiter per queue: of two first claimers creating it at once, the second is refused
    -- with a duplicate key, and finds the first's row.
    PRIMARY KEY (kind, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
