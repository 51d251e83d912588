-- cairnflow on PostgreSQL, schema version 1: runs, their steps, and signals kept for their waits.
-- Every time is a BIGINT of Unix nanoseconds written by the engine's clock (never a timestamp
-- type: session time zones and rounding would move it). Payloads, outputs and progress are
-- BYTEA made by the client's codec (JSON by default); labels, DAG edges and errors are JSON text.
--
-- The partial indexes below match the SQL layer's predicates exactly (cairnflow.sql.Queries):
-- the planner only uses a partial index whose WHERE clause the query's WHERE clause implies,
-- and only these few rows are hot. Finished runs are in none of them, so the claim, the
-- reclaimer and the due-work scan cost the same with 100 or 10 million finished runs.

CREATE TABLE {runs} (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- insertion order: listings
    id           TEXT    NOT NULL UNIQUE,
    workflow     TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    state        TEXT    NOT NULL,                   -- 'active', or the final status
    payload      BYTEA   NOT NULL,
    idem_key     TEXT,                               -- the idempotency key, kept for history
    active_key   TEXT,                               -- the key while unfinished, NULL after
    labels       TEXT    NOT NULL,                   -- JSON object of str to str
    steps_left   INTEGER NOT NULL,                   -- steps not yet succeeded
    created_at   BIGINT  NOT NULL,
    run_at       BIGINT  NOT NULL,
    finished_at  BIGINT,
    error        TEXT                                -- JSON of the error that failed the run
);

-- An idempotency key is held by at most one unfinished run of a workflow. Finished runs have
-- active_key NULL and are left out of the index entirely (holder_of_key's "active_key IN (...)"
-- implies "active_key IS NOT NULL", so the planner still uses it).
CREATE UNIQUE INDEX "{p}runs_active_key" ON {runs} (workflow, active_key)
    WHERE active_key IS NOT NULL;
-- Listings, newest first: by workflow, by state, or neither (the primary key).
CREATE INDEX "{p}runs_workflow" ON {runs} (workflow, seq);
CREATE INDEX "{p}runs_state" ON {runs} (state, seq);

CREATE TABLE {steps} (
    id            TEXT    PRIMARY KEY,
    run_id        TEXT    NOT NULL,
    workflow      TEXT    NOT NULL,                  -- copied from the run: the claim filters on it
    queue         TEXT    NOT NULL,
    priority      INTEGER NOT NULL,
    name          TEXT    NOT NULL,
    kind          TEXT    NOT NULL,                  -- task, sleep or wait
    position      INTEGER NOT NULL,                  -- definition order
    parents       TEXT    NOT NULL,                  -- JSON list of step names
    children      TEXT    NOT NULL,                  -- JSON list of step names
    parents_left  INTEGER NOT NULL,                  -- parents not yet succeeded; 0 makes it ready
    status        TEXT    NOT NULL,
    due_at        BIGINT,                            -- when a scheduled, sleeping or waiting step is due
    attempt       INTEGER NOT NULL,                  -- claims so far
    failures      INTEGER NOT NULL,
    reclaims      INTEGER NOT NULL,                  -- takeovers of the current attempt
    lease_token   TEXT,                              -- the secret of the current lease
    lease_until   BIGINT,                            -- on the lease clock
    node          TEXT,                              -- the node of the latest claim
    signal_name   TEXT,                              -- what a waiting step waits for
    output        BYTEA,
    error         TEXT,
    progress      BYTEA,
    started_at    BIGINT,
    finished_at   BIGINT,
    heartbeat_at  BIGINT,
    -- Every per-run statement (fan-in, cancel, reads, claim inputs) leads with run_id.
    CONSTRAINT "{p}steps_run_name" UNIQUE (run_id, name)
);

-- The claim: "status = 'ready' AND due_at <= ? ... ORDER BY priority DESC, due_at, id LIMIT n
-- FOR UPDATE SKIP LOCKED" reads this index in order and stops after n rows.
CREATE INDEX "{p}steps_ready" ON {steps} (priority DESC, due_at, id) WHERE status = 'ready';
-- The reclaimer: "status = 'running' AND lease_until < ? ... ORDER BY lease_until".
CREATE INDEX "{p}steps_running" ON {steps} (lease_until) WHERE status = 'running';
-- Due work: "status IN ('scheduled', 'sleeping', 'waiting') AND due_at <= ? ... ORDER BY due_at":
-- delayed starts and retries, sleeps, wait deadlines. A step due later is 'scheduled', not
-- 'ready', so it never sits in the claim's index.
CREATE INDEX "{p}steps_due" ON {steps} (due_at)
    WHERE status IN ('scheduled', 'sleeping', 'waiting');

CREATE TABLE {signals} (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- arrival order: oldest first
    run_id      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    payload     BYTEA   NOT NULL,
    created_at  BIGINT  NOT NULL
);
CREATE INDEX "{p}signals_run" ON {signals} (run_id, name, seq);
