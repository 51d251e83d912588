-- cairnflow on SQLite, schema version 20: the step history of failure paths (Cap.WAIT_BRANCH,
-- Cap.COMPENSATION, #17). The trigger of 016 again, knowing two more step statuses: a wait that
-- timed out onto its branch is recorded 'timed_out', a step that will not run 'skipped'. A
-- compensation started when its run failed (skipped, then ready or blocked) is made ready by
-- the failure, as a child is by its parents: not a transition of its own (the failure before
-- it is recorded), so no row says 'reopened' where nothing was retried.

DROP TRIGGER IF EXISTS "{p}step_history";

CREATE TRIGGER "{p}step_history" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN OLD.status <> NEW.status
    AND NOT (NEW.status = 'ready' AND OLD.status IN ('blocked', 'scheduled', 'skipped'))
    AND NOT (NEW.status = 'blocked' AND OLD.status = 'skipped')
BEGIN
    INSERT INTO {step_history} (run_id, step, attempt, event, node, at)
    VALUES (
        NEW.run_id, NEW.name, NEW.attempt,
        CASE
            WHEN NEW.status = 'running' THEN 'claimed'
            WHEN NEW.status IN (
                'succeeded', 'failed', 'cancelled', 'sleeping', 'waiting', 'timed_out', 'skipped'
            )
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
