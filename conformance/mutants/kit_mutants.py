"""The kit's mutation suite: one-line bugs the conformance kit must refuse, by name.

A kit is only as good as the bugs it catches. Each :class:`Mutant` below is a
bug a driver author could write (an outcome written without its lease token, a
claim without ``SKIP LOCKED``, a fan-in released one parent early...), as one
exact text replacement in the SQL layer or the Postgres dialect, with the
capability whose proof must fail because of it. ``nox -s kit-mutants`` copies
``core/`` and the drivers to a scratch directory, installs the copies in its own
virtualenv, and for every mutant patches the copy, runs the whole kit against
it and reads the JSON report: the mutant is *refused* when the report is not
accepted, and *named* when its capability is among the ``unproven``. The
working tree is never touched.

A mutant whose capability comes out proven is a hole in the kit: write the
missing proof (see ``conformance/README.md``, "Kit mutants"). A mutant whose
old text is no longer in its file fails the run too: the code moved, so the
mutant must move with it.

Usage (what the nox session does)::

    python conformance/mutants/kit_mutants.py prepare SCRATCH
    pip install -e SCRATCH/core -e SCRATCH/drivers/sqlite -e 'SCRATCH/drivers/postgres[binary]' ...
    python conformance/mutants/kit_mutants.py run SCRATCH [--engine sqlite] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository whose sources are copied."""

COPIED = ("pyproject.toml", "core", "drivers/sqlite", "drivers/postgres")
"""What the scratch copy holds: the shared tool configuration and the mutated distributions."""

KITS = {
    "postgres": "drivers/postgres/tests/test_conformance.py",
    "sqlite": "drivers/sqlite/tests/test_conformance.py",
}
"""The kit run per engine, relative to the scratch copy."""

PER_TEST_TIMEOUT = 120
"""Seconds before pytest-timeout stops one kit test: a mutant may make a test hang."""


@dataclass(frozen=True)
class Mutant:
    """One bug: in ``path``, ``old`` (found exactly once) becomes ``new``."""

    name: str
    path: str
    old: str
    new: str
    expect: str
    """The capability the kit must name unproven (a ``cairnflow.Cap`` value)."""
    bug: str
    engines: tuple[str, ...] = ("postgres", "sqlite")

    def changed_line(self) -> str:
        """The one line the mutant changes, as it reads after the change."""
        before, after = self.old.splitlines(), self.new.splitlines()
        return next((b for a, b in zip(before, after, strict=True) if a != b), after[0]).strip()


