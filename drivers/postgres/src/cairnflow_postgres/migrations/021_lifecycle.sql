-- cairnflow on PostgreSQL, schema version 21: the lifecycle outbox (Cap.LIFECYCLE,
-- docs/lifecycle.md). One row per run or step event (run.started, run.succeeded, run.failed,
-- run.cancelled, run.discarded; step.started, step.succeeded, step.failed, step.retried,
-- step.reclaimed, step.cancelled), written by triggers on the steps' status and the runs'
-- state, so in the transaction of the UPDATE that makes the transition: a fenced write that
-- changes no row writes no event, and no transition adds a statement of the engine. They write
-- only while a row of lifecycle_subs wants the run's workflow (its name, or '' for every
-- workflow); without one a transition pays one probe of an empty table's primary key.
--
-- Channels: 'events' (the Client.on_event subscribers of a fleet share its rows) and
-- 'on_failure' (one run.failed row per failed run of a workflow with an on_failure handler).
-- A client leases a channel's free rows (FOR UPDATE SKIP LOCKED; token, lease_until on the
-- lease clock, deliveries counted) and deletes them with its token once handled. ids are not
-- in commit order, so nothing follows them as a cursor. at is the database's clock (Unix ns).

CREATE TABLE {lifecycle} (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel      TEXT    NOT NULL,
    run_id       TEXT    NOT NULL,
    workflow     TEXT    NOT NULL,
    step         TEXT,                               -- NULL for a run's events
    attempt      INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    node         TEXT,
    at           BIGINT  NOT NULL,
    error        TEXT,                               -- JSON of the failure's error
    token        TEXT,                               -- the lease of the client handling it
    lease_until  BIGINT,                             -- NULL: free; else free once passed
    deliveries   INTEGER NOT NULL DEFAULT 0
);
-- The claim reads a channel's oldest rows.
CREATE INDEX "{p}lifecycle_channel" ON {lifecycle} (channel, id);

CREATE TABLE {lifecycle_subs} (
    channel      TEXT    NOT NULL,
    workflow     TEXT    NOT NULL,                   -- '' subscribes to every workflow
    since        BIGINT  NOT NULL,
    PRIMARY KEY (channel, workflow)
);

CREATE FUNCTION {schema}"{p}lifecycle_step"() RETURNS trigger LANGUAGE plpgsql AS '
DECLARE
    now_ns BIGINT;
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM {lifecycle_subs}
        WHERE channel = ''events'' AND workflow IN (NEW.workflow, '''')
    ) THEN
        RETURN NULL;
    END IF;
    now_ns := (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint * 1000;
    IF NEW.status = ''running'' AND NEW.attempt = 1 AND NEW.position = 0 THEN
        INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at)
        VALUES (''events'', NEW.run_id, NEW.workflow, NULL, 1, ''run.started'', NEW.node, now_ns);
    END IF;
    INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
    VALUES (
        ''events'', NEW.run_id, NEW.workflow, NEW.name, NEW.attempt,
        CASE
            WHEN NEW.status = ''running'' THEN ''step.started''
            WHEN NEW.status IN (''succeeded'', ''failed'', ''cancelled'') THEN ''step.'' || NEW.status
            WHEN NEW.failures > OLD.failures THEN ''step.retried''
            ELSE ''step.reclaimed''
        END,
        NEW.node,
        now_ns,
        CASE WHEN NEW.status = ''failed'' OR NEW.failures > OLD.failures THEN NEW.error END
    );
    RETURN NULL;
END';

CREATE TRIGGER "{p}lifecycle_step" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN (OLD.status <> NEW.status
    AND (NEW.status IN ('running', 'succeeded', 'failed', 'cancelled')
        OR (OLD.status = 'running'
            AND (NEW.failures > OLD.failures OR NEW.reclaims > OLD.reclaims))))
EXECUTE FUNCTION {schema}"{p}lifecycle_step"();

CREATE FUNCTION {schema}"{p}lifecycle_run"() RETURNS trigger LANGUAGE plpgsql AS '
BEGIN
    INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
    SELECT DISTINCT channel, NEW.id, NEW.workflow, NULL::text, 0, ''run.'' || NEW.state,
        NULL::text, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint * 1000, NEW.error
    FROM {lifecycle_subs}
    WHERE workflow IN (NEW.workflow, '''')
        AND (channel = ''events'' OR (channel = ''on_failure'' AND NEW.state = ''failed''));
    RETURN NULL;
END';

CREATE TRIGGER "{p}lifecycle_run" AFTER UPDATE OF state ON {runs}
FOR EACH ROW
WHEN (OLD.state = 'active' AND NEW.state <> 'active')
EXECUTE FUNCTION {schema}"{p}lifecycle_run"();
