"""The worker process: ``python -m shop.worker``; runs the shop's workflows, serves metrics.

Prints ``metrics on http://127.0.0.1:PORT/metrics`` once it is working (the exporter
binds a free port), then runs until SIGTERM or SIGINT and drains.
"""

from __future__ import annotations

import os
import signal
import threading

from cairnflow_prometheus import Metrics
from prometheus_client import CollectorRegistry

import cairnflow as cf

from .flows import workflows


def main() -> None:
    store = cf.open_store(os.environ["CAIRNFLOW_URL"])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
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
            while not stop.wait(0.2):
                pass
            client.drain(timeout=30.0)
        finally:
            exporter.stop()
    finally:
        store.close()


if __name__ == "__main__":
    main()