SQL = "core/src/cairnflow/sql"
PG_DIALECT = "drivers/postgres/src/cairnflow_postgres/_dialect.py"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "fencing",
        f"{SQL}/_statements.py",
        'WHERE id = ? AND lease_token = ? AND status = \'running\'"""\n'
        '"""One attempt succeeded (fenced)."""',
        'WHERE id = ? AND (lease_token = ? OR TRUE) AND status = \'running\'"""\n'
        '"""One attempt succeeded (fenced)."""',
        "lease",
        "a success is written whatever lease token it carries",
    ),
    Mutant(
        "skip-locked",
        PG_DIALECT,
        'skip_locked = " FOR UPDATE SKIP LOCKED"',
        'skip_locked = " FOR UPDATE"',
        "multi_process",
        "claims lock with a plain FOR UPDATE: a claim queues behind another's rows",
        engines=("postgres",),
    ),
    Mutant(
        "due-filter",
        f"{SQL}/_statements.py",
        "WHERE status IN ('scheduled', 'sleeping', 'waiting') AND due_at <= ?\n",
        "WHERE status IN ('scheduled', 'sleeping', 'waiting')"
        " AND (due_at <= ? OR status = 'scheduled')\n",
        "retry",
        "a step scheduled for later (retry, snooze) is promoted at the next pass",
    ),
    Mutant(
        "due-status",
        f"{SQL}/_outcomes.py",
        'return "scheduled" if due_at > now else "ready"',
        'return "ready"',
        "snooze",
        "a retry or snooze due later is made ready at once",
    ),
    Mutant(
        "fan-in",
        f"{SQL}/_statements.py",
        "AND parents_left = 0 AND status = 'blocked'",
        "AND parents_left <= 1 AND status = 'blocked'",
        "result",
        "a child is released with one parent still to succeed",
    ),
    Mutant(
        "renewal",
        f"{SQL}/_statements.py",
        "UPDATE {steps} SET lease_until = ?\n",
        "UPDATE {steps} SET lease_until = COALESCE(lease_until, ?)\n",
        "lease",
        "renew() reports the lease held but does not move lease_until",
    ),
    Mutant(
        "signal-dropped",
        f"{SQL}/_outcomes.py",
        "self._execute(cur, q.insert_signal, (run_id, name, payload, now))",
        "(run_id, name, payload, now)  # not kept",
        "signal",
        "a signal sent before its wait is answered STORED and dropped",
    ),
    Mutant(
        "cancel-running",
        f"{SQL}/_statements.py",
        'UNFINISHED = ("blocked", "scheduled", "ready", "running", "sleeping", "waiting")',
        'UNFINISHED = ("blocked", "scheduled", "ready", "sleeping", "waiting")',
        "cancel",
        "a run that ends leaves its running steps running",
    ),
    Mutant(
        "key-kept",
        f"{SQL}/_statements.py",
        "                finished_at = ?, active_key = NULL",
        "                finished_at = ?",
        "idempotency",
        "a succeeded run keeps its idempotency key",
    ),
    Mutant(
        "retry-keyless",
        f"{SQL}/_admin.py",
        "SET state = 'active', finished_at = NULL, error = NULL, active_key = idem_key,",
        "SET state = 'active', finished_at = NULL, error = NULL, active_key = NULL,",
        "retry_run",
        "a retried run runs without taking its idempotency key again",
    ),
    Mutant(
        "cancel-step-alone",
        f"{SQL}/_admin.py",
        "                        doomed.append(child)",
        "                        pass",
        "cancel_step",
        "a cancelled step leaves its dependents blocked: the run never ends",
    ),
    Mutant(
        "reclaim-count",
        f"{SQL}/_statements.py",
        "SET status = 'ready', due_at = ?, reclaims = reclaims + 1,",
        "SET status = 'ready', due_at = ?, reclaims = reclaims,",
        "lease",
        "a reclaim does not count: a step killing its workers is never abandoned",
    ),
    Mutant(
        "batch-split",
        f"{SQL}/_enqueue.py",
        "run_ids = self._tx.committing(lambda cur, commit: write(cur, commit, rows))",
        "run_ids = [i for one in runs for i in self._tx.committing("
        "lambda cur, commit, one=one: write(cur, commit, self.prepare([one])))]",
        "batch_enqueue",
        "a batch is written run by run, one transaction each: a conflict keeps the earlier runs",
    ),
    Mutant(
        "migration-lock",
        PG_DIALECT,
        'cursor.execute("SELECT pg_advisory_lock(%s)", (lock,))',
        'cursor.execute("SELECT %s::bigint", (lock,))',
        "multi_process",
        "migrations take no advisory lock: processes deploying at once race on the DDL",
        engines=("postgres",),
    ),
    Mutant(
        "backoff",
        f"{SQL}/_outcomes.py",
        "if not fenced(q.retry, status, retry_at, error):",
        "if not fenced(q.retry, status, now, error):",
        "retry",
        "a retry is due at once, whatever its backoff",
    ),
    Mutant(
        "overlap",
        f"{SQL}/_statements.py",
        "SELECT {schedule_columns_s}, CASE WHEN r.state = 'active' THEN 0 ELSE 1 END",
        "SELECT {schedule_columns_s}, CASE WHEN r.state = 'active' THEN 1 ELSE 1 END",
        "overlap_skip",
        "a schedule's last run reads finished while it runs: overlap=skip fires anyway",
    ),
    Mutant(
        "redeploy",
        f"{SQL}/_statements.py",
        "SET next_fire = CASE WHEN fingerprint = ? THEN next_fire ELSE ? END,",
        "SET next_fire = CASE WHEN fingerprint <> ? THEN next_fire ELSE ? END,",
        "cron",
        "a redeploy of the same schedule moves its next fire (a tick skipped or repeated)",
    ),
    Mutant(
        "schedule-pause",
        f"{SQL}/_statements.py",
        "SET paused = ?, resumed_at = COALESCE(?, resumed_at), updated_at = ?",
        "SET paused = paused AND ?, resumed_at = COALESCE(?, resumed_at), updated_at = ?",
        "schedule_pause",
        "pausing a schedule writes nothing: it keeps firing",
    ),
    Mutant(
        "tick-history",
        f"{SQL}/_statements.py",
        "WHERE schedule_id = ?\n            ORDER BY at DESC\n",
        "WHERE schedule_id = ?\n            ORDER BY at\n",
        "schedule_history",
        "a schedule's history returns its oldest ticks, not its last",
    ),
    Mutant(
        "leader-expiry",
        f"{SQL}/_leadership.py",
        "if held is not None and held.node != node and held.lease_until >= lease_now:",
        "if held is not None and held.node != node:",
        "leader_election",
        "a leader's lease never expires: a dead leader is never replaced",
    ),
    Mutant(
        "leader-resign",
        f"{SQL}/_statements.py",
        "SET lease_until = 0 WHERE role = ? AND node = ?",
        "SET lease_until = lease_until WHERE role = ? AND node = ?",
        "leader_election",
        "a resigning leader keeps its lease: the next leader waits for it to run out",
    ),
    Mutant(
        "limit-count",
        f"{SQL}/_limiters.py",
        "room[name] = max(limits[name] - int(running), 0)",
        "room[name] = limits[name]",
        "queue_limit_global",
        "a limited claim does not subtract what runs: each claim may take the whole limit",
    ),
    Mutant(
        "limit-lock",
        f"{SQL}/_statements.py",
        'LOCK_LIMITER = "SELECT name FROM {limits} WHERE kind = ? AND name = ?{for_update}"',
        'LOCK_LIMITER = "SELECT name FROM {limits} WHERE kind = ? AND name = ?"',
        "queue_limit_global",
        "the limiter row is read, not locked: two claimers count the same running and both take",
        engines=("postgres",),
    ),
    Mutant(
        "journal-fence",
        f"{SQL}/_journal.py",
        "if held is not None and self._execute(cur, q.hold_step, held).fetchone() is None:",
        "if held is None and lease is not None:",
        "journal",
        "a memo is recorded without checking the lease: a stale attempt's result is kept",
    ),
    Mutant(
        "lock-expiry",
        f"{SQL}/_locks.py",
        "if held.token != token and held.expires_at > now:",
        "if held.token != token:",
        "locks",
        "a lock never expires: one whose holder died is never taken again",
    ),
    Mutant(
        "lock-release-any",
        f"{SQL}/_statements.py",
        'RELEASE_NAMED = "DELETE FROM {locks} WHERE name = ? AND token = ?"',
        'RELEASE_NAMED = "DELETE FROM {locks} WHERE name = ? AND (token = ? OR 1 = 1)"',
        "locks",
        "unlock releases the lock whatever the token: a stale holder frees the new one's",
    ),
    Mutant(
        "rate-uncharged",
        f"{SQL}/_limiters.py",
        "        if leased:\n            tat = _rates.charge(",
        "        if leased and False:\n            tat = _rates.charge(",
        "rate_limit",
        "a rate-limited queue's claim leases within the bucket's room but never charges it",
    ),
    Mutant(
        "rate-room-ignored",
        f"{SQL}/_claims.py",
        "room[name] = min(room.get(name, request.limit), buckets.room(name))",
        "room[name] = room.get(name, request.limit)",
        "rate_limit",
        "a rate-limited queue's claim asks for its free workers, not the tokens its bucket holds",
    ),
    Mutant(
        "compensations-forward",
        f"{SQL}/_branches.py",
        "            reverse=True,\n        )\n        return found",
        "            reverse=False,\n        )\n        return found",
        "compensation",
        "a failed run undoes its steps in the order they ran, not the reverse",
    ),
    Mutant(
        "branch-never-skipped",
        f"{SQL}/_branches.py",
        "return 0 if branch is None else self._skip(cur, graph, [branch.name], now)",
        "return 0",
        "wait_branch",
        "a wait resolved in time leaves its branch blocked: the run never ends",
    ),
    Mutant(
        "timeout-ignores-branch",
        f"{SQL}/_branches.py",
        "        if wait is None or branch is None:\n            return None",
        "        if True:\n            return None",
        "wait_branch",
        "a wait whose timeout passes fails its run though it names a branch",
    ),
    Mutant(
        "forced-compensations-held",
        f"{SQL}/_timing.py",
        "WHERE id IN ({ids}) AND forced = 0 AND status IN ({unfinished}, 'skipped')",
        "WHERE id IN ({ids}) AND forced = 0 AND status IN ({unfinished})",
        "force_run",
        "a forced run's compensations are held by the pause it passed: it never ends",
    ),
)


