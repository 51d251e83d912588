"""cairnflow benchmarks: ``nox -s bench [-- --engine sqlite --only w2k --quick --json out.json]``.

Each workload prints one JSON line as it finishes; a table with every figure
and its ratio to the raw SQL baseline (measured in the same run, on the same
database) ends the output. The exit status is non-zero if any run of any
workload did not succeed; speed never fails the run, it is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _baseline
import _brokers
import _engines
import _finding
import _retention
import _scale
import _workloads
from rich.console import Console
from rich.table import Table

console = Console(stderr=True)

FULL = {
    "w1_single": 2000,
    "w1_batched": 20000,
    "w2": 20000,
    "w3": 2000,
    "w4": 200,
    "w5": 100000,
    "w6": 10000,
    "paused": 10000,
    "idle": 10.0,
    "w7": 1_000_000,
    "history": 1_000_000,
    "w8_queued": 1_000_000,
    "w8_drain": 20_000,
    "rounds": 3,
}
QUICK = {
    "w1_single": 200,
    "w1_batched": 2000,
    "w2": 1000,
    "w3": 100,
    "w4": 30,
    "w5": 5000,
    "w6": 1000,
    "paused": 10000,
    "idle": 3.0,
    "w7": 20_000,
    "history": 20_000,
    "w8_queued": 20_000,
    "w8_drain": 2_000,
    "rounds": 1,
}
W4_BROKER_TARGET_MS = 10.0
"""Issue #19: an enqueue starts on an idle worker within 10 ms (p50) through a broker."""
TARGETS = {
    "sqlite": {"w2_ratio": 0.5},
    "postgres": {"w2_ratio": 0.5},
    "mariadb": {"w2_ratio": 0.4},
}


def emit(record: dict[str, Any], out: list[dict[str, Any]]) -> None:
    out.append(record)
    print(json.dumps(record), flush=True)


GROUPS = ("w2q", "w2k", "retention", "w8", "w1", "w3", "w4", "w5", "w6", "w7")
"""The workloads ``--only`` selects among; the baseline and W2 always run (rows divide by them)."""


