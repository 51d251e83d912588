-- cairnflow on MySQL / MariaDB: the run's tenant (Cap.TENANT) (one statement, see 001): set at
-- enqueue (or by the schedule that fired the run), NULL for a run without one, so an enqueue
-- without a tenant writes what it did. A tenant is a name (at most 128 characters, binary
-- collation as every name). Filtered on by list_runs (r.tenant = ?): the index serves one
-- tenant's runs newest first (seq descending); no partial indexes here, so runs without a
-- tenant are in it under NULL, never read by a tenant's listing. Per-tenant concurrency keys
-- and rate buckets need no column: their names are composed at enqueue.
ALTER TABLE {runs}
    ADD COLUMN tenant VARCHAR(128) NULL,
    ADD KEY `{p}runs_tenant` (tenant, seq)