@dataclass
class Verdict:
    """What the kit said about one mutant on one engine."""

    mutant: Mutant
    engine: str
    refused: bool
    unproven: list[str]
    seconds: float
    note: str = ""

    @property
    def named(self) -> bool:
        """True when the kit refused the mutant naming its capability."""
        return self.refused and self.mutant.expect in self.unproven


def prepare(scratch: Path) -> None:
    """Copy the sources the mutants change into ``scratch`` (emptied first)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", "build", "dist")
    for part in COPIED:
        source, target = ROOT / part, scratch / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
        else:
            shutil.copy2(source, target)
    problems = [problem for mutant in MUTANTS if (problem := _check(scratch, mutant))]
    if problems:
        raise SystemExit("\n".join(problems))


def _check(scratch: Path, mutant: Mutant) -> str | None:
    count = (scratch / mutant.path).read_text(encoding="utf-8").count(mutant.old)
    if count == 1:
        return None
    return (
        f"mutant {mutant.name}: its old text is in {mutant.path} {count} times, not once "
        f"(the code moved: update the mutant): {mutant.old!r}"
    )


def _kit(scratch: Path, engine: str, report: Path) -> tuple[int, dict[str, object] | None]:
    """Run ``engine``'s kit in ``scratch``; its exit status and report (None: none written)."""
    report.unlink(missing_ok=True)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "-o",
        f"timeout={PER_TEST_TIMEOUT}",
        KITS[engine],
        f"--conformance-report={report}",
    ]
    done = subprocess.run(  # noqa: S603 - this interpreter running pytest, no shell
        command, cwd=scratch, capture_output=True, text=True, check=False
    )
    (report.with_suffix(".log")).write_text(done.stdout + done.stderr, encoding="utf-8")
    if not report.exists():
        return done.returncode, None
    loaded: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return done.returncode, loaded


