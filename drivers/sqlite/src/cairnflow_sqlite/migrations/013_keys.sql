-- cairnflow on SQLite, schema version 8: concurrency keys and fifo keys (Cap.CONCURRENCY_KEY,
-- Cap.KEY_FIFO, docs/claim.md, 4). A step carries its key and the key's limit, computed at
-- enqueue; a key's row of limits (kind 'key') counts its running attempts: +1 in the
-- transaction that claims, -1 in the one that ends the lease (an outcome, a hand back, a
-- reclaim, a cancel). A fifo run keeps its key in fifo_key while it is unfinished (cleared when
-- it ends, as active_key): the oldest such run of a key is the key's head, the only run whose
-- steps the claim admits.

ALTER TABLE {steps} ADD COLUMN concurrency_key TEXT;
ALTER TABLE {steps} ADD COLUMN key_limit INTEGER;
ALTER TABLE {runs} ADD COLUMN fifo_key TEXT;
ALTER TABLE {limits} ADD COLUMN running INTEGER NOT NULL DEFAULT 0;  -- a key's running attempts
ALTER TABLE {limits} ADD COLUMN fifo INTEGER NOT NULL DEFAULT 0;     -- 1: a fifo key
ALTER TABLE {limits} ADD COLUMN head TEXT;                           -- a fifo key's run now

-- "SELECT id FROM runs WHERE fifo_key = ? ORDER BY seq LIMIT 1": the head of a fifo key, one
-- probe of this index, which holds the unfinished runs of fifo keys only.
CREATE INDEX "{p}runs_fifo" ON {runs} (fifo_key, seq) WHERE fifo_key IS NOT NULL;
