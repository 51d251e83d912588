-- cairnflow on PostgreSQL, schema version 27: every text column compares byte for byte
-- (COLLATE "C"), as MySQL's utf8mb4_bin, SQLite's BINARY and the memory store do (#20). They
-- held the database's default collation: on a database made with en_US.UTF-8, or any locale
-- but C and POSIX (C.UTF-8 included), every index walk over ids, names, queues, states and keys
-- compared through strcoll() or ICU, where "C" compares bytes. These are identifiers: their
-- order is code point order on every other engine, and now here too, whatever the database's
-- locale. Equality is unchanged (every collation here is deterministic); an ORDER BY of these
-- columns, or a range over them, follows code points on databases of other locales.
--
-- Every text column, not only those indexes order by: a comparison of two columns of
-- different collations is made in one of them, and the planner carries an equality from one
-- column to another (a claim's workflow to the workflow pauses' name) only within one
-- collation. The labels' name and value are "C" since 010; the migrations ledger is the
-- migrator's own.
--
-- Measured (local server, 2026-12-05). A batch's run and step statements alone, 500 runs, 40
-- batches of each variant in turn, the indexed columns altered: 61,313 -> 70,968 runs/s on a
-- C.UTF-8 database, 58,836 -> 67,299 on an ICU en-US one. End to end (bench/collation.py, a
-- namespace at 26 against one at 27, alternating): enqueue_many of 500 27.5 -> 18.2 us a run
-- and a claim of 8 with its success 270.8 -> 235.8 us a step on an en_US.UTF-8 cluster, 19.5
-- -> 18.7 and 246.2 -> 243.7 on C.UTF-8. A run writes nine index entries at enqueue and more
-- at each update (none is HOT), each a descent of a tree of such comparisons.
--
-- On an existing database this rebuilds every index on these tables but those on numbers
-- alone, under the ALTERs' exclusive locks: as long as a REINDEX of runs and steps, during which
-- nothing is claimed or written. The heap is not rewritten. ALTER COLUMN TYPE drops the
-- columns' statistics, so a table holding rows is analyzed again at the end.

-- A column a trigger's WHEN reads cannot change type: the three triggers on steps and runs
-- are dropped first and made again after, as 020 and 021 made them.
DROP TRIGGER "{p}step_history" ON {steps};
DROP TRIGGER "{p}lifecycle_step" ON {steps};
DROP TRIGGER "{p}lifecycle_run" ON {runs};

ALTER TABLE {runs}
    ALTER COLUMN id TYPE TEXT COLLATE "C",
    ALTER COLUMN workflow TYPE TEXT COLLATE "C",
    ALTER COLUMN queue TYPE TEXT COLLATE "C",
    ALTER COLUMN state TYPE TEXT COLLATE "C",
    ALTER COLUMN idem_key TYPE TEXT COLLATE "C",
    ALTER COLUMN active_key TYPE TEXT COLLATE "C",
    ALTER COLUMN labels TYPE TEXT COLLATE "C",
    ALTER COLUMN error TYPE TEXT COLLATE "C",
    ALTER COLUMN fifo_key TYPE TEXT COLLATE "C",
    ALTER COLUMN headers TYPE TEXT COLLATE "C",
    ALTER COLUMN tenant TYPE TEXT COLLATE "C";
ALTER TABLE {steps}
    ALTER COLUMN id TYPE TEXT COLLATE "C",
    ALTER COLUMN run_id TYPE TEXT COLLATE "C",
    ALTER COLUMN workflow TYPE TEXT COLLATE "C",
    ALTER COLUMN queue TYPE TEXT COLLATE "C",
    ALTER COLUMN name TYPE TEXT COLLATE "C",
    ALTER COLUMN kind TYPE TEXT COLLATE "C",
    ALTER COLUMN parents TYPE TEXT COLLATE "C",
    ALTER COLUMN children TYPE TEXT COLLATE "C",
    ALTER COLUMN status TYPE TEXT COLLATE "C",
    ALTER COLUMN lease_token TYPE TEXT COLLATE "C",
    ALTER COLUMN node TYPE TEXT COLLATE "C",
    ALTER COLUMN signal_name TYPE TEXT COLLATE "C",
    ALTER COLUMN error TYPE TEXT COLLATE "C",
    ALTER COLUMN concurrency_key TYPE TEXT COLLATE "C";
ALTER TABLE {step_history}
    ALTER COLUMN run_id TYPE TEXT COLLATE "C",
    ALTER COLUMN step TYPE TEXT COLLATE "C",
    ALTER COLUMN event TYPE TEXT COLLATE "C",
    ALTER COLUMN node TYPE TEXT COLLATE "C";
ALTER TABLE {run_labels}
    ALTER COLUMN run_id TYPE TEXT COLLATE "C";
ALTER TABLE {errors}
    ALTER COLUMN run_id TYPE TEXT COLLATE "C",
    ALTER COLUMN step TYPE TEXT COLLATE "C",
    ALTER COLUMN node TYPE TEXT COLLATE "C",
    ALTER COLUMN error TYPE TEXT COLLATE "C";
ALTER TABLE {signals}
    ALTER COLUMN run_id TYPE TEXT COLLATE "C",
    ALTER COLUMN name TYPE TEXT COLLATE "C";
ALTER TABLE {journal}
    ALTER COLUMN scope TYPE TEXT COLLATE "C",
    ALTER COLUMN step TYPE TEXT COLLATE "C",
    ALTER COLUMN name TYPE TEXT COLLATE "C";
ALTER TABLE {runs_archive}
    ALTER COLUMN id TYPE TEXT COLLATE "C",
    ALTER COLUMN workflow TYPE TEXT COLLATE "C",
    ALTER COLUMN queue TYPE TEXT COLLATE "C",
    ALTER COLUMN state TYPE TEXT COLLATE "C",
    ALTER COLUMN idem_key TYPE TEXT COLLATE "C",
    ALTER COLUMN labels TYPE TEXT COLLATE "C",
    ALTER COLUMN error TYPE TEXT COLLATE "C",
    ALTER COLUMN headers TYPE TEXT COLLATE "C",
    ALTER COLUMN tenant TYPE TEXT COLLATE "C";
ALTER TABLE {steps_archive}
    ALTER COLUMN run_id TYPE TEXT COLLATE "C",
    ALTER COLUMN name TYPE TEXT COLLATE "C",
    ALTER COLUMN kind TYPE TEXT COLLATE "C",
    ALTER COLUMN status TYPE TEXT COLLATE "C",
    ALTER COLUMN parents TYPE TEXT COLLATE "C",
    ALTER COLUMN error TYPE TEXT COLLATE "C",
    ALTER COLUMN node TYPE TEXT COLLATE "C",
    ALTER COLUMN signal_name TYPE TEXT COLLATE "C";
ALTER TABLE {schedules}
    ALTER COLUMN id TYPE TEXT COLLATE "C",
    ALTER COLUMN workflow TYPE TEXT COLLATE "C",
    ALTER COLUMN name TYPE TEXT COLLATE "C",
    ALTER COLUMN spec TYPE TEXT COLLATE "C",
    ALTER COLUMN fingerprint TYPE TEXT COLLATE "C",
    ALTER COLUMN last_run_id TYPE TEXT COLLATE "C";
ALTER TABLE {ticks}
    ALTER COLUMN schedule_id TYPE TEXT COLLATE "C",
    ALTER COLUMN outcome TYPE TEXT COLLATE "C",
    ALTER COLUMN reason TYPE TEXT COLLATE "C",
    ALTER COLUMN node TYPE TEXT COLLATE "C",
    ALTER COLUMN run_id TYPE TEXT COLLATE "C";
ALTER TABLE {leaders}
    ALTER COLUMN role TYPE TEXT COLLATE "C",
    ALTER COLUMN node TYPE TEXT COLLATE "C";
ALTER TABLE {pauses}
    ALTER COLUMN kind TYPE TEXT COLLATE "C",
    ALTER COLUMN name TYPE TEXT COLLATE "C";
ALTER TABLE {limits}
    ALTER COLUMN kind TYPE TEXT COLLATE "C",
    ALTER COLUMN name TYPE TEXT COLLATE "C",
    ALTER COLUMN head TYPE TEXT COLLATE "C";
ALTER TABLE {locks}
    ALTER COLUMN name TYPE TEXT COLLATE "C",
    ALTER COLUMN token TYPE TEXT COLLATE "C";
ALTER TABLE {servers}
    ALTER COLUMN node TYPE TEXT COLLATE "C",
    ALTER COLUMN host TYPE TEXT COLLATE "C",
    ALTER COLUMN queues TYPE TEXT COLLATE "C",
    ALTER COLUMN version TYPE TEXT COLLATE "C";
ALTER TABLE {lifecycle}
    ALTER COLUMN channel TYPE TEXT COLLATE "C",
    ALTER COLUMN run_id TYPE TEXT COLLATE "C",
    ALTER COLUMN workflow TYPE TEXT COLLATE "C",
    ALTER COLUMN step TYPE TEXT COLLATE "C",
    ALTER COLUMN kind TYPE TEXT COLLATE "C",
    ALTER COLUMN node TYPE TEXT COLLATE "C",
    ALTER COLUMN error TYPE TEXT COLLATE "C",
    ALTER COLUMN token TYPE TEXT COLLATE "C";
ALTER TABLE {lifecycle_subs}
    ALTER COLUMN channel TYPE TEXT COLLATE "C",
    ALTER COLUMN workflow TYPE TEXT COLLATE "C";

CREATE TRIGGER "{p}step_history" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN (OLD.status <> NEW.status
    AND NOT (NEW.status = 'ready' AND OLD.status IN ('blocked', 'scheduled', 'skipped'))
    AND NOT (NEW.status = 'blocked' AND OLD.status = 'skipped'))
EXECUTE FUNCTION {schema}"{p}record_step"();
CREATE TRIGGER "{p}lifecycle_step" AFTER UPDATE OF status ON {steps}
FOR EACH ROW
WHEN (OLD.status <> NEW.status
    AND (NEW.status IN ('running', 'succeeded', 'failed', 'cancelled')
        OR (OLD.status = 'running'
            AND (NEW.failures > OLD.failures OR NEW.reclaims > OLD.reclaims))))
EXECUTE FUNCTION {schema}"{p}lifecycle_step"();
CREATE TRIGGER "{p}lifecycle_run" AFTER UPDATE OF state ON {runs}
FOR EACH ROW
WHEN (OLD.state = 'active' AND NEW.state <> 'active')
EXECUTE FUNCTION {schema}"{p}lifecycle_run"();

-- Only a table with rows: ANALYZE of an empty one records it as empty, where the planner
-- assumes ten pages of a table never analyzed (a new namespace's).
DO '
BEGIN
    IF EXISTS (SELECT 1 FROM {runs}) THEN ANALYZE {runs}; END IF;
    IF EXISTS (SELECT 1 FROM {steps}) THEN ANALYZE {steps}; END IF;
    IF EXISTS (SELECT 1 FROM {step_history}) THEN ANALYZE {step_history}; END IF;
    IF EXISTS (SELECT 1 FROM {run_labels}) THEN ANALYZE {run_labels}; END IF;
    IF EXISTS (SELECT 1 FROM {runs_archive}) THEN ANALYZE {runs_archive}; END IF;
    IF EXISTS (SELECT 1 FROM {steps_archive}) THEN ANALYZE {steps_archive}; END IF;
    IF EXISTS (SELECT 1 FROM {ticks}) THEN ANALYZE {ticks}; END IF;
    IF EXISTS (SELECT 1 FROM {lifecycle}) THEN ANALYZE {lifecycle}; END IF;
END';
