"""The conformance report: what was declared, proven, refused, skipped and failed.

The plugin builds it from the test reports at the end of a session and writes
it as JSON with ``--conformance-report=PATH``. One target (the usual case)
gives one flat object; a session that tested several targets (MySQL and
MariaDB through one driver, say) gives ``{"targets": [...]}`` with one such
object each, plus the kit's fields.

``python -m cairnflow_conformance.report PATH`` prints a summary of a written
report and exits 1 unless every target declared exactly what it proved.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cairnflow

from ._version import __version__

__all__ = [
    "REPORT_VERSION",
    "TargetResult",
    "TestRecord",
    "build_report",
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

    def caps(self, kind: str) -> list[str]:
        """The capabilities this test ``proves``, ``requires`` or ``refuses``."""
        values: list[str] = self.static.get(kind, [])
        return values


@dataclass
class TargetResult:
    """The verdict on one target."""

    target: dict[str, Any]
    proven: dict[str, list[str]] = field(default_factory=dict)
    refused: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, list[str]] = field(default_factory=dict)
    xfailed: dict[str, list[str]] = field(default_factory=dict)
    baseline: dict[str, list[str]] = field(default_factory=dict)
    tests: list[dict[str, Any]] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)
    """Declared capabilities that no kit test proves at all (yet)."""

    @property
    def key(self) -> str:
        """The target's name in reports."""
        return str(self.target["key"])

    @property
    def declared(self) -> list[str]:
        """The capabilities the store declared."""
        return list(self.target["declared"])

    @property
    def unproven(self) -> list[str]:
        """Declared capabilities without a kit test that passed on this store."""
        return [c for c in self.declared if c not in self.proven]

    @property
    def broken(self) -> bool:
        """True when a kit test failed on this target (the session fails anyway)."""
        return any(t["outcome"] == "failed" for t in self.tests)

    def gate(self, subset: bool) -> str:
        """``passed``; ``failed`` with unproven capabilities; ``warning`` for a subset run."""
        if not self.unproven:
            return "passed"
        return "warning" if subset else "failed"


def _add(table: dict[str, list[str]], caps: Iterable[str], nodeid: str) -> None:
    for cap in caps:
        table.setdefault(cap, []).append(nodeid)


def summarize(records: Iterable[TestRecord], kit_capabilities: Iterable[str]) -> list[TargetResult]:
    """Group the records by target and sort every test into its tables."""
    tested = set(kit_capabilities)
    results: dict[str, TargetResult] = {}
    for record in records:
        if record.target is None:
            continue  # never reached the capability gate (e.g. the target itself failed)
        result = results.get(record.target["key"])
        if result is None:
            result = results[record.target["key"]] = TargetResult(record.target)
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
        if not proves and not refuses:
            result.baseline.setdefault(outcome, []).append(record.nodeid)
        if outcome == "passed":
            _add(result.refused, refuses, record.nodeid)
            if record.kit:
                _add(result.proven, proves, record.nodeid)
        elif outcome == "skipped":
            # A refusal check skips because its capability is declared: not a gap.
            _add(result.skipped, proves, record.nodeid)
        elif outcome in ("failed", "incomplete", "xpassed"):
            _add(result.failed, [*proves, *refuses], record.nodeid)
        elif outcome == "xfailed":
            _add(result.xfailed, [*proves, *refuses], record.nodeid)
    for result in results.values():
        result.untested = [c for c in result.declared if c not in tested]
        for table in (result.proven, result.refused, result.skipped, result.failed):
            for cap in table:
                table[cap].sort()
    return sorted(results.values(), key=lambda r: r.key)


def _target_report(result: TargetResult, subset: bool) -> dict[str, Any]:
    target = result.target
    sort = dict(sorted(result.proven.items()))
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
        "proven": sort,
        "unproven": sorted(result.unproven),
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


def _targets(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if "targets" in report:
        return list(report["targets"])
    return [report]


def main(argv: Sequence[str] | None = None) -> int:
    """Summarise a report; exit 1 unless each target proved exactly what it declared."""
    parser = argparse.ArgumentParser(prog="python -m cairnflow_conformance.report")
    parser.add_argument("path", type=Path, help="a report written with --conformance-report")
    args = parser.parse_args(argv)
    report = json.loads(args.path.read_text(encoding="utf-8"))
    targets = _targets(report)
    ok = bool(targets) and not report.get("subset") and report.get("exit_status") == 0
    for target in targets:
        declared = set(target["declared"])
        proven = set(target["proven"])
        driver = target["driver"]
        print(
            f"{target['target']}: {driver['distribution']} {driver['version']}, "
            f"SPI {target['spi_version']}, server {target['server'] or '-'}"
        )
        print(f"  declared ({len(declared)}): {', '.join(sorted(declared)) or '-'}")
        print(f"  proven   ({len(proven & declared)}): {', '.join(sorted(proven)) or '-'}")
        print(f"  refused: {', '.join(sorted(target['refused'])) or '-'}")
        if declared - proven:
            print(f"  UNPROVEN: {', '.join(sorted(declared - proven))}")
        ok = ok and declared <= proven and target["gate"] == "passed"
    if report.get("subset"):
        print(f"subset run: {'; '.join(report['subset'])}")
    print(
        f"exit status {report.get('exit_status')}: "
        + ("declared == proven" if ok else "NOT ACCEPTED")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
