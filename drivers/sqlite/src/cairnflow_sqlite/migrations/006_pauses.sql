-- cairnflow on SQLite, schema version 6: paused queues and workflows (Cap.PAUSE_QUEUE,
-- Cap.PAUSE_WORKFLOW). One row per pause; resuming deletes it. Every claim reads the table by
-- its primary key (a queue's pause once per statement, a workflow's once per row the claim
-- visits), so a pause holds every client the moment it commits.

CREATE TABLE {pauses} (
    kind         TEXT    NOT NULL,                   -- 'queue' or 'workflow'
    name         TEXT    NOT NULL,                   -- the queue's or the workflow's name
    paused_at    INTEGER NOT NULL,
    PRIMARY KEY (kind, name)                         -- one pause per queue or workflow
);
