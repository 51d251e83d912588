-- cairnflow on PostgreSQL, schema version 20: the forced ready steps of each queue
-- (Cap.FORCE_RUN). A claim of a paused queue first asks whether one of its forced steps is
-- ready (the queue's gate, a one-time filter, docs/claim.md, 2); this partial index holds those
-- steps alone (none, nearly always), so the answer is one probe where it was a walk of every
-- ready row of the paused queue.
CREATE INDEX "{p}steps_forced_ready" ON {steps} (queue) WHERE status = 'ready' AND forced = 1;
