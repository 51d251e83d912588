-- The reference schema of cairnflow's SQL layer, version 2: schedules (cron) and the ticks they
-- recorded (Cap.CRON and the schedule capabilities). Times are BIGINT Unix nanoseconds, as in
-- version 1. A schedule's id is derived from its workflow and name
-- (cairnflow.schedule.schedule_id), so every node saves the same row.

CREATE TABLE {schedules} (
    id           TEXT   PRIMARY KEY,
    workflow     TEXT   NOT NULL,
    name         TEXT   NOT NULL,
    spec         TEXT   NOT NULL,                   -- the declaration as JSON: any node can fire it
    fingerprint  TEXT   NOT NULL,                   -- what decides the ticks: a change moves next_fire
    next_fire    BIGINT NOT NULL,                   -- the stored next fire every pass is judged against
    paused       BOOLEAN   NOT NULL DEFAULT FALSE,
    resumed_at   BIGINT,                            -- ticks due before the last resume never fire
    last_fire    BIGINT,                            -- the tick time of the last fired tick
    last_run_id  TEXT,                              -- its run (overlap: is it finished?)
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
-- Due schedules: "workflow IN (...) AND next_fire <= ? ORDER BY next_fire", led by workflow so a
-- client reads only its own workflows' due rows.
CREATE INDEX "{p}schedules_due" ON {schedules} (workflow, next_fire);

-- One row per (schedule, tick time): the primary key is what makes a tick fire once across every
-- node (the second insert of a tick is refused, and its whole transaction with it). It also
-- serves the history, newest first.
CREATE TABLE {ticks} (
    schedule_id  TEXT   NOT NULL,
    at           BIGINT NOT NULL,                   -- the tick's instant (a trigger: when it was)
    outcome      TEXT   NOT NULL,                   -- fired, skipped or misfired
    reason       TEXT   NOT NULL,
    node         TEXT   NOT NULL,                   -- who recorded it
    recorded_at  BIGINT NOT NULL,
    run_id       TEXT,                              -- the run a fired tick started
    CONSTRAINT "{p}ticks_pkey" PRIMARY KEY (schedule_id, at)
);
-- Pruning: "recorded_at < ? ORDER BY recorded_at LIMIT n", oldest first.
CREATE INDEX "{p}ticks_recorded" ON {ticks} (recorded_at);
