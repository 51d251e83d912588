-- The reference schema of cairnflow's SQL layer, version 8: forced runs (Cap.FORCE_RUN).
-- force_run sets forced = 1 on every unfinished step of a run, and the claim lets such a step
-- through a paused queue or workflow ("s.forced = 1 OR <no pause>", docs/claim.md). No index:
-- the claim reads the column from the rows it visits through the ready index anyway. A
-- constant default adds the column without rewriting the table.

ALTER TABLE {steps} ADD COLUMN forced $int NOT NULL DEFAULT 0;
