-- The reference schema of cairnflow's SQL layer, version 2: schedules (cron) and the ticks they
-- recorded (Cap.CRON and the schedule capabilities). Times are $bigint Unix nanoseconds, as in
-- version 1. A schedule's id is derived from its workflow and name
-- (cairnflow.schedule.schedule_id), so every node saves the same row.

CREATE TABLE {schedules} (
    id           $text   PRIMARY KEY,
    workflow     $text   NOT NULL,
    name         $text   NOT NULL,
    spec         $text   NOT NULL,                   -- the declaration as JSON: any node can fire it
    fingerprint  $text   NOT NULL,                   -- what decides the ticks: a change moves next_fire
    next_fire    $bigint NOT NULL,                   -- the stored next fire every pass is judged against
    paused       $bool   NOT NULL DEFAULT $false,
    resumed_at   $bigint,                            -- ticks due before the last resume never fire
    last_fire    $bigint,                            -- the tick time of the last fired tick
    last_run_id  $text,                              -- its run (overlap: is it finished?)
    created_at   $bigint NOT NULL,
    updated_at   $bigint NOT NULL
);
-- Due schedules: "workflow IN (...) AND next_fire <= ? ORDER BY next_fire", led by workflow so a
-- client reads only its own workflows' due rows.
CREATE INDEX "{p}schedules_due" ON {schedules} (workflow, next_fire);

-- One row per (schedule, tick time): the primary key is what makes a tick fire once across every
-- node (the second insert of a tick is refused, and its whole transaction with it). It also
-- serves the history, newest first.
CREATE TABLE {ticks} (
    schedule_id  $text   NOT NULL,
    at           $bigint NOT NULL,                   -- the tick's instant (a trigger: when it was)
    outcome      $text   NOT NULL,                   -- fired, skipped or misfired
    reason       $text   NOT NULL,
    node         $text   NOT NULL,                   -- who recorded it
    recorded_at  $bigint NOT NULL,
    run_id       $text,                              -- the run a fired tick started
    CONSTRAINT "{p}ticks_pkey" PRIMARY KEY (schedule_id, at)
);
-- Pruning: "recorded_at < ? ORDER BY recorded_at LIMIT n", oldest first.
CREATE INDEX "{p}ticks_recorded" ON {ticks} (recorded_at);