def run_engine(
    engine: _engines.Engine,
    sizes: dict[str, Any],
    quick: bool,
    out: list[dict[str, Any]],
    only: frozenset[str] = frozenset(GROUPS),
) -> None:
    base = _baseline.measure(engine, _engines.prefix(), jobs=sizes["w2"], batch=8)
    emit({"engine": engine.name, "workload": "baseline", **base}, out)
    # W2 right after the baseline it is compared with (both swing with the machine's load).
    # The default client, the same without claiming ahead (prefetch=0), and two processes.
    for clients, prefetch, name in ((1, None, "x1"), (1, 0, "x1 prefetch 0"), (2, None, "x2")):
        w2 = _workloads.w2_drain(engine, runs=sizes["w2"], clients=clients, prefetch=prefetch)
        w2["ratio_to_batched_baseline"] = w2["runs_per_s"] / base["claim_complete_batched_per_s"]
        emit({"engine": engine.name, "workload": f"W2 drain {name}", **w2}, out)
        if name == "x1":
            plain = w2
    # The claim's clauses (docs/claim.md), each beside the plain W2 of this run: three queues
    # from one pool with a paused queue of ready runs; a global limit the client never reaches
    # (16: its 8 workers and the 8 attempts it claims ahead), which is what the clause costs;
    # and one of the workers alone (8), which also holds back the claim-ahead (prefetched
    # attempts are leased: they count), a cost of the limit itself, not of the clause.
    variants = (
        ("3 queues", sizes["paused"], None),
        ("global limit", 0, 16),
        ("global limit", 0, 8),
    )
    for variant, paused, limit in variants if "w2q" in only else ():
        w2q = _workloads.w2_queues(
            engine, runs=sizes["w2"], variant=variant, paused=paused, limit=limit
        )
        w2q["ratio_to_batched_baseline"] = w2q["runs_per_s"] / base["claim_complete_batched_per_s"]
        w2q["ratio_to_plain_w2"] = w2q["runs_per_s"] / plain["runs_per_s"]
        w2q["plain_statements_per_run"] = plain["statements_per_run"]
        emit({"engine": engine.name, "workload": f"W2q {variant}", **w2q}, out)
    # Plain W2 with a concurrency key of limit 1 on every run (as many keys as runs, #16):
    # the keyed claim against a plain W2 drained right before it, in adjacent pairs, the
    # median of the pairs' ratios (docs/claim.md, 4). Plain W2 swings by 10-15% between two
    # drains minutes apart here, the whole margin of the target: the W2 rows above are not
    # its comparison.
    pairs = []
    for _ in range(sizes["rounds"] if "w2k" in only else 0):
        plain_k = _workloads.w2_drain(engine, runs=sizes["w2"], clients=1)
        keyed = _workloads.w2_drain(engine, runs=sizes["w2"], clients=1, keys=True)
        pairs.append((plain_k, keyed))
    if pairs:
        w2k = dict(_median_record([k for _, k in pairs]))
        w2k["rounds"] = len(pairs)
        w2k["plain_runs_per_s"] = statistics.median(p["runs_per_s"] for p, _ in pairs)
        w2k["pair_ratios"] = [k["runs_per_s"] / p["runs_per_s"] for p, k in pairs]
        w2k["ratio_to_plain_w2"] = statistics.median(w2k["pair_ratios"])
        w2k["ratio_to_batched_baseline"] = w2k["runs_per_s"] / base["claim_complete_batched_per_s"]
        w2k["plain_statements_per_run"] = pairs[0][0]["statements_per_run"]
        emit({"engine": engine.name, "workload": "W2k concurrency keys", **w2k}, out)
    # Tables that stay small (#16): W2 beside a history of finished runs and on empty tables,
    # then W2 while another client prunes that history (docs/retention.md), in adjacent pairs.
    if "retention" in only:
        w2h = _retention.w2_history(
            engine, runs=sizes["w2"], history=sizes["history"], rounds=sizes["rounds"]
        )
        emit({"engine": engine.name, "workload": "W2 history", **w2h}, out)
        w2p = _retention.w2_pruning(
            engine, runs=sizes["w2"], history=sizes["history"], rounds=sizes["rounds"]
        )
        emit({"engine": engine.name, "workload": "W2 pruning", **w2p}, out)
    # Scale (#20): one worker process draining a shallow queue and a deep one (Postgres,
    # SQLite); one worker process against four on one queue (Postgres: SQLite has one writer).
    if "w8" in only and engine.name in ("postgres", "sqlite"):
        w8 = _scale.w8_depth(engine, queued=sizes["w8_queued"], drain=sizes["w8_drain"])
        emit({"engine": engine.name, "workload": "W8 depth", **w8}, out)
    if "w8" in only and engine.name == "postgres":
        w8p = _scale.w8_processes(engine, runs=sizes["w8_drain"])
        emit({"engine": engine.name, "workload": "W8 processes", **w8p}, out)
    if "w1" in only:
        w1 = _workloads.w1_enqueue(engine, single=sizes["w1_single"], batched=sizes["w1_batched"])
        w1["ratio_single"] = w1["enqueue_single_per_s"] / base["enqueue_single_per_s"]
        w1["ratio_many"] = w1["enqueue_many_per_s"] / base["enqueue_batched_per_s"]
        emit({"engine": engine.name, "workload": "W1 enqueue", **w1}, out)
    if "w3" in only:
        for shape in ("chain5", "fan"):
            w3 = _workloads.w3_workflow(engine, runs=sizes["w3"], shape=shape)
            # A step is a claim and a completion: what the batched raw loop does for a job.
            w3["ratio_to_batched_baseline"] = (
                w3["steps_per_s"] / base["claim_complete_batched_per_s"]
            )
            emit({"engine": engine.name, "workload": f"W3 {shape}", **w3}, out)
    if "w4" in only:
        modes = [(1.0, False), (0.1, False)]
        if engine.name == "postgres":
            modes.insert(0, (1.0, True))
        for poll, notifier in modes:
            w4 = _workloads.w4_latency(engine, samples=sizes["w4"], poll=poll, notifier=notifier)
            # Latency has no raw-loop counterpart; its floors are: half the poll interval (any
            # poller's median wait), and one raw claim-and-complete transaction (the notifier's).
            floor_ms = 1000 / base["claim_complete_single_per_s"] if notifier else poll * 500
            w4["floor_ms"] = floor_ms
            w4["p50_to_floor"] = w4["p50_ms"] / floor_ms
            emit({"engine": engine.name, "workload": "W4 latency", **w4}, out)
        # The engines without notifications of their own, woken through a broker (contrib/redis,
        # contrib/nats): polling every second underneath, as a deployment would keep it.
        for broker in _brokers.BROKERS if engine.name in _brokers.ENGINES else ():
            spec = broker.spec()
            if isinstance(spec, str):
                emit(
                    {
                        "engine": engine.name,
                        "workload": "W4 latency",
                        "broker": broker.name,
                        "not_run": spec,
                    },
                    out,
                )
                continue
            w4 = _workloads.w4_latency(
                engine, samples=sizes["w4"], poll=1.0, notifier=True, broker=spec
            )
            w4["floor_ms"] = 1000 / base["claim_complete_single_per_s"]
            w4["p50_to_floor"] = w4["p50_ms"] / w4["floor_ms"]
            emit({"engine": engine.name, "workload": "W4 latency", **w4}, out)
    if "w5" in only:
        w5 = _workloads.w5_footprint(engine, queued=sizes["w5"], idle_seconds=sizes["idle"])
        # The raw loop's table holds one row per job; a run is a run row and a step row.
        w5["bytes_ratio_to_baseline"] = w5["bytes_per_queued_run"] / max(
            base["bytes_per_queued_row"], 1.0
        )
        emit({"engine": engine.name, "workload": "W5 footprint", **w5}, out)
    if "w6" in only:
        w6 = _workloads.w6_schedules(engine, stored=sizes["w6"], idle_seconds=sizes["idle"])
        emit({"engine": engine.name, "workload": "W6 schedules", **w6}, out)
    if "w7" in only:
        w7 = _finding.w7_find(engine, runs=sizes["w7"])
        emit({"engine": engine.name, "workload": "W7 find runs", **w7}, out)


