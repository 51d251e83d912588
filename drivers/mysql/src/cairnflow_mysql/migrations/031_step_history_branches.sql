-- cairnflow on MySQL / MariaDB: the step history of failure paths (Cap.WAIT_BRANCH,
-- Cap.COMPENSATION, #17), file 2 of 2: the trigger of 025 again, knowing two more step
-- statuses: a wait that timed out onto its branch is recorded 'timed_out', a step that will not
-- run 'skipped'. A compensation started when its run failed (skipped, then ready or blocked) was
-- made ready by the failure, as parents make a child ready: not a transition of its own, so no
-- row says 'reopened' where nothing was retried. Between 029 and this file a migrator that died
-- leaves no trigger: running the migration again makes it.
CREATE TRIGGER IF NOT EXISTS `{p}step_history` AFTER UPDATE ON {steps}
FOR EACH ROW
BEGIN
    IF NEW.status <> OLD.status
        AND NOT (NEW.status = 'ready' AND OLD.status IN ('blocked', 'scheduled', 'skipped'))
        AND NOT (NEW.status = 'blocked' AND OLD.status = 'skipped') THEN
        INSERT INTO {step_history} (run_id, step, attempt, event, node, at)
        VALUES (
            NEW.run_id, NEW.name, NEW.attempt,
            CASE
                WHEN NEW.status = 'running' THEN 'claimed'
                WHEN NEW.status IN (
                    'succeeded', 'failed', 'cancelled', 'sleeping', 'waiting', 'timed_out',
                    'skipped'
                )
                    THEN NEW.status
                WHEN OLD.status = 'running' AND NEW.failures > OLD.failures THEN 'retried'
                WHEN OLD.status = 'running' AND NEW.reclaims > OLD.reclaims THEN 'reclaimed'
                WHEN OLD.status = 'running' THEN 'snoozed'
                ELSE 'reopened'
            END,
            NEW.node,
            CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) * 1000
        );
        IF NEW.status <> 'running' THEN
            DELETE FROM {step_history}
            WHERE run_id = NEW.run_id AND seq <= (
                SELECT kept.seq FROM (
                    SELECT seq FROM {step_history} WHERE run_id = NEW.run_id
                    ORDER BY seq DESC LIMIT 1 OFFSET 100
                ) AS kept
            );
        END IF;
    END IF;
END
