-- cairnflow on MySQL / MariaDB: an archived run keeps its headers (Cap.HEADERS, Cap.ARCHIVE):
-- the archive copies the run's columns as they are (one statement, see 001).
ALTER TABLE {runs_archive} ADD COLUMN headers LONGTEXT NULL
