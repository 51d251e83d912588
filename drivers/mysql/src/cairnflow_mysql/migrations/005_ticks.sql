-- cairnflow on MySQL / MariaDB, schedules, file 2 of 2: the ticks schedules recorded (one
-- statement, see 001).
CREATE TABLE IF NOT EXISTS {ticks} (
    schedule_id  VARCHAR(64)   NOT NULL,
    at           BIGINT        NOT NULL,                  -- the tick's instant (a trigger: when it was)
    outcome      VARCHAR(16)   NOT NULL,                  -- fired, skipped or misfired
    reason       VARCHAR(32)   NOT NULL,
    node         VARCHAR(255)  NOT NULL,                  -- who recorded it
    recorded_at  BIGINT        NOT NULL,
    run_id       VARCHAR(64),                             -- the run a fired tick started
    -- One row per (schedule, tick time): the key that makes a tick fire once across every node
    -- (the second insert is refused with a duplicate key, and its whole fire_ticks with it).
    -- It also serves the history (newest first) and "is there a newer tick?", and pruning
    -- deletes by it alone: a DELETE over a range of a secondary index takes gap locks.
    PRIMARY KEY (schedule_id, at),
    -- prune_ticks picks what to delete by a plain read of this index, oldest first.
    KEY `{p}ticks_recorded` (recorded_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
