"""The raw SQL limit: the least a queue must do, in a plain loop on the same driver.

Insert a row; claim rows with the same claim statement the engine uses
(``UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)
RETURNING`` on Postgres and SQLite, ``SELECT ... FOR UPDATE SKIP LOCKED`` then
``UPDATE`` by primary key on MariaDB); mark them done. One job per
transaction ("single"), or ``batch`` jobs per transaction ("batched"). Same
database, same durability settings, same process model (one thread).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from _engines import Engine

PAYLOAD = b'{"n":1}'


def _ddl(engine: Engine, table: str) -> list[str]:
    if engine.name == "sqlite":
        return [
            f'CREATE TABLE "{table}" (id INTEGER PRIMARY KEY AUTOINCREMENT, status TEXT NOT NULL, '
            "payload BLOB NOT NULL, due_at INTEGER NOT NULL, token TEXT, lease_until INTEGER, "
            "finished_at INTEGER)",
            f'CREATE INDEX "{table}_ready" ON "{table}" (due_at, id) WHERE status = \'ready\'',
        ]
    if engine.name == "postgres":
        return [
            f'CREATE TABLE "{table}" (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, '
            "status TEXT NOT NULL, payload BYTEA NOT NULL, due_at BIGINT NOT NULL, token TEXT, "
            "lease_until BIGINT, finished_at BIGINT)",
            f'CREATE INDEX "{table}_ready" ON "{table}" (due_at, id) WHERE status = \'ready\'',
        ]
    return [
        f"CREATE TABLE `{table}` (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
        "status VARCHAR(16) COLLATE utf8mb4_bin NOT NULL, payload LONGBLOB NOT NULL, "
        "due_at BIGINT NOT NULL, token CHAR(32), lease_until BIGINT, finished_at BIGINT, "
        "KEY ready (status, due_at, id)) DEFAULT CHARSET = utf8mb4",
    ]


class Baseline:
    """A raw queue table and the loops over it."""

    def __init__(self, engine: Engine, prefix: str) -> None:
        self.engine = engine
        self.table = f"{prefix}jobs"
        self.conn = engine.connect()
        q = '"' if engine.name != "mariadb" else "`"
        self.t = f"{q}{self.table}{q}"
        for statement in _ddl(engine, self.table):
            self._begin()
            self.conn.cursor().execute(statement)
            self.conn.commit()

    def close(self) -> None:
        """Drop the table and close the connection."""
        self._begin()
        self.conn.cursor().execute(f"DROP TABLE {self.t}")
        self.conn.commit()
        self.conn.close()

    def _begin(self) -> None:
        if self.engine.name == "sqlite":
            self.conn.execute("BEGIN IMMEDIATE")

    def _x(self, cur: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
        cur.execute(self.engine.sql(sql), params)
        return cur

    # -- enqueue ---------------------------------------------------------------------------
    def enqueue(self, count: int, batch: int) -> float:
        """Insert ``count`` rows, ``batch`` per transaction; return rows per second."""
        sql = self.engine.sql(
            f"INSERT INTO {self.t} (status, payload, due_at) VALUES ('ready', ?, ?)"
        )
        started = time.perf_counter()
        done = 0
        while done < count:
            size = min(batch, count - done)
            self._begin()
            cur = self.conn.cursor()
            now = time.time_ns()
            if size == 1:
                cur.execute(sql, (PAYLOAD, now))
            else:
                cur.executemany(sql, [(PAYLOAD, now)] * size)
            self.conn.commit()
            done += size
        return count / (time.perf_counter() - started)

    # -- claim and complete --------------------------------------------------------------------
    def _claim(self, cur: Any, limit: int) -> list[int]:
        token = secrets.token_hex(16)
        now = time.time_ns()
        lease = now + 30 * 10**9
        if self.engine.name == "mariadb":
            self._x(
                cur,
                f"SELECT id FROM {self.t} WHERE status = 'ready' AND due_at <= ? "
                f"ORDER BY due_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
                (now, limit),
            )
            ids = [row[0] for row in cur.fetchall()]
            if ids:
                marks = ", ".join(["?"] * len(ids))
                self._x(
                    cur,
                    f"UPDATE {self.t} SET status = 'running', token = ?, lease_until = ? "
                    f"WHERE id IN ({marks})",
                    (token, lease, *ids),
                )
            return ids
        lock = " FOR UPDATE SKIP LOCKED" if self.engine.name == "postgres" else ""
        self._x(
            cur,
            f"UPDATE {self.t} SET status = 'running', token = ?, lease_until = ? WHERE id IN "
            f"(SELECT id FROM {self.t} WHERE status = 'ready' AND due_at <= ? "
            f"ORDER BY due_at, id LIMIT ?{lock}) RETURNING id",
            (token, lease, now, limit),
        )
        return [row[0] for row in cur.fetchall()]

    def _complete(self, cur: Any, ids: list[int]) -> None:
        marks = ", ".join(["?"] * len(ids))
        self._x(
            cur,
            f"UPDATE {self.t} SET status = 'done', finished_at = ?, token = NULL "
            f"WHERE id IN ({marks}) AND status = 'running'",
            (time.time_ns(), *ids),
        )

    def drain(self, batch: int) -> tuple[float, int]:
        """Claim and complete every row, ``batch`` per transaction; return (jobs/s, jobs)."""
        started = time.perf_counter()
        total = 0
        while True:
            self._begin()
            cur = self.conn.cursor()
            ids = self._claim(cur, batch)
            self.conn.commit()
            if not ids:
                break
            self._begin()
            self._complete(self.conn.cursor(), ids)
            self.conn.commit()
            total += len(ids)
        return total / (time.perf_counter() - started), total


def measure(engine: Engine, prefix: str, *, jobs: int, batch: int) -> dict[str, float]:
    """Every baseline figure for one engine, in one table created and dropped here."""
    baseline = Baseline(engine, prefix)
    singles = min(jobs, 2000)
    try:
        single_enqueue = baseline.enqueue(singles, batch=1)
        single_drain, drained = baseline.drain(batch=1)
        assert drained == singles, f"baseline drained {drained} of {singles}"
        before = engine.table_bytes(prefix)
        batched_enqueue = baseline.enqueue(jobs, batch=1000)
        bytes_per_row = (engine.table_bytes(prefix) - before) / jobs
        batched_drain, drained = baseline.drain(batch=batch)
        assert drained == jobs, f"baseline drained {drained} of {jobs}"
    finally:
        baseline.close()
    return {
        "enqueue_single_per_s": single_enqueue,
        "enqueue_batched_per_s": batched_enqueue,
        "claim_complete_single_per_s": single_drain,
        "claim_complete_batched_per_s": batched_drain,
        "bytes_per_queued_row": bytes_per_row,
        "batch": float(batch),
    }
