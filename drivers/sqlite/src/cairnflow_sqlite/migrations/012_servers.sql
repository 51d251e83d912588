-- cairnflow on SQLite, schema version 9: servers (Cap.SERVERS, #17). One
-- heartbeat row per started client, updated by its primary key every third of a lease and
-- marked stopped when the client stops; listed and pruned by the seen_at index.
CREATE TABLE {servers} (
    node         TEXT     NOT NULL,
    host         TEXT     NOT NULL,
    pid          INTEGER   NOT NULL,
    queues       TEXT     NOT NULL,                 -- JSON list of the queues it serves
    workers      INTEGER      NOT NULL,
    version      TEXT     NOT NULL,                 -- its cairnflow's
    started_at   INTEGER   NOT NULL,
    seen_at      INTEGER   NOT NULL,                 -- its last heartbeat
    beat_every   INTEGER   NOT NULL,                 -- its heartbeat interval, in nanoseconds
    stopped_at   INTEGER,                            -- set by a clean stop
    CONSTRAINT "{p}servers_pkey" PRIMARY KEY (node)
);
CREATE INDEX "{p}servers_seen" ON {servers} (seen_at);
