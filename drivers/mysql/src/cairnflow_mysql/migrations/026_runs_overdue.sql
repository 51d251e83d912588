-- cairnflow on MySQL / MariaDB: run deadlines (Cap.RUN_TIMEOUT) (one statement, see 001). Each
-- client's housekeeping asks for the unfinished runs of a workflow due (run_at) before its
-- deadline span; no partial indexes here, so the index leads with state: the read is one range
-- of ('active', workflow), never a finished run.
CREATE INDEX `{p}runs_overdue` ON {runs} (state, workflow, run_at)
