-- The reference schema of cairnflow's SQL layer, version 15: run headers (Cap.HEADERS,
-- #17/#19): a few short strings kept with the run (a trace context, a tenant) and read by
-- every step as ctx.headers, as one JSON object in text (as labels). NULL for a run without
-- any (most runs), so an enqueue without headers writes what it did. Read only with the run's
-- row (the claim's run columns, get_run): never filtered, no index.

ALTER TABLE {runs} ADD COLUMN headers $text;
ALTER TABLE {runs_archive} ADD COLUMN headers $text;  -- an archived run keeps its headers
