-- cairnflow on MySQL / MariaDB: the trigger that records the step history (Cap.STEP_HISTORY)
-- (one statement, see 001). Every transition of a step's status but a parent's or a due time's
-- making it ready is recorded by the UPDATE that makes it, in its transaction: a fenced write
-- that changes no row records nothing, and no transition adds a statement (statements per step measured equal,
-- docs/history.md).
-- Every transition but a claim drops the run's rows older than its newest 100 (the claim, the
-- hot path, only appends), so a run keeps at most 100 plus its attempts running now. The kept
-- boundary is read through a derived table (MySQL refuses a DELETE whose subquery reads its
-- own table, error 1093). at is the database's clock (Unix ns, microseconds). A server that
-- logs binary and a user without SUPER needs log_bin_trust_function_creators=1 to migrate.
CREATE TRIGGER IF NOT EXISTS `{p}step_history` AFTER UPDATE ON {steps}
FOR EACH ROW
BEGIN
    IF NEW.status <> OLD.status
        AND NOT (NEW.status = 'ready' AND OLD.status IN ('blocked', 'scheduled')) THEN
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
