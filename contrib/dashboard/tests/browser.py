"""A real dashboard for browser tests and screenshots: ``cairn dashboard`` in a subprocess
on 127.0.0.1 (a free port), and a system Chromium driven by Playwright.

Chromium comes from the system's packages (Debian's ``chromium``), never from
``playwright install``; :func:`chromium_path` finds it. Where it is missing a test
is skipped, except under ``CI=1``, where that is a failure saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import PASSWORD, TOKEN, USER

HERE = Path(__file__).parent


def chromium_path() -> str:
    """The system Chromium, or a skip (a failure under CI=1) saying how to get it."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    message = (
        "no system Chromium: apt-get install -y chromium (Debian's package; "
        "the dashboard's browser tests never download a browser)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
    raise AssertionError("unreachable")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def dashboard(url: str, *extra: str) -> Iterator[str]:
    """``cairn dashboard URL`` on a free port; yields its base URL, stops it after."""
    port = free_port()
    env = {
        **os.environ,
        "CAIRNFLOW_DASHBOARD_USER": USER,
        "CAIRNFLOW_DASHBOARD_PASSWORD": PASSWORD,
        "CAIRNFLOW_DASHBOARD_TOKEN": TOKEN,
    }
    command = [sys.executable, "-m", "cairnflow", "dashboard", url, "--port", str(port),
               "--app", "flows:workflows", *extra]  # fmt: skip
    process = subprocess.Popen(command, cwd=HERE, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/login", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if process.poll() is not None:
                out = process.stdout.read() if process.stdout else ""
                raise AssertionError(f"cairn dashboard exited {process.returncode}: {out}")
            if time.monotonic() > deadline:
                raise AssertionError("cairn dashboard did not answer within 60s")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
