"""The history checker: what the processes saw, against what the store kept.

A chaos run is judged from two accounts that do not share a failure:

* the **history**, written by the processes as things happened, append-only
  JSONL, one file per process (:mod:`chaos_workload` writes it): every
  enqueue (acknowledged with its run id, or ended in an error that leaves its
  outcome unknown), every start of a step's body and every completion of one
  (with a nonce that the body also returns, so the stored output names the
  body that produced it), every fault that fired;
* the **store**: every run and step as the store kept them, and every commit
  of a step's success, recorded inside the committing transaction by an audit
  trigger in the database itself (so a success written twice leaves two rows,
  whatever the final state looks like).

:func:`check` compares them and names each violation:

``lost``
    an enqueue was acknowledged with a run id, and the store has no such run;
``stuck``
    a run is not finished (the checker runs after the workload drained);
``wrong_end``
    a run finished otherwise than its workflow must (a run that should have
    succeeded failed; the poison run was not abandoned);
``duplicate_outcome``
    a step's success was committed more than once;
``phantom_outcome``
    a committed output names no body that completed, or a body of another
    attempt than the one the store committed (a stale lease wrote it);
``lease_ran_twice``
    two bodies started under one attempt number: one claim handed out twice
    (every claim numbers its attempt anew, so a takeover never reuses one);
``fan_in_twice``
    a step with several parents committed more than once, or started twice
    under one attempt (two parents both released it);
``fan_in_never``
    every parent of such a step succeeded and it never succeeded, in a run
    that did not fail or get cancelled (no parent released it).

A body may start more than once (at least once is the contract: a killed or
stalled worker's attempt is taken over); only the kinds above are violations.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "Commit",
    "Completed",
    "Enqueued",
    "Expected",
    "FaultFired",
    "History",
    "Kind",
    "Started",
    "Stored",
    "StoredRun",
    "StoredStep",
    "Verdict",
    "Violation",
    "check",
    "read_history",
]


class Kind(StrEnum):
    """The kinds of violation (see the module docstring)."""

    LOST = "lost"
    STUCK = "stuck"
    WRONG_END = "wrong_end"
    DUPLICATE_OUTCOME = "duplicate_outcome"
    PHANTOM_OUTCOME = "phantom_outcome"
    LEASE_RAN_TWICE = "lease_ran_twice"
    FAN_IN_TWICE = "fan_in_twice"
    FAN_IN_NEVER = "fan_in_never"


# -- the history: what the processes logged ------------------------------------------------------
class Enqueued(NamedTuple):
    """One enqueue; ``run_id`` None when it raised (its outcome is unknown to the caller)."""

    key: str
    workflow: str
    run_id: str | None
    at: int


class Started(NamedTuple):
    """A step's body began, under attempt number ``attempt``."""

    run_id: str
    step: str
    attempt: int
    node: str
    pid: int
    at: int


class Completed(NamedTuple):
    """A step's body returned; ``nonce`` is in the output it returned."""

    run_id: str
    step: str
    attempt: int
    node: str
    pid: int
    nonce: str
    at: int


class FaultFired(NamedTuple):
    """A fault point fired in process ``pid`` (logged before it acted, so kills are here too)."""

    point: str
    action: str
    node: str
    pid: int
    at: int


@dataclass
class History:
    """Every event of a chaos run, from every process's log."""

    enqueues: list[Enqueued] = field(default_factory=list)
    starts: list[Started] = field(default_factory=list)
    completions: list[Completed] = field(default_factory=list)
    failures: list[Started] = field(default_factory=list)
    """Bodies that raised on purpose (a step failing its first attempt): their ends."""
    faults: list[FaultFired] = field(default_factory=list)

    def add(self, event: dict[str, Any]) -> None:
        """Add one logged event (a JSON object with ``"ev"`` naming its kind)."""
        kind = event["ev"]
        if kind == "enqueue":
            self.enqueues.append(
                Enqueued(event["key"], event["workflow"], event["run"], event["at"])
            )
        elif kind == "start":
            self.starts.append(
                Started(
                    event["run"],
                    event["step"],
                    event["attempt"],
                    event["node"],
                    event["pid"],
                    event["at"],
                )
            )
        elif kind == "fail":
            self.failures.append(
                Started(
                    event["run"],
                    event["step"],
                    event["attempt"],
                    event["node"],
                    event["pid"],
                    event["at"],
                )
            )
        elif kind == "done":
            self.completions.append(
                Completed(
                    event["run"],
                    event["step"],
                    event["attempt"],
                    event["node"],
                    event["pid"],
                    event["nonce"],
                    event["at"],
                )
            )
        elif kind == "fault":
            self.faults.append(
                FaultFired(
                    event["point"], event["action"], event["node"], event["pid"], event["at"]
                )
            )
        else:
            raise ValueError(f"unknown history event {event!r}")


