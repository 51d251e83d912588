-- cairnflow on PostgreSQL, schema version 18: the trigger that records the step history
-- (Cap.STEP_HISTORY, see 013), kept out of the reference schema (it is this engine's spelling).
-- It runs inside the UPDATE that changes a step's status, so in its transaction; the WHEN
-- clause keeps the function from being called for any other UPDATE of a step (lease renewals,
-- progress, parents' counts). The bound: every transition but a claim drops the run's rows
-- older than its newest 100 (a range of step_history_run); the claim only appends.

CREATE FUNCTION {schema}"{p}record_step"() RETURNS trigger LANGUAGE plpgsql AS '
BEGIN
    INSERT INTO {step_history} (run_id, step, attempt, event, node, at)
    VALUES (
        NEW.run_id, NEW.name, NEW.attempt,
        CASE
            WHEN NEW.status = ''running'' THEN ''claimed''
            WHEN NEW.status IN (''succeeded'', ''failed'', ''cancelled'', ''sleeping'', ''waiting'')
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

CREATE TRIGGER "{p}step_history" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN (OLD.status <> NEW.status
    AND NOT (NEW.status = 'ready' AND OLD.status IN ('blocked', 'scheduled')))
EXECUTE FUNCTION {schema}"{p}record_step"();
