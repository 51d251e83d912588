"""What the shop's tests share: the deployment's parts, its processes, its deadline."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
DEADLINE = 120.0
"""Seconds any process or run gets to be ready or done, on a busy machine."""
TOKEN = "shop-dashboard-token-for-tests"  # a test's own credential


@dataclass
class Database:
    """The store's URL and SQLAlchemy's URL of one database."""

    engine: str
    store_url: str
    sqlalchemy_url: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Process:
    """A child process whose output goes to a file (never a pipe that could fill)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                argv, cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, ready: Callable[[], bool], what: str) -> None:
        """Poll ``ready`` until it holds; fail, with the output, if the process ends first."""
        ends = time.monotonic() + DEADLINE
        while not ready():
            if self.popen.poll() is not None:
                raise ProcessExited(self)
            if time.monotonic() > ends:
                raise AssertionError(
                    f"{self.name}: {what} not within {DEADLINE:g}s\n{self.output()}"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait; kill if it did not exit (and say so). Its exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired as late:
                self.popen.kill()
                self.popen.wait()
                hung = f"{self.name} did not exit on SIGTERM"
                raise AssertionError(f"{hung}\n{self.output()}") from late
        return self.popen.returncode


class ProcessExited(AssertionError):
    def __init__(self, process: Process) -> None:
        self.process = process
        super().__init__(
            f"{process.name} exited with {process.popen.returncode}\n{process.output()}"
        )


def answers(url: str, headers: dict[str, str] | None = None) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return httpx.get(url, headers=headers, timeout=5.0).status_code == 200
        except httpx.TransportError:
            return False

    return ready


@dataclass
class Deployment:
    """The shop's processes for one database, and where each answers."""

    database: Database
    web: str
    dashboard: str
    metrics: str
    worker: Process
    env: dict[str, str]
