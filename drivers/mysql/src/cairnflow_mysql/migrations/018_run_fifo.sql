-- cairnflow on MySQL / MariaDB: a fifo run keeps its key while it is unfinished, cleared when it
-- ends as active_key is (Cap.KEY_FIFO, docs/claim.md, 4) (one statement, see 001). The oldest
-- such run of a key is its head, "fifo_key = ? ORDER BY seq LIMIT 1": one probe of the index.
ALTER TABLE {runs}
    ADD COLUMN fifo_key VARCHAR(128) NULL,
    ADD INDEX `{p}runs_fifo` (fifo_key, seq)
