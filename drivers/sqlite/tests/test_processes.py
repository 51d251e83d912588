"""Many processes on one SQLite file: a worker killed midway (concurrent migrations are a
kit proof of MULTI_PROCESS).

Workers are real processes running ``cairn worker``. Outcome writes are
audited by a trigger in the database itself: every transition of a step into
``succeeded`` inserts a row, so an outcome written twice would show up as two
rows for one step, whatever the final state looks like.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import cairnflow as cf
from cairnflow.testing import wait_until
from cairnflow_sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

APP = """
import time
import cairnflow as cf

chain = cf.Workflow("chain")

@chain.step
def first(ctx, n):
    time.sleep(0.002)  # long enough that a killed worker dies holding steps
    return {"n": n, "first": ctx.node_id}

@chain.step(after=[first])
def second(ctx, data):
    time.sleep(0.002)
    return {**data, "second": ctx.node_id}

@chain.step(after=[second])
def third(ctx, data):
    time.sleep(0.002)
    return {**data, "third": ctx.node_id}
"""

AUDIT = """
CREATE TABLE audit_succeeded (step_id TEXT NOT NULL, node TEXT, at INTEGER);
CREATE TRIGGER audit_step_succeeded AFTER UPDATE OF status ON cf_steps
WHEN NEW.status = 'succeeded' AND OLD.status <> 'succeeded'
BEGIN
    INSERT INTO audit_succeeded VALUES (NEW.id, NEW.node, NEW.finished_at);
END;
"""


def count(db: Path, sql: str) -> int:
    with sqlite3.connect(db, timeout=30) as conn:
        return int(conn.execute(sql).fetchone()[0])


def start_worker(db: Path, app_dir: Path, node: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(app_dir)}
    command = [
        sys.executable,
        "-m",
        "cairnflow",
        "worker",
        f"sqlite:///{db}",
        "--app",
        "chain_app:chain",
        "--workers",
        "2",
        # Short steps: each worker process holds attempts claimed ahead when it is killed.
        "--prefetch",
        "2",
        "--lease",
        "2",
        "--poll-interval",
        "0.2",
        "--node-id",
        node,
        "--log-level",
        "WARNING",
    ]
    return subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def test_four_worker_processes_one_killed_midway(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    (tmp_path / "chain_app.py").write_text(textwrap.dedent(APP))
    store = SQLiteStore(db)
    store.migrate()
    with sqlite3.connect(db) as conn:
        conn.executescript(AUDIT)
    sys.path.insert(0, str(tmp_path))
    # Another test's chain_app may be imported already (one pytest run over several
    # drivers): this test's file is the one its workers load.
    sys.modules.pop("chain_app", None)
    try:
        import chain_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    enqueuer = cf.Client(store)
    enqueuer.register(chain_app.chain)
    for batch in range(4):
        enqueuer.enqueue_many(cf.Job("chain", batch * 500 + i) for i in range(500))
    total_runs = 2000

    logs = {f"w{i}": tmp_path / f"w{i}.log" for i in range(5)}
    workers = {
        name: start_worker(db, tmp_path, name, logs[name]) for name in ("w0", "w1", "w2", "w3")
    }
    try:
        wait_until(
            lambda: (
                count(db, "SELECT COUNT(*) FROM cf_runs WHERE state = 'succeeded'")
                >= total_runs // 2
            ),
            timeout=240,
            what="half of the runs",
        )
        # A fifth worker joins. The others may drain everything before a late starter is
        # up, so runs keep coming until it has claimed; then the first dies holding
        # leases, mid-step.
        workers["w4"] = start_worker(db, tmp_path, "w4", logs["w4"])
        deadline = time.monotonic() + 240
        while count(db, "SELECT COUNT(*) FROM cf_steps WHERE node = 'w4'") == 0:
            assert time.monotonic() < deadline, "the fifth worker never claimed"
            assert workers["w4"].poll() is None, logs["w4"].read_text(errors="replace")
            enqueuer.enqueue_many(cf.Job("chain", total_runs + i) for i in range(20))
            total_runs += 20
            time.sleep(0.1)
        # The first must die holding leases: a backlog keeps every process claiming (a claim
        # is committed with the outcomes before it, so a busy worker always holds some), and
        # it is killed once the store shows one of its attempts running. Without the backlog
        # the others could have drained the queue and w0 died idle (a CI run on a busy
        # machine: no step was reclaimed).
        enqueuer.enqueue_many(cf.Job("chain", total_runs + i) for i in range(500))
        total_runs += 500
        wait_until(
            lambda: (
                count(db, "SELECT COUNT(*) FROM cf_steps WHERE node = 'w0' AND status = 'running'")
                > 0
            ),
            timeout=240,
            what="the first worker to hold a running step",
        )
        workers["w0"].send_signal(signal.SIGKILL)
        assert workers["w0"].wait(10) == -signal.SIGKILL
        wait_until(
            lambda: count(db, "SELECT COUNT(*) FROM cf_runs WHERE state <> 'active'") == total_runs,
            timeout=240,
            what="every run to finish",
        )
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in workers.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()

    assert count(db, "SELECT COUNT(*) FROM cf_runs WHERE state = 'succeeded'") == total_runs
    assert count(db, "SELECT COUNT(*) FROM cf_steps WHERE status = 'succeeded'") == 3 * total_runs
    # Every step's outcome was written exactly once, by the database's own account.
    assert count(db, "SELECT COUNT(*) FROM audit_succeeded") == 3 * total_runs
    assert count(db, "SELECT COUNT(DISTINCT step_id) FROM audit_succeeded") == 3 * total_runs
    # The kill really cost leases: steps were taken over from the dead worker.
    assert count(db, "SELECT COUNT(*) FROM cf_steps WHERE reclaims > 0") >= 1
    # Each stored output was written by the node recorded on the step.
    mismatched = count(
        db,
        "SELECT COUNT(*) FROM cf_steps WHERE json_extract(output, '$.' || name) <> node",
    )
    assert mismatched == 0
    # Every worker did work, the replacement included, and no SQLITE_BUSY surfaced.
    with sqlite3.connect(db) as conn:
        nodes = {node for (node,) in conn.execute("SELECT DISTINCT node FROM cf_steps")}
    assert nodes >= {"w1", "w2", "w3", "w4"}
    for name, log in logs.items():
        text = log.read_text(errors="replace")
        assert "database is locked" not in text, name
        assert "SQLITE_BUSY" not in text, name
        assert "Traceback" not in text, (name, text[-2000:])
