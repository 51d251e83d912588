"""Many processes on one server: the acceptance load test (concurrent migrations are a kit
proof of MULTI_PROCESS).

Workers are real processes running ``python -m cairnflow worker``. Outcome writes
are audited by a trigger in the database itself: every transition of a step into
``succeeded`` inserts a row, so an outcome written twice shows up as two rows for
one step, whatever the final state looks like.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.testing import wait_until
from cairnflow_mysql import MySQLStore

Server = Any  # conftest.Server

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

APP = """
import logging, os, time
import cairnflow as cf

# Count the transactions the driver retried (deadlocks, lock wait timeouts) in this process.
_retries = logging.FileHandler(os.environ["CAIRNFLOW_TEST_RETRY_LOG"])
_retries.setLevel(logging.DEBUG)
_logger = logging.getLogger("cairnflow.mysql.retry")
_logger.setLevel(logging.DEBUG)
_logger.addHandler(_retries)
_logger.propagate = False

chain = cf.Workflow("chain")

@chain.step
def first(ctx, n):
    time.sleep(0.002)  # long enough that a killed worker dies holding steps
    return {"n": n, "first": ctx.node_id}

# Two parents finishing at once on two nodes: the fan-in races for the child.
@chain.step(after=[first])
def left(ctx, data):
    return {**data, "left": ctx.node_id}

@chain.step(after=[first])
def right(ctx, data):
    return {"right": ctx.node_id}

@chain.step(after=[left, right])
def last(ctx, inputs):
    return {"last": ctx.node_id}
"""
STEPS = 4

AUDIT = """
CREATE TABLE `{p}audit` (
    seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    step_id VARCHAR(64) NOT NULL,
    node VARCHAR(255),
    at BIGINT
) ENGINE = InnoDB
"""
TRIGGER = """
CREATE TRIGGER `{p}audit_succeeded` AFTER UPDATE ON `{p}steps` FOR EACH ROW
BEGIN
    IF NEW.status = 'succeeded' AND OLD.status <> 'succeeded' THEN
        INSERT INTO `{p}audit` (step_id, node, at) VALUES (NEW.id, NEW.node, NEW.finished_at);
    END IF;
