"""Worker processes a chaos test starts, kills, stalls and replaces (POSIX).

:class:`Fleet` runs ``python -m chaos_worker`` processes on one store and
keeps their number up: a worker that died (killed by the test, by a fault, or
by the poison step) is replaced by a fresh one with a new node id. It counts
what landed: a SIGKILL sent to a live process, a SIGSTOP held for longer than
the lease, a process that killed itself. Teardown leaves nothing running (a
paused worker is resumed first, so that it can be killed).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cairnflow.testing import FAULTS_ENV

__all__ = ["Fleet", "Landed", "Worker"]

_READY_TIMEOUT = 60.0
HERE = Path(__file__).parent


class Worker:
    """One running chaos worker."""

    def __init__(self, node: str, popen: subprocess.Popen[str], log: Path) -> None:
        self.node = node
        self.popen = popen
        self.log_path = log
        self.paused = False
        self.killed = False
        """True once the test sent it SIGKILL (a death the test caused)."""

    @property
    def alive(self) -> bool:
        """True until the process has exited."""
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status (``-9`` after SIGKILL), or None while it runs."""
        return self.popen.poll()

    def log(self) -> str:
        """What the worker wrote on stderr so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def kill(self) -> bool:
        """SIGKILL; True when it landed on a live process."""
        if not self.alive:
            return False
        self.killed = True
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)
        self.paused = False
        return True

    def pause(self) -> bool:
        """SIGSTOP; True when it landed on a live process."""
        if not self.alive:
            return False
        self.popen.send_signal(signal.SIGSTOP)
        self.paused = True
        return True

    def resume(self) -> None:
        """SIGCONT."""
        if self.alive:
            self.popen.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean stop; return the exit status."""
        if self.paused:
            self.resume()
        if self.alive:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.send_signal(signal.SIGUSR1)  # its threads' stacks, into its log
            time.sleep(0.5)
            self.kill()
            raise AssertionError(
                f"worker {self.node} did not stop within {timeout:g}s; log:\n{self.log()}"
            ) from None

    def close(self) -> None:
        """Make sure the process is gone."""
        if self.alive:
            if self.paused:
                self.resume()
            self.kill()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                stream.close()


@dataclass
class Landed:
    """What the fleet's disruptions did (only what hit a live process counts)."""

    kills: int = 0
    """SIGKILLs the test sent."""
    self_kills: int = 0
    """Workers that died of a SIGKILL the test did not send (a fault, the poison step)."""
    stalls: int = 0
    """SIGSTOPs held for longer than a lease, then SIGCONT."""
    replaced: int = 0
    deaths: list[str] = field(default_factory=list)
    """``node: status`` of every worker that died before the end."""


class Fleet:
    """``size`` chaos workers on the store at ``url``; see the module docstring."""

    def __init__(
        self,
        url: str,
        directory: Path,
        *,
        size: int = 3,
        options: dict[str, Any] | None = None,
        workers: int = 2,
        lease: float = 3.0,
        poll: float = 0.2,
        max_reclaims: int = 5,
        faults: Sequence[str] = (),
    ) -> None:
        self.url = url
        self.directory = directory
        self.history = directory / "history"
        self.size = size
        self.options = options or {}
        self.threads = workers
        self.lease = lease
        self.poll = poll
        self.max_reclaims = max_reclaims
        self.faults = list(faults)
        """``CAIRNFLOW_FAULTS`` of the workers, taken in turn by each one started."""
        self.landed = Landed()
        self.workers: list[Worker] = []
        self._all: list[Worker] = []
        self._count = 0

    # -- starting --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start ``size`` workers at once, and wait until each one says READY."""
        launched = [self._launch() for _ in range(self.size)]
        self.workers += [self._ready(worker) for worker in launched]

    def spawn(self) -> Worker:
        """Start one worker and wait until it says READY."""
        return self._ready(self._launch())

    def _launch(self) -> Worker:
        self._count += 1
        node = f"w{self._count}"
        log = self.directory / f"{node}.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), *(p for p in sys.path if p)])
        env.pop(FAULTS_ENV, None)
        if self.faults:
            env[FAULTS_ENV] = self.faults[(self._count - 1) % len(self.faults)]
        command = [
            sys.executable,
            "-m",
            "chaos_worker",
            "--url",
            self.url,
            "--options",
            json.dumps(self.options),
            "--node",
            node,
            "--history",
            str(self.history),
            "--workers",
            str(self.threads),
            "--lease",
            str(self.lease),
            "--poll",
            str(self.poll),
            "--max-reclaims",
            str(self.max_reclaims),
        ]
        self.directory.mkdir(parents=True, exist_ok=True)
        with log.open("w", encoding="utf-8") as stderr:
            popen = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                text=True,
            )
        worker = Worker(node, popen, log)
        self._all.append(worker)
        return worker

    def _ready(self, worker: Worker) -> Worker:
        """``worker``, once it said READY (or died of a fault of its own while starting)."""
        assert worker.popen.stdout is not None
        line = _read_line(worker.popen.stdout, _READY_TIMEOUT)
        if line.strip() != "READY":
            if not worker.alive and worker.returncode == -signal.SIGKILL:
                return worker  # a fault killed it while it started: replaced later
            worker.close()
            raise AssertionError(
                f"worker {worker.node} did not start (said {line.strip()!r}, exit status "
                f"{worker.returncode}); log:\n{worker.log()}"
            )
        return worker

    # -- disruptions ---------------------------------------------------------------------------
    def alive(self) -> list[Worker]:
        """The workers running now (paused ones included)."""
        return [w for w in self.workers if w.alive]

    def kill(self, worker: Worker) -> None:
        """SIGKILL ``worker`` (counted if it landed); it is replaced at the next :meth:`keep_up`."""
        if worker.kill():
            self.landed.kills += 1

    def stall(self, worker: Worker, seconds: float) -> None:
        """SIGSTOP ``worker`` for ``seconds``, then SIGCONT (counted if it landed)."""
        if worker.pause():
            time.sleep(seconds)
            worker.resume()
            if worker.alive:
                self.landed.stalls += 1

    def keep_up(self) -> None:
        """Replace every worker that died; count the deaths the test did not cause."""
        for at, worker in enumerate(self.workers):
            if worker.alive:
                continue
            status = worker.returncode
            self.landed.deaths.append(f"{worker.node}: {status}")
            if not worker.killed and status == -signal.SIGKILL:
                self.landed.self_kills += 1
            self.workers[at] = self.spawn()
            self.landed.replaced += 1

    # -- ending ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every worker cleanly (a clean stop must exit 0)."""
        for worker in self.workers:
            if worker.paused:
                worker.resume()
        statuses = {w.node: w.stop() for w in self.workers if w.alive}
        bad = {node: status for node, status in statuses.items() if status != 0}
        assert not bad, f"workers did not stop cleanly: {bad}\n{self.logs()}"

    def logs(self, tail: int = 4000) -> str:
        """The end of every worker's log, for a failure message."""
        return "\n".join(f"--- {w.node} ({w.returncode}) ---\n{w.log()[-tail:]}" for w in self._all)

    def log_count(self, text: str) -> int:
        """How many times ``text`` appears in the logs of every worker started."""
        return sum(w.log().count(text) for w in self._all)

    def close(self) -> None:
        """Kill whatever still runs."""
        for worker in self._all:
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
