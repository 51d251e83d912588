-- The reference schema of cairnflow's SQL layer, version 10: the label index (Cap.LABEL_PREFIX,
-- #17), and runs listed by queue. One row per label of a run, written in the enqueue's
-- transaction. Run filters probe it (sql/_filters.py): "l.run_id = r.id AND l.name = ? AND
-- l.value = ?" is a seek of the primary key, and a prefix is "l.name = ? AND l.value >= ? AND
-- l.value < ?", a range of the value index. Name and value compare by code point
-- (TEXT COLLATE "C"), so that range is exactly the prefix whatever the database's locale.
CREATE TABLE {run_labels} (
    run_id      TEXT          NOT NULL,
    name        TEXT COLLATE "C"  NOT NULL,
    value       TEXT COLLATE "C"  NOT NULL,
    created_at  BIGINT        NOT NULL,                -- the run's
    CONSTRAINT "{p}run_labels_pkey" PRIMARY KEY (run_id, name)
);
CREATE INDEX "{p}run_labels_value" ON {run_labels} (name, value, run_id);
-- The labels of runs created before this version.
INSERT INTO {run_labels} (run_id, name, value, created_at)
    SELECT r.id, j.key, j.value, r.created_at FROM {runs} r, jsonb_each_text(r.labels::jsonb) j;
-- Listings by queue, newest first ("r.queue = ? ... ORDER BY r.seq DESC").
CREATE INDEX "{p}runs_queue" ON {runs} (queue, seq);
-- Statistics (Cap.STATS): runs finished since a time, a range of this index.
CREATE INDEX "{p}runs_finished" ON {runs} (finished_at);
