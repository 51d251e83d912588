-- cairnflow on PostgreSQL, schema version 25: a run's lifecycle event written once per channel.
-- The run trigger (021, 024) chose its channels with SELECT DISTINCT over rows that carried
-- clock_timestamp(), which is volatile: read once per row, so two subscriptions of one channel
-- covering the run's workflow (its own and the one to every workflow, '') gave two rows that
-- DISTINCT kept apart, and the run's end was written, and delivered, twice. The channels are
-- now chosen first, then each gets one row. (SQLite's julianday('now') and MySQL's NOW(6) are
-- fixed for the statement: their triggers never wrote twice.)

CREATE OR REPLACE FUNCTION {schema}"{p}lifecycle_run"() RETURNS trigger LANGUAGE plpgsql AS '
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {lifecycle_subs} WHERE workflow IN (NEW.workflow, '''')) THEN
        RETURN NULL;
    END IF;
    INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
    SELECT wanted.channel, NEW.id, NEW.workflow, NULL::text, 0, ''run.'' || NEW.state,
        NULL::text, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint * 1000, NEW.error
    FROM (
        SELECT DISTINCT channel FROM {lifecycle_subs}
        WHERE workflow IN (NEW.workflow, '''')
            AND (channel = ''events'' OR (channel = ''on_failure'' AND NEW.state = ''failed''))
    ) AS wanted;
    RETURN NULL;
END';
