"""Where an idle worker's enqueue -> start goes, stage by stage (Postgres, with the notifier).

W4 gives one number, enqueue -> step start; this script splits it. An enqueuing client in
this process and one worker process (8 workers, 1 s poll behind the notifier) run the W4
schedule; both stamp each stage on the same wall clock::

    python bench/stages.py [--samples 300] [--every-ms 37]

The stages, each in ms after the ``enqueue()`` call began (p50 / p95 / p99):

- ``statement``: the enqueue's one statement returned (its round trip, the commit's flush);
- ``call``: the ``enqueue()`` call returned (the rest is the client's Python);
- ``heard``: the worker's listener thread took the notification;
- ``plan`` / ``planned``: the dispatcher, awake, began and ended planning the claim (its
  slots reserved, ``EngineState.plan_claim``);
- ``store`` / ``claim``: the store's ``claim`` began, then the SQL layer's (``Claims.claim``);
- ``round trip``: the claim was sent, ``claimed``: its rows came back (one round trip: its
  one statement alone, or its BEGIN, statements and COMMIT in a pipeline);
- ``accept`` / ``accepted``: the dispatcher began and ended handing the attempts to the
  workers (``EngineState.accept``: the store's connection is back in its pool by then);
- ``run``: a worker thread took the attempt (``StepRunner.run``);
- ``start``: the step's first line ran.

Then the same machine's price of waking an idle server: a ``SELECT 1`` round trip after
``--every-ms`` of quiet, against back to back, on one connection. On a virtual machine with
two cores the first is several times the second, and an idle worker pays it once for the
enqueue and once for the claim.

The stamps wrap a few private functions of the Postgres driver, the SQL layer and the
engine (named in ``_instrument``); a rename there fails this script loudly, never silently.
A benchmark tool, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _apps
import _engines
import psycopg

import cairnflow as cf

Stamps = list[tuple[str, int]]

STAGES = (
    "heard",
    "plan",
    "planned",
    "store",
    "claim",
    "round trip",
    "claimed",
    "accept",
    "accepted",
    "run",
)
"""The worker process's stamps, in the order an idle worker passes them."""


def _wrap(owner: type, name: str, stamps: Stamps, before: str, after: str | None) -> None:
    """Stamp ``before`` when ``owner.name`` is called and ``after`` when it returns."""
    original: Callable[..., Any] = getattr(owner, name)  # AttributeError: the name moved

    def stamped(*args: Any, **kwargs: Any) -> Any:
        stamps.append((before, time.time_ns()))
        result = original(*args, **kwargs)
        if after is not None:
            stamps.append((after, time.time_ns()))
        return result

    setattr(owner, name, stamped)


def _instrument(stamps: Stamps) -> None:
    """The worker's stamps: each of :data:`STAGES` (the notification heard, the claim planned,
    sent and answered, the attempt handed out and taken by a worker)."""
    from cairnflow._engine._runner import StepRunner
    from cairnflow._engine._state import EngineState
    from cairnflow.sql._claims import Claims
    from cairnflow.sql._store import SQLStore
    from cairnflow_postgres._dialect import PostgresDialect
    from cairnflow_postgres._notify import PgNotifier

    _wrap(PgNotifier, "_dispatch", stamps, "heard", None)
    _wrap(EngineState, "plan_claim", stamps, "plan", "planned")
    _wrap(SQLStore, "claim", stamps, "store", None)
    _wrap(Claims, "claim", stamps, "claim", None)
    _wrap(EngineState, "accept", stamps, "accept", "accepted")
    _wrap(StepRunner, "run", stamps, "run", None)
    pipeline = PostgresDialect.pipeline

    @contextlib.contextmanager
    def stamped(self: PostgresDialect, cursor: Any) -> Iterator[Any]:
        stamps.append(("round trip", time.time_ns()))
        with pipeline(self, cursor) as cursors:
            yield cursors
        stamps.append(("claimed", time.time_ns()))

    PostgresDialect.pipeline = stamped  # type: ignore[method-assign,assignment]
    if hasattr(PostgresDialect, "claim_alone"):  # a claim of one statement, in autocommit
        _wrap(PostgresDialect, "claim_alone", stamps, "round trip", "claimed")


