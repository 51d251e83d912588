-- cairnflow on PostgreSQL, schema version 26: the step history's trim runs its DELETE only
-- when the run holds more than its newest 100 rows (#20). The function of 020 again; what it
-- records and keeps is unchanged. It used to send the DELETE at every transition but a claim,
-- with the newest-but-100 row's seq as its bound: NULL for nearly every run (fewer than 101
-- rows), so a DELETE that matched nothing, yet started an executor (the table and its indexes
-- opened) for each step that ended. Now the same index range is read first, into a variable,
-- and the DELETE is sent only when it found a row.
--
-- Measured (3,000 steps moved from running to succeeded in one transaction, pipelined, the
-- three namespaces in turn, 8 rounds, local server, 2026-12-04): 66.5 us an UPDATE with 020's
-- trigger, 60.9 with this one, 34.5 with none: about a sixth of the trigger's cost.

CREATE OR REPLACE FUNCTION {schema}"{p}record_step"() RETURNS trigger LANGUAGE plpgsql AS '
DECLARE
    cutoff BIGINT;
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
        SELECT seq INTO cutoff FROM {step_history} WHERE run_id = NEW.run_id
            ORDER BY seq DESC LIMIT 1 OFFSET 100;
        IF cutoff IS NOT NULL THEN
            DELETE FROM {step_history} WHERE run_id = NEW.run_id AND seq <= cutoff;
        END IF;
    END IF;
    RETURN NULL;
END';
