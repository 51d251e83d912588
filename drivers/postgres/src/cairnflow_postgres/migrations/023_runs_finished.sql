-- cairnflow on PostgreSQL, schema version 23: runs_finished holds finished runs only. Its two
-- readers ask for a range of finish times ("finished_at < ?" to prune, "finished_at >= ?"
-- for statistics), which a NULL never satisfies, so the planner proves the partial index
-- serves them; every unfinished run was an entry under NULL that each enqueue wrote and no
-- query read (#20: one index entry fewer per run enqueued). Dropped and built again in the
-- migration's transaction: writes to the runs table wait for the build, which reads the
-- finished runs (a pruned table keeps them few).

DROP INDEX {schema}"{p}runs_finished";
CREATE INDEX "{p}runs_finished" ON {runs} (finished_at) WHERE finished_at IS NOT NULL;
