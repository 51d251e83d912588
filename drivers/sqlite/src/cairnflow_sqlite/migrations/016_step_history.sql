-- cairnflow on SQLite, schema version 16: each run's step history (Cap.STEP_HISTORY). One row
-- per transition of a step (claimed, succeeded, failed, retried, reclaimed, snoozed, sleeping,
-- waiting, cancelled, reopened), written by a trigger on the steps' status, so by the very
-- UPDATE that makes the transition, in its transaction: a fenced write that changes no row
-- records nothing, and no transition adds a statement (the claim's hot path sends what it sent
-- before: statements per step measured equal, docs/history.md). A step made ready by its parents or by its due time is not a
-- transition of its own (the retry or the enqueue before it is recorded).
--
-- Bounded: every transition but a claim drops the run's rows older than its newest 100 (the
-- claim, the hot path, only appends; an outcome or reclaim follows every claim), so a run keeps
-- at most 100 plus its attempts running now. at is the database's clock (Unix ns, milliseconds
-- on SQLite 3.40: unixepoch('subsec') needs 3.42); seq orders the rows.

CREATE TABLE {step_history} (
    seq          INTEGER PRIMARY KEY,                -- recording order (never reused while kept)
    run_id       TEXT    NOT NULL,
    step         TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,                   -- the step's attempt (claims so far)
    event        TEXT    NOT NULL,
    node         TEXT,                               -- the node of the attempt's claim
    at           INTEGER NOT NULL
);
CREATE INDEX "{p}step_history_run" ON {step_history} (run_id, seq);

CREATE TRIGGER "{p}step_history" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN OLD.status <> NEW.status
    AND NOT (NEW.status = 'ready' AND OLD.status IN ('blocked', 'scheduled'))
BEGIN
    INSERT INTO {step_history} (run_id, step, attempt, event, node, at)
    VALUES (
        NEW.run_id, NEW.name, NEW.attempt,
        CASE
            WHEN NEW.status = 'running' THEN 'claimed'
            WHEN NEW.status IN ('succeeded', 'failed', 'cancelled', 'sleeping', 'waiting')
                THEN NEW.status
            WHEN OLD.status = 'running' AND NEW.failures > OLD.failures THEN 'retried'
            WHEN OLD.status = 'running' AND NEW.reclaims > OLD.reclaims THEN 'reclaimed'
            WHEN OLD.status = 'running' THEN 'snoozed'
            ELSE 'reopened'
        END,
        NEW.node,
        CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) * 1000000
    );
    DELETE FROM {step_history}
    WHERE NEW.status <> 'running' AND run_id = NEW.run_id AND seq <= (
        SELECT seq FROM {step_history} WHERE run_id = NEW.run_id
        ORDER BY seq DESC LIMIT 1 OFFSET 100
    );
END;
