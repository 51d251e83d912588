"""The worker process: ``python -m shop.worker``; runs the shop's workflows, serves metrics.

Prints ``metrics on http://127.0.0.1:PORT/metrics`` once it is working (the exporter
binds a free port), then runs until SIGTERM or SIGINT and drains.
"""

from __future__ import annotations

import os

from cairnflow_prometheus import Metrics
from prometheus_client import CollectorRegistry

import cairnflow as cf
from cairnflow.shutdown import StopRequest

from .flows import workflows


def main() -> None:
    store = cf.open_store(os.environ["CAIRNFLOW_URL"])
    stop = StopRequest()  # its handler takes no lock (cairnflow.shutdown)
    stop.install()
    try:
        poll = float(os.environ.get("SHOP_POLL_INTERVAL", "1.0"))
        client = cf.Client(store, workers=2, poll_interval=poll, lease=60.0)
        client.register(*workflows)
        metrics = Metrics(CollectorRegistry())
        metrics.install(client)
        exporter = metrics.serve(0)
        try:
            client.start()
            print(f"metrics on http://127.0.0.1:{exporter.port}/metrics", flush=True)
            stop.wait()
            client.drain(timeout=30.0)
        finally:
            exporter.stop()
    finally:
        store.close()


if __name__ == "__main__":
    main()
