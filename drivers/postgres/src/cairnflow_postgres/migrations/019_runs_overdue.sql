-- cairnflow on PostgreSQL, schema version 19: run deadlines (Cap.RUN_TIMEOUT). Each client's
-- housekeeping asks for the unfinished runs of a workflow due (run_at) before its deadline
-- span: this partial index holds the unfinished runs only, by workflow then run_at, so that
-- read never passes a finished run however many the table keeps.
CREATE INDEX "{p}runs_overdue" ON {runs} (workflow, run_at) WHERE state = 'active';
