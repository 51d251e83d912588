"""A benchmark client in its own process: ``python _client_proc.py CONFIG_JSON``.

It opens the engine's store for the namespace, registers the workflows,
starts a client and runs until SIGTERM. With ``measure_idle`` it instead
counts the statements it sends for ``seconds`` after a warm-up and prints
them as JSON. It prints ``ready`` once started, so the parent can begin.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _apps

import cairnflow as cf
from cairnflow.shutdown import StopRequest
from cairnflow.testing import build_notifier


def open_store(engine: str, prefix: str, args: dict[str, Any], broker: Any = None) -> Any:
    # broker: a notifier spec (``_brokers``) for the engines without notifications of their own.
    options = {"notifier": build_notifier(broker)} if broker else {}
    if engine == "sqlite":
        from cairnflow_sqlite import SQLiteStore

        return SQLiteStore(
            args["path"], table_prefix=prefix, synchronous=args["synchronous"], **options
        )
    if engine == "postgres":
        from cairnflow_postgres import PostgresStore

        return PostgresStore(args["url"], table_prefix=prefix)
    from cairnflow_mysql import MySQLStore

    return MySQLStore.from_url(args["url"], table_prefix=prefix, **options)


def main() -> None:
    config = json.loads(sys.argv[1])
    store = open_store(config["engine"], config["prefix"], config["args"], config.get("broker"))
    client = cf.Client(
        store,
        workers=config["workers"],
        poll_interval=config["poll"],
        lease=30,
        notifier=None if config.get("notifier", True) else False,
    )
    client.register(*[_apps.ALL[name]() for name in config["workflows"]])
    done = StopRequest()  # its handler takes no lock (cairnflow.shutdown)
    done.install(signal.SIGTERM)
    client.start()
    print("ready", flush=True)
    if config.get("measure_idle"):
        time.sleep(config.get("warmup", 2.0))
        before = store.stats.snapshot()
        time.sleep(config["seconds"])
        after = store.stats.snapshot()
        client.stop()
        store.close()
        print(json.dumps({k: after[k] - before[k] for k in after}), flush=True)
        return
    done.wait()
    client.stop()
    store.close()


if __name__ == "__main__":
    main()