def read_history(directory: Path) -> History:
    """Every ``*.jsonl`` log in ``directory``, as one history.

    A process killed in the middle of a write can leave a last line cut short:
    such a line is skipped (what it said did not finish happening either).
    """
    history = History()
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            history.add(event)
    return history


# -- the store: what was kept -------------------------------------------------------------------
class StoredRun(NamedTuple):
    """A run as the store kept it; ``error`` is the type of the error that ended it."""

    run_id: str
    workflow: str
    key: str | None
    state: str
    error: str | None


class StoredStep(NamedTuple):
    """A step as the store kept it; ``nonce`` from its stored output (None without one)."""

    run_id: str
    step: str
    status: str
    attempt: int
    parents: tuple[str, ...]
    nonce: str | None


class Commit(NamedTuple):
    """One commit of a step's success, as the audit trigger saw it inside the transaction.

    ``kind`` is the step's (``task``, ``sleep``, ``wait``): only a task's output
    comes from a body, so only a task's ``nonce`` is checked against the history.
    """

    run_id: str
    step: str
    attempt: int
    kind: str
    nonce: str | None


@dataclass
class Stored:
    """Everything the store kept of a chaos run."""

    runs: list[StoredRun] = field(default_factory=list)
    steps: list[StoredStep] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)


# -- the verdict -----------------------------------------------------------------------------
class Violation(NamedTuple):
    """One violation: its kind, where, and what was seen."""

    kind: Kind
    run_id: str
    step: str | None
    detail: str

    def __str__(self) -> str:
        where = self.run_id if self.step is None else f"{self.run_id}/{self.step}"
        return f"{self.kind.value}: {where}: {self.detail}"


class Expected(NamedTuple):
    """How a workflow's runs must end: their final state, and the error type if they fail."""

    state: str = "succeeded"
    error: str | None = None


@dataclass
class Verdict:
    """What :func:`check` found, and the counts a report quotes."""

    violations: list[Violation]
    counts: dict[str, int]

    def of(self, kind: Kind) -> list[Violation]:
        """The violations of one kind."""
        return [v for v in self.violations if v.kind is kind]

    def summary(self, limit: int = 20) -> str:
        """The counts and the first violations, for an assertion message."""
        lines = [", ".join(f"{name} {n}" for name, n in self.counts.items())]
        lines += [str(v) for v in self.violations[:limit]]
        if len(self.violations) > limit:
            lines.append(f"... and {len(self.violations) - limit} more")
        return "\n".join(lines)


def check(
    history: History, stored: Stored, expected: Mapping[str, Expected] | None = None
) -> Verdict:
    """Compare ``history`` with ``stored``; every violation found, and the counts.

    ``expected`` maps a workflow to how its runs must end (default: succeeded).
    """
    expected = expected or {}
    violations: list[Violation] = []
    runs = {run.run_id: run for run in stored.runs}
    steps = {(step.run_id, step.step): step for step in stored.steps}
    commits: dict[tuple[str, str], list[Commit]] = defaultdict(list)
    for commit in stored.commits:
        commits[(commit.run_id, commit.step)].append(commit)
    completions = {done.nonce: done for done in history.completions}

    violations += _lost(history.enqueues, runs)
    violations += _ends(stored.runs, expected)
    violations += _outcomes(commits, completions)
    violations += _leases(history.starts, steps)
    violations += _fan_ins(stored.steps, runs, commits)

    acknowledged = sum(1 for e in history.enqueues if e.run_id is not None)
    counts = {
        "runs": len(stored.runs),
        "enqueued": acknowledged,
        "enqueues unknown": len(history.enqueues) - acknowledged,
        "starts": len(history.starts),
        # Starts beyond each step's first, but for the retries of deliberate failures: what
        # the chaos made run again.
        "re-executions": len(history.starts)
        - len({(s.run_id, s.step) for s in history.starts})
        - len(history.failures),
        "commits": len(stored.commits),
        "faults": len(history.faults),
        **{
            f"faults {action}": n
            for action, n in Counter(fault.action for fault in history.faults).items()
        },
        **{kind.value: 0 for kind in Kind},
        **Counter(v.kind.value for v in violations),
    }
    return Verdict(violations, counts)


