-- cairnflow on MySQL / MariaDB: an archived run keeps its tenant (Cap.TENANT, Cap.ARCHIVE):
-- the archive copies the run's columns as they are (one statement, see 001).
ALTER TABLE {runs_archive} ADD COLUMN tenant VARCHAR(128) NULL
