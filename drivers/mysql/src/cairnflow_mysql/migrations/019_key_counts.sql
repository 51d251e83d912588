-- cairnflow on MySQL / MariaDB: a concurrency key's row of limits (kind 'key') counts its
-- running attempts, +1 in the transaction that claims, -1 in the one that ends the lease;
-- a fifo key keeps the run admitted now (Cap.CONCURRENCY_KEY, Cap.KEY_FIFO, docs/claim.md, 4)
-- (one statement, see 001).
ALTER TABLE {limits}
    ADD COLUMN running BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN fifo TINYINT NOT NULL DEFAULT 0,
    ADD COLUMN head VARCHAR(64) NULL