END
"""
ERRORS_THAT_MUST_NOT_SURFACE = (
    "Traceback",
    "Deadlock",
    "Lock wait timeout",
    "1213",
    "1205",
    "Unavailable",
    "ERROR",
)


def count(server: Server, sql: str) -> int:
    return int(server.query(sql)[0][0])


def start_worker(
    url: str, prefix: str, app_dir: Path, node: str, log: Path, retries: Path
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(app_dir),
        "CAIRNFLOW_TEST_RETRY_LOG": str(retries),
    }
    command = [
        sys.executable,
        "-m",
        "cairnflow",
        "worker",
        url,
        "--app",
        "chain_app:chain",
        "--workers",
        "8",
        "--lease",
        "3",
        "--poll-interval",
        "0.2",
        "--node-id",
        node,
        "--log-level",
        "WARNING",
        "-o",
        f"table_prefix={prefix}",
        "-o",
        "pool_size=12",
    ]
    return subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def innodb_counter(server: Server, name: str) -> int | None:
    """A server-wide InnoDB counter (everyone's sessions, so an upper bound for ours)."""
    rows = server.query(
        "SELECT `count` FROM information_schema.innodb_metrics WHERE name = %s", name
    )
    return int(rows[0][0]) if rows else None


@pytest.mark.timeout(600)
def test_two_worker_processes_complete_2000_runs_each_outcome_written_once(
    server: Server, prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = MySQLStore(server.url, table_prefix=prefix)
    store.migrate()
    server.query(AUDIT.format(p=prefix))
    server.query(TRIGGER.format(p=prefix))
    (tmp_path / "chain_app.py").write_text(textwrap.dedent(APP))
    retries = {f"w{i}": tmp_path / f"w{i}.retries" for i in range(3)}
    os.environ["CAIRNFLOW_TEST_RETRY_LOG"] = str(tmp_path / "enqueuer.retries")
    sys.path.insert(0, str(tmp_path))
    # Another test's chain_app may be imported already (one pytest run over several
    # drivers): this test's file is the one its workers load.
    sys.modules.pop("chain_app", None)
    try:
        import chain_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
        del os.environ["CAIRNFLOW_TEST_RETRY_LOG"]
    deadlocks_before = innodb_counter(server, "lock_deadlocks")
    timeouts_before = innodb_counter(server, "lock_timeouts")

    total_runs = 2000
    logs = {name: tmp_path / f"{name}.log" for name in retries}
    workers = {
        name: start_worker(server.url, prefix, tmp_path, name, logs[name], retries[name])
        for name in ("w0", "w1")
    }
    enqueue_errors: list[BaseException] = []

    def enqueue() -> None:  # the test process enqueues while the workers run
        try:
            client = cf.Client(store)
            client.register(chain_app.chain)
            for batch in range(40):
                client.enqueue_many(cf.Job("chain", batch * 50 + i) for i in range(50))
                time.sleep(0.05)
        except BaseException as error:
            enqueue_errors.append(error)

    started = time.monotonic()
    enqueuer = threading.Thread(target=enqueue, name="enqueuer")
    enqueuer.start()
    try:
        wait_until(
            lambda: (
                count(server, f"SELECT COUNT(*) FROM `{prefix}runs` WHERE state = 'succeeded'")
                >= total_runs // 3
            ),
            timeout=240,
            what="a third of the runs",
        )
        workers["w0"].send_signal(signal.SIGKILL)  # dies holding leases, mid-step
        assert workers["w0"].wait(10) == -signal.SIGKILL
        workers["w2"] = start_worker(server.url, prefix, tmp_path, "w2", logs["w2"], retries["w2"])
        enqueuer.join(120)
        assert not enqueue_errors, enqueue_errors
        # The replacement must take part: w1 may drain everything before a late starter is
        # up (a CI run on a busy machine: w2 had claimed nothing), so runs keep coming
        # until it has claimed.
        topper = cf.Client(store)
        topper.register(chain_app.chain)
        deadline = time.monotonic() + 240
        while count(server, f"SELECT COUNT(*) FROM `{prefix}steps` WHERE node = 'w2'") == 0:
            assert time.monotonic() < deadline, "the replacement worker never claimed"
            assert workers["w2"].poll() is None, logs["w2"].read_text(errors="replace")
            topper.enqueue_many(cf.Job("chain", total_runs + i) for i in range(20))
            total_runs += 20
            time.sleep(0.1)
        wait_until(
            lambda: (
                count(server, f"SELECT COUNT(*) FROM `{prefix}runs` WHERE state <> 'active'")
                == total_runs
            ),
            timeout=300,
            what="every run to finish",
        )
        elapsed = time.monotonic() - started
    finally:
        enqueuer.join(120)
        for process in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in workers.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        store.close()

    p = prefix
    assert count(server, f"SELECT COUNT(*) FROM `{p}runs`") == total_runs
    assert count(server, f"SELECT COUNT(*) FROM `{p}runs` WHERE state = 'succeeded'") == total_runs
    steps = STEPS * total_runs
    assert count(server, f"SELECT COUNT(*) FROM `{p}steps` WHERE status = 'succeeded'") == steps
    # Every step's outcome was written exactly once, by the database's own account.
    assert count(server, f"SELECT COUNT(*) FROM `{p}audit`") == steps
    assert count(server, f"SELECT COUNT(DISTINCT step_id) FROM `{p}audit`") == steps
    # ...by the node the step records, whose name is also inside the output it wrote.
    mismatched = count(
        server,
        f"SELECT COUNT(*) FROM `{p}steps` s JOIN `{p}audit` a ON a.step_id = s.id "
        "WHERE a.node <> s.node OR JSON_UNQUOTE(JSON_EXTRACT(CONVERT(s.output USING utf8mb4), "
        "CONCAT('$.', s.name))) <> s.node",
    )
    assert mismatched == 0
    # The kill cost leases: steps were taken over from the dead worker.
    reclaimed = count(server, f"SELECT COUNT(*) FROM `{p}steps` WHERE reclaims > 0")
    assert reclaimed >= 1
    nodes = {row[0] for row in server.query(f"SELECT DISTINCT node FROM `{p}steps`")}
    assert nodes >= {"w1", "w2"}
    # No deadlock, lock wait timeout or traceback reached a worker's log.
    for name, log in logs.items():
        text = log.read_text(errors="replace")
        for marker in ERRORS_THAT_MUST_NOT_SURFACE:
            assert marker not in text, (name, marker, text[-3000:])
    retried = {
        name: len(path.read_text().splitlines()) if path.exists() else 0
        for name, path in {**retries, "enqueuer": tmp_path / "enqueuer.retries"}.items()
    }
    deadlocks = (innodb_counter(server, "lock_deadlocks") or 0) - (deadlocks_before or 0)
    timeouts = (innodb_counter(server, "lock_timeouts") or 0) - (timeouts_before or 0)
    with capsys.disabled():
        print(
            f"\n[load {server.kind}] {total_runs} runs / {steps} steps in {elapsed:.1f}s; "
            f"transactions retried per process: {retried}; server-wide InnoDB deadlocks "
            f"{deadlocks}, lock wait timeouts {timeouts}; steps reclaimed from the killed "
            f"worker: {reclaimed}; nodes: {sorted(nodes)}"
        )
