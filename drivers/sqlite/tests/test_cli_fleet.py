"""``cairn worker`` in a fleet: drains on SIGTERM, stops when idle, recycles with status 75.

Real ``cairn worker`` processes on a real SQLite file. What a run became is read
from the file; a step that must still be running when the signal lands waits
for a file the test creates, so no assertion rests on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cairnflow as cf
from cairnflow.cli import RECYCLE_EXIT_STATUS

FLOWS = """
import pathlib
import time

import cairnflow as cf

HERE = pathlib.Path(__file__).parent


def work(ctx, data):
    if data.get("gate"):
        (HERE / "started").touch()
        while not (HERE / "release").exists():
            time.sleep(0.02)
    return ctx.node_id


workflows = [cf.Workflow("cli-work", steps=[cf.Step("a", work)])]
"""


def _setup(tmp_path: Path) -> tuple[str, cf.Client, cf.Store]:
    (tmp_path / "flows.py").write_text(textwrap.dedent(FLOWS))
    url = f"sqlite:///{tmp_path / 'flows.db'}"
    store = cf.open_store(url)
    store.migrate()
    client = cf.Client(store)
    namespace: dict[str, object] = {"__file__": str(tmp_path / "flows.py")}
    exec(textwrap.dedent(FLOWS), namespace)
    client.register(*namespace["workflows"])  # type: ignore[misc]
    return url, client, store


def _worker(tmp_path: Path, url: str, *options: str) -> subprocess.Popen[str]:
    command = ["worker", url, "--app", "flows:workflows", "--node-id", "cli-node"]
    return subprocess.Popen(
        [sys.executable, "-m", "cairnflow", *command, "--poll-interval", "0.05", *options],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(worker: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        out, _ = worker.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        worker.kill()
        out, _ = worker.communicate()
        raise AssertionError(f"the worker did not exit:\n{out}") from None
    return worker.returncode, out


def _when_started(tmp_path: Path, worker: subprocess.Popen[str]) -> None:
    """Wait until the gated step runs in ``worker`` (it creates the file ``started``)."""
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert worker.poll() is None, "the worker exited before the step began"
        assert time.monotonic() < deadline, "the gated step never began"
        time.sleep(0.02)


def _lines_until(worker: subprocess.Popen[str], text: str) -> list[str]:
    """The lines ``worker`` printed up to the first that holds ``text`` (which must come)."""
    assert worker.stdout is not None
    said: list[str] = []
    for line in worker.stdout:
        said.append(line)
        if text in line:
            return said
    raise AssertionError(f"the worker never said {text!r}:\n{''.join(said)}")


def _step(store: cf.Store, run: cf.RunRef) -> cf.store.StoredStep:
    stored = store.get_run(run.id)
    assert stored is not None
    return stored.steps[0]


def test_a_worker_recycles_after_max_jobs_with_status_75(tmp_path: Path) -> None:
    url, client, store = _setup(tmp_path)
    refs = [client.enqueue("cli-work", {}) for _ in range(5)]
    status, out = _finish(_worker(tmp_path, url, "--max-jobs", "2", "--workers", "1"))
    try:
        assert status == RECYCLE_EXIT_STATUS == 75, out
        assert "stopped (recycle_jobs)" in out, out
        steps = [_step(store, ref) for ref in refs]
        done = [s for s in steps if s.status is cf.StepStatus.SUCCEEDED]
        assert len(done) == 2, steps
        assert {s.node for s in done} == {"cli-node"}
        assert all(s.attempt == 0 for s in steps if s not in done), steps
    finally:
        store.close()


def test_a_worker_recycles_after_max_seconds_with_status_75(tmp_path: Path) -> None:
    url, _client, store = _setup(tmp_path)
    store.close()
    status, out = _finish(_worker(tmp_path, url, "--max-seconds", "0.5"))
    assert status == 75, out
    assert "stopped (recycle_time)" in out, out


def test_a_worker_stops_when_idle_with_status_0_once_its_runs_are_done(tmp_path: Path) -> None:
    url, client, store = _setup(tmp_path)
    refs = [client.enqueue("cli-work", {}) for _ in range(3)]
    delayed = client.enqueue("cli-work", {}, delay=1.0)  # unfinished though nothing runs
    status, out = _finish(_worker(tmp_path, url, "--stop-when-idle", "0.3"))
    try:
        assert status == 0, out
        assert "stopped (idle)" in out, out
        for ref in [*refs, delayed]:
            assert _step(store, ref).status is cf.StepStatus.SUCCEEDED, ref
    finally:
        store.close()


def test_sigterm_drains_the_worker_its_running_step_finishes_and_is_written(
    tmp_path: Path,
) -> None:
    url, client, store = _setup(tmp_path)
    ref = client.enqueue("cli-work", {"gate": True})
    waiting = client.enqueue("cli-work", {}, delay=0.5)
    worker = _worker(tmp_path, url, "--workers", "1", "--drain-timeout", "60")
    try:
        _when_started(tmp_path, worker)
        worker.send_signal(signal.SIGTERM)
        # Draining: the running step is let finish; nothing new is claimed, though the
        # delayed run is due by now or soon. The gate opens only once the worker said its
        # claim loop had ended: released sooner, the step's slot could free up before the
        # signal was seen (a busy machine), and that claim would be no fault of the drain.
        said = _lines_until(worker, "claims nothing more (drained)")
        (tmp_path / "release").touch()
        status, out = _finish(worker)
        out = "".join(said) + out
        assert status == 0, out
        assert "stopped (drained); 0 attempt(s) handed back" in out, out
        step = _step(store, ref)
        assert (step.status, step.attempt, step.node) == (cf.StepStatus.SUCCEEDED, 1, "cli-node")
        assert _step(store, waiting).attempt == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        store.close()


def test_a_second_signal_hands_the_running_step_back_at_once(tmp_path: Path) -> None:
    url, client, store = _setup(tmp_path)
    ref = client.enqueue("cli-work", {"gate": True})
    worker = _worker(tmp_path, url, "--drain-timeout", "600")
    try:
        _when_started(tmp_path, worker)
        worker.send_signal(signal.SIGTERM)
        _lines_until(worker, "draining")
        worker.send_signal(signal.SIGINT)
        status, out = _finish(worker)
        assert status == 0, out
        # "drained", or "requested" when the second signal landed before the drain began.
        assert "attempt(s) handed back" in out, out
        assert "; 1 attempt(s) handed back" in out, out
        step = _step(store, ref)
        assert (step.status, step.attempt, step.failures) == (cf.StepStatus.READY, 1, 0)
    finally:
        (tmp_path / "release").touch()
        if worker.poll() is None:
            worker.kill()
        store.close()
