-- cairnflow on SQLite, schema version 1: runs, their steps, and signals kept for their waits.
-- Every time is an INTEGER of Unix nanoseconds; payloads, outputs and progress are BLOBs made
-- by the client's codec (JSON by default).

CREATE TABLE {runs} (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,  -- insertion order: listings, cursors
    id           TEXT    NOT NULL UNIQUE,
    workflow     TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    state        TEXT    NOT NULL,                   -- 'active', or the final status
    payload      BLOB    NOT NULL,
    idem_key     TEXT,                               -- the idempotency key, kept for history
    active_key   TEXT,                               -- the key while unfinished, NULL after
    labels       TEXT    NOT NULL,                   -- JSON object of str to str
    steps_left   INTEGER NOT NULL,                   -- steps not yet succeeded
    created_at   INTEGER NOT NULL,
    run_at       INTEGER NOT NULL,
    finished_at  INTEGER,
    error        TEXT                                -- JSON of the error that failed the run
);

-- An idempotency key is held by at most one unfinished run of a workflow: finished runs have
-- active_key NULL, and NULLs never collide.
CREATE UNIQUE INDEX "{p}runs_active_key" ON {runs} (workflow, active_key);
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
    due_at        INTEGER,                           -- when a scheduled, sleeping or waiting step is due
    attempt       INTEGER NOT NULL,                  -- claims so far
    failures      INTEGER NOT NULL,
    reclaims      INTEGER NOT NULL,                  -- takeovers of the current attempt
    lease_token   TEXT,                              -- the secret of the current lease
    lease_until   INTEGER,                           -- on the lease clock
    node          TEXT,                              -- the node of the latest claim
    signal_name   TEXT,                              -- what a waiting step waits for
    output        BLOB,
    error         TEXT,
    progress      BLOB,
    started_at    INTEGER,
    finished_at   INTEGER,
    heartbeat_at  INTEGER,
    UNIQUE (run_id, name)
);

-- The claim reads ready steps most urgent first: the index holds only ready rows, in that order.
CREATE INDEX "{p}steps_ready" ON {steps} (priority DESC, due_at, id) WHERE status = 'ready';
-- The reclaimer reads running steps by lease end.
CREATE INDEX "{p}steps_running" ON {steps} (lease_until) WHERE status = 'running';
-- Housekeeping reads what falls due (delayed starts and retries, sleeps, wait deadlines) by
-- due time. Steps due later are 'scheduled', not 'ready', so they never sit in the claim's index.
CREATE INDEX "{p}steps_due" ON {steps} (due_at) WHERE status IN ('scheduled', 'sleeping', 'waiting');

CREATE TABLE {signals} (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,   -- arrival order: a wait takes the oldest
    run_id      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX "{p}signals_run" ON {signals} (run_id, name, seq);
