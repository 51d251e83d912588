-- The reference schema of cairnflow's SQL layer, version 17: the run's tenant (Cap.TENANT):
-- set at enqueue (or by the schedule that fired the run), NULL for a run without one, so an
-- enqueue without a tenant writes what it did. Filtered on by list_runs (r.tenant = ?): the
-- index serves one tenant's runs newest first (seq descending) and holds only the runs that
-- have a tenant. Per-tenant concurrency keys and rate buckets need no column: their names
-- are composed at enqueue (the tenant, U+001F, the key) and counted as any other.

ALTER TABLE {runs} ADD COLUMN tenant $text;
CREATE INDEX "{p}runs_tenant" ON {runs} (tenant, seq) WHERE tenant IS NOT NULL;
ALTER TABLE {runs_archive} ADD COLUMN tenant $text;  -- an archived run keeps its tenant
