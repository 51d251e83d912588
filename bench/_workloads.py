"""The workloads W1 to W5. Every completion is counted from the store, never from counters
of the harness, and a workload fails if any run it enqueued did not succeed."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import _apps
from _engines import Engine
from _engines import prefix as new_prefix

import cairnflow as cf
from cairnflow.testing import build_notifier

HERE = Path(__file__).parent
NS = 1e9


class CountingStore:
    """Wraps a store and counts the SPI operations the engine calls (claims, finishes...)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target) or name.startswith("_"):
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return target(*args, **kwargs)

        return counted


def _finishes(calls: Counter[str] | dict[str, int]) -> int:
    return sum(calls.get(name, 0) for name in ("finish", "finish_many", "finish_and_claim"))


class Failed(Exception):
    """A workload's runs did not all succeed."""


def raw_one(engine: Engine, sql: str) -> tuple[Any, ...]:
    conn = engine.connect()
    try:
        cur = conn.cursor()
        cur.execute(sql)
        row = tuple(cur.fetchone())
        conn.commit()
        return row
    finally:
        conn.close()


def q(engine: Engine, table: str) -> str:
    return f"`{table}`" if engine.name == "mariadb" else f'"{table}"'


def numbered(engine: Engine, count: int) -> tuple[str, str]:
    """The numbers 1 to ``count`` as ``g.n``, in the engine's SQL: (a ``WITH`` clause to put
    before the ``SELECT``, or nothing; the ``FROM`` item)."""
    if engine.name == "postgres":
        return "", f"generate_series(1, {count}) AS g (n)"
    if engine.name == "mariadb":
        return "", f"(SELECT seq AS n FROM seq_1_to_{count}) g"
    recursive = (
        f"WITH RECURSIVE g (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {count}) "
    )
    return recursive, "g"


def numbered_text(engine: Engine, text: str) -> str:
    """``text`` followed by ``g.n``, as an SQL expression of the engine (ids of filled rows)."""
    return f"CONCAT('{text}', g.n)" if engine.name == "mariadb" else f"'{text}' || g.n"


def null_payload(engine: Engine) -> str:
    """The JSON ``null`` as a bytes literal of the engine."""
    return "'\\x6e756c6c'::bytea" if engine.name == "postgres" else "x'6e756c6c'"


def analyze(engine: Engine, conn: Any, tables: Sequence[str]) -> None:
    """What autovacuum (Postgres) or a DBA (MariaDB) would have done after a bulk fill."""
    cur = conn.cursor()
    if engine.name == "postgres":
        conn.autocommit = True
        for table in tables:
            cur.execute(f"ANALYZE {table}")
    elif engine.name == "mariadb":
        cur.execute(f"ANALYZE TABLE {', '.join(tables)}")
        cur.fetchall()


