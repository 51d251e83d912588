"""A small Django project (``project/``: settings, the ``shop`` app with one model) on SQLite
(``default``) and Postgres (``postgres``), set up once per test process.

Without ``CAIRNFLOW_TEST_POSTGRES_URL`` the Postgres tests are skipped, saying why,
unless ``$CI`` is set: then they fail, since a CI run that skips its database proves
nothing. The process's table prefix keeps its shop table and store apart from other
test processes on the shared server; both are dropped at the end.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PROJECT = Path(__file__).parent / "project"
_SQLITE_DIR = tempfile.mkdtemp(prefix="cairnflow-django-")
os.environ["CAIRNFLOW_DJANGO_PREFIX"] = f"dj{secrets.token_hex(4)}_"
os.environ["CAIRNFLOW_DJANGO_SQLITE"] = str(Path(_SQLITE_DIR) / "shop.db")
os.environ["DJANGO_SETTINGS_MODULE"] = "shop_settings"
sys.path.insert(0, str(PROJECT))

import django  # noqa: E402 - after the environment the settings read

django.setup()
# Set up now; the variable would make pytest-django (when installed) in pytest-xdist's
# workers import the settings before this file put the project on the path.
del os.environ["DJANGO_SETTINGS_MODULE"]

import cairnflow_django  # noqa: E402
from django.db import connections  # noqa: E402

ALIASES = ["default", "postgres"]


def _unblocked(request: pytest.FixtureRequest) -> contextlib.AbstractContextManager[Any]:
    """Database access, also where pytest-django is installed (it blocks it by default).

    These tests use the project's real databases and transactions, committed and rolled
    back as a view's are, not pytest-django's test databases.
    """
    if request.config.pluginmanager.hasplugin("django"):
        blocker: Any = request.getfixturevalue("django_db_blocker")
        return blocker.unblock()  # type: ignore[no-any-return]
    return contextlib.nullcontext()


@pytest.fixture(autouse=True)
def _database_access(request: pytest.FixtureRequest) -> Iterator[None]:
    with _unblocked(request):
        yield


@pytest.fixture(scope="session")
def _databases(request: pytest.FixtureRequest) -> Iterator[set[str]]:
    """Create the shop's table and migrate the store in every configured database."""
    from shop.models import Order

    ready: set[str] = set()
    with _unblocked(request):
        yield from _create(ready, Order)


def _create(ready: set[str], order: Any) -> Iterator[set[str]]:
    try:
        for alias in ALIASES:
            if alias not in connections:
                continue
            with connections[alias].schema_editor() as editor:
                editor.create_model(order)
            ready.add(alias)
            cairnflow_django.get_client(alias).store.migrate()
        yield ready
    finally:
        for alias in ready:
            cairnflow_django.get_client(alias).store.drop_tables()
            with connections[alias].schema_editor() as editor:
                editor.delete_model(order)
        cairnflow_django.reset()
        connections.close_all()
        shutil.rmtree(_SQLITE_DIR, ignore_errors=True)


@pytest.fixture(params=ALIASES)
def alias(request: pytest.FixtureRequest, _databases: set[str]) -> str:
    """The database alias a test runs on: ``default`` (SQLite) or ``postgres``."""
    name: str = request.param
    if name not in _databases:
        why = "CAIRNFLOW_TEST_POSTGRES_URL is not set"
        if os.environ.get("CI"):
            pytest.fail(f"{why} ($CI is set: the Postgres tests must run here)", pytrace=False)
        pytest.skip(why)
    from shop.models import Order

    Order.objects.using(name).all().delete()  # each test starts without orders
    return name
