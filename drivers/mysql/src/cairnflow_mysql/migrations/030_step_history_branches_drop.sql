-- cairnflow on MySQL / MariaDB: the step history of failure paths (Cap.WAIT_BRANCH,
-- Cap.COMPENSATION, #17), file 1 of 2 (one statement a file, see 001): the trigger of 025 goes,
-- and 030 makes it again knowing two more step statuses. IF EXISTS: safe to run again.
DROP TRIGGER IF EXISTS `{p}step_history`
