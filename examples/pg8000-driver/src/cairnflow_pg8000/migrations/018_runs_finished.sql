-- The reference schema of cairnflow's SQL layer, version 18: runs_finished holds finished
-- runs only. Its two readers ask for a range of finish times ("finished_at < ?" to prune,
-- "finished_at >= ?" for statistics), which a NULL never satisfies, so an engine that proves
-- "IS NOT NULL" from a comparison (PostgreSQL, SQLite) serves them from the partial index;
-- every unfinished run was an entry under NULL that each enqueue wrote and no query read.

DROP INDEX {schema}"{p}runs_finished";
CREATE INDEX "{p}runs_finished" ON {runs} (finished_at) WHERE finished_at IS NOT NULL;
