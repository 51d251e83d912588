-- cairnflow on MySQL / MariaDB: the forced ready steps of each queue (Cap.FORCE_RUN) (one
-- statement, see 001). A claim of a paused queue first asks whether one of its forced steps is
-- ready (the queue's gate, evaluated once, docs/claim.md, 2). There are no partial indexes: a
-- virtual column holds the queue of a forced ready step and NULL for every other, and its
-- index answers in one probe where the claim walked every ready row of the paused queue. An
-- update that leaves the column NULL (every claim and outcome of an unforced step) leaves the
-- index alone.
ALTER TABLE {steps}
    ADD COLUMN forced_ready VARCHAR(128)
        AS (CASE WHEN forced = 1 AND status = 'ready' THEN queue END) VIRTUAL,
    ADD INDEX `{p}steps_forced_ready` (forced_ready)
