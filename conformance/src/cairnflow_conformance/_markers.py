"""The markers a kit test carries, and how they are read back.

``@proves(*caps, requires=(...))`` says what a passing test proves on a store
and what else it needs without proving it. ``@refuses(cap)`` marks a check that
runs only when the store does *not* declare ``cap``: the client must refuse the
operation with :class:`~cairnflow.Unsupported` and write nothing.

Capability names are checked where they are written: an unknown name raises
:class:`UnknownCapability` at import, which pytest shows as a collection error
naming it. Raw ``pytest.mark.proves("...")`` marks are checked again when the
plugin collects the test, so a typo cannot silently prove nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from cairnflow import Cap

__all__ = [
    "PROVES",
    "REFUSES",
    "KitMarks",
    "UnknownCapability",
    "parse_capability",
    "proves",
    "refuses",
]

PROVES = "proves"
"""The marker name of :func:`proves`."""

REFUSES = "refuses"
"""The marker name of :func:`refuses`."""


class UnknownCapability(ValueError):
    """A marker names a capability that :class:`cairnflow.Cap` does not have."""

    def __init__(self, value: object, where: str) -> None:
        self.value = value
        known = [c.value for c in Cap]
        close = difflib.get_close_matches(str(value).lower(), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        super().__init__(
            f"unknown capability {value!r} in {where}{hint}; "
            f"a capability is a member of cairnflow.Cap, e.g. Cap.SLEEP or 'sleep'"
        )


def parse_capability(value: object, where: str) -> Cap:
    """Return the :class:`Cap` that ``value`` names (a member, its value or its name)."""
    if isinstance(value, Cap):
        return value
    if isinstance(value, str):
        try:
            return Cap(value)
        except ValueError:
            pass
        member = Cap.__members__.get(value)
        if member is not None:
            return member
    raise UnknownCapability(value, where)


def _parse_all(values: Iterable[object], where: str) -> tuple[Cap, ...]:
    if isinstance(values, str | Cap):
        values = [values]
    return tuple(parse_capability(v, where) for v in values)


def proves(*caps: Cap | str, requires: Iterable[Cap | str] = ()) -> pytest.MarkDecorator:
    """Mark a kit test: passing it proves ``caps``; it also needs ``requires``.

    The test runs only when the store declares every capability of both;
    otherwise it is skipped with a reason naming what is missing. ``proves()``
    with no capability marks a baseline test that every store must pass.
    """
    proved = _parse_all(caps, "@proves")
    needed = _parse_all(requires, "@proves(requires=...)")
    return pytest.mark.proves(*proved, requires=needed)


def refuses(cap: Cap | str) -> pytest.MarkDecorator:
    """Mark a refusal check: it runs only when the store does not declare ``cap``."""
    return pytest.mark.refuses(parse_capability(cap, "@refuses"))


@dataclass(frozen=True, slots=True)
class KitMarks:
    """What the markers of one test say, checked against the vocabulary."""

    proves: frozenset[Cap]
    requires: frozenset[Cap]
    refuses: frozenset[Cap]

    @classmethod
    def of(cls, item: pytest.Item) -> KitMarks | None:
        """The marks of ``item``, or None when it carries neither marker.

        Raises :class:`UnknownCapability` for a name outside the vocabulary.
        """
        marks = [*item.iter_markers(PROVES), *item.iter_markers(REFUSES)]
        return cls.from_marks(marks, item.nodeid)

    @classmethod
    def from_marks(cls, marks: Iterable[pytest.Mark], where: str) -> KitMarks | None:
        """What ``proves`` and ``refuses`` marks among ``marks`` say (None: there are none)."""
        proved: set[Cap] = set()
        needed: set[Cap] = set()
        refused: set[Cap] = set()
        found = False
        for mark in marks:
            if mark.name == PROVES:
                found = True
                here = f"{where}: @{PROVES}"
                proved.update(_parse_all(mark.args, here))
                needed.update(_parse_all(mark.kwargs.get("requires", ()), f"{here}(requires=...)"))
                extra = set(mark.kwargs) - {"requires"}
                if extra:
                    raise TypeError(f"{here} takes only requires=..., got {sorted(extra)}")
            elif mark.name == REFUSES:
                found = True
                refused.update(_parse_all(mark.args, f"{where}: @{REFUSES}"))
        if not found:
            return None
        return cls(frozenset(proved), frozenset(needed), frozenset(refused))

    def missing(self, declared: frozenset[Cap]) -> list[Cap]:
        """What the store must declare for this test to run, and does not."""
        return sorted((self.proves | self.requires) - declared, key=lambda c: c.value)
