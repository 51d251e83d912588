"""Collection: the markers, the check of capability names, the override check.

Problems found here turn the collect report of the module or class into a
collection error naming them, so the session stops before a test runs:

* a ``proves``/``refuses`` marker naming a capability outside ``cairnflow.Cap``;
* a suite subclass that deletes a kit test, or overrides one without
  ``pytest.mark.xfail(reason=...)`` (an xfail-marked override is how a driver
  says "known not to pass yet"; it proves nothing and holds its capability
  unproven, so the proof gate fails while the store declares it);
* a kit test function marked ``skip``/``xfail`` in place (the mark would land on
  the kit's shared function, for every suite in the session);
* a suite's ``capabilities_under_test`` naming an unknown capability, or none.

A suite with ``capabilities_under_test`` (:func:`~cairnflow_conformance.suite.suite_focus`)
keeps only the kit tests in its focus (:func:`~cairnflow_conformance.suite.in_focus`):
the others are removed here, not deselected, so the run is no subset run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from cairnflow import Cap

from .._markers import PROVES, REFUSES, KitMarks, UnknownCapability
from ..suite import ConformanceSuite, in_focus, kit_tests, suite_focus

__all__ = ["STATIC_PROPERTY", "is_suite_item", "item_marks", "override_problems"]

STATIC_PROPERTY = "cairnflow_kit"
"""The ``user_properties`` entry with what collection knows about a kit test."""

_KIT_MARKS = frozenset({PROVES, REFUSES, "parametrize", "xdist_group"})


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (``--strict-markers`` safe)."""
    config.addinivalue_line(
        "markers",
        f"{PROVES}(*caps, requires=()): cairnflow conformance: passing proves caps on the store "
        "(which must declare caps and requires for the test to run)",
    )
    config.addinivalue_line(
        "markers",
        f"{REFUSES}(cap): cairnflow conformance: runs only when the store does not declare cap",
    )
    # pytest-xdist registers it when installed; the kit uses it either way.
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker")


def override_problems(cls: type) -> list[str]:
    """What a suite subclass did to the kit's tests that it may not do."""
    problems: list[str] = []
    for name, kit_function in kit_tests().items():
        where = f"{cls.__qualname__}.{name}"
        found = inspect.getattr_static(cls, name, None)
        if found is kit_function:
            foreign = [
                m.name for m in getattr(kit_function, "pytestmark", []) if m.name not in _KIT_MARKS
            ]
            if foreign:
                problems.append(
                    f"{where}: the kit's own test function was marked "
                    f"pytest.mark.{foreign[0]}; override it in the subclass instead, marked "
                    f"pytest.mark.xfail(reason=...)"
                )
            continue
        if found is None or not callable(found):
            problems.append(
                f"{where}: kit test deleted (it is {found!r}); a suite cannot drop a kit test, "
                f"only override it marked pytest.mark.xfail(reason=...)"
            )
            continue
        if not _xfail_with_reason(found):
            problems.append(
                f"{where} overrides a kit test without pytest.mark.xfail(reason=...); "
                f"kit tests are not the driver's to change"
            )
    return problems


def _xfail_with_reason(function: Callable[..., Any]) -> bool:
    for mark in getattr(function, "pytestmark", []):
        if mark.name == "xfail":
            reason = mark.kwargs.get("reason", mark.args[1] if len(mark.args) > 1 else "")
            if isinstance(reason, str) and reason.strip():
                return True
    return False


def _suite_class(node: pytest.Collector) -> type[ConformanceSuite] | None:
    obj = getattr(node, "obj", None)
    if (
        isinstance(node, pytest.Class)
        and isinstance(obj, type)
        and issubclass(obj, ConformanceSuite)
    ):
        return obj
    return None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """Turn marker and override problems into a collection error of the module or class."""
    report = yield
    if report.outcome != "passed":
        return report
    problems: list[str] = []
    suite = _suite_class(collector)
    if suite is not None:
        problems.extend(override_problems(suite))
        try:
            suite_focus(suite)
        except (UnknownCapability, ValueError) as error:
            problems.append(str(error))
    for node in report.result:
        if isinstance(node, pytest.Item):
            try:
                KitMarks.of(node)
            except (UnknownCapability, TypeError) as error:
                problems.append(str(error))
    if problems:
        report.outcome = "failed"
        report.longrepr = "cairnflow conformance kit:\n" + "\n".join(f"  {p}" for p in problems)
        report.result = []
    return report


def is_suite_item(item: pytest.Item) -> bool:
    """True for a test collected from a :class:`ConformanceSuite` subclass."""
    cls = getattr(item, "cls", None)
    return isinstance(cls, type) and issubclass(cls, ConformanceSuite)


def item_marks(item: pytest.Item) -> KitMarks | None:
    """The kit marks that govern ``item``.

    Its own; or, for a suite's (xfail) override of a kit test, the kit test's,
    so the override is skipped where the original would be, and the report
    says which capability's test it replaced.
    """
    marks = KitMarks.of(item)
    if marks is not None or not is_suite_item(item):
        return marks
    kit_function = kit_tests().get(getattr(item, "originalname", item.name))
    if kit_function is None:
        return None
    return KitMarks.from_marks(getattr(kit_function, "pytestmark", []), item.nodeid)


def _focus(item: pytest.Item) -> frozenset[Cap] | None:
    """The capabilities ``item``'s suite puts under test (None: the whole kit, or no suite)."""
    cls = getattr(item, "cls", None)
    return suite_focus(cls) if is_suite_item(item) and cls is not None else None


def _static(
    item: pytest.Item, marks: KitMarks | None, focus: frozenset[Cap] | None
) -> dict[str, Any] | None:
    suite = is_suite_item(item)
    if marks is None and not suite:
        return None
    function = getattr(item, "function", None)
    name = getattr(item, "originalname", item.name)
    kit_function = kit_tests().get(name)
    return {
        "suite": item.parent.nodeid if suite and item.parent is not None else None,
        "function": name,
        "kit": suite and kit_function is not None and function is kit_function,
        "proves": sorted(c.value for c in marks.proves) if marks else [],
        "requires": sorted(c.value for c in marks.requires) if marks else [],
        "refuses": sorted(c.value for c in marks.refuses) if marks else [],
        "under_test": None if focus is None else sorted(c.value for c in focus),
    }


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep a focused suite's tests in its focus; attach what collection knows to each
    kit test, so it travels on its reports."""
    kept: list[pytest.Item] = []
    for item in items:
        marks, focus = item_marks(item), _focus(item)
        if marks is not None and not in_focus(marks, focus):
            continue  # a kit test outside its suite's focus (a driver's own test always runs)
        kept.append(item)
        static = _static(item, marks, focus)
        if static is not None:
            item.user_properties.append((STATIC_PROPERTY, static))
    items[:] = kept
