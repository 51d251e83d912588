-- cairnflow on MySQL / MariaDB: the trigger that writes the runs' lifecycle events
-- (Cap.LIFECYCLE) (one statement, see 001). A run leaving 'active' writes run.<its state> for
-- the 'events' channel and, when it failed, one row for the 'on_failure' channel, each while a
-- subscription wants its workflow, in the transaction of the UPDATE that ends the run.
CREATE TRIGGER IF NOT EXISTS `{p}lifecycle_run` AFTER UPDATE ON {runs}
FOR EACH ROW
BEGIN
    IF OLD.state = 'active' AND NEW.state <> 'active' THEN
        INSERT INTO {lifecycle} (channel, run_id, workflow, step, attempt, kind, node, at, error)
        SELECT DISTINCT channel, NEW.id, NEW.workflow, NULL, 0, CONCAT('run.', NEW.state), NULL,
            CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) * 1000, NEW.error
        FROM {lifecycle_subs}
        WHERE workflow IN (NEW.workflow, '')
            AND (channel = 'events' OR (channel = 'on_failure' AND NEW.state = 'failed'));
    END IF;
END
