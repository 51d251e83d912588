"""What a worker's operator reads in its log (#19): a real client on a real SQLite file.

Step failures, timeouts and lease takeovers at WARNING, retries scheduled and
runs finished at INFO, each on its area's logger (``cairnflow.steps``,
``.runs``, ``.leases``) with run id, workflow, step, attempt and node as
``extra`` fields; the JSON formatter; ``cairn worker --log-json``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.logging import JsonFormatter
from cairnflow.store import ClaimRequest
from cairnflow_sqlite import SQLiteStore

pytestmark = pytest.mark.timeout(120)


def records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    names = ("run_id", "workflow", "step", "attempt", "node")
    return {name: getattr(record, name) for name in names}


@pytest.fixture
def store(db: Path) -> Any:
    made = SQLiteStore(str(db))
    made.migrate()
    yield made
    made.close()


def test_a_failure_its_retry_and_the_run_finishing_are_logged(
    store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def flaky(ctx: cf.StepContext, data: Any) -> str:
        calls.append(ctx.attempt)
        if len(calls) == 1:
            raise ConnectionError("the bank did not answer")
        return "paid"

    retry = cf.RetryPolicy(max_attempts=3, backoff=cf.Backoff(initial=0.05))
    wf = cf.Workflow("pay", steps=[cf.Step("charge", flaky, retry=retry)])
    caplog.set_level(logging.INFO, logger="cairnflow")
    with cf.Client(store, poll_interval=0.05, node_id="node-a") as client:
        client.register(wf)
        ref = client.enqueue(wf, 1)
        assert client.result(ref, timeout=30) == "paid"
        cf.testing.wait_until(lambda: records(caplog, "cairnflow.runs"), timeout=30)

    failed, retried = records(caplog, "cairnflow.steps")
    assert failed.levelno == logging.WARNING
    expected = {"run_id": ref.id, "workflow": "pay", "step": "charge", "attempt": 1}
    assert fields(failed) == {**expected, "node": "node-a"}
    assert (failed.error_type, failed.error) == ("ConnectionError", "the bank did not answer")  # type: ignore[attr-defined]
    assert "failed on attempt 1: ConnectionError" in failed.getMessage()
    assert retried.levelno == logging.INFO
    assert fields(retried) == {**expected, "node": "node-a"}
    # The due time logged is the one the store holds for the retry (it ran at or after it).
    second = client.info(ref).steps["charge"]
    assert retried.retry_at <= second.started_at_ns  # type: ignore[attr-defined]
    assert 0 <= retried.retry_in <= 0.05  # type: ignore[attr-defined]
    (finished,) = records(caplog, "cairnflow.runs")
    assert finished.levelno == logging.INFO
    assert fields(finished) == {**expected, "attempt": 2, "node": "node-a"}
    assert finished.status == "succeeded"  # type: ignore[attr-defined]


def test_a_run_that_fails_and_a_timeout_are_warnings(
    store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(ctx: cf.StepContext, data: Any) -> None:
        raise ValueError("no such customer")

    def slow(ctx: cf.StepContext, data: Any) -> None:
        while not ctx.cancelled:
            time.sleep(0.01)

    failing = cf.Workflow("broken", steps=[cf.Step("only", broken)])
    timing = cf.Workflow("slow", steps=[cf.Step("only", slow, timeout=0.2)])
    caplog.set_level(logging.WARNING, logger="cairnflow")
    with cf.Client(store, poll_interval=0.05) as client:
        client.register(failing, timing)
        runs = [client.enqueue(failing), client.enqueue(timing)]
        for ref in runs:
            assert client.wait(ref, timeout=30).status is cf.Status.FAILED
        cf.testing.wait_until(lambda: len(records(caplog, "cairnflow.runs")) == 2, timeout=30)
    steps = {r.workflow: r for r in records(caplog, "cairnflow.steps")}  # type: ignore[attr-defined]
    assert "failed on attempt 1: ValueError: no such customer" in steps["broken"].getMessage()
    assert "timed out on attempt 1: StepTimeout" in steps["slow"].getMessage()
    assert steps["slow"].error_type == "StepTimeout"  # type: ignore[attr-defined]
    ends = {r.run_id: r for r in records(caplog, "cairnflow.runs")}  # type: ignore[attr-defined]
    assert set(ends) == {ref.id for ref in runs}
    assert all(r.levelno == logging.WARNING and r.status == "failed" for r in ends.values())  # type: ignore[attr-defined]
    assert all(r.node == client.node_id for r in ends.values())  # type: ignore[attr-defined]
    # Nothing at INFO was asked for: no retry or success record was made.
    assert all(r.levelno >= logging.WARNING for r in caplog.records)


def test_a_lease_taken_back_is_logged(store: SQLiteStore, caplog: pytest.LogCaptureFixture) -> None:
    wf = cf.Workflow("leased", steps=[cf.Step("only", lambda ctx, data: "done")])
    enqueuer = cf.Client(store)
    enqueuer.register(wf)
    ref = enqueuer.enqueue(wf)
    # A worker that claimed the step and died: its lease ended a moment after the claim.
    now = time.time_ns()
    (claimed,) = store.claim(
        ClaimRequest(
            workflows=frozenset({"leased"}), limit=1, now=now, lease_until=now + 1, node_id="dead"
        )
    )
    assert claimed.run_id == ref.id
    caplog.set_level(logging.WARNING, logger="cairnflow.leases")
    with cf.Client(store, poll_interval=0.05, node_id="survivor") as client:
        client.register(wf)
        assert client.result(ref, timeout=30) == "done"
    (taken,) = records(caplog, "cairnflow.leases")
    assert taken.levelno == logging.WARNING
    assert (taken.count, taken.node) == (1, "survivor")  # type: ignore[attr-defined]
    assert "took back 1 attempt(s) whose leases expired" in taken.getMessage()


def test_the_json_formatter_writes_the_fields_at_the_top_level() -> None:
    record = logging.LogRecord(
        "cairnflow.steps", logging.WARNING, __file__, 1, "%s failed", ("x",), None
    )
    record.run_id = "run_1"
    record.attempt = 2
    record.odd = object()
    try:
        raise ValueError("boom")
    except ValueError:
        record.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["logger"] == "cairnflow.steps"
    assert line["message"] == "x failed"
    assert (line["run_id"], line["attempt"]) == ("run_1", 2)
    assert line["odd"].startswith("<object object")
    assert "ValueError: boom" in line["exception"]
    assert line["time"].endswith("+00:00")


FLOWS = """
import cairnflow as cf

def broken(ctx, data):
    raise ValueError("card declined")

workflows = [cf.Workflow("declined", steps=[cf.Step("charge", broken)])]
"""


def test_cairn_worker_logs_json_lines(tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    client = cf.Client(store)  # the enqueuing side knows the workflow's name and steps only
    client.register(cf.Workflow("declined", steps=[cf.Step("charge", lambda ctx, data: None)]))
    ref = client.enqueue("declined")
    store.close()
    worker = subprocess.run(
        [
            sys.executable,
            "-m",
            "cairnflow",
            "worker",
            url,
            "--app",
            "flows:workflows",
            "--poll-interval",
            "0.1",
            "--stop-when-idle",
            "0.5",
            "--log-json",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr
    lines = [json.loads(line) for line in worker.stderr.splitlines() if line.startswith("{")]
    by_logger = {line["logger"]: line for line in lines}
    step, run = by_logger["cairnflow.steps"], by_logger["cairnflow.runs"]
    assert (step["run_id"], step["step"], step["attempt"]) == (ref.id, "charge", 1)
    assert step["error_type"] == "ValueError" and step["level"] == "WARNING"
    assert (run["run_id"], run["status"], run["level"]) == (ref.id, "failed", "WARNING")
