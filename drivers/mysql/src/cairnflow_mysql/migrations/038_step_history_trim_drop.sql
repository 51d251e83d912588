-- cairnflow on MySQL / MariaDB: the step history's trim runs its DELETE only when the run
-- holds more than its newest 100 rows (#20), file 1 of 2 (one statement a file, see 001): the
-- trigger of 031 goes, and 039 makes it again. IF EXISTS: safe to run again.
DROP TRIGGER IF EXISTS `{p}step_history`
