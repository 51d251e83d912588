"""How many statements an enqueue sends to the server, and in how many round trips.

An enqueue is as few statements as the tables it writes, plus the COMMIT: the
runs in one INSERT, their steps in one (a multi-row VALUES), the labels in one
when there are any. A batch is the same count as one run. The server's own
counter (the session's ``Questions``) is read on the store's only connection:
counted, never timed, so a change that adds a statement (a read before the
write, a statement per row) fails here instead of showing up as noise in a
benchmark. A one-run enqueue sends its statements and the COMMIT as one query
(``CLIENT.MULTI_STATEMENTS``): one round trip, counted as the queries PyMySQL
sends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql
import pytest

import cairnflow as cf
from cairnflow_mysql import MySQLStore

Server = Any  # conftest.Server: the server under test and raw connections to it

pytestmark = pytest.mark.timeout(120)


def _chain() -> cf.Workflow:
    wf = cf.Workflow("chain")
    first = wf.step(lambda ctx, data: None, name="first")
    wf.step(lambda ctx, data: None, name="second", after=[first])
    return wf


def _questions(store: MySQLStore) -> int:
    """The statements the store's one connection has sent so far, this one included."""
    with store._connections.connection() as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Questions'")
        ((_, value),) = cur.fetchall()
        conn.commit()
        return int(value)


def _sent(store: MySQLStore, action: Callable[[], object]) -> int:
    """The statements ``action()`` sent, COMMIT included."""
    before = _questions(store)
    action()
    return _questions(store) - before - 2  # the second SHOW, and the COMMIT after the first


def test_an_enqueue_is_one_statement_per_table_and_the_commit(server: Server, prefix: str) -> None:
    store = MySQLStore(server.url, table_prefix=prefix, pool_size=1)
    try:
        store.migrate()
        client = cf.Client(store)
        client.register(_chain())
        client.enqueue("chain", 0)
        assert _sent(store, lambda: client.enqueue("chain", 1)) == 3  # runs, steps, COMMIT
        assert _sent(store, lambda: client.enqueue("chain", 2, key="k")) == 3
        jobs = [cf.Job("chain", n) for n in range(200)]
        assert _sent(store, lambda: client.enqueue_many(jobs)) == 3
        labelled = [cf.Job("chain", n, labels={"n": str(n)}) for n in range(200)]
        assert _sent(store, lambda: client.enqueue_many(labelled)) == 4
        # A key held by an unfinished run: the INSERT is refused, nothing is written.
        with pytest.raises(cf.DuplicateRun) as caught:
            client.enqueue_many([cf.Job("chain", 3, key="free"), cf.Job("chain", 4, key="k")])
        assert caught.value.run_id is not None
        assert client.enqueue("chain", 5, key="free").id  # nothing of the batch holds it
        assert server.query(f"SELECT COUNT(*) FROM `{prefix}runs`") == [(404,)]
    finally:
        store.close()


def test_a_one_run_enqueue_is_one_round_trip(
    server: Server, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MySQLStore(server.url, table_prefix=prefix, pool_size=1)
    sent: list[str] = []
    execute = pymysql.connections.Connection._execute_command

    def counted(conn: Any, command: int, sql: Any) -> Any:
        if command == pymysql.constants.COMMAND.COM_QUERY:
            sent.append(sql if isinstance(sql, str) else sql.decode())
        return execute(conn, command, sql)

    try:
        store.migrate()
        client = cf.Client(store, notifier=False)
        client.register(_chain())
        client.enqueue("chain", 0)
        monkeypatch.setattr(pymysql.connections.Connection, "_execute_command", counted)
        ref = client.enqueue("chain", 1)
        assert len(sent) == 1, sent  # the run, its steps and the COMMIT in one query
        assert sent[0].rstrip().endswith("COMMIT"), sent[0]
        sent.clear()
        client.enqueue("chain", 2, key="k")
        with pytest.raises(cf.DuplicateRun):  # refused by the first statement: nothing lands
            client.enqueue("chain", 3, key="k")
        assert len(sent) >= 2, sent
        monkeypatch.undo()
        assert client.info(ref).status is cf.Status.QUEUED
        assert server.query(f"SELECT COUNT(*) FROM `{prefix}runs`") == [(3,)]
        assert server.query(f"SELECT COUNT(*) FROM `{prefix}steps`") == [(6,)]
    finally:
        store.close()
