"""The proof gate: every kit test of a declared capability must pass on the store.

Kit tests carry what they prove on their reports (``user_properties``), so the
verdict is reached in the process that sees every report: the only process
without pytest-xdist, the controller with it. Workers add how many kit tests
they deselected (``workeroutput``). A subset run (``-k``, ``-m``, ``--lf``,
``--deselect``, a deselecting plugin, node ids that leave kit tests out) turns
a failed gate into a warning; a full run that leaves a declared capability
unproven fails the session and names it, with each test that held it back
and why (see :mod:`cairnflow_conformance.report` for the rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cairnflow import Cap

from .._markers import KitMarks
from ..report import (
    KitProof,
    TargetResult,
    TestRecord,
    build_report,
    explain,
    summarize,
    write_report,
)
from ..suite import focused_kit_tests, kit_tests
from .collection import STATIC_PROPERTY, is_suite_item
from .fixtures import TARGET_PROPERTY

__all__ = ["Ledger", "ProofGate", "kit_proofs"]

_DESELECTED = "cairnflow_conformance_deselected"


@dataclass
class Ledger:
    """What the controller learnt during the session."""

    records: dict[str, TestRecord] = field(default_factory=dict)
    deselected: int = 0
    results: list[TargetResult] = field(default_factory=list)
    subset: list[str] = field(default_factory=list)
    report_path: Path | None = None

    def add(self, report: pytest.TestReport) -> None:
        """Fold one phase report of a kit test into its record."""
        props = dict(report.user_properties)
        static = props.get(STATIC_PROPERTY)
        if not isinstance(static, dict):
            return
        record = self.records.get(report.nodeid)
        if record is None:
            record = self.records[report.nodeid] = TestRecord(report.nodeid, static)
        target = props.get(TARGET_PROPERTY)
        if isinstance(target, dict):
            record.target = target
        record.phases[report.when] = report.outcome
        if hasattr(report, "wasxfail"):
            record.xfail = True
            record.reason = record.reason or str(report.wasxfail) or None
        if record.reason is None:
            record.reason = _reason(report)


def _reason(report: pytest.TestReport) -> str | None:
    """The skip reason, or where and how a phase failed (its first line)."""
    if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        lines = str(getattr(crash, "message", "") or "").strip().splitlines()
        how = lines[0][:200] if lines else "failed"
        return how if report.when == "call" else f"error in {report.when}: {how}"
    return None


def kit_proofs() -> dict[str, KitProof]:
    """Every kit test by name: what it proves and requires (capability values)."""
    proofs: dict[str, KitProof] = {}
    for name, function in kit_tests().items():
        marks = KitMarks.from_marks(getattr(function, "pytestmark", []), name)
        if marks is not None:
            proofs[name] = KitProof(
                frozenset(c.value for c in marks.proves),
                frozenset(c.value for c in marks.requires),
            )
    return proofs


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """Register this session's :class:`ProofGate` (one per config, so nested runs stay apart)."""
    path = config.getoption("conformance_report", None)
    report_path = Path(config.invocation_params.dir, path) if path else None
    config.pluginmanager.register(ProofGate(config, report_path), "cairnflow-conformance-gate")


def _subset_reasons(config: pytest.Config, ledger: Ledger) -> list[str]:
    option = config.option
    reasons: list[str] = []
    if getattr(option, "keyword", ""):
        reasons.append(f"-k {option.keyword!r}")
    if getattr(option, "markexpr", ""):
        reasons.append(f"-m {option.markexpr!r}")
    if getattr(option, "lf", False):
        reasons.append("--lf")
    if getattr(option, "stepwise", False):
        reasons.append("--stepwise")
    if getattr(option, "deselect", None):
        reasons.append("--deselect")
    if ledger.deselected:
        reasons.append(f"{ledger.deselected} kit test(s) deselected")
    seen: dict[str, set[str]] = {}
    focus: dict[str, frozenset[Cap] | None] = {}
    for record in ledger.records.values():
        suite = record.static.get("suite")
        if suite:
            seen.setdefault(str(suite), set()).add(str(record.static.get("function")))
            under_test = record.static.get("under_test")
            focus[str(suite)] = None if under_test is None else frozenset(map(Cap, under_test))
    for suite, names in sorted(seen.items()):
        every = focused_kit_tests(focus[suite])  # a focused suite's kit is its focus
        left_out = sorted(every - names)
        if left_out:
            shown = ", ".join(left_out[:3]) + (", ..." if len(left_out) > 3 else "")
            reasons.append(f"{suite} ran {len(names)} of {len(every)} kit tests (not: {shown})")
    return reasons


