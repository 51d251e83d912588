-- The reference schema of cairnflow's SQL layer, version 7: durable step state (Cap.JOURNAL,
-- Cap.LOCKS). Every statement on these tables is by primary key: a memo's probe and record, a
-- lock's take, extension and release.

-- One row per memoised result; a step's rows have its run's id as scope (a run's rows are
-- one range of the key), a standalone journal's any scope and the step ''. Never updated:
-- the first record of a key wins.
CREATE TABLE {journal} (
    scope        TEXT    NOT NULL,                  -- a run id, or an application's scope
    step         TEXT    NOT NULL,                  -- the step's name; '' outside a step
    name         TEXT    NOT NULL,                  -- the memo's name
    value        BYTEA   NOT NULL,                  -- the result, by the client's codec
    recorded_at  BIGINT  NOT NULL,
    CONSTRAINT "{p}journal_pkey" PRIMARY KEY (scope, step, name)
);

-- One row per named lock taken and not released; an expired row is free for the next taker,
-- who writes over it. A row, not a session lock: a dropped connection releases nothing.
CREATE TABLE {locks} (
    name         TEXT    NOT NULL,
    token        TEXT    NOT NULL,                  -- the holder's secret
    taken_at     BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,                  -- held while after the taker's now
    CONSTRAINT "{p}locks_pkey" PRIMARY KEY (name)
);
