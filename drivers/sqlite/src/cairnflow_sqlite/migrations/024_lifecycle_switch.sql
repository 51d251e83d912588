-- cairnflow on SQLite, schema version 24: the lifecycle triggers of 021 exist only while a
-- subscription wants them (#20). Without a subscriber each looked up lifecycle_subs at every
-- transition of a step or end of a run: a quarter of W2's throughput (measured in
-- cairnflow_sqlite/_lifecycle.py, which holds their text now). The store creates them in the
-- transaction that records a subscription, drops them in the one that removes the last, and
-- makes them match the subscriptions after every migrate, so a store with subscriptions has
-- them back as soon as this migration's migrate returns.

DROP TRIGGER IF EXISTS "{p}lifecycle_step";
DROP TRIGGER IF EXISTS "{p}lifecycle_run";
