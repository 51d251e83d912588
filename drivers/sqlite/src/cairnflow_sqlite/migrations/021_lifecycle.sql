-- cairnflow on SQLite, schema version 21: the lifecycle outbox (Cap.LIFECYCLE, docs/lifecycle.md).
-- One row per run or step event (run.started, run.succeeded, run.failed, run.cancelled,
-- run.discarded; step.started, step.succeeded, step.failed, step.retried, step.reclaimed,
-- step.cancelled), written by triggers on the steps' status and the runs' state, so by the very
-- UPDATE that makes the transition, in its transaction: a fenced write that changes no row
-- writes no event, and no transition adds a statement of the engine. They write only while a
-- row of lifecycle_subs wants the run's workflow (its name, or '' for every workflow): without
-- a subscriber a transition pays one lookup of an empty table's primary key.
--
-- Channels: 'events' (the Client.on_event subscribers of a fleet share its rows) and
-- 'on_failure' (one run.failed row per failed run of a workflow with an on_failure handler).
-- A client leases a channel's free rows (token, lease_until on the lease clock, deliveries
-- counted) and deletes them with its token once handled; a row a dead client held is free
-- again after its lease. at is the database's clock (Unix ns, milliseconds on SQLite 3.40).

CREATE TABLE {lifecycle} (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: an id names one event
    channel      TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    workflow     TEXT    NOT NULL,
    step         TEXT,                               -- NULL for a run's events
    attempt      INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    node         TEXT,
    at           INTEGER NOT NULL,
    error        TEXT,                               -- JSON of the failure's error
    token        TEXT,                               -- the lease of the client handling it
    lease_until  INTEGER,                            -- NULL: free; else free once passed
    deliveries   INTEGER NOT NULL DEFAULT 0
);
-- The claim reads a channel's oldest rows.
CREATE INDEX "{p}lifecycle_channel" ON {lifecycle} (channel, id);

CREATE TABLE {lifecycle_subs} (
    channel      TEXT    NOT NULL,
    workflow     TEXT    NOT NULL,                   -- '' subscribes to every workflow
    since        INTEGER NOT NULL,
    PRIMARY KEY (channel, workflow)
);

CREATE TRIGGER "{p}lifecycle_step" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN OLD.status <> NEW.status
    AND (NEW.status IN ('running', 'succeeded', 'failed', 'cancelled')
        OR (OLD.status = 'running'
            AND (NEW.failures > OLD.failures OR NEW.reclaims > OLD.reclaims)))
    AND EXISTS (
        SELECT 1 FROM {lifecycle_subs}
        WHERE channel = 'events' AND workflow IN (NEW.workflow, '')
    )
BEGIN
    INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
    SELECT 'events', NEW.run_id, NEW.workflow, NULL, 1, 'run.started', NEW.node,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 1000000, NULL
    WHERE NEW.status = 'running' AND NEW.attempt = 1 AND NEW.position = 0;
    INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
    VALUES (
        'events', NEW.run_id, NEW.workflow, NEW.name, NEW.attempt,
        CASE
            WHEN NEW.status = 'running' THEN 'step.started'
            WHEN NEW.status IN ('succeeded', 'failed', 'cancelled') THEN 'step.' || NEW.status
            WHEN NEW.failures > OLD.failures THEN 'step.retried'
            ELSE 'step.reclaimed'
        END,
        NEW.node,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 1000000,
        CASE WHEN NEW.status = 'failed' OR NEW.failures > OLD.failures THEN NEW.error END
    );
END;

CREATE TRIGGER "{p}lifecycle_run" AFTER UPDATE OF state ON {runs}
FOR EACH ROW
WHEN OLD.state = 'active' AND NEW.state <> 'active'
BEGIN
    INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
    SELECT DISTINCT channel, NEW.id, NEW.workflow, NULL, 0, 'run.' || NEW.state, NULL,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 1000000, NEW.error
    FROM {lifecycle_subs}
    WHERE workflow IN (NEW.workflow, '')
        AND (channel = 'events' OR (channel = 'on_failure' AND NEW.state = 'failed'));
END;
