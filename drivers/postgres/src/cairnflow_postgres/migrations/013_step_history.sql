-- cairnflow on PostgreSQL, schema version 13: each run's step history (Cap.STEP_HISTORY). One
-- row per transition of a step (claimed, succeeded, failed, retried, reclaimed, snoozed,
-- sleeping, waiting, cancelled, reopened), written by a trigger on the steps' status, so by the
-- very UPDATE that makes the transition, in its transaction: a fenced write that changes no row
-- records nothing, and no transition adds a statement (the claim's hot path sends what it sent
-- before; bench/statements). A step made ready by its parents or by its due time is not a
-- transition of its own (the retry or the enqueue before it is recorded).
--
-- Bounded: every transition but a claim drops the run's rows older than its newest 100 (the
-- claim, the hot path, only appends and takes no lock on older rows; an outcome or a reclaim
-- follows every claim), so a run keeps at most 100 plus its attempts running now. Every
-- statement reads one run's range of the primary key. at is the database's clock
-- (clock_timestamp(), Unix ns); seq orders the rows.

CREATE TABLE {step_history} (
    seq          BIGINT   GENERATED ALWAYS AS IDENTITY,  -- recording order
    run_id       TEXT     NOT NULL,
    step         TEXT     NOT NULL,
    attempt      INTEGER  NOT NULL,                  -- the step's attempt (claims so far)
    event        TEXT     NOT NULL,
    node         TEXT,                               -- the node of the attempt's claim
    at           BIGINT   NOT NULL,
    CONSTRAINT "{p}step_history_pkey" PRIMARY KEY (run_id, seq)
);

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
