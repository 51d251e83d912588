-- cairnflow on PostgreSQL, schema version 8: rate limits (Cap.RATE_LIMIT, docs/claim.md, 5).
-- A bucket is a row of limits (kind 'rate' for a named bucket, 'queue-rate' for a queue's):
-- its theoretical arrival time in Unix nanoseconds, the moment the bucket would be empty
-- again, moved under the row's lock by each take (cairnflow/_rates.py). NULL: never taken
-- from. A column without a default is added without rewriting the table.

ALTER TABLE {limits} ADD COLUMN tat BIGINT;
