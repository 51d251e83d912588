"""The conformance report: what was declared, proven, refused, skipped and failed.

The plugin builds it from the test reports at the end of a session and writes
it as JSON with ``--conformance-report=PATH``. One target (the usual case)
gives one flat object; a session that tested several targets (MySQL and
MariaDB through one driver, say) gives ``{"targets": [...]}`` with one such
object each, plus the kit's fields.

A declared capability is proven only when *every* kit test proving it that can
run on the store (the store declares all it proves and requires) ran as the
kit wrote it and passed. One passing test is no proof when its siblings fail,
skip themselves or are overridden: a capability is the sum of its tests, and
an unrelated passing test must not cover for the one that shows the store
wrong. Each test that holds a capability back is named in ``why_unproven``
with its outcome and reason, so a refusal always says what to fix.

A suite that puts only some capabilities under test
(``ConformanceSuite.capabilities_under_test``: a notifier's suite, say) gives a
target whose ``under_test`` lists them: only those are judged (``unproven``,
the gate, the command below), and one the store does not declare is unproven
(the suite proves nothing of it); the store's other capabilities are proven by
its own whole-kit run. ``under_test`` is null for a whole-kit run.

``python -m cairnflow_conformance.report PATH`` prints a summary of a written
report and exits 1 unless every target declared exactly what it proved,
saying why when it does not.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cairnflow

from ._version import __version__

__all__ = [
    "REPORT_VERSION",
    "KitProof",
    "TargetResult",
    "TestRecord",
    "build_report",
    "explain",
    "judged",
    "main",
    "summarize",
    "write_report",
]

REPORT_VERSION = 1


@dataclass
class TestRecord:
    """Everything the reports of one test said (setup, call and teardown)."""

    __test__ = False  # not a pytest test class, despite its name

    nodeid: str
    static: dict[str, Any]
    target: dict[str, Any] | None = None
    phases: dict[str, str] = field(default_factory=dict)
    xfail: bool = False
    reason: str | None = None
    """Why it did not pass: the skip or xfail reason, or where and how it failed."""

    @property
    def outcome(self) -> str:
        """passed, failed, skipped, xfailed, xpassed, or incomplete (never finished)."""
        if "failed" in self.phases.values():
            return "failed"
        call = self.phases.get("call")
        if self.xfail:
            return "xpassed" if call == "passed" else "xfailed"
        if "skipped" in self.phases.values():
            return "skipped"
        if call == "passed" and self.phases.get("teardown") == "passed":
            return "passed"
        return "incomplete"

    @property
    def kit(self) -> bool:
        """True for a kit test as the kit defines it (not a driver's own or overridden test)."""
        return bool(self.static.get("kit"))

    @property
    def function(self) -> str:
        """The name of the suite method (without parameters)."""
        return str(self.static.get("function"))

    def caps(self, kind: str) -> list[str]:
        """The capabilities this test ``proves``, ``requires`` or ``refuses``."""
        values: list[str] = self.static.get(kind, [])
        return values


@dataclass(frozen=True)
class KitProof:
    """What one kit test proves and what else it needs, as capability values."""

    proves: frozenset[str]
    requires: frozenset[str]

    def counts_on(self, declared: Iterable[str]) -> bool:
        """True when the test proves something ``declared`` and may run (all it needs declared).

        A test that proves or requires a capability the store does not declare
        is skipped by the capability gate; it counts neither for nor against.
        """
        have = set(declared)
        return bool(self.proves & have) and self.proves | self.requires <= have


@dataclass
class TargetResult:
    """The verdict on one target."""

    target: dict[str, Any]
    proven: dict[str, list[str]] = field(default_factory=dict)
    """Proven declared capabilities: the kit tests that passed, all of them."""
    why_unproven: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each unproven declared capability: ``{"reason", "tests": [{"id", "outcome", "reason"}]}``."""
    refused: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)
    xfailed: dict[str, list[str]] = field(default_factory=dict)
    baseline: dict[str, list[str]] = field(default_factory=dict)
    tests: list[dict[str, Any]] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)
    """Judged capabilities that no kit test proves at all (yet)."""
    under_test: list[str] | None = None
    """What a focused suite put under test (None: the whole kit ran on this target)."""

    @property
    def key(self) -> str:
        """The target's name in reports."""
        return str(self.target["key"])

    @property
    def declared(self) -> list[str]:
        """The capabilities the store declared."""
        return list(self.target["declared"])

    @property
    def judged(self) -> list[str]:
        """The capabilities the gate judges: every declared one, or those under test."""
        return judged(self.declared, self.under_test)

    @property
    def unproven(self) -> list[str]:
        """Judged capabilities whose kit tests did not all pass on this store."""
        return [c for c in self.judged if c not in self.proven]

    @property
    def broken(self) -> bool:
        """True when a kit test failed on this target (the session fails anyway)."""
        return any(t["outcome"] == "failed" for t in self.tests)

    def gate(self, subset: bool) -> str:
        """``passed``; ``failed`` with unproven capabilities; ``warning`` for a subset run."""
        if not self.unproven:
            return "passed"
        return "warning" if subset else "failed"


def judged(declared: Iterable[str], under_test: Iterable[str] | None) -> list[str]:
    """The capabilities a gate judges: all of ``declared``, or those ``under_test``."""
    return list(declared) if under_test is None else sorted(under_test)


def _add(table: dict[str, list[str]], caps: Iterable[str], nodeid: str) -> None:
    for cap in caps:
        table.setdefault(cap, []).append(nodeid)


def _not_run(nodeid: str) -> dict[str, str]:
    why = "no report of it on this store (deselected, or stopped before the capability gate)"
    return {"id": nodeid, "outcome": "not run", "reason": why}


def _hold_back(record: TestRecord) -> dict[str, str] | None:
    """Why ``record`` keeps its capabilities unproven (None: it is a passing kit test)."""
    outcome = record.outcome
    if not record.kit:
        why = "overridden by the driver" + (f" ({record.reason})" if record.reason else "")
        return {"id": record.nodeid, "outcome": outcome, "reason": why}
    if outcome == "passed":
        return None
    why = record.reason or ("it never finished" if outcome == "incomplete" else outcome)
    return {"id": record.nodeid, "outcome": outcome, "reason": why}


def _judge(
    result: TargetResult,
    ran: Mapping[str, list[TestRecord]],
    kit: Mapping[str, KitProof],
    stopped: Mapping[tuple[str, str], list[TestRecord]],
) -> None:
    """Fill ``proven`` and ``why_unproven``: a capability needs every kit test that counts.

    ``stopped`` holds the records of kit tests that ended before the capability
    gate named their target (a driver's hook skipped or failed them first), by
    suite and function: they explain a test that did not run on this target.
    """
    declared = result.declared
    suites = sorted({str(r.static["suite"]) for rs in ran.values() for r in rs})
    for cap in result.judged:
        if cap not in declared:
            result.why_unproven[cap] = {
                "reason": "under test, but the store does not declare it",
                "tests": [],
            }
            continue
        names = sorted(n for n, proof in kit.items() if cap in proof.proves)
        if not names:
            result.why_unproven[cap] = {"reason": "no kit test proves it yet", "tests": []}
            continue
        counted = [n for n in names if kit[n].counts_on(declared)]
        if not counted:
            result.why_unproven[cap] = {
                "reason": "none of its kit tests can run on this store (each proves or "
                "requires a capability it does not declare)",
                "tests": [],
            }
            continue
        passed: list[str] = []
        held: list[dict[str, str]] = []
        for name in counted:
            records = ran.get(name)
            if not records:
                early = [r for suite in suites for r in stopped.get((suite, name), [])]
                if early:
                    held.extend(_hold_back(r) or _not_run(r.nodeid) for r in early)
                else:
                    held.append(_not_run(f"{suites[0]}::{name}" if len(suites) == 1 else name))
                continue
            for record in records:
                hold = _hold_back(record)
                if hold is None:
                    passed.append(record.nodeid)
                else:
                    held.append(hold)
        if held:
            outcomes = Counter(t["outcome"] for t in held)
            how = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
            result.why_unproven[cap] = {
                "reason": f"{len(held)} of its {len(passed) + len(held)} kit tests on this "
                f"store did not pass: {how}",
                "tests": sorted(held, key=lambda t: t["id"]),
            }
        else:
            result.proven[cap] = sorted(passed)


def summarize(records: Iterable[TestRecord], kit: Mapping[str, KitProof]) -> list[TargetResult]:
    """Group the records by target, sort every test into its tables, judge each target.

    ``kit`` is every kit test by function name: a test of a declared capability
    that has no record for a target did not run there.
    """
    results: dict[str, TargetResult] = {}
    whole: set[str] = set()  # targets a whole-kit suite ran on: every declared cap is judged
    ran: dict[str, dict[str, list[TestRecord]]] = {}
    stopped: dict[tuple[str, str], list[TestRecord]] = {}
    for record in records:
        if record.target is None:
            # It never reached the capability gate (the target itself failed, or a hook
            # stopped it first): it explains the test missing from its suite's targets.
            if record.static.get("suite") and record.function in kit:
                stopped.setdefault((record.static["suite"], record.function), []).append(record)
            continue
        result = results.get(record.target["key"])
        if result is None:
            result = results[record.target["key"]] = TargetResult(record.target)
        under_test = record.static.get("under_test")
        if under_test is None:
            whole.add(result.key)
        else:
            result.under_test = sorted({*(result.under_test or ()), *under_test})
        outcome = record.outcome
        proves = record.caps("proves")
        refuses = record.caps("refuses")
        result.tests.append(
            {
                "id": record.nodeid,
                "outcome": outcome,
                "kit": record.kit,
                "proves": proves,
                "requires": record.caps("requires"),
                "refuses": refuses,
                **({"reason": record.reason} if record.reason else {}),
            }
        )
        if record.static.get("suite") and record.function in kit:
            ran.setdefault(result.key, {}).setdefault(record.function, []).append(record)
        if not proves and not refuses:
            result.baseline.setdefault(outcome, []).append(record.nodeid)
        if outcome == "passed":
            _add(result.refused, refuses, record.nodeid)
        elif outcome == "skipped":
            # A refusal check skips because its capability is declared: not a gap.
            _add(result.skipped, proves, record.nodeid)
        elif outcome in ("failed", "incomplete", "xpassed"):
            _add(result.failed, [*proves, *refuses], record.nodeid)
        elif outcome == "xfailed":
            _add(result.xfailed, [*proves, *refuses], record.nodeid)
    tested = {cap for proof in kit.values() for cap in proof.proves}
    for result in results.values():
        if result.key in whole:
            result.under_test = None
        result.untested = [c for c in result.judged if c not in tested]
        _judge(result, ran.get(result.key, {}), kit, stopped)
        for table in (result.refused, result.skipped, result.failed, result.xfailed):
            for cap in table:
                table[cap].sort()
    return sorted(results.values(), key=lambda r: r.key)


def explain(why_unproven: Mapping[str, Mapping[str, Any]], subset: bool = False) -> list[str]:
    """One line per unproven capability, then one per test holding it back.

    In a subset run the tests that did not run are counted, not listed (they
    were left out on purpose, and the gate only warns).
    """
    lines: list[str] = []
    for cap, why in sorted(why_unproven.items()):
        lines.append(f"UNPROVEN: {cap} ({why['reason']})")
        shown = _held_tests(why, subset)
        lines.extend(f"  {t['id']}: {t['outcome']}: {t['reason']}" for t in shown)
        if len(shown) < len(why["tests"]):
            lines.append(f"  {len(why['tests']) - len(shown)} kit test(s) not run in this subset")
    return lines


def _held_tests(why: Mapping[str, Any], subset: bool) -> list[Mapping[str, str]]:
    """The tests holding one capability back (in a subset run, not those it left out)."""
    return [t for t in why.get("tests", []) if not (subset and t["outcome"] == "not run")]


def _target_report(result: TargetResult, subset: bool) -> dict[str, Any]:
    target = result.target
    return {
        "target": result.key,
        "driver": {
            "name": target["driver"],
            "distribution": target["distribution"],
            "version": target["version"],
            "url": target["url"],
            "durable": target["durable"],
        },
        "spi_version": target["spi_version"],
        "server": target["server"],
        "declared": sorted(result.declared),
        "under_test": result.under_test,
        "proven": dict(sorted(result.proven.items())),
        "unproven": sorted(result.unproven),
        "why_unproven": dict(sorted(result.why_unproven.items())),
        "untested": sorted(result.untested),
        "refused": dict(sorted(result.refused.items())),
        "skipped": dict(sorted(result.skipped.items())),
        "failed": dict(sorted(result.failed.items())),
        "xfailed": dict(sorted(result.xfailed.items())),
        "baseline": dict(sorted(result.baseline.items())),
        "gate": result.gate(subset),
        "tests": sorted(result.tests, key=lambda t: str(t["id"])),
    }


def build_report(
    results: Sequence[TargetResult], subset_reasons: Sequence[str], exit_status: int
) -> dict[str, Any]:
    """The JSON report: flat for one target, ``targets`` for several."""
    subset = bool(subset_reasons)
    head: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "kit": {"distribution": "cairnflow-conformance", "version": __version__},
        "core": {
            "distribution": "cairnflow",
            "version": cairnflow.__version__,
            "spi_version": cairnflow.SPI_VERSION,
        },
        "subset": list(subset_reasons),
        "exit_status": exit_status,
    }
    targets = [_target_report(r, subset) for r in results]
    if len(targets) == 1:
        return {**head, **targets[0]}
    gates = {t["gate"] for t in targets}
    overall = "failed" if "failed" in gates else "warning" if "warning" in gates else "passed"
    return {**head, "gate": overall if targets else "no-target", "targets": targets}


