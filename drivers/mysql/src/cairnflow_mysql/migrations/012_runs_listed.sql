-- cairnflow on MySQL / MariaDB: runs listed by queue (#17, "r.queue = ? ... ORDER BY r.seq
-- DESC") and counted by finish time (Cap.STATS: "finished_at >= ?", a dashboard's window)
-- (one statement, see 001). MySQL has no ADD INDEX IF NOT EXISTS: a migrator that died between
-- this statement and its ledger row leaves indexes that refuse the statement again ("Duplicate
-- key name"); drop them by hand, then migrate.
ALTER TABLE {runs}
    ADD INDEX `{p}runs_queue` (queue, seq),
    ADD INDEX `{p}runs_finished` (finished_at)
