-- cairnflow on MySQL / MariaDB: the labels of runs created before the label index (010), one
-- row per key of each run's JSON labels (one statement, see 001; IGNORE makes it safe to run
-- again after a migrator died before its ledger row).
INSERT IGNORE INTO {run_labels} (run_id, name, value, created_at)
    SELECT r.id, k.name,
           JSON_UNQUOTE(JSON_EXTRACT(r.labels, CONCAT('$."', k.name, '"'))), r.created_at
    FROM {runs} r,
         JSON_TABLE(JSON_KEYS(r.labels), '$[*]' COLUMNS (name VARCHAR(63) PATH '$')) k
