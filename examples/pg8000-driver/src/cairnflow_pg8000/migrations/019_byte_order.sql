-- cairnflow-pg8000, version 19, a migration of this driver's own (not the reference's): every
-- text column compares byte for byte (COLLATE "C"), as cairnflow-postgres's 027_byte_order does
-- and as the conformance kit's README asks of a driver whose engine gives text a collation.
-- Versions 1-18 were rendered from the reference schema with plain TEXT, which takes the
-- database's default collation: under en_US.UTF-8, an ICU locale, or any locale but C and
-- POSIX, every index walk over ids, names, queues and keys compared through strcoll() or ICU,
-- and the SQL layer's lock orders, which follow Python's sorted() (code points), could differ
-- from the order the database locked rows in. Equality is unchanged; an ORDER BY or a range
-- over these columns follows code points now, whatever the database's locale.
--
-- Every text column, not only the indexed ones: the planner carries an equality from one
-- column to another only within one collation. The run labels' name and value are "C" since
-- the reference's 010; the migrations ledger is the migrator's own. On an existing database
-- this rebuilds the indexes on these columns under the ALTERs' exclusive locks (as long as a
-- REINDEX of runs and steps); the heap is not rewritten. The reference schema defines no
-- trigger, so none reads these columns and nothing is dropped first.

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

-- ALTER COLUMN TYPE drops the columns' statistics: a table holding rows is analyzed again. Only
-- a table with rows: ANALYZE of an empty one records it as empty, where the planner assumes ten
-- pages of a table never analyzed (a new namespace's).
DO '
BEGIN
    IF EXISTS (SELECT 1 FROM {runs}) THEN ANALYZE {runs}; END IF;
    IF EXISTS (SELECT 1 FROM {steps}) THEN ANALYZE {steps}; END IF;
    IF EXISTS (SELECT 1 FROM {step_history}) THEN ANALYZE {step_history}; END IF;
    IF EXISTS (SELECT 1 FROM {run_labels}) THEN ANALYZE {run_labels}; END IF;
    IF EXISTS (SELECT 1 FROM {runs_archive}) THEN ANALYZE {runs_archive}; END IF;
    IF EXISTS (SELECT 1 FROM {steps_archive}) THEN ANALYZE {steps_archive}; END IF;
    IF EXISTS (SELECT 1 FROM {ticks}) THEN ANALYZE {ticks}; END IF;
END';
