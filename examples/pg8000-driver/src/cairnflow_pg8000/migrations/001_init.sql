-- The reference schema of cairnflow's SQL layer, version 1: runs, their steps, and signals kept
-- for their waits, as every statement of cairnflow.sql reads and writes them
-- (core/src/cairnflow/sql/_statements.py).
--
-- A new SQL engine does not copy another driver's migrations: it renders these files with its
-- own types (python -m cairnflow.sql.reference --types ENGINE --into its migrations/) and
-- ships the results as ITS migration files. Never render them at import time: an applied
-- migration is checked against the checksum of its file, so a driver's migrations are frozen
-- files, and a later reference version arrives as a new numbered file.
--
-- Two kinds of placeholder:
--   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY INTEGER BIGINT TEXT BYTEA   types, filled by reference_migrations() (see TYPES);
--   {runs} {steps} {signals} {p}          the namespace, filled per store by the SQL layer from
--                                         its validated, quoted Tables (left as they are here).
--
-- Rules every engine keeps:
--   * times are BIGINT Unix nanoseconds written by the engine's clock (never a timestamp type:
--     session time zones and rounding would move them);
--   * payloads, outputs and progress are BYTEA made by the client's codec, returned byte for
--     byte (an engine that truncates or re-encodes them fails the kit);
--   * labels, DAG edges (parents, children) and errors are JSON text;
--   * the column names and meanings below are the SQL layer's: add columns if you must, never
--     rename or retype one.
--
-- The partial indexes match the SQL layer's predicates exactly, so only the hot rows are in
-- them. An engine without partial indexes (MySQL) indexes the whole column list instead and
-- leads each index with the status; the claim still stops after n rows of it.

CREATE TABLE {runs} (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,                          -- insertion order: listings, cursors
    id           TEXT   NOT NULL UNIQUE,
    workflow     TEXT   NOT NULL,
    queue        TEXT   NOT NULL,
    priority     INTEGER    NOT NULL DEFAULT 0,
    state        TEXT   NOT NULL,                   -- 'active', or the final status
    payload      BYTEA  NOT NULL,
    idem_key     TEXT,                              -- the idempotency key, kept for history
    active_key   TEXT,                              -- the key while unfinished, NULL after
    labels       TEXT   NOT NULL,                   -- JSON object of str to str
    steps_left   INTEGER    NOT NULL,                   -- steps not yet succeeded
    created_at   BIGINT NOT NULL,
    run_at       BIGINT NOT NULL,
    finished_at  BIGINT,
    error        TEXT                               -- JSON of the error that failed the run
);

-- An idempotency key is held by at most one unfinished run of a workflow: the unique index is
-- the guard (two enqueues racing on one key cannot both pass), and a run that ends sets its
-- active_key to NULL in the transaction that ends it.
CREATE UNIQUE INDEX "{p}runs_active_key" ON {runs} (workflow, active_key)
    WHERE active_key IS NOT NULL;
-- Listings, newest first: by workflow, by state, or neither (seq).
CREATE INDEX "{p}runs_workflow" ON {runs} (workflow, seq);
CREATE INDEX "{p}runs_state" ON {runs} (state, seq);

CREATE TABLE {steps} (
    id            TEXT   PRIMARY KEY,
    run_id        TEXT   NOT NULL,
    workflow      TEXT   NOT NULL,                  -- copied from the run: the claim filters on it
    queue         TEXT   NOT NULL,
    priority      INTEGER    NOT NULL,
    name          TEXT   NOT NULL,
    kind          TEXT   NOT NULL,                  -- task, sleep or wait
    position      INTEGER    NOT NULL,                  -- definition order
    parents       TEXT   NOT NULL,                  -- JSON list of step names
    children      TEXT   NOT NULL,                  -- JSON list of step names
    parents_left  INTEGER    NOT NULL,                  -- parents not yet succeeded; 0 makes it ready
    status        TEXT   NOT NULL,                  -- blocked, scheduled, ready, running, ...
    due_at        BIGINT,                           -- when a scheduled, sleeping or waiting step is due
    attempt       INTEGER    NOT NULL,                  -- claims so far
    failures      INTEGER    NOT NULL,
    reclaims      INTEGER    NOT NULL,                  -- takeovers of the current attempt
    lease_token   TEXT,                             -- the secret of the current lease
    lease_until   BIGINT,                           -- on the lease clock
    node          TEXT,                             -- the node of the latest claim
    signal_name   TEXT,                             -- what a waiting step waits for
    output        BYTEA,
    error         TEXT,
    progress      BYTEA,
    started_at    BIGINT,
    finished_at   BIGINT,
    heartbeat_at  BIGINT,
    -- Every per-run statement (fan-in, cancel, reads, claim inputs) leads with run_id.
    CONSTRAINT "{p}steps_run_name" UNIQUE (run_id, name)
);

-- The claim: "status = 'ready' ... ORDER BY priority DESC, due_at, id LIMIT n" reads this index
-- in order and stops after n rows (FOR UPDATE SKIP LOCKED where the engine locks rows).
CREATE INDEX "{p}steps_ready" ON {steps} (priority DESC, due_at, id) WHERE status = 'ready';
-- The reclaimer: "status = 'running' AND lease_until < ? ... ORDER BY lease_until".
CREATE INDEX "{p}steps_running" ON {steps} (lease_until) WHERE status = 'running';
-- Due work: delayed starts and retries, sleeps, wait deadlines, by due time. A step due later is
-- 'scheduled', not 'ready', so it never sits in the claim's index.
CREATE INDEX "{p}steps_due" ON {steps} (due_at)
    WHERE status IN ('scheduled', 'sleeping', 'waiting');

CREATE TABLE {signals} (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,                           -- arrival order: a wait takes the oldest
    run_id      TEXT   NOT NULL,
    name        TEXT   NOT NULL,
    payload     BYTEA  NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX "{p}signals_run" ON {signals} (run_id, name, seq);
