"""A peer's workers in their own process: ``python _worker.py KEY URL CONCURRENCY``.

Runs the peer's workers (``Peer.work``) on the database until SIGTERM, then prints the
start time of every probe run it ran, as one JSON line (run number -> ``time.time_ns()``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))

import peers


async def main(key: str, url: str, concurrency: int) -> None:
    peer = importlib.import_module(f"peers.peer_{key}").PEER
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await peer.work(url, concurrency, stop)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    print(json.dumps(peers.PROBES), flush=True)