def _lost(enqueues: Iterable[Enqueued], runs: Mapping[str, StoredRun]) -> list[Violation]:
    return [
        Violation(Kind.LOST, e.run_id, None, f"enqueue {e.key!r} was acknowledged; no such run")
        for e in enqueues
        if e.run_id is not None and e.run_id not in runs
    ]


def _ends(runs: Iterable[StoredRun], expected: Mapping[str, Expected]) -> list[Violation]:
    found = []
    for run in runs:
        if run.state == "active":
            found.append(Violation(Kind.STUCK, run.run_id, None, f"{run.workflow} unfinished"))
            continue
        want = expected.get(run.workflow, Expected())
        if run.state != want.state or (want.error is not None and run.error != want.error):
            found.append(
                Violation(
                    Kind.WRONG_END,
                    run.run_id,
                    None,
                    f"{run.workflow} ended {run.state} ({run.error}); expected {want.state}"
                    + (f" ({want.error})" if want.error else ""),
                )
            )
    return found


def _outcomes(
    commits: Mapping[tuple[str, str], Sequence[Commit]], completions: Mapping[str, Completed]
) -> list[Violation]:
    found = []
    for (run_id, step), made in commits.items():
        if len(made) > 1:
            attempts = [c.attempt for c in made]
            found.append(
                Violation(
                    Kind.DUPLICATE_OUTCOME,
                    run_id,
                    step,
                    f"success committed {len(made)} times (attempts {attempts})",
                )
            )
        for commit in made:
            if commit.kind != "task":
                continue
            done = completions.get(commit.nonce) if commit.nonce is not None else None
            if done is None or (done.run_id, done.step) != (run_id, step):
                found.append(
                    Violation(
                        Kind.PHANTOM_OUTCOME,
                        run_id,
                        step,
                        f"committed output {commit.nonce!r} is from no completed body of it",
                    )
                )
            elif done.attempt != commit.attempt:
                found.append(
                    Violation(
                        Kind.PHANTOM_OUTCOME,
                        run_id,
                        step,
                        f"attempt {commit.attempt} committed the output of attempt "
                        f"{done.attempt} (a stale lease wrote it)",
                    )
                )
    return found


def _twice(starts: Iterable[Started]) -> dict[tuple[str, str], list[int]]:
    """The attempt numbers started more than once, per step."""
    seen = Counter((s.run_id, s.step, s.attempt) for s in starts)
    twice: dict[tuple[str, str], list[int]] = defaultdict(list)
    for (run_id, step, attempt), n in seen.items():
        if n > 1:
            twice[(run_id, step)].append(attempt)
    return twice


def _leases(
    starts: Sequence[Started], steps: Mapping[tuple[str, str], StoredStep]
) -> list[Violation]:
    found = []
    for (run_id, step), attempts in _twice(starts).items():
        stored = steps.get((run_id, step))
        kind = Kind.LEASE_RAN_TWICE
        if stored is not None and len(stored.parents) > 1:
            kind = Kind.FAN_IN_TWICE
        found.append(Violation(kind, run_id, step, f"attempt(s) {sorted(attempts)} started twice"))
    return found


def _fan_ins(
    steps: Iterable[StoredStep],
    runs: Mapping[str, StoredRun],
    commits: Mapping[tuple[str, str], Sequence[Commit]],
) -> list[Violation]:
    found = []
    for step in steps:
        if len(step.parents) < 2:
            continue
        made = len(commits.get((step.run_id, step.step), ()))
        if made > 1:
            found.append(
                Violation(
                    Kind.FAN_IN_TWICE,
                    step.run_id,
                    step.step,
                    f"ran to a committed success {made} times",
                )
            )
            continue
        run = runs.get(step.run_id)
        ended_badly = run is not None and run.state in ("failed", "cancelled")
        parents_done = all(commits.get((step.run_id, parent)) for parent in step.parents)
        if parents_done and made == 0 and not ended_badly:
            found.append(
                Violation(
                    Kind.FAN_IN_NEVER,
                    step.run_id,
                    step.step,
                    f"parents {list(step.parents)} all succeeded; it never did "
                    f"(status {step.status})",
                )
            )
    return found
