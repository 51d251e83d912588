-- The reference schema of cairnflow's SQL layer, version 14: the archive (Cap.ARCHIVE,
-- Cap.RETENTION, #16). Pruning moves each finished run and its steps here with INSERT ... SELECT
-- of the same columns, in the transaction that deletes them from runs and steps, so a run is in
-- exactly one place. No claim, outcome or reclaim reads these tables. The chunk to prune is read
-- from the runs_finished index of version 10 ("finished_at < ? ORDER BY finished_at LIMIT n").
CREATE TABLE {runs_archive} (
    seq          $bigint NOT NULL,                   -- the run's insertion order, as it was
    id           $text   NOT NULL,
    workflow     $text   NOT NULL,
    queue        $text   NOT NULL,
    state        $text   NOT NULL,                   -- the final status
    payload      $bytes  NOT NULL,
    idem_key     $text,
    labels       $text   NOT NULL,                   -- JSON object of str to str
    created_at   $bigint NOT NULL,
    run_at       $bigint NOT NULL,
    finished_at  $bigint NOT NULL,
    error        $text,                              -- JSON of the error that failed the run
    archived_at  $bigint,                            -- when the pruner moved it (Unix ns)
    CONSTRAINT "{p}runs_archive_pkey" PRIMARY KEY (id)
);
-- archived_runs: newest finish first, "ORDER BY finished_at DESC, id DESC LIMIT n" read backwards
-- (after a cursor: "finished_at <= ? AND (finished_at < ? OR id < ?)").
CREATE INDEX "{p}runs_archive_finished" ON {runs_archive} (finished_at, id);
CREATE TABLE {steps_archive} (
    run_id        $text   NOT NULL,
    position      $int    NOT NULL,                  -- definition order
    name          $text   NOT NULL,
    kind          $text   NOT NULL,
    status        $text   NOT NULL,
    parents       $text   NOT NULL,                  -- JSON list of step names
    attempt       $int    NOT NULL,
    failures      $int    NOT NULL,
    reclaims      $int    NOT NULL,
    output        $bytes,
    error         $text,
    node          $text,
    progress      $bytes,
    signal_name   $text,
    due_at        $bigint,
    started_at    $bigint,
    finished_at   $bigint,
    heartbeat_at  $bigint,
    -- A run's steps: one range of the primary key (archived_runs reads them by run).
    CONSTRAINT "{p}steps_archive_pkey" PRIMARY KEY (run_id, name)
);
