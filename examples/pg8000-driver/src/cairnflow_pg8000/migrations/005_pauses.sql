-- The reference schema of cairnflow's SQL layer, version 5: paused queues and workflows
-- (Cap.PAUSE_QUEUE, Cap.PAUSE_WORKFLOW). One row per pause; resuming deletes it. Every claim
-- reads the table by its primary key (a queue's pause once per statement, a workflow's once per
-- row the claim visits), so a pause holds every client the moment it commits. paused_at is
-- BIGINT Unix nanoseconds.

CREATE TABLE {pauses} (
    kind         TEXT   NOT NULL,                   -- 'queue' or 'workflow'
    name         TEXT   NOT NULL,                   -- the queue's or the workflow's name
    paused_at    BIGINT NOT NULL,
    -- One pause per queue or workflow: of two pausers inserting at once, the second is refused
    -- here, and reports it paused already.
    CONSTRAINT "{p}pauses_pkey" PRIMARY KEY (kind, name)
);
