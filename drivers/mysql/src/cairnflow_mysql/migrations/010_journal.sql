-- cairnflow on MySQL / MariaDB, the journal (Cap.JOURNAL) (one statement, see 001).
-- One row per memoised result; a step's rows have its run's id as scope (a run's rows are one
-- range of the key), a standalone journal's any scope and the step ''. Never updated: the first
-- record of a key wins. Every statement is by the primary key (4 * 3 * 128 bytes of
-- utf8mb4, within InnoDB's 3072).
CREATE TABLE IF NOT EXISTS {journal} (
    scope        VARCHAR(128)  NOT NULL,                  -- a run id, or an application's scope
    step         VARCHAR(128)  NOT NULL,                  -- the step's name; '' outside a step
    name         VARCHAR(128)  NOT NULL,                  -- the memo's name
    value        LONGBLOB      NOT NULL,                  -- the result, by the client's codec
    recorded_at  BIGINT        NOT NULL,
    PRIMARY KEY (scope, step, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
