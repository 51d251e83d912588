-- cairnflow on SQLite, schema version 7: global queue limits (Cap.QUEUE_LIMIT_GLOBAL,
-- docs/claim.md, 3). A claim of a queue with a global limit reads its limiter row, counts the
-- queue's running steps and takes at most the limit minus that count; SQLite's one writer
-- (BEGIN IMMEDIATE) already serialises the claims, so the row is not locked here, only kept
-- for the kinds of limit that will carry state (concurrency keys, rate limits).

CREATE TABLE {limits} (
    kind         TEXT    NOT NULL,                   -- 'queue'
    name         TEXT    NOT NULL,                   -- the queue's name
    PRIMARY KEY (kind, name)                         -- one limiter per queue
);

-- "SELECT count(*) FROM steps WHERE queue = ? AND status = 'running'": one range of this
-- index, which holds the running steps only (at most the fleet's workers).
CREATE INDEX "{p}steps_running_queue" ON {steps} (queue) WHERE status = 'running';
