"""A TCP proxy on loopback that holds every chunk for a while each way: a database a network away.

The local servers answer in tens of microseconds, so a round trip costs almost nothing
here and a change that saves round trips measures as noise; a fleet's workers reach
their database across a network, where each one costs a few hundred microseconds or
more. Point a benchmark at the proxy to measure what round trips cost there::

    python bench/delay_proxy.py --listen 6543 --to 5432 --delay-ms 0.25 &
    CAIRNFLOW_BENCH_POSTGRES_URL=postgresql://postgres@127.0.0.1:6543/test \\
        python bench/run.py --engine postgres --only w4

``--delay-ms`` is one way: 0.25 makes a round trip of 0.5 ms, as between two hosts of
one data centre. Bytes keep their order, each direction is delayed on its own, and
nothing else is changed. Loopback only: it listens on and connects to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import socket
import threading
import time

HOST = "127.0.0.1"


def _forward(source: socket.socket, target: socket.socket, delay: float) -> None:
    """Copy ``source`` to ``target``, each chunk sent ``delay`` seconds after it arrived."""
    chunks: collections.deque[tuple[float, bytes]] = collections.deque()
    ready = threading.Condition()
    ended = False

    def send() -> None:
        while True:
            with ready:
                while not chunks and not ended:
                    ready.wait()
                if not chunks:
                    break
                due, data = chunks.popleft()
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                target.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    while True:
        try:
            data = source.recv(65536)
        except OSError:
            data = b""
        with ready:
            if not data:
                ended = True
                ready.notify()
                return
            chunks.append((time.monotonic() + delay, data))
            ready.notify()


def serve(listen: int, to: int, delay: float) -> None:
    """Accept on ``listen`` forever; each connection goes to ``to``, delayed both ways."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((HOST, listen))
    server.listen(128)
    while True:
        client, _ = server.accept()
        upstream = socket.create_connection((HOST, to))
        for end in (client, upstream):
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for source, target in ((client, upstream), (upstream, client)):
            threading.Thread(target=_forward, args=(source, target, delay), daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--listen", type=int, required=True, help="the port to listen on")
    parser.add_argument("--to", type=int, required=True, help="the server's port on 127.0.0.1")
    parser.add_argument("--delay-ms", type=float, required=True, help="one way, milliseconds")
    args = parser.parse_args()
    serve(args.listen, args.to, args.delay_ms / 1000)


if __name__ == "__main__":
    main()
