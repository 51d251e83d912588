"""The shop (``tests/app/shop``) deployed as a reader would: each part a process of its own.

A database per test: a SQLite file of its own, or a Postgres database of its own
(``CAIRNFLOW_TEST_POSTGRES_URL`` names the server; the role needs CREATEDB), dropped
afterwards. Without the Postgres URL its tests are skipped, saying why, unless ``$CI``
is set: then they fail, since a CI run that skips its database proves nothing.

Servers bind 127.0.0.1. The web application and the dashboard are given a port found
free just before they start; one taken in between by another process is seen in the
server's output and the server is started again on another port. Every wait is a
generous deadline polled, never a fixed sleep: the machine may be busy.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # shop_deploy, beside this file

from shop_deploy import (
    DEADLINE,
    HERE,
    TOKEN,
    Database,
    Deployment,
    Process,
    ProcessExited,
    answers,
    free_port,
)


def _postgres(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "shop.db"
        yield Database("sqlite", f"sqlite:///{path}", f"sqlite:///{path}")
        return
    server = os.environ.get("CAIRNFLOW_TEST_POSTGRES_URL")
    if not server:
        why = "CAIRNFLOW_TEST_POSTGRES_URL is not set"
        if os.environ.get("CI"):
            pytest.fail(f"{why} ($CI is set: the Postgres tests must run here)", pytrace=False)
        pytest.skip(why)
    import psycopg

    name = f"cairnflow_app_{secrets.token_hex(4)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = _postgres(server, name)
    try:
        yield Database("postgres", url, "postgresql+psycopg://" + url.split("://", 1)[1])
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def deployment(database: Database, tmp_path: Path) -> Iterator[Deployment]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        "SHOP_DATABASE_URL": database.sqlalchemy_url,
        "CAIRNFLOW_URL": database.store_url,
        "SHOP_POLL_INTERVAL": "0.25",
        "CAIRNFLOW_DASHBOARD_TOKEN": TOKEN,
    }
    env.pop("CAIRNFLOW_DASHBOARD_USER", None)
    env.pop("CAIRNFLOW_DASHBOARD_PASSWORD", None)
    cairn = [sys.executable, "-m", "cairnflow"]
    # Once per deploy, before the new code starts (docs/guides/web-app.md).
    migrate = subprocess.run(
        [*cairn, "migrate", database.store_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    started: list[Process] = []

    def serve(name: str, argv: Callable[[int], list[str]], ready_path: str) -> str:
        for attempt in range(3):
            port = free_port()
            process = Process(name, argv(port), env, tmp_path / f"{name}-{attempt}.log")
            started.append(process)
            base = f"http://127.0.0.1:{port}"
            try:
                process.wait_for(answers(base + ready_path), "answering")
            except ProcessExited:
                if "address already in use" not in process.output().lower():
                    raise
                continue  # the port was taken after it was found free: another one
            return base
        raise AssertionError(f"{name}: no free port in 3 tries")

    try:
        web = serve(
            "web",
            lambda port: [
                sys.executable,
                "-m",
                "uvicorn",
                "shop.web:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            "/health",
        )
        dashboard = serve(
            "dashboard",
            lambda port: [*cairn, "dashboard", database.store_url, "--port", str(port)],
            "/login",
        )
        worker = Process(
            "worker", [sys.executable, "-m", "shop.worker"], env, tmp_path / "worker.log"
        )
        started.append(worker)
        worker.wait_for(lambda: "metrics on " in worker.output(), "serving its metrics")
        metrics = worker.output().split("metrics on ", 1)[1].split()[0]
        yield Deployment(database, web, dashboard, metrics, worker, env)
    finally:
        for process in reversed(started):
            if process.popen.poll() is None:
                process.popen.kill()
                process.popen.wait()
