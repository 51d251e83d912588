-- cairnflow on MySQL / MariaDB: each step's concurrency key and the key's limit, computed at
-- enqueue (Cap.CONCURRENCY_KEY, docs/claim.md, 4) (one statement, see 001). A key's row of
-- limits counts its running attempts (012). MySQL has no ADD COLUMN IF NOT EXISTS: a migrator
-- that died between this statement and its ledger row leaves columns to drop by hand.
ALTER TABLE {steps}
    ADD COLUMN concurrency_key VARCHAR(128) NULL,
    ADD COLUMN key_limit INT NULL
