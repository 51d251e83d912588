"""The code of ``docs/guides/web-app.md``, run as it is written there, on Postgres (#19).

Each block whose first line is ``# <file>.py`` is written to that file in a
directory of its own and imported from there: ``flows.py``, ``web_app.py`` (a
Starlette application, driven through Starlette's test client, a worker client
running the steps) and ``enqueue_orders.py`` (a plain script, run in a process).
The application's database is a schema of the test's own (``search_path``), so
its ``orders`` table and the store's tables never meet another test's.

Starlette (with httpx, for its test client) is installed in ``nox -s tests`` with
the contrib distributions' test extras; without it the Starlette recipe is skipped,
saying so, except under ``$CI``, where it fails.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

import cairnflow as cf

pytestmark = pytest.mark.timeout(180)

GUIDE = Path(__file__).parents[3] / "docs" / "guides" / "web-app.md"


def guide_files() -> dict[str, str]:
    """The guide's files: every python block whose first line is ``# name.py``, by name."""
    text = GUIDE.read_text(encoding="utf-8")
    files = {}
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        first = block.split("\n", 1)[0]
        named = re.match(r"# ([\w/]+\.py)", first)
        if named:
            files[named.group(1)] = block
    return files


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The guide's files in a directory on ``sys.path``; its modules forgotten afterwards."""
    for name, code in guide_files().items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for module in ("flows", "web_app", "enqueue_orders"):
        sys.modules.pop(module, None)


@pytest.fixture
def database(postgres_url: str, admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    """The application's database URL: a schema of its own first on the ``search_path``."""
    schema = f"guide_{uuid.uuid4().hex[:10]}"
    admin_conn.execute(f'CREATE SCHEMA "{schema}"')
    admin_conn.execute(f'CREATE TABLE "{schema}".orders (id TEXT PRIMARY KEY, total INT)')
    separator = "&" if "?" in postgres_url else "?"
    yield f"{postgres_url}{separator}options={quote(f'-c search_path={schema}')}"
    admin_conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_the_guide_names_its_files() -> None:
    assert {"flows.py", "web_app.py", "shop/jobs.py", "shop/views.py", "enqueue_orders.py"} <= set(
        guide_files()
    )


def _starlette_testclient() -> Any:
    try:
        return importlib.import_module("starlette.testclient").TestClient
    except ImportError as missing:
        why = f"the guide's Starlette recipe needs starlette and httpx ({missing})"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; $CI is set: it must run here", pytrace=False)
        pytest.skip(why)


def test_the_starlette_recipe(
    app_dir: Path,
    database: str,
    monkeypatch: pytest.MonkeyPatch,
    admin_conn: psycopg.Connection[Any],
) -> None:
    test_client = _starlette_testclient()
    monkeypatch.setenv("DATABASE_URL", database)
    monkeypatch.setenv("CAIRNFLOW_URL", "postgresql://?table_prefix=shop_")
    flows = importlib.import_module("flows")
    web_app = importlib.import_module("web_app")
    worker_store = cf.open_store(database, table_prefix="shop_")
    worker_store.migrate()  # `cairn migrate`, once per deploy
    try:
        with cf.Client(worker_store, poll_interval=0.05) as worker:
            worker.register(*flows.workflows)
            with test_client(web_app.app) as http:
                created = http.post("/orders", json={"id": "A-1", "total": 120})
                assert created.status_code == 201, created.text
                run = created.json()["run"]
                # The order and its run committed together.
                schema_orders = admin_conn.execute(
                    "SELECT id FROM " + _schema_of(database) + ".orders"
                ).fetchall()
                assert schema_orders == [("A-1",)]
                cf.testing.wait_until(
                    lambda: worker.info(run).steps["approval"].status is cf.StepStatus.WAITING,
                    timeout=60,
                )
                approved = http.post(f"/orders/{run}/approve")
                assert approved.json() == {"signal": "delivered"}
                worker.wait(run, timeout=60)
                shown = http.get(f"/orders/{run}").json()
                assert shown == {"status": "succeeded", "result": "shipped, approved by ops"}
    finally:
        worker_store.drop_tables()
        worker_store.close()


def _schema_of(database: str) -> str:
    found = re.search(r"search_path%3D(\w+)", database)
    assert found is not None
    return f'"{found.group(1)}"'


def run_script(app_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "enqueue_orders.py"],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_plain_script_recipe(app_dir: Path, database: str) -> None:
    url = f"{database}&table_prefix=script_"
    store = cf.open_store(url)
    store.migrate()
    try:
        env = {**os.environ, "CAIRNFLOW_URL": url, "PYTHONPATH": str(app_dir)}
        first = run_script(app_dir, env)
        assert first.returncode == 0, first.stderr
        ids = first.stdout.split()
        assert len(ids) == 3
        assert {store.get_run(run_id).workflow for run_id in ids} == {"fulfil"}  # type: ignore[union-attr]
        again = run_script(app_dir, env)
        assert again.returncode == 1 and "DuplicateRun" in again.stderr
    finally:
        store.drop_tables()
        store.close()