def settle(engine: Engine, conn: Any, *, timeout: float = 120.0) -> float:
    """Write a bulk fill's pages out before measuring beside it; the seconds it took.

    A history of finished runs accumulated over days sits on disk; the same history written
    by one statement a moment ago is still dirty in the server's cache, and the server
    flushes it while the next workload runs, competing with that workload's commits for the
    disk. Postgres: a ``CHECKPOINT`` (skipped without the right to it). MariaDB: wait until
    the buffer pool's dirty pages are under 5% of it (InnoDB flushes in the background; at
    most ``timeout`` seconds). SQLite: a ``wal_checkpoint(TRUNCATE)``.
    """
    started = time.perf_counter()
    cur = conn.cursor()
    if engine.name == "postgres":
        conn.autocommit = True
        # Without the right to it (not a superuser nor pg_checkpoint) measure as is.
        with contextlib.suppress(Exception):
            cur.execute("CHECKPOINT")
    elif engine.name == "mariadb":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cur.execute(
                "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                "WHERE VARIABLE_NAME IN ('INNODB_BUFFER_POOL_PAGES_DIRTY', "
                "'INNODB_BUFFER_POOL_PAGES_TOTAL')"
            )
            status = {name.upper(): int(value) for name, value in cur.fetchall()}
            if (
                status["INNODB_BUFFER_POOL_PAGES_DIRTY"] * 20
                < status["INNODB_BUFFER_POOL_PAGES_TOTAL"]
            ):
                break
            time.sleep(1.0)
    elif engine.name == "sqlite":
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cur.fetchall()
    return time.perf_counter() - started


def verify(engine: Engine, prefix: str, runs: int) -> None:
    """Fail unless exactly ``runs`` runs exist and every one succeeded (read from the store)."""
    total, succeeded = raw_one(
        engine,
        f"SELECT COUNT(*), SUM(CASE WHEN state = 'succeeded' THEN 1 ELSE 0 END) "
        f"FROM {q(engine, prefix + 'runs')}",
    )
    if int(total) != runs or int(succeeded or 0) != runs:
        raise Failed(f"{engine.name}: {succeeded} of {total} runs succeeded, {runs} expected")


def step_window(engine: Engine, prefix: str) -> tuple[int, float]:
    """(succeeded steps, seconds from the first claim to the last completion), from the store."""
    count, first, last = raw_one(
        engine,
        f"SELECT COUNT(*), MIN(started_at), MAX(finished_at) FROM {q(engine, prefix + 'steps')} "
        f"WHERE status = 'succeeded'",
    )
    return int(count), (int(last) - int(first)) / NS


def wait_for(engine: Engine, prefix: str, runs: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    table = q(engine, prefix + "runs")
    while time.monotonic() < deadline:
        (done,) = raw_one(engine, f"SELECT COUNT(*) FROM {table} WHERE state <> 'active'")
        if int(done) >= runs:
            return
        time.sleep(0.2)
    raise Failed(f"{engine.name}: runs did not finish within {timeout:g}s")


@contextmanager
def namespace(engine: Engine) -> Iterator[tuple[str, Any]]:
    """A fresh, migrated namespace, dropped afterwards."""
    prefix = new_prefix()
    store = engine.make_store(prefix)
    store.migrate()
    try:
        yield prefix, store
    finally:
        store.close()
        engine.drop(prefix)


@contextmanager
def client_processes(
    engine: Engine, prefix: str, count: int, **config: Any
) -> Iterator[list[subprocess.Popen[str]]]:
    """``count`` worker processes (``_client_proc.py``), each started and ready."""
    body = {"engine": engine.name, "prefix": prefix, "args": engine.worker_args, **config}
    processes = [
        subprocess.Popen(
            [sys.executable, str(HERE / "_client_proc.py"), json.dumps(body)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            if line != "ready":
                raise Failed(f"a client process did not start: {line!r}")
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def enqueue_all(
    store: Any, workflow: cf.Workflow, runs: int, payload: Any = None, *, numbered: bool = False
) -> None:
    """``runs`` runs of ``workflow`` with ``payload``, or (``numbered``) each with its number."""
    client = cf.Client(store)
    client.register(workflow)
    for start in range(0, runs, 1000):
        count = min(1000, runs - start)
        client.enqueue_many(
            cf.Job(workflow.name, start + i if numbered else payload) for i in range(count)
        )


# -- W1 ----------------------------------------------------------------------------------------------
def w1_enqueue(engine: Engine, *, single: int, batched: int, batch: int = 1000) -> dict[str, Any]:
    """Runs per second enqueued one per transaction, and with enqueue_many(batch)."""
    with namespace(engine) as (prefix, store):
        client = cf.Client(store)
        client.register(_apps.noop())
        started = time.perf_counter()
        for i in range(single):
            client.enqueue("noop", i)
        one = single / (time.perf_counter() - started)
        started = time.perf_counter()
        for start in range(0, batched, batch):
            client.enqueue_many(
                cf.Job("noop", i) for i in range(start, min(start + batch, batched))
            )
        many = batched / (time.perf_counter() - started)
        (count,) = raw_one(engine, f"SELECT COUNT(*) FROM {q(engine, prefix + 'runs')}")
        if int(count) != single + batched:
            raise Failed(f"{count} runs stored, {single + batched} enqueued")
    return {"enqueue_single_per_s": one, "enqueue_many_per_s": many}


# -- W2 ----------------------------------------------------------------------------------------------
def w2_drain(
    engine: Engine,
    *,
    runs: int,
    clients: int,
    workers: int = 8,
    prefetch: int | None = None,
    keys: bool = False,
) -> dict[str, Any]:
    """Completed runs per second, first claim to last completion, from the store.

    ``prefetch`` (one client only): the client's claim-ahead; None is the default (as many
    as its workers), 0 claims only for free workers. ``keys`` (one client only): every run
    under a concurrency key of its own with a limit of 1 (#16: many distinct keys, the keyed
    claim, a key row created at enqueue and locked and moved by each claim and outcome).
    """
    workflow = _apps.keyed() if keys else _apps.noop()
    with namespace(engine) as (prefix, store):
        enqueue_all(store, workflow, runs, numbered=keys)
        before = store.stats.snapshot()
        if clients == 1:
            counting = CountingStore(store)
            with cf.Client(
                counting, workers=workers, poll_interval=0.5, lease=30, prefetch=prefetch
            ) as client:
                client.register(workflow)
                wait_for(engine, prefix, runs, timeout=600)
            calls = dict(counting.calls)
            after = store.stats.snapshot()
            statements = (after["statements"] - before["statements"]) / runs
        else:
            with client_processes(
                engine, prefix, clients, workers=workers, poll=0.5, workflows=["noop"]
            ):
                wait_for(engine, prefix, runs, timeout=600)
            calls = {}
            statements = None  # sent by the processes, not counted here
        verify(engine, prefix, runs)
        steps, seconds = step_window(engine, prefix)
    return {
        "runs": runs,
        "clients": clients,
        "workers": workers,
        "prefetch": workers if prefetch is None else prefetch,
        "keys": keys,
        "runs_per_s": steps / seconds,
        "claim_calls_per_run": calls.get("claim", 0) / runs if calls else None,
        "calls": calls,
        "finish_calls_per_run": _finishes(calls) / runs if calls else None,
        "statements_per_run": statements,
    }


PAUSED_QUEUE = "bench-paused"


def w2_queues(
    engine: Engine,
    *,
    runs: int,
    variant: str,
    paused: int = 0,
    workers: int = 8,
    limit: int | None = None,
) -> dict[str, Any]:
    """W2 with queues, one client of ``workers`` workers in all (docs/claim.md).

    ``variant`` "3 queues": the runs spread over three queues the client serves from one
    pool, beside a fourth it serves that is paused and holds ``paused`` ready runs (the
    claims must neither run nor walk them). "global limit": plain W2's one queue with a
    global limit of ``limit`` (default ``workers``; prefetched attempts count, so a limit of
    the workers alone holds back the claim-ahead, and ``2 * workers`` is never reached).
    Completions are counted from the store; the paused runs must be untouched.
    """
    if variant == "3 queues":
        names = ["bench-q1", "bench-q2", "bench-q3"]
        queues = [cf.QueueConfig(name) for name in [*names, PAUSED_QUEUE]]
    elif variant == "global limit":
        names = ["default"]
        queues = [cf.QueueConfig("default", limit=workers if limit is None else limit)]
    else:
        raise ValueError(f"unknown W2 variant {variant!r}")
    flows = [_apps.noop_on(name) for name in names] + [_apps.noop_on(PAUSED_QUEUE)]
    with namespace(engine) as (prefix, store):
        setup = cf.Client(store)
        setup.register(*flows)
        if paused:
            setup.pause_queue(PAUSED_QUEUE)
            for start in range(0, paused, 1000):
                count = min(1000, paused - start)
                setup.enqueue_many(cf.Job(f"noop-{PAUSED_QUEUE}") for _ in range(count))
        for start in range(0, runs, 1000):  # the queues' runs interleaved, as they arrive
            count = min(1000, runs - start)
            setup.enqueue_many(cf.Job(f"noop-{names[i % len(names)]}") for i in range(count))
        before = store.stats.snapshot()
        with cf.Client(
            store, workers=workers, queues=queues, poll_interval=0.5, lease=30
        ) as client:
            client.register(*flows)
            wait_for(engine, prefix, runs, timeout=600)
        after = store.stats.snapshot()
        runs_table, steps_table = q(engine, prefix + "runs"), q(engine, prefix + "steps")
        (succeeded,) = raw_one(
            engine, f"SELECT COUNT(*) FROM {runs_table} WHERE state = 'succeeded'"
        )
        (waiting,) = raw_one(
            engine,
            f"SELECT COUNT(*) FROM {steps_table} WHERE queue = '{PAUSED_QUEUE}'"
            " AND status = 'ready' AND attempt = 0",
        )
        if int(succeeded) != runs or int(waiting) != paused:
            raise Failed(
                f"{engine.name}: {succeeded} of {runs} runs succeeded, "
                f"{waiting} of {paused} paused runs untouched"
            )
        steps, seconds = step_window(engine, prefix)
    return {
        "runs": runs,
        "variant": variant,
        "queues": len(names),
        "paused_ready": paused,
        "workers": workers,
        "limit": (workers if limit is None else limit) if variant == "global limit" else None,
        "runs_per_s": steps / seconds,
        "statements_per_run": (after["statements"] - before["statements"]) / runs,
        "transactions_per_run": (after["transactions"] - before["transactions"]) / runs,
    }


# -- W3 ----------------------------------------------------------------------------------------------
def w3_workflow(engine: Engine, *, runs: int, shape: str, workers: int = 8) -> dict[str, Any]:
    """Steps per second of a 5-step chain or a 1 -> 4 -> 1 fan (or ``chain3``, for the peers'
    comparison), and the cost of each step."""
    workflow = {"chain3": _apps.chain3, "chain5": _apps.chain5, "fan": _apps.fan}[shape]()
    with namespace(engine) as (prefix, store):
        enqueue_all(store, workflow, runs, payload=1)
        counting = CountingStore(store)
        before = store.stats.snapshot()
        with cf.Client(counting, workers=workers, poll_interval=0.5, lease=30) as client:
            client.register(workflow)
            wait_for(engine, prefix, runs, timeout=900)
        after = store.stats.snapshot()
        verify(engine, prefix, runs)
        steps, seconds = step_window(engine, prefix)
        claimed = counting.calls.get("claim", 0)
        finished = _finishes(counting.calls)
    return {
        "shape": shape,
        "runs": runs,
        "steps": steps,
        "steps_per_s": steps / seconds,
        "claim_calls_per_step": claimed / steps,
        "finish_calls_per_step": finished / steps,
        "transactions_per_step": (after["transactions"] - before["transactions"]) / steps,
        "statements_per_step": (after["statements"] - before["statements"]) / steps,
    }


# -- W4 ----------------------------------------------------------------------------------------------
W4_EVERY = 0.02
"""W4 enqueues one run every 20 ms..."""
W4_DRIFT = 0.0001
"""...plus 0.1 ms: a poll interval of 1 s or 100 ms is a whole number of 20 ms steps, so on an
exact 20 ms grid every sample would meet the polls at one of a few phases, and where that
grid fell against the poll would move the median by up to 10 ms. Drifting 0.1 ms a sample
sweeps the phases evenly."""


def w4_latency(
    engine: Engine,
    *,
    samples: int,
    poll: float,
    notifier: bool,
    every: float = W4_EVERY + W4_DRIFT,
    broker: list[Any] | None = None,
) -> dict[str, Any]:
    """Enqueue on one client, step start on another with idle workers: p50/p95/p99 in ms.

    ``broker`` (a notifier spec, see ``_brokers``): both stores are opened with that
    notifier, the worker's and the enqueuer's, each with one of its own."""
    with namespace(engine) as (prefix, migrated), contextlib.ExitStack() as stack:
        store = migrated
        if broker is not None:
            store = engine.make_store(prefix, notifier=build_notifier(broker))
            stack.callback(store.close)
        with client_processes(
            engine,
            prefix,
            1,
            workers=8,
            poll=poll,
            workflows=["probe"],
            notifier=notifier,
            broker=broker,
        ):
            time.sleep(max(0.5, poll))  # the worker's first poll and LISTEN are behind us
            enqueuer = cf.Client(store, notifier=None if notifier else False)
            enqueuer.register(_apps.probe())
            sent: list[tuple[cf.RunRef, int]] = []
            # An absolute schedule (the i-th enqueue at start + i * every), whose drift against
            # the poll period (W4_DRIFT) meets the worker's polls at every phase.
            start = time.monotonic()
            for i in range(samples):
                time.sleep(max(0.0, start + i * every - time.monotonic()))
                t0 = time.time_ns()
                sent.append((enqueuer.enqueue("probe", None), t0))
            wait_for(engine, prefix, samples, timeout=120 + poll * 3)
            latencies = []
            for ref, t0 in sent:
                info = enqueuer.info(ref)
                latencies.append((int(info.result) - t0) / 1e6)
        verify(engine, prefix, samples)
    latencies.sort()

    def pct(p: float) -> float:
        # Linear between the two nearest ranks (rank p * (n - 1), as numpy's default): the
        # p50 of an even count is the mean of its two middle samples, not the upper one.
        rank = p / 100 * (len(latencies) - 1)
        low = int(rank)
        high = min(low + 1, len(latencies) - 1)
        return latencies[low] + (latencies[high] - latencies[low]) * (rank - low)

    return {
        "samples": samples,
        "poll_interval_s": poll,
        "notifier": notifier,
        "broker": None if broker is None else broker[0].split(":")[0].removeprefix("cairnflow_"),
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "mean_ms": statistics.fmean(latencies),
    }


# -- W5 ----------------------------------------------------------------------------------------------
def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _idle_counts(engine: Engine, prefix: str, seconds: float) -> dict[str, int]:
    """What one idle worker process of 16 workers sends in ``seconds`` (after a warm-up)."""
    with client_processes(
        engine,
        prefix,
        1,
        workers=16,
        poll=1.0,
        workflows=["noop"],
        measure_idle=True,
        seconds=seconds,
    ) as procs:
        assert procs[0].stdout is not None
        counts: dict[str, int] = json.loads(procs[0].stdout.readline())
    return counts


def w5_footprint(engine: Engine, *, queued: int, idle_seconds: float) -> dict[str, Any]:
    """Worker RSS and bytes per run with 0 and ``queued`` runs; statements/s of 16 idle workers."""
    result: dict[str, Any] = {"queued": queued}
    with namespace(engine) as (prefix, store):
        empty = engine.table_bytes(prefix)
        with client_processes(engine, prefix, 1, workers=16, poll=1.0, workflows=["noop"]) as procs:
            time.sleep(3)
            result["worker_rss_mb_empty"] = _rss_kb(procs[0].pid) / 1024
        enqueue_all(store, _apps.noop(), queued)
        full = engine.table_bytes(prefix)
        result["bytes_per_queued_run"] = (full - empty) / queued
        # The same worker process shape, started with the whole backlog in front of it.
        with client_processes(engine, prefix, 1, workers=16, poll=1.0, workflows=["noop"]) as procs:
            time.sleep(3)
            result["worker_rss_mb_backlog"] = _rss_kb(procs[0].pid) / 1024
        result["worker_rss_growth_mb"] = (
            result["worker_rss_mb_backlog"] - result["worker_rss_mb_empty"]
        )
    with namespace(engine) as (prefix, _store):
        counts = _idle_counts(engine, prefix, idle_seconds)
        result["idle_statements_per_s"] = counts["statements"] / idle_seconds
        result["idle_transactions_per_s"] = counts["transactions"] / idle_seconds
    return result


# -- W6 ----------------------------------------------------------------------------------------------
def _due_pass_ms(store: Any, samples: int = 50) -> float:
    """The median time of the store call a dispatcher pass makes for schedules, in ms."""
    names = frozenset({"noop"})
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        store.due_schedules(now=time.time_ns(), workflows=names, limit=100)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def w6_schedules(engine: Engine, *, stored: int, idle_seconds: float) -> dict[str, Any]:
    """What stored schedules cost: one pass's schedule query with none and with ``stored``, and
    the statements per second of 16 idle workers with 1,000 schedules stored."""
    result: dict[str, Any] = {"stored": stored}
    # A yearly cron: stored, never due while the bench runs.
    yearly = "0 0 1 1 *"
    with namespace(engine) as (prefix, store):
        result["pass_ms_empty"] = _due_pass_ms(store)
        client = cf.Client(store)
        client.register(_apps.noop())
        for n in range(stored):
            client.add_schedule("noop", cf.Schedule(f"s{n}", yearly))
        result["pass_ms_stored"] = _due_pass_ms(store)
        result["pass_ms_added"] = result["pass_ms_stored"] - result["pass_ms_empty"]
    with namespace(engine) as (prefix, store):
        client = cf.Client(store)
        client.register(_apps.noop())
        for n in range(1000):
            client.add_schedule("noop", cf.Schedule(f"s{n}", yearly))
        counts = _idle_counts(engine, prefix, idle_seconds)
        result["idle_statements_per_s_1000_schedules"] = counts["statements"] / idle_seconds
    return result


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import platform

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cairnflow": cf.__version__,
    }