class ProofGate:
    """The hooks of the proof gate for one session (see the module docstring)."""

    def __init__(self, config: pytest.Config, report_path: Path | None) -> None:
        self.config = config
        self.worker = _is_worker(config)
        self.ledger = Ledger(report_path=report_path)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        """Count kit tests a selection left out (in this process's collection)."""
        self.ledger.deselected += sum(1 for item in items if is_suite_item(item))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Record each phase of each kit test (in the controller only, under xdist)."""
        if not self.worker:
            self.ledger.add(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: add what a worker deselected."""
        output = getattr(node, "workeroutput", None) or {}
        self.ledger.deselected += int(output.get(_DESELECTED, 0))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Reach the verdict, fail the session on an unproven capability, write the report."""
        ledger = self.ledger
        if self.worker:
            workeroutput: dict[str, Any] = getattr(self.config, "workeroutput", {})
            workeroutput[_DESELECTED] = ledger.deselected
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        ledger.subset = _subset_reasons(self.config, ledger)
        ledger.results = summarize(ledger.records.values(), kit_proofs())
        subset = bool(ledger.subset)
        failed_gate = any(r.gate(subset) == "failed" for r in ledger.results)
        if failed_gate and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if ledger.report_path is not None:
            report = build_report(ledger.results, ledger.subset, int(session.exitstatus))
            write_report(ledger.report_path, report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Show the verdict per target."""
        ledger = self.ledger
        if self.worker or not ledger.results:
            return
        tr = terminalreporter
        subset = bool(ledger.subset)
        tr.write_sep("=", "cairnflow conformance")
        for result in ledger.results:
            _show(tr, result, subset)
        if subset:
            tr.write_line(f"subset run: {'; '.join(ledger.subset)}", yellow=True)
        if ledger.report_path is not None:
            tr.write_line(f"conformance report: {ledger.report_path}")


def _show(tr: Any, result: TargetResult, subset: bool) -> None:
    target = result.target
    focus = (
        f", {len(result.judged)} under test ({', '.join(result.under_test)})"
        if result.under_test is not None
        else ""
    )
    tr.write_line(
        f"{result.key}: {target['distribution']} {target['version']}, SPI "
        f"{target['spi_version']}: {len(result.declared)} declared{focus}, "
        f"{len(result.judged) - len(result.unproven)} proven"
    )
    if result.proven:
        shown = ", ".join(f"{c} ({len(ids)})" for c, ids in sorted(result.proven.items()))
        tr.write_line(f"  proven: {shown}")
    if result.refused:
        tr.write_line(f"  refused as undeclared: {', '.join(sorted(result.refused))}")
    undeclared = sorted(set(result.skipped) - set(result.declared))
    if undeclared:
        tr.write_line(f"  not declared, their tests skipped: {', '.join(undeclared)}")
    for line in explain(result.why_unproven, subset):
        tr.write_line(f"  {line}", red=not subset, yellow=subset)
    gate = result.gate(subset)
    what = "declared" if result.under_test is None else "under test"
    if gate == "failed":
        tr.write_line(
            f"  proof gate FAILED: {what} but unproven: {', '.join(result.unproven)}",
            red=True,
            bold=True,
        )
    elif gate == "warning":
        tr.write_line(
            f"  proof gate WARNING (subset run, not a verdict): {what} but not proven "
            f"in this run: {', '.join(result.unproven)}",
            yellow=True,
        )
    else:
        which = "declared capability" if result.under_test is None else "capability under test"
        tr.write_line(f"  proof gate passed: every kit test of every {which} passed", green=True)
