-- The reference schema of cairnflow's SQL layer, version 11: servers (Cap.SERVERS, #17). One
-- heartbeat row per started client, updated by its primary key every third of a lease and
-- marked stopped when the client stops; listed and pruned by the seen_at index.
CREATE TABLE {servers} (
    node         $text     NOT NULL,
    host         $text     NOT NULL,
    pid          $bigint   NOT NULL,
    queues       $text     NOT NULL,                 -- JSON list of the queues it serves
    workers      $int      NOT NULL,
    version      $text     NOT NULL,                 -- its cairnflow's
    started_at   $bigint   NOT NULL,
    seen_at      $bigint   NOT NULL,                 -- its last heartbeat
    beat_every   $bigint   NOT NULL,                 -- its heartbeat interval, in nanoseconds
    stopped_at   $bigint,                            -- set by a clean stop
    CONSTRAINT "{p}servers_pkey" PRIMARY KEY (node)
);
CREATE INDEX "{p}servers_seen" ON {servers} (seen_at);