def write_report(path: Path, report: Mapping[str, Any]) -> None:
    """Write ``report`` as indented JSON (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def _judged(target: Mapping[str, Any]) -> list[str]:
    """What the gate judged on a reported ``target`` (a report without ``under_test``:
    every declared capability)."""
    return judged(target["declared"], target.get("under_test"))


def _targets(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if "targets" in report:
        return list(report["targets"])
    return [report]


def _refusals(report: Mapping[str, Any], targets: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why ``report`` is not accepted (empty: it is)."""
    why: list[str] = []
    subset = bool(report.get("subset"))
    if not targets:
        why.append("no target was tested")
    if subset:
        why.append("a subset run is no verdict")
    for target in targets:
        unproven = sorted(set(_judged(target)) - set(target["proven"]))
        if unproven:
            why_unproven = target.get("why_unproven", {})
            held = [t for c in unproven for t in _held_tests(why_unproven.get(c, {}), subset)]
            tests = sorted({t["id"].rpartition("::")[2] for t in held})
            why.append(
                f"{target['target']}: unproven {', '.join(unproven)}"
                + (f" (tests: {', '.join(tests)})" if tests else "")
            )
        elif target["gate"] != "passed":
            why.append(f"{target['target']}: proof gate {target['gate']}")
    status = report.get("exit_status")
    if status != 0 and not why:
        why.append(f"the session failed (exit status {status})")
    return why


