"""Worker processes through a database outage: every backend terminated, three times.

The workers are real ``python -m cairnflow worker`` processes on a database
this test creates and drops, so terminating "every backend of the test
database" touches nothing else on a shared server. Outcome writes are audited
by a trigger in the database itself: every transition of a step into
``succeeded`` inserts a row, so an output written twice would show up as two
rows for one step, whatever the final state looks like.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import cairnflow as cf
from cairnflow.testing import wait_until
from cairnflow_postgres import PostgresStore

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    pytest.mark.timeout(420),
]

RUNS = 500
POLL = 5.0  # long on purpose: after the outage, only notifications start work quickly

APP = """
import time
import cairnflow as cf

chain = cf.Workflow("chain")

@chain.step
def first(ctx, n):
    time.sleep(0.01)  # long enough that an outage catches steps mid-flight
    return {"n": n, "first": ctx.node_id}

@chain.step(after=[first])
def second(ctx, data):
    time.sleep(0.01)
    return {**data, "second": ctx.node_id}

@chain.step(after=[second])
def third(ctx, data):
    time.sleep(0.01)
    return {**data, "third": ctx.node_id}

stamp = cf.Workflow("stamp")

@stamp.step
def now(ctx, _):
    return time.time_ns()

workflows = [chain, stamp]
"""

AUDIT = """
CREATE TABLE audit_succeeded (step_id TEXT NOT NULL, node TEXT, at BIGINT);
CREATE FUNCTION audit_step_succeeded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit_succeeded VALUES (NEW.id, NEW.node, NEW.finished_at);
    RETURN NEW;
END $$;
CREATE TRIGGER audit_step_succeeded AFTER UPDATE OF status ON cf_steps FOR EACH ROW
WHEN (NEW.status = 'succeeded' AND OLD.status <> 'succeeded')
EXECUTE FUNCTION audit_step_succeeded();
"""


@pytest.fixture
def dedicated_url(postgres_url: str, admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    """A database of this test's own, dropped afterwards (whatever is still connected)."""
    parts = urlsplit(postgres_url)
    if parts.scheme not in ("postgresql", "postgres"):
        pytest.skip("this test needs the server as a postgresql:// URL")
    name = f"cairnflow_restart_{secrets.token_hex(4)}"
    admin_conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    finally:
        admin_conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_worker(url: str, app_dir: Path, node: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(app_dir)}
    command = [
        sys.executable,
        "-m",
        "cairnflow",
        "worker",
        url,
        "--app",
        "restart_app:workflows",
        "--workers",
        "4",
        "--lease",
        "2",
        "--poll-interval",
        str(POLL),
        "--node-id",
        node,
        "--log-level",
        "WARNING",
        "-o",
        "max_size=8",
    ]
    return subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def one(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def test_two_workers_outlive_every_backend_being_terminated(
    dedicated_url: str, tmp_path: Path, record_property: Any
) -> None:
    (tmp_path / "restart_app.py").write_text(textwrap.dedent(APP))
    store = PostgresStore(dedicated_url, max_size=4)
    store.migrate()
    admin = psycopg.connect(dedicated_url, autocommit=True)
    admin.execute(AUDIT)
    sys.path.insert(0, str(tmp_path))
    try:
        import restart_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    enqueuer = cf.Client(store)
    enqueuer.register(restart_app.chain, restart_app.stamp)
    logs = {name: tmp_path / f"{name}.log" for name in ("w1", "w2")}
    workers = {name: start_worker(dedicated_url, tmp_path, name, log) for name, log in logs.items()}
    terminated: list[int] = []
    try:
        wait_until(
            lambda: (
                one(admin, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%'")
                >= 2
            ),
            timeout=60,
            what="both workers to listen",
        )
        enqueuer.enqueue_many(cf.Job("chain", i) for i in range(RUNS))

        def finished() -> int:
            return int(one(admin, "SELECT count(*) FROM cf_runs WHERE state <> 'active'"))

        outage_at = 0.0
        for share in (0.2, 0.45, 0.7):
            wait_until(lambda s=share: finished() >= RUNS * s, timeout=120, what=f"{share:.0%}")
            outage_at = time.time()
            # Every backend of this database but our own: the workers' pools, their
            # listeners, the enqueuer's pool.
            terminated.append(
                int(
                    one(
                        admin,
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
                    )
                )
            )
        # The listeners came back: two new sessions LISTEN again since the last outage.
        wait_until(
            lambda: (
                one(
                    admin,
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%' "
                    "AND backend_start > to_timestamp(%s)",
                    outage_at,
                )
                >= 2
            ),
            timeout=30,
            what="both listeners to reconnect",
        )
        wait_until(lambda: finished() == RUNS, timeout=240, what="every run to finish")
        # Back to notifications: with a 5 s poll, runs start well within a second.
        latencies = []
        for _ in range(5):
            sent = time.time_ns()
            latencies.append((enqueuer.result(enqueuer.enqueue("stamp"), timeout=20) - sent) / 1e9)
            time.sleep(0.05)
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in workers.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        store.close()

    try:
        assert one(admin, "SELECT count(*) FROM cf_runs WHERE state = 'succeeded'") == RUNS + 5
        assert one(admin, "SELECT count(*) FROM cf_steps WHERE status = 'succeeded'") == (
            3 * RUNS + 5
        )
        # Every step's outcome was written exactly once, by the database's own account.
        assert one(admin, "SELECT count(*) FROM audit_succeeded") == 3 * RUNS + 5
        assert one(admin, "SELECT count(DISTINCT step_id) FROM audit_succeeded") == 3 * RUNS + 5
        # Each stored output was written by the node recorded on the step.
        mismatched = one(
            admin,
            "SELECT count(*) FROM cf_steps WHERE workflow = 'chain' "
            "AND convert_from(output, 'UTF8')::jsonb ->> name <> node",
        )
        assert mismatched == 0
        reclaimed = one(admin, "SELECT count(*) FROM cf_steps WHERE reclaims > 0")
        nodes = {r[0] for r in admin.execute("SELECT DISTINCT node FROM cf_steps")}
    finally:
        admin.close()
    assert nodes == {"w1", "w2"}
    assert min(terminated) >= 4  # each outage really cut the workers off
    texts = {name: log.read_text(errors="replace") for name, log in logs.items()}
    reconnects = {name: text.count("listener reconnected") for name, text in texts.items()}
    unavailable = {name: text.count("is unavailable") for name, text in texts.items()}
    assert all(count >= 1 for count in reconnects.values()), reconnects
    assert sorted(latencies)[2] < 1.0, latencies
    summary = (
        f"backends terminated {terminated}; steps reclaimed {reclaimed}; listener reconnects "
        f"{reconnects}; Unavailable in logs {unavailable}; latencies after the outage "
        f"{[round(x, 3) for x in latencies]}"
    )
    record_property("restart_summary", summary)
    print(summary)
