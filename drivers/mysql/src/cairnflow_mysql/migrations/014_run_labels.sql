-- cairnflow on MySQL / MariaDB: the label index (Cap.LABEL_PREFIX, #17) (one statement, see
-- 001). One row per label of a run, written in the enqueue's transaction. Run filters probe it
-- (sql/_filters.py): "l.run_id = r.id AND l.name = ? AND l.value = ?" is a seek of the primary
-- key, and a prefix is "l.name = ? AND l.value >= ? AND l.value < ?", a range of the value index
-- (the value is VARBINARY: UTF-8 bytes, in code point order, with no PAD SPACE, so the range
-- is exactly the prefix and an exact match is exact).
CREATE TABLE IF NOT EXISTS {run_labels} (
    run_id       VARCHAR(64)   NOT NULL,
    name         VARCHAR(63)   NOT NULL,
    value        VARBINARY(1024) NOT NULL,             -- bytes: no PAD SPACE, code point order
    created_at   BIGINT        NOT NULL,                  -- the run's
    PRIMARY KEY (run_id, name),
    KEY `{p}run_labels_value` (name, value, run_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