def main(argv: Sequence[str] | None = None) -> int:
    """Summarise a report; exit 1 unless each target proved exactly what it declared."""
    parser = argparse.ArgumentParser(prog="python -m cairnflow_conformance.report")
    parser.add_argument("path", type=Path, help="a report written with --conformance-report")
    args = parser.parse_args(argv)
    report = json.loads(args.path.read_text(encoding="utf-8"))
    targets = _targets(report)
    for target in targets:
        declared = set(_judged(target))  # what the gate judged: all, or what was under test
        proven = set(target["proven"]) & declared
        driver = target["driver"]
        print(
            f"{target['target']}: {driver['distribution']} {driver['version']}, "
            f"SPI {target['spi_version']}, server {target['server'] or '-'}"
        )
        if target.get("under_test") is not None:
            print(f"  under test ({len(declared)}): {', '.join(sorted(declared))} (focused)")
        else:
            print(f"  declared ({len(declared)}): {', '.join(sorted(declared)) or '-'}")
        print(f"  proven   ({len(proven)}): {', '.join(sorted(proven)) or '-'}")
        print(f"  refused: {', '.join(sorted(target['refused'])) or '-'}")
        why = dict(target.get("why_unproven", {}))
        for cap in declared - proven - set(why):  # a report older than why_unproven
            why[cap] = {"reason": "no passing kit test", "tests": []}
        for line in explain(why, bool(report.get("subset"))):
            print(f"  {line}")
    if report.get("subset"):
        print(f"subset run: {'; '.join(report['subset'])}")
    refusals = _refusals(report, targets)
    focused = any(t.get("under_test") is not None for t in targets)
    accepted = "declared == proven" + (" (of what was under test)" if focused else "")
    verdict = "NOT ACCEPTED: " + "; ".join(refusals) if refusals else accepted
    print(f"exit status {report.get('exit_status')}: {verdict}")
    return 1 if refusals else 0


if __name__ == "__main__":
    sys.exit(main())
