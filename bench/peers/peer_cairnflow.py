"""cairnflow itself, measured by the code of ``nox -s bench`` (``bench/_workloads.py``) with the
same setup: ``PostgresStore`` with its defaults (a psycopg pool of at most 10 connections,
the Postgres notifier), the ``postgres`` engine of ``bench/_engines.py`` pointed at the fresh
database, each workload in a fresh namespace of it."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from . import Peer
from ._measure import pct


class CairnflowPeer(Peer):
    name = "cairnflow"
    order = 10
    distributions = ("cairnflow", "cairnflow-postgres", "psycopg")
    batch_api = "`Client.enqueue_many`"
    config = (
        "the `nox -s bench` code: W1 (`enqueue`, `enqueue_many` in batches of 500), W4 with the "
        "notifier (1 client process of 8 workers, 1 s poll as the fallback), W2 x1 (1 client of "
        "8 workers, default prefetch, 0.5 s poll), W3 on a 3-step chain (8 workers)"
    )

    def workload(self, name: str, url: str, sizes: dict[str, Any]) -> dict[str, Any]:
        import _apps
        import _engines
        import _workloads

        import cairnflow as cf

        os.environ["CAIRNFLOW_BENCH_POSTGRES_URL"] = url
        engine = _engines.load("postgres", Path(tempfile.mkdtemp(prefix="cairnpeers-")))
        if isinstance(engine, str):
            raise RuntimeError(engine)
        if name == "enqueue":
            w1 = _workloads.w1_enqueue(
                engine, single=sizes["single"], batched=sizes["batched"], batch=sizes["batch"]
            )
            took = []
            with _workloads.namespace(engine) as (_prefix, store):
                client = cf.Client(store)
                client.register(_apps.noop())
                time.sleep(0.5)
                for i in range(sizes["calls"]):
                    time.sleep(0.01)
                    started = time.perf_counter()
                    client.enqueue("noop", i)
                    took.append((time.perf_counter() - started) * 1000)
            return {
                **w1,
                "enqueue_batched_per_s": w1["enqueue_many_per_s"],
                "batch": sizes["batch"],
                "enqueue_call_p50_ms": pct(took, 50),
                "enqueue_call_p95_ms": pct(took, 95),
            }
        if name == "latency":
            return _workloads.w4_latency(engine, samples=sizes["samples"], poll=1.0, notifier=True)
        if name == "drain":
            return _workloads.w2_drain(
                engine, runs=sizes["drain"], clients=1, workers=sizes["concurrency"]
            )
        if name == "chain":
            return _workloads.w3_workflow(
                engine, runs=sizes["chain"], shape="chain3", workers=sizes["concurrency"]
            )
        raise ValueError(f"unknown workload {name!r}")


PEER = CairnflowPeer()