def worker(url: str, prefix: str, out: str) -> None:
    """The worker process: serve ``probe`` until stdin closes, then write the stamps."""
    from cairnflow_postgres import PostgresStore

    stamps: Stamps = []
    _instrument(stamps)
    store = PostgresStore(url, table_prefix=prefix)
    client = cf.Client(store, workers=8, poll_interval=1.0, lease=30)
    client.register(_apps.probe())
    client.start()
    print("ready", flush=True)
    sys.stdin.read()  # the parent closes it when done
    client.stop()
    store.close()
    Path(out).write_text(json.dumps(stamps))


def _first_after(stamps: Stamps, name: str, t0: int, before: int) -> int | None:
    found = [at for stage, at in stamps if stage == name and t0 <= at < before]
    return min(found) if found else None


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def _idle_round_trips(url: str, every: float, count: int = 200) -> tuple[float, float]:
    """p50 of ``SELECT 1`` after ``every`` seconds of quiet, and back to back (ms)."""
    with psycopg.connect(url, autocommit=True) as conn:
        idle, busy = [], []
        for _ in range(count):
            time.sleep(every)
            started = time.perf_counter()
            conn.execute("SELECT 1")
            idle.append(time.perf_counter() - started)
        for _ in range(count):
            started = time.perf_counter()
            conn.execute("SELECT 1")
            busy.append(time.perf_counter() - started)
    return statistics.median(idle) * 1e3, statistics.median(busy) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--every-ms", type=float, default=37.0)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    engine = _engines.load_or_exit("postgres", HERE)
    url, prefix = engine.url, _engines.prefix()
    store = engine.make_store(prefix)
    store.migrate()
    out = Path(tempfile.mkdtemp(prefix="cairnstages-")) / "stamps.json"
    statement: list[int] = []
    execute = psycopg.Cursor.execute

    def timed(self: psycopg.Cursor[Any], *a: Any, **k: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            result = execute(self, *a, **k)
            statement.append(time.time_ns())
            return result
        return execute(self, *a, **k)  # the notifier's sender thread

    try:
        process = subprocess.Popen(
            [sys.executable, __file__, "--worker", url, prefix, str(out)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdin is not None
        if process.stdout.readline().strip() != "ready":
            raise SystemExit("the worker process did not start")
        time.sleep(1.0)  # its first poll and its LISTEN are behind us
        client = cf.Client(store)
        client.register(_apps.probe())
        psycopg.Cursor.execute = timed  # type: ignore[method-assign]
        sent: list[tuple[cf.RunRef, int, int, int]] = []
        every = args.every_ms / 1000
        start = time.monotonic()
        for i in range(args.samples):
            time.sleep(max(0.0, start + i * every - time.monotonic()))
            t0 = time.time_ns()
            ref = client.enqueue("probe", None)
            sent.append((ref, t0, statement[-1], time.time_ns()))
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        time.sleep(1.0)
        process.stdin.close()
        process.wait(timeout=60)
        stamps: Stamps = [(stage, at) for stage, at in json.loads(out.read_text())]
        stages: dict[str, list[float]] = {}
        for n, (ref, t0, done, returned) in enumerate(sent):
            started = int(client.info(ref).result)
            bound = sent[n + 1][1] if n + 1 < len(sent) else started + 1
            row = {"statement": done, "call": returned}
            for name in STAGES:
                at = _first_after(stamps, name, t0, min(bound, started))
                if at is not None:
                    row[name] = at
            row["start"] = started
            for name, at in row.items():
                stages.setdefault(name, []).append((at - t0) / 1e6)
        print(f"{args.samples} enqueues {args.every_ms} ms apart, ms after the call began:")
        for name, values in stages.items():
            print(
                f"  {name:11s} p50 {_pct(values, 50):6.2f}  p95 {_pct(values, 95):6.2f}"
                f"  p99 {_pct(values, 99):6.2f}  ({len(values)})"
            )
        idle, busy = _idle_round_trips(url, every)
        print(f"SELECT 1: {idle:.3f} ms after {args.every_ms} ms idle, {busy:.3f} back to back")
    finally:
        store.close()
        engine.drop(prefix)


if __name__ == "__main__":
    main()
