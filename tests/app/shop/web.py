"""The web application: ``POST /orders`` writes the order and enqueues its fulfilment at once.

The order's row and the run are written in one SQLAlchemy transaction
(:func:`cairnflow_sqlalchemy.enqueue`): an order refused after the enqueue (more than
``STOCK`` items) rolls back both, and the response names the run id that was never
committed. The client is never started (the worker process runs the steps); the
wake-up after the commit reaches the workers through the store's notifier where it
has one (Postgres), else they find the run at their next poll.

SQLAlchemy's calls are synchronous: the endpoint runs them in Starlette's thread pool,
never on the event loop. On Postgres, ``POST /orders/async`` does the same on the event
loop itself: the order's row and ``await aio.enqueue_tx(conn, ...)`` (``cf.AsyncClient``)
in one transaction of a ``psycopg_pool.AsyncConnectionPool``. SQLite has no async
connection the store writes on, so the route is not there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from cairnflow_sqlalchemy import enqueue
from sqlalchemy.orm import sessionmaker
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import cairnflow as cf

from .flows import workflows

STOCK = 10
"""The most items of one kind an order may ask for."""

metadata = sa.MetaData()
orders = sa.Table(
    "shop_orders",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("item", sa.String(80), nullable=False),
    sa.Column("qty", sa.Integer, nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
)


class OutOfStock(Exception):
    """More items asked for than the shop holds: the order and its run roll back."""


class Shop:
    """The process's database engine and its cairnflow client (never started)."""

    def __init__(self, database_url: str, cairnflow_url: str) -> None:
        self.engine = sa.create_engine(database_url)
        metadata.create_all(self.engine)
        self.sessions = sessionmaker(self.engine)
        self.store = cf.open_store(cairnflow_url)
        self.client = cf.Client(self.store, enqueue_only=True)
        self.client.register(*workflows)

    def place(self, order: dict[str, Any]) -> str:
        """Write the order and enqueue its fulfilment in one transaction; the run's id."""
        with self.sessions.begin() as session:
            ref = enqueue(self.client, session, "shop-fulfil", order, key=f"order-{order['id']}")
            session.execute(sa.insert(orders).values(run_id=ref.id, **order))
            if order["qty"] > STOCK:
                raise OutOfStock(ref.id)
        return ref.id

    def close(self) -> None:
        self.store.close()
        self.engine.dispose()


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    url = os.environ["CAIRNFLOW_URL"]
    shop = Shop(os.environ["SHOP_DATABASE_URL"], url)
    app.state.shop = shop
    try:
        if not url.startswith("postgresql://"):
            yield
            return
        from psycopg_pool import AsyncConnectionPool

        async with (
            AsyncConnectionPool(url, min_size=1, max_size=4, open=False) as db,
            cf.AsyncClient(shop.client, threads=2) as aio,
        ):
            await db.wait()
            app.state.db, app.state.aio = db, aio
            yield
    finally:
        shop.close()


def _order(body: dict[str, Any]) -> dict[str, Any]:
    return {"id": str(body["id"]), "item": str(body["item"]), "qty": int(body["qty"])}


async def create_order(request: Request) -> JSONResponse:
    order = _order(await request.json())
    shop: Shop = request.app.state.shop
    try:
        run_id = await run_in_threadpool(shop.place, order)
    except OutOfStock as refused:
        return JSONResponse({"error": "out of stock", "rolled_back_run": str(refused)}, 409)
    return JSONResponse({"order": order["id"], "run": run_id}, status_code=201)


async def create_order_async(request: Request) -> JSONResponse:
    """Postgres: the order and its run in one transaction awaited on the event loop."""
    if not hasattr(request.app.state, "aio"):
        return JSONResponse({"error": "this database has no async connection to enqueue on"}, 404)
    order = _order(await request.json())
    aio: cf.AsyncClient = request.app.state.aio
    run_id = None
    try:
        async with request.app.state.db.connection() as conn, conn.transaction():
            ref = await aio.enqueue_tx(conn, "shop-fulfil", order, key=f"order-{order['id']}")
            run_id = ref.id
            await conn.execute(
                "INSERT INTO shop_orders (id, item, qty, run_id) VALUES (%s, %s, %s, %s)",
                (order["id"], order["item"], order["qty"], run_id),
            )
            if order["qty"] > STOCK:
                raise OutOfStock(run_id)
    except OutOfStock:
        return JSONResponse({"error": "out of stock", "rolled_back_run": run_id}, 409)
    aio.wake()  # committed (the store's NOTIFY went out with the COMMIT)
    return JSONResponse({"order": order["id"], "run": run_id}, status_code=201)


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


app = Starlette(
    routes=[
        Route("/orders", create_order, methods=["POST"]),
        Route("/orders/async", create_order_async, methods=["POST"]),
        Route("/health", health),
    ],
    lifespan=lifespan,
)
