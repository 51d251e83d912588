-- cairnflow on MySQL / MariaDB: the trigger that writes the steps' lifecycle events
-- (Cap.LIFECYCLE) (one statement, see 001). step.started (and run.started for the first
-- attempt of a run's first step), step.succeeded, step.failed, step.retried, step.reclaimed and
-- step.cancelled are written by the UPDATE that makes the transition, in its transaction, while
-- a subscription of the 'events' channel wants the step's workflow: a fenced write that changes
-- no row writes nothing. at is the database's clock (Unix ns, microseconds). A server that logs
-- binary and a user without SUPER needs log_bin_trust_function_creators=1 to migrate.
CREATE TRIGGER IF NOT EXISTS `{p}lifecycle_step` AFTER UPDATE ON {steps}
FOR EACH ROW
BEGIN
    IF NEW.status <> OLD.status
        AND (NEW.status IN ('running', 'succeeded', 'failed', 'cancelled')
            OR (OLD.status = 'running'
                AND (NEW.failures > OLD.failures OR NEW.reclaims > OLD.reclaims)))
        AND EXISTS (
            SELECT 1 FROM {lifecycle_subs}
            WHERE channel = 'events' AND workflow IN (NEW.workflow, '')
        ) THEN
        IF NEW.status = 'running' AND NEW.attempt = 1 AND NEW.position = 0 THEN
            INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at)
            VALUES (
                'events', NEW.run_id, NEW.workflow, NULL, 1, 'run.started', NEW.node,
                CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) * 1000
            );
        END IF;
        INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
        VALUES (
            'events', NEW.run_id, NEW.workflow, NEW.name, NEW.attempt,
            CASE
                WHEN NEW.status = 'running' THEN 'step.started'
                WHEN NEW.status IN ('succeeded', 'failed', 'cancelled')
                    THEN CONCAT('step.', NEW.status)
                WHEN NEW.failures > OLD.failures THEN 'step.retried'
                ELSE 'step.reclaimed'
            END,
            NEW.node,
            CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) * 1000,
            CASE WHEN NEW.status = 'failed' OR NEW.failures > OLD.failures THEN NEW.error END
        );
    END IF;
END
