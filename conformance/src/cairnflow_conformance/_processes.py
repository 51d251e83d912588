"""Worker processes for the multi-process and durability tests (POSIX).

:class:`WorkerProcesses` starts ``python -m cairnflow_conformance._worker``
with the target's ``worker_factory`` and the test's namespace, waits for the
worker to say it is ready, and at teardown makes sure nothing is left running
(a paused worker is resumed first, so it can be killed).
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import pytest

import cairnflow as cf

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
        lease: float = 5.0,
        poll: float = 0.05,
        max_reclaims: int = 5,
        interrupt: bool = True,
        schedules: bool = False,
        clock: tuple[float, int, int] | None = None,
        leader_lease: float | None = None,
        queues: Sequence[cf.QueueConfig] | None = None,
        prune: tuple[float, int] | None = None,
    ) -> WorkerProcess:
        """Start a worker and wait until its client runs.

        The default lease is long enough that a worker stalled by a loaded machine
        keeps its attempts (a test of takeovers asks for a short one).

        ``schedules`` adds the ticker workflow (fired every second); ``clock``
        (speed, epoch, since) makes its scheduling clock a
        :class:`cairnflow.clock.Scaled` one; ``leader_lease`` turns leader
        election on; ``queues`` makes it serve those queues only (``Client(queues=)``);
        ``prune`` (seconds, chunk) makes it prune finished runs older than that
        (``Client(prune_after=, prune_chunk=)``, a pass every 50 ms).
        """
        if os.name != "posix":
            pytest.skip("worker-process tests need POSIX signals (SIGKILL, SIGSTOP)")
        spec = self._require_worker_factory("this test runs the store in worker processes")
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
        if schedules:
            command.append("--schedules")
        if clock is not None:
            command += ["--clock", ":".join(str(part) for part in clock)]
        if leader_lease is not None:
            command += ["--leader-lease", str(leader_lease)]
        if prune is not None:
            command += ["--prune-after", str(prune[0]), "--prune-chunk", str(prune[1])]
        if queues is not None:
            command += ["--queues", json.dumps([dataclasses.asdict(q) for q in queues])]
        env = self._environment()
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

    def migrate_at_once(self, namespace: str, count: int) -> list[list[str]]:
        """Migrate ``namespace`` from ``count`` processes starting at one instant.

        Returns what each process applied; fails the test, with the processes'
        errors, when any of them failed.
        """
        spec = self._require_worker_factory("this test migrates from several processes")
        # After every interpreter has started and connected, even on a loaded machine.
        start_at = time.time() + 3.0 + 0.25 * count
        command = [
            sys.executable,
            "-m",
            "cairnflow_conformance._migrator",
            "--factory",
            spec,
            "--namespace",
            namespace,
            "--config",
            json.dumps(dict(self._target.worker_config)),
            "--start-at",
            str(start_at),
        ]
        racers = [
            subprocess.Popen(  # noqa: S603 - our interpreter, our module, checked args
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._environment(),
                text=True,
            )
            for _ in range(count)
        ]
        outputs = [racer.communicate(timeout=_READY_TIMEOUT * 4) for racer in racers]
        failed = [err for racer, (_, err) in zip(racers, outputs, strict=True) if racer.returncode]
        if failed:
            pytest.fail(
                f"{len(failed)} of {count} processes migrating at once failed; the first:\n"
                f"{failed[0][-3000:]}",
                pytrace=False,
            )
        return [list(json.loads(out.strip().splitlines()[-1])) for out, _ in outputs]

    def _require_worker_factory(self, why: str) -> str:
        spec = self._target.worker_factory
        if spec is None:
            pytest.fail(
                f"{why}: give the StoreTarget a worker_factory ('module:function', importable "
                f"in a fresh interpreter)",
                pytrace=False,
            )
        return spec

    @staticmethod
    def _environment() -> dict[str, str]:
        env = dict(os.environ)
        # A process imports what this one can (the worker factory may live next to the
        # tests rather than in an installed package).
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        return env

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
