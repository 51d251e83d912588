"""A chaos worker process: ``python -m chaos_worker --url URL --node N --history DIR ...``.

It opens the store at ``URL`` (``--options``: the driver's keyword arguments
as JSON), runs a client with the chaos workflows, logs what its steps do to
``DIR`` (:class:`chaos_workload.Recorder`) and prints ``READY``. The faults of
``CAIRNFLOW_FAULTS`` in its environment are armed for the whole process, with
every one that fires logged before it acts (so a kill it does to itself is in
the history). It runs until SIGTERM, or until its stdin closes (a test that
died never leaves it behind), then stops its client cleanly and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import chaos_workload

import cairnflow as cf
from cairnflow.shutdown import StopRequest
from cairnflow.testing import FAULTS_ENV, faults

READY = "READY"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos_worker")
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}", help="JSON keyword arguments of the store")
    parser.add_argument("--node", required=True)
    parser.add_argument("--history", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--max-reclaims", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker until told to stop; return the exit status."""
    args = _parse(argv)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format=f"%(asctime)s {args.node} %(levelname)s %(name)s: %(message)s",
    )
    recorder = chaos_workload.Recorder(args.history, args.node)
    chaos_workload.set_recorder(recorder)
    spec = os.environ.get(FAULTS_ENV, "")
    armed = faults(spec, observe=recorder.fault) if spec else contextlib.nullcontext()
    store: cf.Store = cf.open_store(args.url, **json.loads(args.options))
    client = cf.Client(
        store,
        workers=args.workers,
        poll_interval=args.poll,
        lease=args.lease,
        max_reclaims=args.max_reclaims,
        node_id=args.node,
    )
    client.register(*chaos_workload.workflows())
    done = StopRequest()  # its handler takes no lock (cairnflow.shutdown)
    done.install()

    def watch_stdin() -> None:
        sys.stdin.read()  # the parent holds our stdin open: EOF means it is gone
        done.set()

    threading.Thread(target=watch_stdin, name="chaos-worker-stdin", daemon=True).start()
    with armed:
        client.start()
        print(READY, flush=True)
        try:
            done.wait()
        finally:
            client.stop(timeout=10)
            store.close()
    print("STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
