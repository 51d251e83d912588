"""Worker processes for the multi-process and durability tests (POSIX).

:class:`WorkerProcesses` starts ``python -m cairnflow_conformance._worker``
with the target's ``worker_factory`` and the test's namespace, waits for the
worker to say it is ready, and at teardown makes sure nothing is left running
(a paused worker is resumed first, so it can be killed).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from ._target import StoreTarget

__all__ = ["WorkerProcess", "WorkerProcesses"]

_READY_TIMEOUT = 30.0


class WorkerProcess:
    """One running kit worker."""

    def __init__(self, node_id: str, popen: subprocess.Popen[str], log: Path) -> None:
        self.node_id = node_id
        self.popen = popen
        self.log_path = log
        self.paused = False

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.popen.pid

    @property
    def alive(self) -> bool:
        """True until the process has exited."""
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status (``-9`` after SIGKILL), or None while it runs."""
        return self.popen.poll()

    def log(self) -> str:
        """What the worker wrote on stderr so far (for failure messages)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: a crash; nothing of the process runs again."""
        if self.alive:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: a stall; every thread of the process stops where it is."""
        self.popen.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT: the stalled process carries on as if nothing happened."""
        self.popen.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM: a clean stop (the client hands running steps back); return the status."""
        if self.paused:
            self.resume()
        if self.alive:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.send_signal(signal.SIGUSR1)  # its threads' stacks, into the log
            time.sleep(0.5)
            self.kill()
            raise AssertionError(
                f"worker {self.node_id} did not stop within {timeout:g}s; log:\n{self.log()}"
            ) from None

    def close(self) -> None:
        """Make sure the process is gone (teardown)."""
        if self.alive:
            if self.paused:
                self.resume()
            self.kill()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                stream.close()

    def __repr__(self) -> str:
        return f"<WorkerProcess {self.node_id} pid={self.pid} returncode={self.returncode}>"


class WorkerProcesses:
    """Starts kit workers on one namespace; every one is gone after :meth:`close`."""

    def __init__(self, target: StoreTarget, namespace: str, directory: Path) -> None:
        self._target = target
        self._namespace = namespace
        self._directory = directory
        self._started: list[WorkerProcess] = []

    def spawn(
        self,
        node_id: str,
        *,
        workers: int = 2,
        lease: float = 1.0,
        poll: float = 0.05,
        max_reclaims: int = 5,
        interrupt: bool = True,
    ) -> WorkerProcess:
        """Start a worker and wait until its client runs."""
        if os.name != "posix":
            pytest.skip("worker-process tests need POSIX signals (SIGKILL, SIGSTOP)")
        spec = self._target.worker_factory
        if spec is None:
            pytest.fail(
                "this test runs the store in worker processes: give the StoreTarget a "
                "worker_factory ('module:function', importable in a fresh interpreter)",
                pytrace=False,
            )
        self._directory.mkdir(parents=True, exist_ok=True)
        log = self._directory / f"{node_id}.log"
        command = [
            sys.executable,
            "-m",
            "cairnflow_conformance._worker",
            "--factory",
            spec,
            "--namespace",
            self._namespace,
            "--config",
            json.dumps(dict(self._target.worker_config)),
            "--node-id",
            node_id,
            "--workers",
            str(workers),
            "--lease",
            str(lease),
            "--poll",
            str(poll),
            "--max-reclaims",
            str(max_reclaims),
        ]
        if not interrupt:
            command.append("--no-interrupt")
        env = dict(os.environ)
        # The worker imports what this process can import (the worker factory may
        # live next to the tests rather than in an installed package).
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        with log.open("w", encoding="utf-8") as stderr:
            popen = subprocess.Popen(  # noqa: S603 - our interpreter, our module, checked args
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                text=True,
            )
        worker = WorkerProcess(node_id, popen, log)
        self._started.append(worker)
        assert popen.stdout is not None
        line = _read_line(popen.stdout, _READY_TIMEOUT)
        if line.strip() != "READY":
            worker.close()
            raise AssertionError(
                f"worker {node_id} did not start (said {line.strip()!r}, exit status "
                f"{popen.poll()}); log:\n{worker.log()}"
            )
        return worker

    @property
    def started(self) -> list[WorkerProcess]:
        """Every worker started so far, in order."""
        return list(self._started)

    def logs(self) -> str:
        """The logs of every worker, for a failure message."""
        return "\n".join(f"--- {w.node_id} ({w.returncode}) ---\n{w.log()}" for w in self._started)

    def close(self) -> None:
        """Kill whatever still runs."""
        for worker in self._started:
            worker.close()


def _read_line(stream: IO[str], timeout: float) -> str:
    """One line from a pipe, or "" after ``timeout`` seconds or at EOF."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return ""
        ready, _, _ = select.select([stream], [], [], left)
        if ready:
            return stream.readline()
