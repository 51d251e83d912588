-- The reference schema of cairnflow's SQL layer, version 6: global queue limits
-- (Cap.QUEUE_LIMIT_GLOBAL, docs/claim.md, 3). A claim of a queue with a global limit locks the
-- queue's limiter row (SELECT ... FOR UPDATE), counts the queue's running steps and takes at
-- most the limit minus that count: two claimers of the queue serialise on the row. An index
-- lives in its table's schema.

CREATE TABLE {limits} (
    kind         $text   NOT NULL,                   -- 'queue'
    name         $text   NOT NULL,                   -- the queue's name
    -- One limiter per queue: of two first claimers creating it at once, the second is refused
    -- here, and finds the first's row.
    CONSTRAINT "{p}limits_pkey" PRIMARY KEY (kind, name)
);

-- "SELECT count(*) FROM steps WHERE queue = ? AND status = 'running'": one range of this
-- index, which holds the running steps only (at most the fleet's workers).
CREATE INDEX "{p}steps_running_queue" ON {steps} (queue) WHERE status = 'running';
