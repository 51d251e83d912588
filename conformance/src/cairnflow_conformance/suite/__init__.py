"""The kit's tests, grouped by capability, combined into :class:`ConformanceSuite`.

A driver subclasses the suite in a test module::

    from cairnflow_conformance import ConformanceSuite

    class TestMyDriver(ConformanceSuite): ...

Every test is marked with what it proves (``@proves``) or refuses
(``@refuses``); the plugin skips what the store does not declare and checks at
the end that each declared capability was proven.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from cairnflow import Cap

from .._markers import PROVES, REFUSES, KitMarks, parse_capability
from .admin import CancelAllTests, CancelStepTests, DeleteRunTests, JobRetryTests, RetryRunTests
from .baseline import BaselineTests
from .branches import CompensationTests, WaitBranchTests
from .clocks import DatabaseClockTests
from .deadlines import RunTimeoutTests
from .durability import DurabilityTests
from .enqueue import (
    BatchEnqueueTests,
    DelayedStartTests,
    HeadersTests,
    IdempotencyTests,
    PayloadLimitTests,
    RetriedEnqueueTests,
)
from .failures import RetryTests, SnoozeTests, StepTimeoutTests
from .fleet import FleetTests
from .history import StepHistoryTests
from .keys import ConcurrencyKeyTests, FifoKeyTests
from .leases import HeartbeatTests, LeaseTests, ProgressTests
from .lifecycle import LifecycleTests
from .pauses import PauseTests
from .policy import (
    BudgetProcessTests,
    DiscardTests,
    ErrorHistoryTests,
    MaxErrorsTests,
    RecoveredStepTests,
    RetryUntilTests,
)
from .processes import MultiProcessTests
from .queues import GlobalLimitTests, QueueTests
from .rates import RateLimitTests
from .refusals import RefusalTests
from .results import ClosureTests, NodeIdentityTests, ResultTests, RunQueryTests
from .retention import ArchiveTests, RetentionTests
from .run_queries import LabelPrefixTests, RunFilterTests
from .schedules import ScheduleTests
from .servers import ServerTests
from .state import JournalTests, LockTests
from .statistics import StatsTests
from .tenants import TenantTests
from .timing import DueQueryTests, ForceRunTests, RescheduleTests
from .transactions import TransactionalEnqueueTests
from .waits import CancelTests, SignalTests, SleepTests
from .wakeups import NotifyTests

__all__ = [
    "ConformanceSuite",
    "focused_kit_tests",
    "in_focus",
    "kit_tests",
    "proving_tests",
    "refusing_tests",
    "suite_focus",
]


class ConformanceSuite(
    BaselineTests,
    ResultTests,
    RunQueryTests,
    RunFilterTests,
    LabelPrefixTests,
    NodeIdentityTests,
    ClosureTests,
    RetryTests,
    RetryUntilTests,
    MaxErrorsTests,
    DiscardTests,
    RecoveredStepTests,
    BudgetProcessTests,
    ErrorHistoryTests,
    StepHistoryTests,
    LifecycleTests,
    RunTimeoutTests,
    StepTimeoutTests,
    SnoozeTests,
    SleepTests,
    SignalTests,
    CancelTests,
    WaitBranchTests,
    CompensationTests,
    IdempotencyTests,
    DelayedStartTests,
    BatchEnqueueTests,
    HeadersTests,
    PayloadLimitTests,
    RetriedEnqueueTests,
    LeaseTests,
    HeartbeatTests,
    ProgressTests,
    MultiProcessTests,
    DurabilityTests,
    TransactionalEnqueueTests,
    NotifyTests,
    DatabaseClockTests,
    ScheduleTests,
    QueueTests,
    GlobalLimitTests,
    RateLimitTests,
    ConcurrencyKeyTests,
    FifoKeyTests,
    PauseTests,
    FleetTests,
    JournalTests,
    LockTests,
    RescheduleTests,
    ForceRunTests,
    DueQueryTests,
    RetryRunTests,
    JobRetryTests,
    DeleteRunTests,
    CancelAllTests,
    CancelStepTests,
    StatsTests,
    TenantTests,
    ServerTests,
    RetentionTests,
    ArchiveTests,
    RefusalTests,
):
    """Every kit test. Subclass it (``class TestMyDriver(ConformanceSuite)``) to run the kit.

    The subclass needs a ``cairnflow_target`` fixture (usually in ``conftest.py``)
    and the plugin (``pytest_plugins = ["cairnflow_conformance.plugin"]``). It
    may override a kit test only to mark it ``pytest.mark.xfail(reason=...)``;
    deleting or replacing one otherwise fails the session.
    """

    capabilities_under_test: ClassVar[Iterable[Cap | str] | None] = None
    """The capabilities this suite proves, when it proves only some of what its store declares.

    ``None`` (the default) runs the whole kit and asks that every declared
    capability be proven. A suite for one part of a store whose own kit runs
    elsewhere (a notifier given to a driver's store: ``{Cap.NOTIFY}``) names
    that part. Then only the kit tests that prove, require or refuse one of
    these capabilities run, with the baseline tests (``@proves()``); the others
    are not collected, so the run is no subset. The proof gate asks that each
    of these capabilities be proven (one the store does not declare is
    unproven), and the report lists them as the target's ``under_test``. See
    :func:`suite_focus`.
    """


def suite_focus(cls: type[ConformanceSuite]) -> frozenset[Cap] | None:
    """The capabilities ``cls`` puts under test (its ``capabilities_under_test``), or None.

    Raises :class:`~cairnflow_conformance.UnknownCapability` for a name outside
    ``cairnflow.Cap``, and :class:`ValueError` for an empty or non-iterable value.
    """
    where = f"{cls.__qualname__}.capabilities_under_test"
    value = cls.capabilities_under_test
    if value is None:
        return None
    if isinstance(value, str | Cap) or not isinstance(value, Iterable):
        raise ValueError(
            f"{where} must be a set of capabilities, e.g. frozenset({{Cap.NOTIFY}}); got {value!r}"
        )
    focus = frozenset(parse_capability(v, where) for v in value)
    if not focus:
        raise ValueError(f"{where} names no capability; leave it None to run the whole kit")
    return focus


def in_focus(marks: KitMarks, focus: frozenset[Cap] | None) -> bool:
    """Whether a kit test marked ``marks`` runs in a suite that puts ``focus`` under test.

    Every test runs in a whole-kit suite (``focus`` None). A focused suite runs a
    test that proves, requires or refuses a capability of ``focus``, and the
    baseline tests, which prove nothing and every store must pass.
    """
    if focus is None:
        return True
    return bool((marks.proves | marks.requires | marks.refuses) & focus) or not (
        marks.proves or marks.refuses
    )


def focused_kit_tests(focus: frozenset[Cap] | None) -> frozenset[str]:
    """The names of the kit tests of which at least one case runs in a suite focused on
    ``focus`` (:func:`in_focus`; a parametrized test's cases are judged one by one)."""
    names: set[str] = set()
    for name, function in kit_tests().items():
        marks = list(getattr(function, "pytestmark", []))
        cases = [
            [*marks, *getattr(value, "marks", ())]
            for param in marks
            if param.name == "parametrize"
            for value in param.args[1]
        ] or [marks]
        for case in cases:
            found = KitMarks.from_marks(case, name)
            if found is not None and in_focus(found, focus):
                names.add(name)
                break
    return frozenset(names)


def kit_tests() -> dict[str, Callable[..., Any]]:
    """Every kit test function by name, as :class:`ConformanceSuite` defines them."""
    found: dict[str, Callable[..., Any]] = {}
    for name in sorted(dir(ConformanceSuite)):
        if not name.startswith("test"):
            continue
        function = inspect.getattr_static(ConformanceSuite, name)
        if callable(function):
            found[name] = function
    return found


def _marks(function: Callable[..., Any], name: str) -> list[Any]:
    return [m for m in getattr(function, "pytestmark", []) if m.name == name]


def proving_tests() -> Mapping[Cap, tuple[str, ...]]:
    """Which kit tests prove each capability (capabilities without a test are absent)."""
    proving: dict[Cap, list[str]] = {}
    for name, function in kit_tests().items():
        for mark in _marks(function, PROVES):
            for value in mark.args:
                proving.setdefault(parse_capability(value, name), []).append(name)
    return {cap: tuple(names) for cap, names in sorted(proving.items())}


def refusing_tests() -> Mapping[Cap, tuple[str, ...]]:
    """Which kit tests check the refusal of each capability."""
    refusing: dict[Cap, list[str]] = {}
    for name, function in kit_tests().items():
        for param in getattr(function, "pytestmark", []):
            if param.name != "parametrize":
                continue
            for value in param.args[1]:
                for mark in getattr(value, "marks", ()):
                    if mark.name == REFUSES:
                        for cap in mark.args:
                            refusing.setdefault(parse_capability(cap, name), []).append(name)
    return {cap: tuple(dict.fromkeys(names)) for cap, names in sorted(refusing.items())}