def _unproven(report: dict[str, object] | None) -> list[str]:
    if report is None:
        return []
    unproven = report.get("unproven", [])
    return sorted(str(cap) for cap in unproven) if isinstance(unproven, list) else []


def _accepted(status: int, report: dict[str, object] | None) -> bool:
    return status == 0 and report is not None and not _unproven(report)


def judge(scratch: Path, mutant: Mutant, engine: str, reports: Path) -> Verdict:
    """Apply ``mutant`` in ``scratch``, run ``engine``'s kit, restore the file."""
    path = scratch / mutant.path
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace(mutant.old, mutant.new, 1), encoding="utf-8")
    started = time.monotonic()
    try:
        status, report = _kit(scratch, engine, reports / f"{mutant.name}-{engine}.json")
    finally:
        path.write_text(original, encoding="utf-8")
    note = "" if report is not None else f"no report (pytest exit status {status})"
    return Verdict(
        mutant,
        engine,
        refused=not _accepted(status, report),
        unproven=_unproven(report),
        seconds=time.monotonic() - started,
        note=note,
    )


def table(verdicts: Sequence[Verdict]) -> str:
    """The score as a markdown table."""
    lines = [
        "| mutant | engine | the bug | expected unproven | refused? | named unproven |",
        "|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        refused = ("yes" if v.named else "yes, not named") if v.refused else "**NO**"
        named = ", ".join(v.unproven) or v.note or "-"
        lines.append(
            f"| {v.mutant.name} | {v.engine} | {v.mutant.bug} | {v.mutant.expect} | "
            f"{refused} | {named} |"
        )
    caught = sum(v.named for v in verdicts)
    lines.append("")
    lines.append(f"score: {caught} of {len(verdicts)} refused with their capability named")
    return "\n".join(lines)


def run(scratch: Path, engines: Sequence[str], only: Sequence[str]) -> int:
    """The unmutated kit first (it must be accepted), then every mutant; 0 when all are named."""
    reports = scratch / "reports"
    reports.mkdir(exist_ok=True)
    chosen = [m for m in MUTANTS if not only or m.name in only]
    unknown = sorted(set(only) - {m.name for m in MUTANTS})
    if unknown:
        print(f"unknown mutant(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    problems = [problem for mutant in chosen if (problem := _check(scratch, mutant))]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    for engine in engines:
        status, report = _kit(scratch, engine, reports / f"unmutated-{engine}.json")
        if not _accepted(status, report):
            # One retry, said aloud: a timing test that fails once on a loaded machine must
            # not stop the run, and one that fails twice is a finding of its own.
            print(
                f"the unmutated kit failed on {engine} (unproven: "
                f"{', '.join(_unproven(report)) or '-'}); running it again",
                flush=True,
            )
            status, report = _kit(scratch, engine, reports / f"unmutated-{engine}.json")
        if not _accepted(status, report):
            print(
                f"the unmutated kit is not accepted on {engine} (unproven: "
                f"{', '.join(_unproven(report)) or '-'}; see {reports}/unmutated-{engine}.log): "
                f"no mutant can be judged",
                file=sys.stderr,
            )
            return 1
        print(f"unmutated kit on {engine}: accepted", flush=True)
    verdicts: list[Verdict] = []
    for mutant in chosen:
        for engine in engines:
            if engine not in mutant.engines:
                continue
            verdict = judge(scratch, mutant, engine, reports)
            verdicts.append(verdict)
            print(
                f"{mutant.name} on {engine}: {'refused' if verdict.refused else 'ACCEPTED'}, "
                f"unproven {', '.join(verdict.unproven) or '-'} ({verdict.seconds:.0f} s): "
                f"{mutant.changed_line()}",
                flush=True,
            )
    print()
    print(table(verdicts))
    print(f"\nreports and logs: {reports}")
    return 0 if all(v.named for v in verdicts) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``prepare SCRATCH`` or ``run SCRATCH [--engine E]... [--only NAME]...``."""
    parser = argparse.ArgumentParser(prog="kit_mutants.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="copy the sources into SCRATCH")
    prep.add_argument("scratch", type=Path)
    go = commands.add_parser("run", help="judge every mutant on the copy in SCRATCH")
    go.add_argument("scratch", type=Path)
    go.add_argument(
        "--engine",
        action="append",
        choices=sorted(KITS),
        help="the kits to run (default: postgres; give it twice for both)",
    )
    go.add_argument("--only", action="append", default=[], help="a mutant's name (repeatable)")
    commands.add_parser("list", help="the mutants and what each must prove unproven")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.scratch.resolve())
        return 0
    if args.command == "list":
        for mutant in MUTANTS:
            print(f"{mutant.name}: {mutant.expect}: {mutant.bug} ({mutant.path})")
        return 0
    engines = args.engine or ["postgres"]
    if "postgres" in engines and not os.environ.get("CAIRNFLOW_TEST_POSTGRES_URL"):
        print("the Postgres kit needs CAIRNFLOW_TEST_POSTGRES_URL", file=sys.stderr)
        return 2
    return run(args.scratch.resolve(), engines, args.only)


if __name__ == "__main__":
    sys.exit(main())
