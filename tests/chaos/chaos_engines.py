"""The three engines as a chaos test sees them: a database of its own, an audit, what to break.

Each test gets a database nobody else uses (a SQLite file; on Postgres and
MariaDB a database it creates and drops), so that "every connection of the
test database" touches nothing of the other suites on a shared server. On it
an :class:`Engine` installs the audit trigger (every commit of a step's
success leaves a row, inside the committing transaction), reads the audit
back, terminates the test database's connections, and restarts the server
(only where the chaos session allows it: see :data:`RESTARTS_ENV`).
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import socket
import sqlite3
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import chaos_history as h
import psycopg
import pymysql
from chaos_workload import nonce_of

import cairnflow as cf
from cairnflow_conformance.databases import parts

__all__ = ["RESTARTS_ENV", "Engine", "MariaDBEngine", "PostgresEngine", "SQLiteEngine"]

RESTARTS_ENV = "CAIRNFLOW_CHAOS_RESTARTS"
"""``1``: the chaos tests may restart the local database servers (``nox -s chaos`` sets it)."""

AUDIT_TABLE = "chaos_commits"
_READY_WAIT = 90.0


class Engine:
    """One engine's database of this test (see the module docstring)."""

    name = ""
    kills_connections = False
    """True where the test can terminate the database's connections (a server)."""
    store_options: dict[str, Any] = {}
    """Keyword arguments of the store in worker processes (small pools: a shared server)."""

    def __init__(self, url: str) -> None:
        self.url = url
        """The store URL of this test's own database."""

    def open_store(self, **options: Any) -> cf.Store:
        """A store on this test's database."""
        store: cf.Store = cf.open_store(self.url, **{**self.store_options, **options})
        return store

    def install_audit(self) -> None:
        """Create the audit table and its trigger (after the store's migrations)."""
        raise NotImplementedError

    def commits(self) -> list[h.Commit]:
        """Every commit of a step's success the audit recorded, in order."""
        rows = self._query(
            f"SELECT run_id, name, attempt, kind, output FROM {AUDIT_TABLE} ORDER BY seq"
        )
        return [
            h.Commit(str(run), str(name), int(attempt), str(kind), _nonce(kind, output))
            for run, name, attempt, kind, output in rows
        ]

    def kill_connections(self) -> int:
        """Terminate every connection of this test's database; how many there were."""
        raise NotImplementedError(f"{self.name} has no connections to kill")

    def restart(self) -> None:
        """Restart the database server and wait until it answers."""
        raise NotImplementedError(f"{self.name} has no server to restart")

    def restart_problem(self) -> str | None:
        """Why this engine's server cannot be restarted here (None: it can)."""
        return f"{self.name} has no server"

    def drop(self) -> None:
        """Remove this test's database."""

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError


def _nonce(kind: Any, output: Any) -> str | None:
    if str(kind) != "task" or output is None:
        return None
    return nonce_of(bytes(output))


