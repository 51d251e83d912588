"""cairnflow against its peers on PostgreSQL: ``nox -s bench-peers [-- --quick --write]``.

Every peer (``bench/peers/peer_*.py``) runs the same workloads (``bench/peers/_measure.py``;
cairnflow through the code of ``nox -s bench``), each workload in its own process on a fresh
database created for it and dropped after, three times (the median is reported), the peers
in a rotating order. A raw psycopg ``INSERT`` loop (``bench/_baseline.py``) runs in the same
run. One JSON line is printed per measurement, one table at the end; ``--write`` puts that
table, the versions and the machine into ``docs/benchmarks.md`` (between its
``bench-peers`` markers). A peer that is not installed is marked so; the others still run.
The exit status is non-zero if a workload of an installed peer failed.

The server is ``CAIRNFLOW_BENCH_POSTGRES_URL``, else ``CAIRNFLOW_TEST_POSTGRES_URL``; the
role needs CREATEDB. Scratch databases are named ``bench_peer_<peer>_<random>``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import _baseline
import _engines
import _workloads
import psycopg
from peers import _measure, discover
from rich.console import Console
from rich.table import Table

console = Console(stderr=True)

FULL = {
    "single": 2000,
    "batched": 10000,
    "batch": 500,
    "calls": 200,
    "samples": 200,
    "drain": 5000,
    "chain": 1000,
    "concurrency": 8,
    "reps": 3,
}
QUICK = {
    "single": 200,
    "batched": 1000,
    "batch": 500,
    "calls": 30,
    "samples": 30,
    "drain": 500,
    "chain": 100,
    "concurrency": 8,
    "reps": 1,
}
RAW = "raw"
"""The raw INSERT loop's key (not a peer: a floor)."""
CHILD_TIMEOUT = 1800
DOCS = HERE.parent / "docs" / "benchmarks.md"
BEGIN = "<!-- bench-peers:begin (written by `nox -s bench-peers -- --write`) -->"
END = "<!-- bench-peers:end -->"


