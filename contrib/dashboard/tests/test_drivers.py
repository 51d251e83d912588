"""The same pages and an action on PostgreSQL and MariaDB: the dashboard only uses the
client's public reads and acts, so every SQL driver shows the same thing.

Servers come from ``CAIRNFLOW_TEST_POSTGRES_URL`` / ``CAIRNFLOW_TEST_MARIADB_URL`` through
the kit's :mod:`cairnflow_conformance.databases` (a skip where absent, a failure under CI
for a required one); each test uses tables of its own prefix on the shared server.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import flows
import pytest
from conftest import csrf, fill, make_app, signed_in

import cairnflow as cf
from cairnflow_conformance import databases

SERVERS: dict[str, Callable[[], AbstractContextManager[str]]] = {
    "postgres": databases.postgres,
    "mariadb": databases.mariadb,
}


@pytest.fixture(params=sorted(SERVERS))
def server_url(request: pytest.FixtureRequest) -> Iterator[str]:
    with SERVERS[request.param]() as url:
        yield url


def test_pages_and_a_retry_on_a_server(server_url: str) -> None:
    prefix = f"dash{uuid.uuid4().hex[:8]}_"
    flows.FAILING.clear()
    filled = fill(server_url, table_prefix=prefix)
    app, store = make_app(server_url, table_prefix=prefix)
    try:
        web = signed_in(app)
        failed = web.get("/runs", params={"status": "failed"})
        assert set(re.findall(r'data-run="([^"]+)"', failed.text)) == {filled.failed}
        acme = web.get("/runs", params={"label": "tenant=acme"})
        assert set(re.findall(r'data-run="([^"]+)"', acme.text)) == set(filled.acme)
        run = web.get(f"/runs/{filled.failed}")
        assert 'data-step="charge" data-status="failed"' in run.text
        assert "card declined for order o-1" in run.text
        for path in ("/queues", "/schedules", "/servers", "/throughput"):
            page = web.get(path)
            assert page.status_code == 200, path
            assert "does not declare" not in page.text, path
        done = web.post(f"/runs/{filled.failed}/retry", data={"csrftoken": csrf(web)})
        assert ">retried<" in web.get(done.headers["location"]).text
        assert not cf.Client(store).info(filled.failed).finished
    finally:
        store.drop_tables()  # the server is shared: leave no namespace behind
        store.close()
        flows.FAILING.clear()
