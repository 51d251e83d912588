"""A table whose cached copy holds a trigger a killed connection left unparsed.

MariaDB parses a table's triggers each time it opens the table into its table
cache. A connection killed during that parse leaves the copy cached with the
trigger marked unparseable: every later statement given that copy fails with
"Trigger ... has an error in its body" though the trigger is intact, until the
copy leaves the cache (a CI run of the enqueue kill test met it: 618 of 922
enqueues failed). The store flushes its trigger tables and runs the
transaction again; without the RELOAD privilege it says what to grant.

To break a copy on purpose, the tests add a trigger slow to parse (about 0.2 s
on MariaDB 10.11) to the store's steps table and kill a connection while it
opens that table, until a probe meets the broken copy.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from typing import Any

import pymysql
import pytest

import cairnflow as cf
from cairnflow.testing import wait_until
from cairnflow_mysql import MySQLStore, broken_trigger
from cairnflow_mysql._url import parse_url

pytestmark = pytest.mark.timeout(180)

Server = Any  # conftest.Server

SLOW_IFS = 1500
"""Statements in the slow trigger: its parse takes about 0.2 s (MariaDB 10.11, measured)."""
KILL_TRIES = 20


@pytest.fixture(autouse=True)
def _mariadb_only(server: Server) -> None:
    if server.kind != "mariadb":
        pytest.skip("the broken copy was measured on MariaDB 10.11; no MySQL 8 server here")


def add_slow_trigger(server: Server, prefix: str) -> None:
    """A trigger on steps that never fires (BEFORE DELETE) and takes long to parse."""
    body = " ".join(
        f"IF OLD.name = 'never-{i}' THEN SET @cf_never = {i}; END IF;" for i in range(SLOW_IFS)
    )
    server.query(
        f"CREATE TRIGGER `{prefix}slow` BEFORE DELETE ON `{prefix}steps` "
        f"FOR EACH ROW BEGIN {body} END"
    )


PROBE = (
    "INSERT INTO `{prefix}steps` (id, run_id, workflow, queue, priority, name, kind, position, "
    "parents, children, parents_left, status, attempt, failures, reclaims) "
    "VALUES ('probe', 'probe', 'probe', 'default', 0, 'probe', 'step', 0, '[]', '[]', 0, "
    "'pending', 0, 0, 0)"
)
"""A row written to steps and rolled back: MariaDB refuses a broken copy to an INSERT that
writes a row (an UPDATE or DELETE that matches no row, or an INSERT of no row, goes through)."""


def probe(server: Server, prefix: str) -> BaseException | None:
    """The error an insert into steps meets now (None: it went through; it is rolled back)."""
    conn = server.connect(autocommit=False)
    try:
        with conn.cursor() as cursor:
            cursor.execute(PROBE.format(prefix=prefix))
    except pymysql.err.MySQLError as error:
        return error
    finally:
        conn.rollback()
        conn.close()
    return None


def break_cached_steps(server: Server, prefix: str) -> BaseException:
    """Kill connections while they open steps until a write meets a broken copy; its error."""
    admin = server.connect()
    for attempt in range(KILL_TRIES):
        with admin.cursor() as cursor:
            cursor.execute(f"FLUSH TABLES `{prefix}steps`")
        victim = server.connect()

        def open_steps(conn: Any = victim) -> None:
            try:
                with conn.cursor() as cursor:
                    cursor.execute(f"SELECT COUNT(*) FROM `{prefix}steps`")
            except pymysql.err.MySQLError:
                pass  # killed, as intended

        opener = threading.Thread(target=open_steps)
        opener.start()
        time.sleep(0.005 * (attempt + 1))  # within the parse, on a slow machine as well
        # A victim that had finished is not there to kill: the next try kills sooner.
        with admin.cursor() as cursor, contextlib.suppress(pymysql.err.OperationalError):
            cursor.execute(f"KILL CONNECTION {int(victim.thread_id()):d}")
        opener.join()
        error = probe(server, prefix)
        if error is not None:
            assert broken_trigger(error), f"the probe failed otherwise: {error!r}"
            return error
    pytest.fail(f"{KILL_TRIES} kills during the open of steps left no broken cached copy")


def workflow() -> cf.Workflow:
    wf = cf.Workflow("flushed")
    wf.step(lambda ctx, d: d, name="one")
    return wf


def broken_client(server: Server, store: MySQLStore, prefix: str) -> cf.Client:
    """A client of ``store``, migrated, whose steps table has a broken cached copy."""
    store.migrate()
    client = cf.Client(store, notifier=False)
    client.register(workflow())
    add_slow_trigger(server, prefix)
    break_cached_steps(server, prefix)
    return client


def test_a_broken_cached_trigger_is_flushed_and_the_enqueue_runs_again(
    server: Server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = MySQLStore(server.url, table_prefix=prefix, pool_size=2)
    try:
        client = broken_client(server, store, prefix)
        with caplog.at_level(logging.WARNING, logger="cairnflow.mysql"):
            run_id = client.enqueue("flushed", {"n": 1})
        assert client.info(run_id).status == "queued"
        flushed = [r for r in caplog.records if "FLUSH TABLES" in r.getMessage()]
        assert flushed, "the enqueue went through without meeting the broken copy"
        assert probe(server, prefix) is None  # the copy left the cache: writes go through
    finally:
        store.close()


def test_a_broken_cached_trigger_met_by_enqueue_tx_is_flushed_once_the_application_rolls_back(
    server: Server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The application's transaction is its own: the store neither runs it again nor flushes
    # on its connection (a FLUSH commits). The application gets the error, and the store
    # flushes on a connection of its own, which waits for the application's rollback.
    store = MySQLStore(server.url, table_prefix=prefix, pool_size=2)
    app = server.connect(autocommit=False)
    try:
        client = broken_client(server, store, prefix)
        with caplog.at_level(logging.WARNING, logger="cairnflow.mysql"):
            with pytest.raises(pymysql.err.MySQLError) as raised:
                client.enqueue_tx(app, "flushed", {"n": 1})
            assert broken_trigger(raised.value), raised.value
            app.rollback()
            wait_until(
                lambda: probe(server, prefix) is None,
                timeout=120,
                what="the store's flush of the broken copy after the application's rollback",
            )
        flushed = [r for r in caplog.records if "FLUSH TABLES" in r.getMessage()]
        assert flushed, "the copy left the cache without the store's flush"
        run_id = client.enqueue_tx(app, "flushed", {"n": 2})  # the application's retry
        app.commit()
        assert client.info(run_id).status == "queued"
        assert server.query(f"SELECT COUNT(*) FROM `{prefix}runs`") == [(1,)]
    finally:
        app.close()
        store.close()


def test_without_reload_the_store_names_the_privilege_and_writes_nothing(
    server: Server, prefix: str
) -> None:
    admin_store = MySQLStore(server.url, table_prefix=prefix, pool_size=1)
    admin_store.migrate()
    admin_store.close()
    url = parse_url(server.url)
    user = f"cf_noreload_{uuid.uuid4().hex[:8]}"
    server.query(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    try:
        server.query(f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{url.database}`.* TO '{user}'@'%'")
        host = f"{url.host}:{url.port}" if url.port else url.host
        store = MySQLStore(f"mysql://{user}:pw@{host}/{url.database}", table_prefix=prefix)
        try:
            client = cf.Client(store, notifier=False)
            client.register(workflow())
            add_slow_trigger(server, prefix)
            break_cached_steps(server, prefix)
            with pytest.raises(cf.CairnError, match=r"RELOAD privilege.*FLUSH TABLES"):
                client.enqueue("flushed", {"n": 1})
            assert server.query(f"SELECT COUNT(*) FROM `{prefix}runs`") == [(0,)]
        finally:
            store.close()
    finally:
        server.query(f"DROP USER '{user}'@'%'")
        server.query(f"FLUSH TABLES `{prefix}steps`")  # leave no broken copy behind
