-- The reference schema of cairnflow's SQL layer, version 14: the archive (Cap.ARCHIVE,
-- Cap.RETENTION, #16). Pruning moves each finished run and its steps here with INSERT ... SELECT
-- of the same columns, in the transaction that deletes them from runs and steps, so a run is in
-- exactly one place. No claim, outcome or reclaim reads these tables. The chunk to prune is read
-- from the runs_finished index of version 10 ("finished_at < ? ORDER BY finished_at LIMIT n").
CREATE TABLE {runs_archive} (
    seq          BIGINT NOT NULL,                   -- the run's insertion order, as it was
    id           TEXT   NOT NULL,
    workflow     TEXT   NOT NULL,
    queue        TEXT   NOT NULL,
    state        TEXT   NOT NULL,                   -- the final status
    payload      BYTEA  NOT NULL,
    idem_key     TEXT,
    labels       TEXT   NOT NULL,                   -- JSON object of str to str
    created_at   BIGINT NOT NULL,
    run_at       BIGINT NOT NULL,
    finished_at  BIGINT NOT NULL,
    error        TEXT,                              -- JSON of the error that failed the run
    archived_at  BIGINT,                            -- when the pruner moved it (Unix ns)
    CONSTRAINT "{p}runs_archive_pkey" PRIMARY KEY (id)
);
-- archived_runs: newest finish first, "ORDER BY finished_at DESC, id DESC LIMIT n" read backwards
-- (after a cursor: "finished_at <= ? AND (finished_at < ? OR id < ?)").
CREATE INDEX "{p}runs_archive_finished" ON {runs_archive} (finished_at, id);
CREATE TABLE {steps_archive} (
    run_id        TEXT   NOT NULL,
    position      INTEGER    NOT NULL,                  -- definition order
    name          TEXT   NOT NULL,
    kind          TEXT   NOT NULL,
    status        TEXT   NOT NULL,
    parents       TEXT   NOT NULL,                  -- JSON list of step names
    attempt       INTEGER    NOT NULL,
    failures      INTEGER    NOT NULL,
    reclaims      INTEGER    NOT NULL,
    output        BYTEA,
    error         TEXT,
    node          TEXT,
    progress      BYTEA,
    signal_name   TEXT,
    due_at        BIGINT,
    started_at    BIGINT,
    finished_at   BIGINT,
    heartbeat_at  BIGINT,
    -- A run's steps: one range of the primary key (archived_runs reads them by run).
    CONSTRAINT "{p}steps_archive_pkey" PRIMARY KEY (run_id, name)
);