# -- SQLite --------------------------------------------------------------------------------------
class SQLiteEngine(Engine):
    """A SQLite file of the test's own; nothing to kill but processes."""

    name = "sqlite"

    def __init__(self, directory: Path) -> None:
        self.path = directory / "chaos.db"
        super().__init__(f"sqlite:///{self.path}")

    def install_audit(self) -> None:
        with sqlite3.connect(self.path, timeout=30) as conn:
            conn.executescript(
                f"""
                CREATE TABLE {AUDIT_TABLE} (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT, step_id TEXT NOT NULL,
                    run_id TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
                    attempt INTEGER NOT NULL, output BLOB
                );
                CREATE TRIGGER chaos_audit AFTER UPDATE ON cf_steps
                WHEN NEW.status = 'succeeded'
                    AND (OLD.status <> 'succeeded' OR NEW.finished_at IS NOT OLD.finished_at)
                BEGIN
                    INSERT INTO {AUDIT_TABLE} (step_id, run_id, name, kind, attempt, output)
                    VALUES (NEW.id, NEW.run_id, NEW.name, NEW.kind, NEW.attempt, NEW.output);
                END;
                """
            )

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            return list(conn.execute(sql, tuple(params)).fetchall())
        finally:
            conn.close()

    def drop(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


# -- servers -------------------------------------------------------------------------------------
def _local(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1", "") or host == socket.gethostname()


def _wait_for(what: str, check: list[str], *, ok: bool = True) -> None:
    """Run ``check`` every half second until it succeeds (``ok``) or fails; at most 90 s."""
    deadline = time.monotonic() + _READY_WAIT
    while time.monotonic() < deadline:
        done = subprocess.run(check, capture_output=True, check=False, timeout=30)
        if (done.returncode == 0) == ok:
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: still not after {_READY_WAIT:g}s ({' '.join(check)})")


class PostgresEngine(Engine):
    """A database ``cairnflow_chaos_<hex>`` on the test server, dropped at the end."""

    name = "postgres"
    kills_connections = True
    store_options = {"min_size": 1, "max_size": 5}

    def __init__(self, server_url: str) -> None:
        self.server = parts(server_url)
        self.database = f"cairnflow_chaos_{secrets.token_hex(4)}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        super().__init__(str(dataclasses.replace(self.server, database=self.database)))

    def _admin(self) -> psycopg.Connection[Any]:
        """A connection to the server's own database (never one of the test's)."""
        return psycopg.connect(str(self.server), autocommit=True, connect_timeout=10)

    def install_audit(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                f"""
                CREATE TABLE {AUDIT_TABLE} (
                    seq BIGSERIAL PRIMARY KEY, step_id TEXT NOT NULL, run_id TEXT NOT NULL,
                    name TEXT NOT NULL, kind TEXT NOT NULL, attempt INTEGER NOT NULL,
                    output BYTEA
                );
                CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO {AUDIT_TABLE} (step_id, run_id, name, kind, attempt, output)
                    VALUES (NEW.id, NEW.run_id, NEW.name, NEW.kind, NEW.attempt, NEW.output);
                    RETURN NEW;
                END $$;
                CREATE TRIGGER chaos_audit AFTER UPDATE ON cf_steps FOR EACH ROW
                WHEN (NEW.status = 'succeeded'
                      AND (OLD.status <> 'succeeded'
                           OR NEW.finished_at IS DISTINCT FROM OLD.finished_at))
                EXECUTE FUNCTION chaos_audit();
                """
            )

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return list(conn.execute(sql, tuple(params)).fetchall())

    def kill_connections(self) -> int:
        with self._admin() as conn:
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.database,),
            ).fetchone()
        return int(row[0]) if row else 0

    def listeners(self) -> set[int]:
        """The backends of this test's database that LISTEN (the notifiers' connections)."""
        with self._admin() as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND query LIKE 'LISTEN %%'",
                (self.database,),
            ).fetchall()
        return {int(pid) for (pid,) in rows}

    def kill_listeners(self) -> set[int]:
        """Terminate the listening backends of this test's database; their pids."""
        with self._admin() as conn:
            # The function in the select list runs for the rows the WHERE kept, only.
            rows = conn.execute(
                "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND query LIKE 'LISTEN %%'",
                (self.database,),
            ).fetchall()
        return {int(pid) for pid, _ in rows}

    def restart_problem(self) -> str | None:
        if not _local(self.server.host):
            return f"the Postgres server {self.server.host} is not this machine's"
        if shutil.which("pg_ctlcluster") is None or shutil.which("pg_isready") is None:
            return "pg_ctlcluster and pg_isready are not installed"
        if len(_clusters()) != 1:
            return f"not exactly one cluster version in /etc/postgresql: {_clusters()}"
        return None

    def restart(self) -> None:
        """``pg_ctlcluster --skip-systemctl-redirect <version> main restart``; wait for it."""
        version = _clusters()[0]
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
            check=True,
            timeout=120,
            **_DETACHED,
        )
        host, port = self.server.host or "127.0.0.1", str(self.server.port or 5432)
        _wait_for("Postgres answering", ["pg_isready", "-h", host, "-p", port, "-q"])

    def drop(self) -> None:
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


def _clusters() -> list[str]:
    root = Path("/etc/postgresql")
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


