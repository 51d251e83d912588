"""docs/tutorial.md, run as a reader would: its files written, its commands run, in order.

Every fenced block with a ``title`` is part of the tutorial's script: a ``python`` block titled
``NAME.py`` is written to the working directory; a ``bash`` block titled ``worker`` starts in
the background (the reader's first terminal); every other titled ``bash`` block runs and must
exit 0. ``RUN_ID`` in a command is the id ``enqueue.py`` printed. Untitled blocks are
illustrations and are not run.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import cairnflow as cf

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BLOCK = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```', re.S | re.M)


def _argv(line: str) -> list[str]:
    words = shlex.split(line)
    if words[0] == "cairn":
        return [sys.executable, "-m", "cairnflow", *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    raise AssertionError(f"the tutorial runs a command this test does not know: {line!r}")


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    blocks = BLOCK.findall(TUTORIAL.read_text(encoding="utf-8"))
    assert [title for _, title, _ in blocks] == [
        "flows.py",
        "migrate",
        "worker",
        "enqueue.py",
        "run-enqueue",
        "inspect",
    ], "the tutorial's steps changed: update this test with them"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "120"}
    worker: subprocess.Popen[str] | None = None
    run_id = None
    printed: list[str] = []
    try:
        for language, title, body in blocks:
            if language == "python":
                (tmp_path / title).write_text(body, encoding="utf-8")
                continue
            for line in filter(None, (line.strip() for line in body.splitlines())):
                if title == "worker":
                    worker = subprocess.Popen(
                        _argv(line),
                        cwd=tmp_path,
                        env=env,
                        text=True,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                    )
                    continue
                command = line
                if "RUN_ID" in line:
                    assert run_id is not None
                    command = line.replace("RUN_ID", run_id)
                done = subprocess.run(
                    _argv(command),
                    cwd=tmp_path,
                    env=env,
                    text=True,
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
                assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
                printed.append(done.stdout)
                if title == "run-enqueue":
                    run_id, outcome = done.stdout.strip().splitlines()[-2:]
                    assert outcome == "succeeded receipt for A-1: 42 EUR"
        assert worker is not None and worker.poll() is None, "the worker stopped by itself"
        worker.send_signal(signal.SIGINT)  # Ctrl-C: it drains and exits 0
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0, out
        assert "charging A-1 (attempt 1)" in out
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
    assert run_id is not None and run_id in printed[-2], "cairn runs does not list the run"
    assert "receipt for A-1" in printed[-1], "cairn show does not show the output"
    store = cf.open_store(f"sqlite:///{tmp_path / 'tutorial.db'}")
    try:
        info = cf.Client(store).info(run_id)
    finally:
        store.close()
    assert info.status is cf.Status.SUCCEEDED
    assert info.steps["charge"].attempts == 1
