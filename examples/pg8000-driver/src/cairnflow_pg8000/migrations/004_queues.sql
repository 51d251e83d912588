-- The reference schema of cairnflow's SQL layer, version 4: the ready index leads with the queue
-- (Cap.QUEUE). A claim names its queues and claims each with its own statement,
-- "status = 'ready' AND queue = ? AND workflow IN (...) ORDER BY priority DESC, due_at, id
-- LIMIT n" (docs/claim.md): led by the queue, each reads its own range of the index in order
-- and stops after n rows, however many ready rows the other queues hold. An index lives in its
-- table's schema: {schema} (the quoted schema and a dot, or nothing) names it there.

DROP INDEX {schema}"{p}steps_ready";
CREATE INDEX "{p}steps_ready" ON {steps} (queue, priority DESC, due_at, id) WHERE status = 'ready';
