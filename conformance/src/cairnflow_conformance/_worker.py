"""A kit worker process: ``python -m cairnflow_conformance._worker --factory M:F ...``.

It builds the store with the target's ``worker_factory`` for one namespace,
registers the kit's process workflows that the store supports, starts a client
and prints ``READY`` on stdout. It runs until SIGTERM (or its stdin closes,
so a dead test never leaves it behind), then stops the client cleanly and
exits 0. Tests kill it with SIGKILL to play a crashed worker and pause it
with SIGSTOP to play a stalled one.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import cairnflow as cf
from cairnflow.shutdown import StopRequest

from ._target import load_worker_factory
from .workflows import process_workflows, ticker

__all__ = ["main"]

READY = "READY"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cairnflow_conformance._worker")
    parser.add_argument("--factory", required=True, help="module:function building the store")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--config", default="{}", help="JSON keyword arguments for the factory")
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--poll", type=float, default=0.05)
    parser.add_argument("--max-reclaims", type=int, default=5)
    parser.add_argument(
        "--schedules",
        action="store_true",
        help="also run the ticker workflow, fired every second by its schedule",
    )
    parser.add_argument(
        "--clock",
        default=None,
        help="SPEED:EPOCH_NS:SINCE_NS: a scheduling clock sped up (cairnflow.clock.Scaled)",
    )
    parser.add_argument("--leader-lease", type=float, default=None, help="elect a leader")
    parser.add_argument(
        "--queues",
        default=None,
        help="a JSON list of cairnflow.QueueConfig keyword arguments: serve those queues only",
    )
    parser.add_argument(
        "--prune-after",
        type=float,
        default=None,
        help="prune finished runs older than this many seconds (Cap.RETENTION)",
    )
    parser.add_argument("--prune-chunk", type=int, default=200, help="runs per prune chunk")
    parser.add_argument(
        "--no-interrupt",
        action="store_true",
        help="never raise inside a running step (a stalled step then returns normally)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker until told to stop; return the exit status."""
    args = _parse(argv)
    # SIGUSR1 writes every thread's stack to the log: what a worker that will not stop
    # is doing, for the failure message (see WorkerProcess.stop).
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format=f"%(asctime)s {args.node_id} %(levelname)s %(name)s: %(message)s",
    )
    factory = load_worker_factory(args.factory)
    store: cf.Store = factory(args.namespace, **json.loads(args.config))
    options: dict[str, Any] = {}
    if args.clock is not None:
        speed, epoch, since = args.clock.split(":")
        options["clock"] = cf.clock.Scaled(float(speed), int(epoch), int(since))
    if args.leader_lease is not None:
        options.update(leader_election=True, leader_lease=args.leader_lease)
    if args.prune_after is not None:
        options.update(
            prune_after=args.prune_after, prune_chunk=args.prune_chunk, prune_interval=0.05
        )
    if args.queues is not None:
        options["queues"] = [
            cf.QueueConfig(
                **{**queue, "rate": cf.Rate(**queue["rate"]) if queue.get("rate") else None}
            )
            for queue in json.loads(args.queues)
        ]
    client = cf.Client(
        store,
        workers=args.workers,
        poll_interval=args.poll,
        lease=args.lease,
        max_reclaims=args.max_reclaims,
        node_id=args.node_id,
        interrupt=not args.no_interrupt,
        **options,
    )
    candidates = process_workflows() + ([ticker()] if args.schedules else [])
    supported = [
        wf for wf in candidates if set(wf.required_capabilities()) <= set(store.capabilities)
    ]
    client.register(*supported)
    done = StopRequest()  # its handler takes no lock (cairnflow.shutdown)
    done.install()

    def watch_stdin() -> None:
        # The parent holds our stdin open; EOF means it is gone, so stop too.
        sys.stdin.read()
        done.set()

    threading.Thread(target=watch_stdin, name="kit-worker-stdin", daemon=True).start()
    client.start()
    print(READY, flush=True)
    try:
        done.wait()  # a signal, or stdin closed (watch_stdin)
    finally:
        client.stop(timeout=10)
        store.close()
    print("STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
