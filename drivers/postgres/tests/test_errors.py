"""The classifier on real errors from the server, and what the store makes of them."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

import cairnflow as cf
from cairnflow.sql import ErrorClass
from cairnflow.testing import wait_until
from cairnflow_postgres import PostgresStore, classify

pytestmark = pytest.mark.timeout(120)

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]


def raised(action: Callable[[], Any]) -> BaseException:
    try:
        action()
    except Exception as error:
        return error
    raise AssertionError("nothing was raised")


@pytest.fixture
def scratch(admin_conn: psycopg.Connection[Any]) -> Iterator[str]:
    """A two-row table of this test's own."""
    table = f"scratch_{secrets.token_hex(4)}"
    admin_conn.execute(f'CREATE TABLE "{table}" (id INT PRIMARY KEY, n INT NOT NULL)')
    admin_conn.execute(f'INSERT INTO "{table}" VALUES (1, 0), (2, 0)')
    yield table
    admin_conn.execute(f'DROP TABLE "{table}"')


def test_a_unique_violation(postgres_url: str, scratch: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        error = raised(lambda: conn.execute(f'INSERT INTO "{scratch}" VALUES (1, 1)'))
    assert isinstance(error, psycopg.errors.UniqueViolation)
    assert classify(error) == ErrorClass(unique_violation=True)


def test_a_real_deadlock_between_two_connections(postgres_url: str, scratch: str) -> None:
    first, second = psycopg.connect(postgres_url), psycopg.connect(postgres_url)
    errors: list[BaseException] = []
    both_hold_one = threading.Barrier(2)

    def worker(conn: psycopg.Connection[Any], mine: int, theirs: int) -> None:
        try:
            conn.execute("SET deadlock_timeout = '100ms'")
            conn.execute(f'UPDATE "{scratch}" SET n = n + 1 WHERE id = %s', (mine,))
            both_hold_one.wait()
            conn.execute(f'UPDATE "{scratch}" SET n = n + 1 WHERE id = %s', (theirs,))
            conn.commit()
        except psycopg.Error as error:
            errors.append(error)
            conn.rollback()

    try:
        threads = [
            threading.Thread(target=worker, args=(first, 1, 2)),
            threading.Thread(target=worker, args=(second, 2, 1)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        first.close()
        second.close()
    assert len(errors) == 1  # Postgres broke the cycle by failing exactly one of them
    assert isinstance(errors[0], psycopg.errors.DeadlockDetected)
    assert errors[0].sqlstate == "40P01"
    assert classify(errors[0]) == ErrorClass(retryable=True)


def test_a_real_serialization_failure(postgres_url: str, scratch: str) -> None:
    first, second = psycopg.connect(postgres_url), psycopg.connect(postgres_url)
    try:
        for conn in (first, second):
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.execute(f'SELECT n FROM "{scratch}" WHERE id = 1')
        first.execute(f'UPDATE "{scratch}" SET n = 5 WHERE id = 1')
        first.commit()
        error = raised(lambda: second.execute(f'UPDATE "{scratch}" SET n = 6 WHERE id = 1'))
        second.rollback()
    finally:
        first.close()
        second.close()
    assert isinstance(error, psycopg.errors.SerializationFailure)
    assert classify(error) == ErrorClass(retryable=True)


def test_a_terminated_connection(postgres_url: str, admin_conn: psycopg.Connection[Any]) -> None:
    with psycopg.connect(postgres_url) as conn:
        admin_conn.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        first = raised(lambda: conn.execute("SELECT 1"))
        # The server says why (57P01) when the message arrives in time; psycopg's own
        # "connection lost" otherwise. Either way, and the next try on the dead connection:
        assert classify(first) == ErrorClass(unavailable=True), repr(first)
        again = raised(lambda: conn.execute("SELECT 1"))
        assert classify(again) == ErrorClass(unavailable=True), repr(again)


def test_a_refused_connection() -> None:
    error = raised(lambda: psycopg.connect("postgresql://x@127.0.0.1:1/x?connect_timeout=1"))
    assert isinstance(error, psycopg.OperationalError)
    assert classify(error) == ErrorClass(unavailable=True)


@pytest.mark.parametrize(
    ("sql", "params", "sqlstate"),
    [
        ("SELECT %s::bigint", (2**63,), "22003"),  # bigint out of range
        ("""SELECT '"\\u0000"'::jsonb""", (), "22P05"),  # unsupported Unicode escape sequence
        ("SELECT %s::text::bytea", ("\\xzz",), "22023"),  # invalid hexadecimal digit
        ("SELECT repeat('x', 1 << 30)", (), "54000"),  # requested length too large
    ],
)
def test_a_value_the_server_refuses_for_what_it_is(
    postgres_url: str, sql: str, params: tuple[Any, ...], sqlstate: str
) -> None:
    with psycopg.connect(postgres_url) as conn:
        error = raised(lambda: conn.execute(sql, params))
    assert isinstance(error, psycopg.DataError | psycopg.errors.ProgramLimitExceeded)
    assert error.sqlstate == sqlstate
    assert classify(error) == ErrorClass(refused=True)


def test_text_psycopg_cannot_send_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        nul = raised(lambda: conn.execute("SELECT %s::text", ("a\x00b",)))
        surrogate = raised(lambda: conn.execute("SELECT %s::text", ("a\udc80b",)))
    assert isinstance(nul, psycopg.DataError) and nul.sqlstate is None
    assert "NUL" in str(nul)
    assert classify(nul) == ErrorClass(refused=True)
    assert isinstance(surrogate, UnicodeEncodeError)
    assert classify(surrogate) == ErrorClass(refused=True)


def test_the_store_turns_a_lost_race_into_duplicate_run(
    store: PostgresStore, make_client: ClientFactory
) -> None:
    client = make_client(store, _noop(), start=False)
    first = client.enqueue("noop", key="same")
    with pytest.raises(cf.DuplicateRun) as caught:
        client.enqueue("noop", key="same")
    assert caught.value.run_id == first.id


def test_terminated_pool_connections_are_replaced_without_an_error(
    postgres_url: str,
    make_store: StoreFactory,
    make_client: ClientFactory,
    admin_conn: psycopg.Connection[Any],
) -> None:
    name = f"cf_errors_{secrets.token_hex(4)}"
    store = make_store(dsn=f"{postgres_url}?application_name={name}", min_size=4, max_size=4)
    client = make_client(store, _noop())
    assert client.result(client.enqueue("noop"), timeout=5) == "done"
    wait_until(lambda: store.pool.get_stats()["pool_size"] == 4, timeout=5, what="4 connections")
    killed = admin_conn.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
        (name,),
    ).fetchone()
    assert killed is not None and killed[0] >= 4  # every connection of this store, no other
    # Each dead connection is noticed when lent and replaced at once: no error surfaces, and
    # no backoff either (psycopg_pool's own check= sleeps 1 s, 2 s, ... per dead connection).
    started = time.monotonic()
    assert store.get_run("run_none") is None
    assert time.monotonic() - started < 1.0
    for _ in range(5):
        assert client.result(client.enqueue("noop"), timeout=10) == "done"


def _noop() -> cf.Workflow:
    wf = cf.Workflow("noop")
    wf.step(lambda ctx, d: "done", name="only")
    return wf


def test_opening_a_store_fails_at_once_with_the_servers_reason(postgres_url: str) -> None:
    # Loopback only: a closed port on 127.0.0.1, and the test server with a role and a
    # database that do not exist. None waits for the pool's timeout (30 s by default).
    base = urlsplit(postgres_url)
    host, port = base.hostname or "127.0.0.1", base.port or 5432
    with pytest.raises(cf.Unavailable, match="Connection refused") as refused:
        cf.open_store("postgresql://postgres@127.0.0.1:1/test")
    assert refused.value.__cause__ is not None
    with pytest.raises(cf.StoreOpenError, match='role "cairnflow_nosuchrole" does not exist'):
        cf.open_store(f"postgresql://cairnflow_nosuchrole@{host}:{port}/test")
    with pytest.raises(cf.StoreOpenError, match='database "cairnflow_nosuchdb" does not exist'):
        cf.open_store(f"postgresql://{base.username}@{host}:{port}/cairnflow_nosuchdb")
