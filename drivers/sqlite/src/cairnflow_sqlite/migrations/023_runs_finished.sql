-- cairnflow on SQLite, schema version 23: runs_finished holds finished runs only. Its two
-- readers ask for a range of finish times ("finished_at < ?" to prune, "finished_at >= ?"
-- for statistics); a comparison on the column implies it is NOT NULL, so the partial index
-- qualifies for both. Every unfinished run was an entry under NULL that each enqueue wrote
-- and no query read (#20: one index entry fewer per run enqueued).

DROP INDEX "{p}runs_finished";
CREATE INDEX "{p}runs_finished" ON {runs} (finished_at) WHERE finished_at IS NOT NULL;
