"""``python -m cairnflow_conformance._migrator``: one of several processes racing to migrate.

It builds the store with the target's worker factory, waits for the shared
start instant (so every racer begins at once), migrates, and prints the
versions it applied as one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence

from ._target import load_worker_factory


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cairnflow_conformance._migrator")
    parser.add_argument("--factory", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--config", default="{}")
    parser.add_argument("--start-at", type=float, required=True)
    args = parser.parse_args(argv)
    store = load_worker_factory(args.factory)(args.namespace, **json.loads(args.config))
    try:
        # Connect first (a fresh namespace is not migrated: the check fails, but opens
        # the store's connections), so the racers differ only in when they are scheduled.
        with contextlib.suppress(Exception):  # SchemaNotReady, as expected
            store.check_schema()
        time.sleep(max(0.0, args.start_at - time.time()))
        applied = store.migrate()
    finally:
        store.close()
    print(json.dumps(applied))
    return 0


if __name__ == "__main__":
    sys.exit(main())