def _pairs(ratios: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in ratios)


def _median_record(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The record of median throughput among ``records`` (one drain's figures, whole)."""
    ranked = sorted(records, key=lambda r: r["runs_per_s"])
    return ranked[(len(ranked) - 1) // 2]


def table(records: list[dict[str, Any]]) -> Table:
    view = Table(
        title="cairnflow benchmarks (ratios are to the raw SQL loop, same run, same database)"
    )
    for column in ("engine", "workload", "figure", "ratio / note"):
        view.add_column(column)
    for r in records:
        engine, name = r.get("engine", ""), r.get("workload", "")
        if name == "baseline":
            view.add_row(
                engine,
                name,
                f"claim+complete batched {r['claim_complete_batched_per_s']:.0f}/s, "
                f"single {r['claim_complete_single_per_s']:.0f}/s",
                f"batch {r['batch']:.0f}",
            )
        elif name == "W1 enqueue":
            view.add_row(
                engine,
                name,
                f"{r['enqueue_single_per_s']:.0f}/s single, {r['enqueue_many_per_s']:.0f}/s many",
                f"{r['ratio_single']:.2f}x, {r['ratio_many']:.2f}x",
            )
        elif name == "W2k concurrency keys":
            view.add_row(
                engine,
                "W2 concurrency keys, one per run",
                f"{r['runs_per_s']:.0f} runs/s (plain W2 beside it {r['plain_runs_per_s']:.0f})",
                f"{r['ratio_to_plain_w2']:.2f}x plain W2 (target 0.80x), median of "
                f"{_pairs(r['pair_ratios'])}; "
                f"{r['statements_per_run']:.2f} statements/run "
                f"(plain {r['plain_statements_per_run']:.2f})",
            )
        elif name == "W2 history":
            view.add_row(
                engine,
                f"W2 beside {r['history']:,} finished runs",
                f"{r['runs_per_s_history']:.0f} runs/s (empty tables {r['runs_per_s_empty']:.0f})",
                f"{r['ratio_to_empty']:.2f}x empty (target 0.90x), median of "
                f"{_pairs(r['pair_ratios'])}; claim p95 "
                f"{r['claim_p95_ms_history']:.1f} ms (empty {r['claim_p95_ms_empty']:.1f})",
            )
        elif name == "W2 pruning":
            view.add_row(
                engine,
                f"W2 while pruning {r['history']:,} runs",
                f"{r['runs_per_s_pruning']:.0f} runs/s (not pruning {r['runs_per_s_still']:.0f}); "
                f"{sum(r['pruned_during_w2']):,} pruned meanwhile",
                f"{r['ratio_to_still']:.2f}x (target 0.80x), median of "
                f"{_pairs(r['pair_ratios'])}; claim p95 {r['p95_ratio']:.2f}x "
                f"(target 2x), median of {_pairs(r['p95_pair_ratios'])}: "
                f"{r['claim_p95_ms_pruning']:.1f} ms",
            )
        elif name == "W8 depth":
            view.add_row(
                engine,
                f"W8 drain {r['drained']:,} of {r['queued']:,} queued, one process",
                f"{r['runs_per_s_deep']:.0f} runs/s (of {r['drained']:,} queued: "
                f"{r['runs_per_s_shallow']:.0f})",
                f"{r['ratio_deep_to_shallow']:.2f}x (target 0.80x)",
            )
        elif name == "W8 processes":
            view.add_row(
                engine,
                f"W8 {r['processes']} worker processes, {r['workers_per_process']} workers each",
                f"{r['runs_per_s_many']:.0f} runs/s (one process {r['runs_per_s_one']:.0f})",
                f"{r['ratio_many_to_one']:.2f}x one process (target 1.5x)",
            )
        elif name.startswith("W2q"):
            paused = f", {r['paused_ready']:,} paused ready" if r["paused_ready"] else ""
            limit = f" of {r['limit']}" if r.get("limit") else ""
            view.add_row(
                engine,
                f"W2 {r['variant']}{limit}{paused}",
                f"{r['runs_per_s']:.0f} runs/s ({r['ratio_to_batched_baseline']:.2f}x)",
                f"{r['ratio_to_plain_w2']:.2f}x plain W2; {r['statements_per_run']:.2f} "
                f"statements/run (plain {r['plain_statements_per_run']:.2f})",
            )
        elif name.startswith("W2"):
            target = TARGETS.get(engine, {}).get("w2_ratio")
            met = (
                ""
                if target is None or r["clients"] != 1 or r["prefetch"] == 0
                else (
                    " (target met)"
                    if r["ratio_to_batched_baseline"] >= target
                    else f" (target {target}x missed)"
                )
            )
            view.add_row(
                engine,
                name,
                f"{r['runs_per_s']:.0f} runs/s",
                f"{r['ratio_to_batched_baseline']:.2f}x{met}",
            )
        elif name.startswith("W3"):
            view.add_row(
                engine,
                name,
                f"{r['steps_per_s']:.0f} steps/s ({r['ratio_to_batched_baseline']:.2f}x)",
                f"{r['claim_calls_per_step']:.2f} claims, {r['finish_calls_per_step']:.2f} finishes, "
                f"{r['transactions_per_step']:.2f} tx per step",
            )
        elif name.startswith("W4") and "not_run" in r:
            view.add_row(engine, f"W4 latency ({r['broker']} notifier)", r["not_run"], "")
        elif name.startswith("W4"):
            mode = "notifier" if r["notifier"] else f"poll {r['poll_interval_s']:g}s"
            if r.get("broker"):
                mode = f"{r['broker']} notifier, poll {r['poll_interval_s']:g}s"
            view.add_row(
                engine,
                f"W4 latency ({mode})",
                f"p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms",
                f"p50 {r['p50_to_floor']:.2f}x its floor of {r['floor_ms']:.1f} ms; "
                f"{r['samples']} samples"
                + (f" (target p50 < {W4_BROKER_TARGET_MS:g} ms)" if r.get("broker") else ""),
            )
        elif name.startswith("W5"):
            view.add_row(
                engine,
                name,
                f"RSS {r['worker_rss_mb_empty']:.1f} -> {r['worker_rss_mb_backlog']:.1f} MB; "
                f"{r['bytes_per_queued_run']:.0f} B/run ({r['bytes_ratio_to_baseline']:.1f}x)",
                f"{r['idle_statements_per_s']:.1f} statements/s idle (16 workers)",
            )
        elif name.startswith("W6"):
            view.add_row(
                engine,
                name,
                f"a pass's schedule query {r['pass_ms_empty']:.2f} -> "
                f"{r['pass_ms_stored']:.2f} ms with {r['stored']} stored",
                f"{r['idle_statements_per_s_1000_schedules']:.1f} statements/s idle "
                f"(16 workers, 1,000 schedules)",
            )
        elif name.startswith("W7"):
            met = "target met" if r["prefix_ms"] < r["target_ms"] else "target missed"
            view.add_row(
                engine,
                name,
                f"newest 50 failed, label prefix: {r['prefix_ms']:.1f} ms among {r['runs']:,} "
                f"runs ({met}: {r['target_ms']:.0f} ms)",
                f"prefix of every run {r['common_prefix_ms']:.1f} ms, exact label "
                f"{r['label_ms']:.1f} ms",
            )
        elif name == "skipped":
            view.add_row(engine, "skipped", r["reason"], "")
    return view


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--engine", action="append", choices=_engines.ENGINES, help="repeatable; default: all"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes: a smoke test that every workload completes",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=GROUPS,
        help="repeatable; default: every workload (the baseline and W2 always run)",
    )
    parser.add_argument(
        "--json", type=Path, help="write every record (and the machine) to this file"
    )
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    records: list[dict[str, Any]] = []
    emit(
        {"workload": "machine", **_workloads.machine(), "quick": args.quick, "sizes": sizes},
        records,
    )
    failed = False
    workdir = Path(tempfile.mkdtemp(prefix="cairnbench-"))
    for name in args.engine or list(_engines.ENGINES):
        engine = _engines.load(name, workdir)
        if isinstance(engine, str):
            emit({"engine": name, "workload": "skipped", "reason": engine}, records)
            continue
        emit(
            {"engine": name, "workload": "settings", "driver": engine.driver, **engine.settings},
            records,
        )
        started = time.monotonic()
        try:
            run_engine(engine, sizes, args.quick, records, frozenset(args.only or GROUPS))
        except _workloads.Failed as error:
            failed = True
            emit({"engine": name, "workload": "FAILED", "reason": str(error)}, records)
        console.print(f"[dim]{name}: {time.monotonic() - started:.0f}s[/dim]")
    console.print(table(records))
    if args.json:
        args.json.write_text(json.dumps(records, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