class MariaDBEngine(Engine):
    """A database ``cairnflow_chaos_<hex>`` on the test server, dropped at the end."""

    name = "mariadb"
    kills_connections = True
    store_options = {"pool_size": 4}

    def __init__(self, server_url: str) -> None:
        self.server = parts(server_url)
        self.database = f"cairnflow_chaos_{secrets.token_hex(4)}"
        with self._connect(None) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{self.database}`")
        super().__init__(str(dataclasses.replace(self.server, database=self.database)))

    def _connect(self, database: str | None) -> Any:
        server = self.server
        return pymysql.connect(
            host=server.host or "127.0.0.1",
            port=server.port or 3306,
            user=server.user or "root",
            password=server.password or "",
            database=database,
            autocommit=True,
            connect_timeout=10,
        )

    def install_audit(self) -> None:
        with self._connect(self.database) as conn, conn.cursor() as cur:
            cur.execute(
                f"""
                CREATE TABLE {AUDIT_TABLE} (
                    seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                    step_id VARCHAR(64) NOT NULL, run_id VARCHAR(64) NOT NULL,
                    name VARCHAR(128) NOT NULL, kind VARCHAR(16) NOT NULL,
                    attempt INT NOT NULL, output LONGBLOB
                ) ENGINE = InnoDB
                """
            )
            cur.execute(
                f"""
                CREATE TRIGGER chaos_audit AFTER UPDATE ON cf_steps FOR EACH ROW
                BEGIN
                    IF NEW.status = 'succeeded' AND (OLD.status <> 'succeeded'
                            OR NOT (NEW.finished_at <=> OLD.finished_at)) THEN
                        INSERT INTO {AUDIT_TABLE} (step_id, run_id, name, kind, attempt, output)
                        VALUES (NEW.id, NEW.run_id, NEW.name, NEW.kind, NEW.attempt,
                                NEW.output);
                    END IF;
                END
                """
            )

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._connect(self.database) as conn, conn.cursor() as cur:
            cur.execute(sql, tuple(params))
            return list(cur.fetchall())

    def kill_connections(self) -> int:
        killed = 0
        with self._connect(None) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = %s AND id <> CONNECTION_ID()",
                (self.database,),
            )
            for (thread,) in cur.fetchall():
                try:
                    cur.execute(f"KILL CONNECTION {int(thread)}")
                    killed += 1
                except pymysql.err.OperationalError:
                    pass  # it ended by itself meanwhile
        return killed

    def _admin_command(self, *args: str) -> list[str]:
        server = self.server
        command = ["mariadb-admin", f"-h{server.host or '127.0.0.1'}"]
        command += [f"-P{server.port or 3306}", f"-u{server.user or 'root'}"]
        if server.password:
            command.append(f"-p{server.password}")
        return [*command, *args]

    def restart_problem(self) -> str | None:
        if not _local(self.server.host):
            return f"the MariaDB server {self.server.host} is not this machine's"
        needed = ("mariadb-admin", "start-stop-daemon")
        if any(shutil.which(tool) is None for tool in needed) or not Path(_MARIADBD).exists():
            return f"{', '.join(needed)} and {_MARIADBD} are needed"
        return None

    def restart(self) -> None:
        """``mariadb-admin shutdown``, then ``start-stop-daemon`` as ``.ci/run`` starts it."""
        subprocess.run(self._admin_command("shutdown"), check=True, timeout=120)
        # --oknodo does nothing while the old server still exits: wait until it is gone.
        _wait_for(
            "the old mariadbd gone",
            ["start-stop-daemon", "--status", "--exec", _MARIADBD],
            ok=False,
        )
        subprocess.run(
            ["start-stop-daemon", "--start", "--oknodo", "--background", "--exec", _MARIADBD],
            check=True,
            timeout=60,
            **_DETACHED,
        )
        _wait_for("MariaDB answering", self._admin_command("ping"))

    def drop(self) -> None:
        self.kill_connections()
        with self._connect(None) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{self.database}`")


_MARIADBD = "/usr/sbin/mariadbd"

_DETACHED: dict[str, Any] = {
    "stdin": subprocess.DEVNULL,
    "stdout": subprocess.DEVNULL,
    "stderr": subprocess.DEVNULL,
}
"""A server started from a test must not hold the test's pipes open (nor wait on them)."""
