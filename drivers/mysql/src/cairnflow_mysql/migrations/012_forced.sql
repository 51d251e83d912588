-- cairnflow on MySQL / MariaDB, forced runs (Cap.FORCE_RUN) (one statement, see 001).
-- force_run sets forced = 1 on every unfinished step of a run, and the claim lets such a step
-- through a paused queue or workflow ("s.forced = 1 OR <no pause>", docs/claim.md). No index:
-- the claim reads the column from the rows it visits through the claim index anyway. An
-- instant ADD COLUMN on MariaDB 10.3+ and MySQL 8.0.12+ (a constant default, at the end).
ALTER TABLE {steps} ADD COLUMN forced TINYINT NOT NULL DEFAULT 0
