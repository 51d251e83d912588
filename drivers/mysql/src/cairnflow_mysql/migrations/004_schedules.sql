-- cairnflow on MySQL / MariaDB, schedules, file 1 of 2: schedules (cron) (one statement, see 001).
-- A schedule's id is derived from its workflow and name (cairnflow.schedule.schedule_id:
-- 'sch_' and 32 hex digits), so every node saves the same row. Times are BIGINT nanoseconds.
CREATE TABLE IF NOT EXISTS {schedules} (
    id           VARCHAR(64)   NOT NULL,
    workflow     VARCHAR(128)  NOT NULL,
    name         VARCHAR(128)  NOT NULL,
    spec         LONGTEXT      NOT NULL,                  -- the declaration as JSON: any node can fire it
    fingerprint  VARCHAR(128)  NOT NULL,                  -- what decides the ticks: a change moves next_fire
    next_fire    BIGINT        NOT NULL,                  -- the stored next fire every pass is judged against
    paused       BOOLEAN       NOT NULL DEFAULT FALSE,
    resumed_at   BIGINT,                                  -- ticks due before the last resume never fire
    last_fire    BIGINT,                                  -- the tick time of the last fired tick
    last_run_id  VARCHAR(64),                             -- its run (overlap: is it finished?)
    created_at   BIGINT        NOT NULL,
    updated_at   BIGINT        NOT NULL,
    PRIMARY KEY (id),
    -- due_schedules: "workflow IN (...) AND next_fire <= ? ORDER BY next_fire". Led by
    -- workflow, so a client reads only its own workflows' due rows: a schedule of a workflow no
    -- client serves any more stays due forever, and in an index led by next_fire it would sit
    -- ahead of every pass. It is a plain read (fire_ticks locks one schedule by id).
    KEY `{p}schedules_due` (workflow, next_fire)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
