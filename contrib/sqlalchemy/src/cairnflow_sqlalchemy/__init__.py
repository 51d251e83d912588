"""Enqueue cairnflow runs inside a SQLAlchemy transaction; wake the workers after its commit.

The core's ``client.enqueue_tx(tx, ...)`` (``Cap.TRANSACTIONAL_ENQUEUE``) writes the runs
on the application's own DB-API connection (psycopg 3, PyMySQL, sqlite3), inside its open
transaction, so they commit or roll back with the application's rows. SQLAlchemy hides that
connection behind its pool and begins its transactions lazily: :func:`enqueue` begins the
transaction SQLAlchemy's way (a Session's or a Connection's autobegin), hands the core the
DB-API connection under it (``Connection.connection.driver_connection``, no second
connection), and arranges the wake-up.

The wake-up must come after the COMMIT, never before (a worker woken earlier finds
nothing, then sleeps until its next poll) and never after a rollback. SQLAlchemy tells a
:class:`~sqlalchemy.orm.Session` when its transaction committed (its ``after_commit``
event), so a Session's wake-ups are sent by themselves. A Core
:class:`~sqlalchemy.engine.Connection` has no event after its COMMIT (its ``commit`` event
comes before it): :func:`begin` is ``engine.begin()`` / ``connection.begin()`` that sends
them once its block has committed. The wake-up is ``client.wake(others=True)``: the
client's own dispatcher when it runs, and the other clients through its notifier (on
Postgres the store's ``NOTIFY`` is also queued in the transaction and sent at its commit).
A wake-up is a hint: one lost or sent twice changes when a run starts, never whether.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session, scoped_session

from cairnflow import CairnError, Client, RunRef, Workflow

__all__ = ["Bind", "begin", "dbapi_connection", "enqueue"]

__version__ = "0.1.0"

Bind = Session | scoped_session[Any] | Connection
"""What :func:`enqueue` takes: an ORM Session (or a scoped_session) or a Core Connection."""

_PENDING = "cairnflow_sqlalchemy.wake"
"""The key, in a Session's ``info``, of the clients to wake after its transaction commits."""

_CONNECTION_WAKES: weakref.WeakKeyDictionary[Connection, list[Client]] = weakref.WeakKeyDictionary()
"""The clients to wake after a Core Connection's :func:`begin` block commits."""


def dbapi_connection(bind: Bind) -> Any:
    """The DB-API connection under ``bind``, with its transaction begun.

    A Session begins its transaction (``session.connection()``); a Connection
    outside a transaction begins one (``connection.begin()``), which its
    ``commit()`` or ``rollback()`` ends, as with SQLAlchemy's autobegin. What
    the core's ``enqueue_tx`` takes.
    """
    driver = _connection(bind).connection.driver_connection
    if driver is None:
        raise CairnError("the SQLAlchemy connection has no DB-API connection (it was invalidated)")
    return driver


def enqueue(
    client: Client,
    bind: Bind,
    workflow: str | Workflow,
    payload: Any = None,
    *,
    key: str | None = None,
    delay: float | timedelta | None = None,
    labels: Mapping[str, str] | None = None,
    queue: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> RunRef:
    """Enqueue a run of ``workflow`` in ``bind``'s transaction: it commits or rolls back with it.

    ``bind`` is a Session (or scoped_session) or a Core Connection on the
    store's database; the options are :meth:`cairnflow.Client.enqueue`'s
    (``headers``: short strings every step reads as ``ctx.headers``, on a store
    declaring ``Cap.HEADERS``; the client's enqueue hooks add theirs). A
    held idempotency ``key`` raises :class:`cairnflow.DuplicateRun` and leaves
    the transaction usable (the runs are written in a savepoint where the
    engine needs one): roll it back, or go on and commit the application's rows.

    The wake-up is sent after the commit: by itself for a Session, at the end
    of a :func:`begin` block for a Connection (a Connection committed by hand
    then calls ``client.wake(others=True)``). Nothing is sent after a rollback.
    """
    connection = dbapi_connection(bind)
    ref = client.enqueue_tx(
        connection, workflow, payload,
        key=key, delay=delay, labels=labels, queue=queue, headers=headers,
    )  # fmt: skip
    if isinstance(bind, Connection):
        _add(_CONNECTION_WAKES.setdefault(bind, []), client)
    else:
        _add(_session_wakes(_session(bind)), client)
    return ref


@contextlib.contextmanager
def begin(bind: Engine | Connection) -> Iterator[Connection]:
    """``engine.begin()`` or ``connection.begin()``, then the wake-ups of the runs enqueued in it.

    The block's transaction commits when it ends, or rolls back if it raises;
    the clients of the runs :func:`enqueue` wrote in it are woken after the
    commit, and never after a rollback. An Engine's connection is closed after.
    """
    with contextlib.ExitStack() as stack:
        connection = bind if isinstance(bind, Connection) else stack.enter_context(bind.connect())
        _CONNECTION_WAKES.pop(connection, None)  # left by an enqueue outside begin()
        try:
            with connection.begin():
                yield connection
            clients = _CONNECTION_WAKES.pop(connection, [])
        finally:
            _CONNECTION_WAKES.pop(connection, None)
    for client in clients:
        client.wake(others=True)


def _connection(bind: object) -> Connection:
    """The Connection of ``bind``'s transaction, begun if it was not."""
    if isinstance(bind, Connection):
        if bind.closed or bind.invalidated:
            raise CairnError("enqueue() needs an open Connection; this one is closed or invalid")
        if not bind.in_transaction():
            bind.begin()
        return bind
    if isinstance(bind, Session | scoped_session):
        return _session(bind).connection()
    if isinstance(bind, Engine):
        raise TypeError(
            "enqueue() takes a Session or a Connection in a transaction, not an Engine: an "
            "Engine has no transaction (use `with cairnflow_sqlalchemy.begin(engine) as conn:`)"
        )
    raise TypeError(
        f"enqueue() takes a SQLAlchemy Session or Connection, got {type(bind).__qualname__}"
    )


def _session(bind: Session | scoped_session[Any]) -> Session:
    return bind() if isinstance(bind, scoped_session) else bind


def _add(clients: list[Client], client: Client) -> None:
    if not any(known is client for known in clients):
        clients.append(client)


def _session_wakes(session: Session) -> list[Client]:
    """The clients ``session`` wakes after its transaction commits (listening from now on)."""
    if not event.contains(session, "after_commit", _after_commit):
        event.listen(session, "after_commit", _after_commit)
        event.listen(session, "after_transaction_end", _after_transaction_end)
    pending: list[Client] = session.info.setdefault(_PENDING, [])
    return pending


def _after_commit(session: Session) -> None:
    """Wake the clients once the outermost transaction committed (not a savepoint's release)."""
    root = session.get_transaction()
    if root is not None and root.is_active:
        return  # a begin_nested() block committed: the outer transaction decides
    clients: list[Client] = session.info.pop(_PENDING, [])
    for client in clients:
        client.wake(others=True)


def _after_transaction_end(session: Session, transaction: Any) -> None:
    """The outermost transaction ended without a commit (rolled back, closed): no wake-up."""
    if transaction.parent is None:
        session.info.pop(_PENDING, None)