# -- one measurement, in its own process --------------------------------------------------------
def raw_loop(url: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """The raw INSERT loop of ``nox -s bench`` on the same database: one row per transaction,
    then ``batch`` rows per transaction (``executemany``), then single inserts timed alone."""
    os.environ["CAIRNFLOW_BENCH_POSTGRES_URL"] = url
    engine = _engines.load("postgres", Path(tempfile.mkdtemp(prefix="cairnpeers-")))
    if isinstance(engine, str):
        raise RuntimeError(engine)
    loop = _baseline.Baseline(engine, _engines.prefix())
    try:
        single = loop.enqueue(sizes["single"], batch=1)
        batched = loop.enqueue(sizes["batched"], batch=sizes["batch"])
        time.sleep(0.5)
        took = []
        for _ in range(sizes["calls"]):
            time.sleep(0.01)
            started = time.perf_counter()
            loop.enqueue(1, batch=1)
            took.append((time.perf_counter() - started) * 1000)
    finally:
        loop.close()
    return {
        "enqueue_single_per_s": single,
        "enqueue_batched_per_s": batched,
        "batch": sizes["batch"],
        "enqueue_call_p50_ms": _measure.pct(took, 50),
        "enqueue_call_p95_ms": _measure.pct(took, 95),
    }


def child(key: str, workload: str, url: str, sizes: dict[str, Any]) -> dict[str, Any]:
    if key == RAW:
        return raw_loop(url, sizes)
    peer = discover()[key]
    mine = peer.workload(workload, url, sizes)
    if mine is not None:
        return mine
    return asyncio.run(_measure.run(peer, key, workload, url, sizes))


# -- the run -------------------------------------------------------------------------------------
def server_url() -> str:
    url = os.environ.get("CAIRNFLOW_BENCH_POSTGRES_URL") or os.environ.get(
        "CAIRNFLOW_TEST_POSTGRES_URL"
    )
    if not url:
        sys.exit("bench-peers: set CAIRNFLOW_BENCH_POSTGRES_URL (or CAIRNFLOW_TEST_POSTGRES_URL)")
    return url


def on_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def scratch(url: str, key: str) -> str:
    name = f"bench_peer_{key}_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop(url: str, name: str) -> None:
    assert name.startswith("bench_peer_")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(url: str, key: str, workload: str, sizes: dict[str, Any]) -> dict[str, Any]:
    name = scratch(url, key)
    try:
        done = subprocess.run(
            [
                *(sys.executable, __file__, "--child", key, workload, on_database(url, name)),
                *("--sizes", json.dumps(sizes)),
            ],
            check=False,
            stdout=subprocess.PIPE,
            text=True,
            timeout=CHILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {CHILD_TIMEOUT}s"}
    finally:
        drop(url, name)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit status {done.returncode} (its stderr is above)"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def machine(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:

        def one(sql: str) -> str:
            row = conn.execute(sql).fetchone()
            return str(row[0]) if row else ""

        server = one("SELECT version()").split(" on ")[0]
        fsync, sync = one("SHOW fsync"), one("SHOW synchronous_commit")
    return {
        **_workloads.machine(),
        "server": server,
        "fsync": fsync,
        "synchronous_commit": sync,
        "psycopg": psycopg.__version__,
    }


def median_of(records: list[dict[str, Any]], field: str) -> float | None:
    values = [r[field] for r in records if "error" not in r and r.get(field) is not None]
    return statistics.median(values) if values else None


ROWS = [
    ("enqueue, {single:,} runs one per transaction (runs/s)", "enqueue", ["enqueue_single_per_s"]),
    (
        "enqueue, {batched:,} runs in batches of {batch} (runs/s)",
        "enqueue",
        ["enqueue_batched_per_s"],
    ),
    ("`enqueue()` call p50, one caller, idle (ms)", "enqueue", ["enqueue_call_p50_ms"]),
    ("enqueue → step start p50 / p95, 1 idle worker (ms)", "latency", ["p50_ms", "p95_ms"]),
    (
        "drain {drain:,} queued no-op runs, {concurrency} concurrent (runs/s)",
        "drain",
        ["runs_per_s"],
    ),
    ("3-step workflow, {chain:,} runs (steps/s)", "chain", ["steps_per_s"]),
]
"""(label, workload, figures): one row of the table each."""


def number(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def cells(
    results: dict[tuple[str, str], list[dict[str, Any]]],
    columns: list[tuple[str, str, str]],
    sizes: dict[str, Any],
) -> list[list[str]]:
    """The table's rows: one per workload figure, one cell per column (key, name, state)."""
    out = []
    for label, workload, fields in ROWS:
        row = [label.format(**sizes)]
        for key, _name, state in columns:
            records = results.get((key, workload), [])
            if state:
                row.append(state)
            elif not records:
                row.append("—")
            elif all("error" in r for r in records):
                row.append("failed")
            else:
                values = [median_of(records, f) for f in fields]
                row.append(
                    " / ".join(number(v) for v in values)
                    + ("" if all("error" not in r for r in records) else " (some failed)")
                )
        out.append(row)
    return out


def markdown(
    rows: list[list[str]],
    columns: list[tuple[str, str, str]],
    info: dict[str, Any],
    peers: dict[str, Any],
    reps: int,
    seconds: float,
    quick: bool,
) -> str:
    head = ["workload", *[name for _k, name, _s in columns]]
    lines = [
        BEGIN,
        "",
        f"One run of `nox -s bench-peers` on {info['date']}"
        + (" (`--quick`: small sizes, not a measurement)" if quick else "")
        + f", {reps} repetition{'s' if reps != 1 else ''} of every workload, each on a fresh "
        f"database (the median is shown); {seconds / 60:.1f} min in all. Machine: "
        f"{info['cpus']} CPUs, {info['platform']}, CPython {info['python']}; "
        f"{info['server']} on the same machine, `fsync={info['fsync']}`, "
        f"`synchronous_commit={info['synchronous_commit']}`.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", "Versions and configuration:", ""]
    lines.append(
        f"- **raw `INSERT` loop**: psycopg {info['psycopg']}, one client, the `nox -s bench` "
        "baseline's table and statement; one row per transaction, then 500 rows per "
        "transaction (`executemany`), then single inserts timed alone"
    )
    for key, name, state in columns:
        if key == RAW:
            continue
        peer = peers[key]
        version = peer.versions() if not state else f"not installed: {', '.join(peer.missing())}"
        lines.append(f"- **{name}** ({version}): {peer.config}; batches: {peer.batch_api}")
    lines += ["", END]
    return "\n".join(lines)


def write_docs(path: Path, block: str) -> None:
    text = path.read_text()
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        _, after = rest.split(END, 1)
        text = before + block + after
    else:
        text = text.rstrip() + "\n\n## The peers\n\n" + block + "\n"
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    parser.add_argument("--reps", type=int, help="repetitions of every workload (default 3)")
    parser.add_argument("--peer", action="append", help="only these peers (repeatable)")
    parser.add_argument(
        "--workload", action="append", choices=_measure.WORKLOADS, help="repeatable"
    )
    parser.add_argument("--json", type=Path, help="write every record to this file")
    parser.add_argument(
        "--write",
        nargs="?",
        const=DOCS,
        type=Path,
        help=f"put the table into this file's bench-peers section (default {DOCS})",
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("PEER", "WORKLOAD", "URL"), help=argparse.SUPPRESS
    )
    parser.add_argument("--sizes", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = child(*args.child, json.loads(args.sizes))
        print(json.dumps(result), flush=True)
        return 0

    sizes = dict(QUICK if args.quick else FULL)
    reps = args.reps or sizes.pop("reps")
    sizes.pop("reps", None)
    url = server_url()
    peers = discover()
    unknown = set(args.peer or ()) - set(peers)
    if unknown:
        parser.error(f"unknown peer(s) {sorted(unknown)}; known: {sorted(peers)}")
    chosen = [k for k in peers if not args.peer or k in args.peer]
    info = {**machine(url), "date": datetime.date.today().isoformat()}
    records: list[dict[str, Any]] = [{"workload": "machine", **info, "sizes": sizes, "reps": reps}]
    print(json.dumps(records[0]), flush=True)
    columns: list[tuple[str, str, str]] = [(RAW, "raw `INSERT` loop (psycopg)", "")]
    runnable = []
    for key in chosen:
        missing = peers[key].missing()
        if missing:
            console.print(
                f"[yellow]bench-peers: {peers[key].name}: not installed ({', '.join(missing)})[/yellow]"
            )
            columns.append((key, peers[key].name, "not installed"))
        else:
            columns.append((key, peers[key].name, ""))
            runnable.append(key)
    workloads = args.workload or list(_measure.WORKLOADS)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    started = time.monotonic()
    for rep in range(reps):
        order = runnable[rep % max(len(runnable), 1) :] + runnable[: rep % max(len(runnable), 1)]
        for workload in workloads:
            keys = ([RAW] if workload == "enqueue" else []) + order
            for key in keys:
                began = time.monotonic()
                result = measure(url, key, workload, sizes)
                record = {
                    "peer": key,
                    "workload": workload,
                    "rep": rep + 1,
                    "seconds": round(time.monotonic() - began, 1),
                    **result,
                }
                records.append(record)
                results.setdefault((key, workload), []).append(result)
                print(json.dumps(record), flush=True)
                if "error" in result:
                    console.print(f"[red]{key} {workload}: {result['error']}[/red]")
    seconds = time.monotonic() - started
    rows = cells(results, columns, sizes)
    view = Table(title=f"cairnflow and its peers on PostgreSQL (median of {reps})")
    for title in ["workload", *[name for _k, name, _s in columns]]:
        view.add_column(title)
    for row in rows:
        view.add_row(*row)
    console.print(view)
    console.print(f"[dim]{seconds / 60:.1f} min[/dim]")
    if args.json:
        args.json.write_text(json.dumps(records, indent=2))
    if args.write:
        block = markdown(rows, columns, info, peers, reps, seconds, args.quick)
        write_docs(args.write, block)
        console.print(f"written to {args.write}")
    failed = any("error" in r for r in records)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
