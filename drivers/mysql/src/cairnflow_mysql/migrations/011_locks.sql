-- cairnflow on MySQL / MariaDB, named locks (Cap.LOCKS) (one statement, see 001).
-- One row per named lock taken and not released; a take locks it (SELECT ... FOR UPDATE), and
-- an expired row is free for the next taker, who writes over it. A row, not GET_LOCK(): a
-- session lock ends with its connection, so a dropped connection would release it.
CREATE TABLE IF NOT EXISTS {locks} (
    name         VARCHAR(128)  NOT NULL,
    token        CHAR(32)      NOT NULL,                  -- the holder's secret
    taken_at     BIGINT        NOT NULL,
    expires_at   BIGINT        NOT NULL,                  -- held while after the taker's now
    -- One holder per name: of two first takers inserting at once, the second is refused with
    -- a duplicate key and takes again, against the row the first wrote.
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin
