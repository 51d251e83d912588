"""Fixtures: a real SQLite file with runs made by a real client (one of them failed)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cairnflow_dashboard import Credentials, DashboardSettings, create_app
from starlette.applications import Starlette
from starlette.testclient import TestClient

import cairnflow as cf

sys.path.insert(0, str(Path(__file__).parent))

import flows

QUEUES = ["default", "billing"]
USER, PASSWORD, TOKEN = "ops", "correct horse battery", "t0ken-for-tests-only"
CREDENTIALS = Credentials(token=TOKEN, user=USER, password=PASSWORD)


@dataclass
class Filled:
    """A store file, the ids of its runs, and which one failed."""

    url: str
    runs: list[str]
    failed: str
    acme: list[str]


def fill(url: str, *, count: int = 6, **options: str) -> Filled:
    """Migrate ``url`` and run ``count`` orders through a started client; the 2nd fails."""
    store = cf.open_store(url, **options)
    store.migrate()
    client = cf.Client(store, workers=2, poll_interval=0.05, queues=QUEUES)
    client.register(*flows.build())
    refs = []
    failed = ""
    acme = []
    for i in range(count):
        order_id = f"o-{i}"
        tenant = "acme-eu" if i % 2 == 0 else "globex"
        if i == 1:
            flows.FAILING.add(order_id)
        ref = client.enqueue(
            "orders",
            {"id": order_id, "qty": i + 1},
            labels={"tenant": tenant},
            queue="billing" if i % 3 == 0 else "default",
            tenant=tenant if cf.Cap.TENANT in store.capabilities else None,
        )
        refs.append(ref.id)
        if i == 1:
            failed = ref.id
        if tenant.startswith("acme"):
            acme.append(ref.id)
    client.start()
    try:
        for ref_id in refs:
            client.wait(ref_id, timeout=120)
    finally:
        client.stop()
        store.close()
    return Filled(url, refs, failed, acme)


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[Filled]:
    flows.FAILING.clear()
    yield fill(f"sqlite:///{tmp_path / 'dash.db'}")
    flows.FAILING.clear()


def make_app(url: str, *, read_only: bool = False, **options: str) -> tuple[Starlette, cf.Store]:
    store = cf.open_store(url, **options)
    client = cf.Client(store)
    app = create_app(
        client,
        DashboardSettings(credentials=CREDENTIALS, read_only=read_only, workflows=flows.build()),
    )
    return app, store


def signed_in(app: Starlette) -> TestClient:
    """A test client signed in through the login form, like a browser."""
    web = TestClient(app, follow_redirects=False)
    page = web.get("/login")
    token = web.cookies["csrftoken"]
    assert page.status_code == 200
    done = web.post("/login", data={"user": USER, "password": PASSWORD, "next": "/runs",
                                     "csrftoken": token})  # fmt: skip
    assert done.status_code == 303, done.text
    return web


def csrf(web: TestClient) -> str:
    return web.cookies["csrftoken"]


def pytest_configure(config: pytest.Config) -> None:
    # test_drivers imports the kit's database helpers; the kit's package marks its checks.
    config.addinivalue_line("markers", "proves(cap): the capability a kit check proves")
    config.addinivalue_line("markers", "refuses(cap): the capability a kit check refuses")
