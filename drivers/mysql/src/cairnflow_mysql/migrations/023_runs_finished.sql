-- cairnflow on MySQL / MariaDB: runs by finish time (Cap.RETENTION, #16) (one statement, see
-- 001). A prune chunk is "finished_at < ? ORDER BY finished_at LIMIT n": a range of this index
-- from its low end (unfinished runs, finished_at NULL, sort first and are skipped by the range
-- start), stopped after the chunk. The read takes no lock (a plain consistent read at READ
-- COMMITTED); the chunk's runs are then locked by primary key. Run again after a migrator died
-- before its ledger row, it is refused as a duplicate key name (1061), which the migrator takes
-- as applied (MySQLDialect.migration_statement).
ALTER TABLE {runs} ADD INDEX `{p}runs_finished` (finished_at)
