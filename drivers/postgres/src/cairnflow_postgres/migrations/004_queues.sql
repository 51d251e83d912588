-- cairnflow on PostgreSQL, schema version 4: the ready index leads with the queue (Cap.QUEUE).
-- A claim names its queues and claims each with its own statement, "status = 'ready' AND
-- queue = ? AND workflow IN (...) ORDER BY priority DESC, due_at, id LIMIT n FOR UPDATE SKIP
-- LOCKED" (docs/claim.md): led by the queue, each reads its own range of the index in order and
-- stops after n rows, however many ready rows the other queues hold. One transaction (DDL is
-- transactional here): the claim never meets the table without a ready index.

DROP INDEX {schema}"{p}steps_ready";
CREATE INDEX "{p}steps_ready" ON {steps} (queue, priority DESC, due_at, id) WHERE status = 'ready';
