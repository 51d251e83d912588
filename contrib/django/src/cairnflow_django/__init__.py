"""cairnflow for Django: enqueue inside ``transaction.atomic()``, wake the workers on ``on_commit``.

The core's ``client.enqueue_tx(tx, ...)`` (``Cap.TRANSACTIONAL_ENQUEUE``) writes the runs on
the application's own DB-API connection, inside its open transaction. Django holds that
connection (``connection.connection``: a ``sqlite3`` or psycopg 3 connection) and opens its
transaction in ``atomic()``: :func:`enqueue` writes there, so a run commits with the
view's rows or rolls back with them (a nested ``atomic()`` that rolls back to its
savepoint takes the run with it), and asks ``transaction.on_commit`` to wake the workers:
after the outermost COMMIT, never before it, never after a rollback (Django drops the
callbacks of a rolled-back block).

The store must be in the database the run is enqueued on: ``CAIRNFLOW['URL']``, or the
URL built from ``DATABASES`` (see :mod:`cairnflow_django._conf`). The web process's client
(:func:`get_client`) is made once per process and database and never started: it
enqueues and reads; ``python manage.py cairn_worker`` runs the work.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, transaction

from cairnflow import CairnError, Client, RunRef, Workflow, open_store

from ._conf import Config, config

__all__ = ["Config", "config", "enqueue", "get_client", "load_workflows", "reset"]

__version__ = "0.1.0"

_clients: dict[str, Client] = {}
_lock = threading.Lock()


def get_client(using: str | None = None) -> Client:
    """The client on the store in database ``using`` (default ``default``), made once.

    Its workflows are ``CAIRNFLOW['APP']``'s, its options ``CAIRNFLOW['CLIENT']``. It is
    never started here: a web process enqueues, signals and reads; workers run elsewhere.
    """
    alias = using or DEFAULT_DB_ALIAS
    with _lock:
        client = _clients.get(alias)
        if client is None:
            conf = config()
            store = open_store(conf.store_url(alias), **conf.options)
            try:
                client = Client(store, **conf.client)
                if conf.app is not None:
                    client.register(*load_workflows(conf.app))
            except BaseException:
                store.close()
                raise
            _clients[alias] = client
    return client


def reset() -> None:
    """Forget the clients made so far and close their stores (tests, a settings change)."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.stop()
        client.store.close()


def enqueue(
    workflow: str | Workflow,
    payload: Any = None,
    *,
    using: str | None = None,
    key: str | None = None,
    delay: float | timedelta | None = None,
    labels: Mapping[str, str] | None = None,
    queue: str | None = None,
) -> RunRef:
    """Enqueue a run in the open ``transaction.atomic()`` of database ``using``.

    The options are :meth:`cairnflow.Client.enqueue`'s. The run commits or rolls back
    with the transaction; the workers are woken on ``on_commit``. A held idempotency
    ``key`` raises :class:`cairnflow.DuplicateRun` and leaves the transaction usable.
    Outside ``atomic()`` (autocommit) nothing is written: use ``get_client().enqueue``.
    """
    alias = using or DEFAULT_DB_ALIAS
    connection = transaction.get_connection(alias)
    if not connection.in_atomic_block:
        raise CairnError(
            f"cairnflow_django.enqueue() writes in the transaction of database {alias!r}, "
            f"but none is open: call it inside `with transaction.atomic():` (or use "
            f"get_client().enqueue(...) to enqueue on its own)"
        )
    client = get_client(alias)
    connection.ensure_connection()
    ref = client.enqueue_tx(
        connection.connection, workflow, payload, key=key, delay=delay, labels=labels, queue=queue
    )
    transaction.on_commit(functools.partial(client.wake, others=True), using=alias)
    return ref


def load_workflows(spec: str) -> list[Workflow]:
    """The workflows ``module:attribute`` names: a Workflow, a list of them, or a callable
    returning either (what ``cairn worker --app`` takes)."""
    module_name, _, attr = spec.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if callable(target) and not isinstance(target, Workflow):
        target = target()
    found = [target] if isinstance(target, Workflow) else list(target)
    if not found or not all(isinstance(w, Workflow) for w in found):
        raise CairnError(f"{spec} must be a Workflow, a list of workflows, or a callable")
    return found
