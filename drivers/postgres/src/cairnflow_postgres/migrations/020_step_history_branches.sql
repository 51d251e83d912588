-- cairnflow on PostgreSQL, schema version 20: the step history of failure paths
-- (Cap.WAIT_BRANCH, Cap.COMPENSATION, #17), kept out of the reference schema as 017 is. The
-- function of 017 again, knowing two more step statuses: a wait that timed out onto its branch
-- is recorded 'timed_out', a step that will not run 'skipped'; and the trigger's WHEN leaves out
-- a compensation started when its run failed (skipped, then ready or blocked): the failure made
-- it ready, as parents make a child ready, so no row says 'reopened' where nothing was retried.

CREATE OR REPLACE FUNCTION {schema}"{p}record_step"() RETURNS trigger LANGUAGE plpgsql AS '
BEGIN
    INSERT INTO {step_history} (run_id, step, attempt, event, node, at)
    VALUES (
        NEW.run_id, NEW.name, NEW.attempt,
        CASE
            WHEN NEW.status = ''running'' THEN ''claimed''
            WHEN NEW.status IN (
                ''succeeded'', ''failed'', ''cancelled'', ''sleeping'', ''waiting'',
                ''timed_out'', ''skipped''
            )
                THEN NEW.status
            WHEN OLD.status = ''running'' AND NEW.failures > OLD.failures THEN ''retried''
            WHEN OLD.status = ''running'' AND NEW.reclaims > OLD.reclaims THEN ''reclaimed''
            WHEN OLD.status = ''running'' THEN ''snoozed''
            ELSE ''reopened''
        END,
        NEW.node,
        (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint * 1000
    );
    IF NEW.status <> ''running'' THEN
        DELETE FROM {step_history}
        WHERE run_id = NEW.run_id AND seq <= (
            SELECT seq FROM {step_history} WHERE run_id = NEW.run_id
            ORDER BY seq DESC LIMIT 1 OFFSET 100
        );
    END IF;
    RETURN NULL;
END';

DROP TRIGGER IF EXISTS "{p}step_history" ON {steps};

CREATE TRIGGER "{p}step_history" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN (OLD.status <> NEW.status
    AND NOT (NEW.status = 'ready' AND OLD.status IN ('blocked', 'scheduled', 'skipped'))
    AND NOT (NEW.status = 'blocked' AND OLD.status = 'skipped'))
EXECUTE FUNCTION {schema}"{p}record_step"();
