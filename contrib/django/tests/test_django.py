"""Runs enqueued in ``transaction.atomic()``, woken on ``on_commit``, and the worker command,
on SQLite and Postgres.

Each test checks what the database holds after the commit or the rollback (the run, the
shop's order) and when the wake-up was sent, by the count of the application client's
notifier: never before the commit, never after a rollback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import cairnflow_django
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import override_settings
from shop.models import Order
from shop.notifier import NOTIFIER

import cairnflow as cf
from cairnflow.testing import wait_until

from .conftest import PROJECT

TIMEOUT = 60.0


@pytest.fixture
def worker(alias: str) -> Iterator[cf.Client]:
    """An idle worker on the store of ``alias``: it polls when it starts, then every 10
    minutes, so a run it finishes within a test's timeout was started by a wake-up."""
    store = cairnflow_django.get_client(alias).store
    client = cf.Client(store, poll_interval=600, notifier=NOTIFIER.inner)
    client.register(*cairnflow_django.load_workflows("shop.workflows:workflows"))
    client.start()
    yield client
    client.stop()


def _items(alias: str) -> list[str]:
    return sorted(Order.objects.using(alias).values_list("item", flat=True))


def test_a_commit_keeps_the_run_and_wakes_an_idle_worker(alias: str, worker: cf.Client) -> None:
    store = cairnflow_django.get_client(alias).store
    sent = NOTIFIER.sent
    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(item="book")
        ref = cairnflow_django.enqueue("dj-ship", {"item": "book"}, using=alias, key="o-1")
        assert store.get_run(ref.id) is None  # not committed: nobody sees it
        assert NOTIFIER.sent == sent
    assert NOTIFIER.sent == sent + 1
    info = worker.wait(ref, timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED
    assert info.result == {"shipped": {"item": "book"}}
    assert info.key == "o-1"
    assert _items(alias) == ["book"]


def test_a_rollback_drops_the_run_and_the_order_and_wakes_nobody(alias: str) -> None:
    store = cairnflow_django.get_client(alias).store
    sent = NOTIFIER.sent
    refs = []

    def refused() -> None:
        with transaction.atomic(using=alias):
            Order.objects.using(alias).create(item="lamp")
            refs.append(cairnflow_django.enqueue("dj-ship", {"item": "lamp"}, using=alias))
            raise RuntimeError("payment refused")

    with pytest.raises(RuntimeError, match="payment refused"):
        refused()
    assert NOTIFIER.sent == sent
    assert store.get_run(refs[0].id) is None
    assert _items(alias) == []


def test_a_nested_block_rolled_back_takes_its_run_and_its_wake_up(alias: str) -> None:
    store = cairnflow_django.get_client(alias).store
    sent = NOTIFIER.sent
    refs = []

    def inner() -> None:
        with transaction.atomic(using=alias):
            Order.objects.using(alias).create(item="vase")
            refs.append(cairnflow_django.enqueue("dj-ship", {"item": "vase"}, using=alias))
            raise RuntimeError("fragile")

    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(item="rug")
        with pytest.raises(RuntimeError, match="fragile"):
            inner()
    assert store.get_run(refs[0].id) is None
    assert _items(alias) == ["rug"]
    assert NOTIFIER.sent == sent  # the nested block's on_commit was dropped with it


def test_a_held_key_raises_in_the_transaction_which_stays_usable(alias: str) -> None:
    client = cairnflow_django.get_client(alias)
    held = client.enqueue("dj-ship", {"item": "first"}, key="o-7")
    sent = NOTIFIER.sent
    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(item="second")
        with pytest.raises(cf.DuplicateRun, match="o-7"):
            cairnflow_django.enqueue("dj-ship", {"item": "second"}, using=alias, key="o-7")
        Order.objects.using(alias).create(item="third")  # the transaction still works...
        assert _items(alias) == ["second", "third"]
        transaction.set_rollback(True, using=alias)  # ...and rolls back cleanly
    assert _items(alias) == []
    assert NOTIFIER.sent == sent
    assert client.store.get_run(held.id) is not None


def test_outside_atomic_nothing_is_written(alias: str) -> None:
    with pytest.raises(cf.CairnError, match=r"transaction\.atomic"):
        cairnflow_django.enqueue("dj-ship", {"item": "loose"}, using=alias)


def test_the_settings_are_checked_with_what_is_wrong() -> None:
    with (
        override_settings(CAIRNFLOW={"URL": "postgres"}),
        pytest.raises(ImproperlyConfigured, match="URL"),
    ):
        cairnflow_django.config()
    with (
        override_settings(CAIRNFLOW={"WORKERS": 3}),
        pytest.raises(ImproperlyConfigured, match="WORKERS"),
    ):
        cairnflow_django.config()
    with (
        override_settings(CAIRNFLOW={"APP": "shop.workflows"}),
        pytest.raises(ImproperlyConfigured, match="module:attribute"),
    ):
        cairnflow_django.config()


def test_the_worker_command_runs_a_run_and_stops_on_a_signal(alias: str) -> None:
    client = cairnflow_django.get_client(alias)
    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(item="clock")
        ref = cairnflow_django.enqueue("dj-ship", {"item": "clock"}, using=alias)
    command = [sys.executable, "manage.py", "cairn_worker", "--database", alias]
    command += ["--workers", "2", "--poll-interval", "0.2", "--drain-timeout", "10"]
    process = subprocess.Popen(
        command,
        cwd=PROJECT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def done() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the worker exited early:\n{process.stdout.read()}")  # type: ignore[union-attr]
            return client.info(ref).status is cf.Status.SUCCEEDED

        wait_until(done, timeout=TIMEOUT, what="the worker command to run the run")
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, output
    assert "stopped" in output
    assert client.info(ref).result == {"shipped": {"item": "clock"}}


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES:UserWarning")
def test_the_store_url_is_the_setting_or_derived_from_databases(tmp_path: Path) -> None:
    sqlite = str(tmp_path / "app.db")
    databases = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sqlite},
        "pg": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "shop",
            "USER": "app",
            "PASSWORD": "p@ss:word",
            "HOST": "db.local",
            "PORT": "5433",
        },
        "mem": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
    }
    with override_settings(DATABASES=databases, CAIRNFLOW={}):
        conf = cairnflow_django.config()
        assert conf.store_url() == f"sqlite:///{sqlite}"
        assert conf.store_url("pg") == "postgresql://app:p%40ss%3Aword@db.local:5433/shop"
        with pytest.raises(ImproperlyConfigured, match="in-memory"):
            conf.store_url("mem")
        with pytest.raises(ImproperlyConfigured, match="'nowhere'"):
            conf.store_url("nowhere")
    with override_settings(DATABASES=databases, CAIRNFLOW={"URL": "sqlite:////srv/cf.db"}):
        assert cairnflow_django.config().store_url() == "sqlite:////srv/cf.db"
        assert cairnflow_django.config().store_url("pg").startswith("postgresql://app:")


def test_the_worker_command_refuses_a_missing_app_and_a_bad_option() -> None:
    with override_settings(CAIRNFLOW={}), pytest.raises(CommandError, match="APP"):
        call_command("cairn_worker")
    with pytest.raises(CommandError, match="--workers"):
        call_command("cairn_worker", workers="0")
