-- cairnflow on SQLite, schema version 2: the idempotency-key index holds unfinished runs with a
-- key only. A finished run (active_key NULL) or a run without a key is not in it at all, so
-- ending a run touches one index fewer; the unique constraint is the same (NULLs never
-- collided), and holder_of_key's "active_key IN (...)" implies the index's predicate.

DROP INDEX "{p}runs_active_key";
CREATE UNIQUE INDEX "{p}runs_active_key" ON {runs} (workflow, active_key)
    WHERE active_key IS NOT NULL;
