-- cairnflow on SQLite, schema version 3: schedules (cron) and the ticks they recorded.
-- Every time is an INTEGER of Unix nanoseconds, as in 001. A schedule's id is derived from its
-- workflow and name (cairnflow.schedule.schedule_id), so every node saves the same row.

CREATE TABLE {schedules} (
    id           TEXT    PRIMARY KEY,
    workflow     TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    spec         TEXT    NOT NULL,                   -- the declaration as JSON: any node can fire it
    fingerprint  TEXT    NOT NULL,                   -- what decides the ticks: a change moves next_fire
    next_fire    INTEGER NOT NULL,                   -- the stored next fire every pass is judged against
    paused       INTEGER NOT NULL DEFAULT 0,
    resumed_at   INTEGER,                            -- ticks due before the last resume never fire
    last_fire    INTEGER,                            -- the tick time of the last fired tick
    last_run_id  TEXT,                               -- its run (overlap: is it finished?)
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
-- due_schedules: "workflow IN (...) AND next_fire <= ? ORDER BY next_fire". Led by workflow, so
-- a client reads only its own workflows' due rows: a schedule of a workflow no client serves
-- any more stays due forever, and in an index led by next_fire it would sit ahead of every
-- pass. The sort that follows is over due rows only.
CREATE INDEX "{p}schedules_due" ON {schedules} (workflow, next_fire);

-- One row per (schedule, tick time): the primary key is what makes a tick fire once across
-- every node (the second insert of a tick is refused, and its whole fire_ticks with it). It
-- also serves the history, newest first (read backwards), and "is there a newer tick?".
CREATE TABLE {ticks} (
    schedule_id  TEXT    NOT NULL,
    at           INTEGER NOT NULL,                   -- the tick's instant (a trigger: when it was)
    outcome      TEXT    NOT NULL,                   -- fired, skipped or misfired
    reason       TEXT    NOT NULL,
    node         TEXT    NOT NULL,                   -- who recorded it
    recorded_at  INTEGER NOT NULL,
    run_id       TEXT,                               -- the run a fired tick started
    PRIMARY KEY (schedule_id, at)
);
-- prune_ticks: "recorded_at < ? ORDER BY recorded_at LIMIT n", oldest first, stops after n.
CREATE INDEX "{p}ticks_recorded" ON {ticks} (recorded_at);
