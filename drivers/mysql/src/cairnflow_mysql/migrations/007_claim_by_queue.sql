-- cairnflow on MySQL / MariaDB: the claim index leads with the queue after the status
-- (Cap.QUEUE) (one statement, see 001). A claim names its queues and claims each with its own
-- locking read, "status = 'ready' AND queue = ? AND workflow IN (...) ORDER BY priority DESC,
-- due_at, id LIMIT n FOR UPDATE SKIP LOCKED" (docs/claim.md): each reads its own range of the
-- index in order and stops after n rows, however many ready rows the other queues hold.
-- The index is dropped and added again under its own name in one ALTER TABLE, so a migrator
-- that died between this statement and its ledger row leaves a statement that can run again
-- (MySQL has no DROP INDEX IF EXISTS).
ALTER TABLE {steps}
    DROP INDEX `{p}steps_claim`,
    ADD INDEX `{p}steps_claim` (status, queue, priority DESC, due_at, id)
