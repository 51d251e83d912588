"""Schedules: cron declarations, their ticks, and what one scheduler pass decides.

A schedule starts a workflow run at every *tick* of a cron expression read in
an IANA time zone. Everything here is pure: no store, no clock, no threads.
The engine keeps one row per schedule with its *stored next fire*; at each
pass it calls :func:`plan_ticks` with that value and "now", starts the runs
in ``fire``, records the rest, and stores ``next_fire_ns`` in the same
transaction. Because the decision depends only on the declaration and those
two numbers, every node reaches the same one, and ticks missed while no
client ran are judged against the stored next fire, never against when some
node happened to look.

Wall time versus instants. Cron speaks wall time ("02:30 every day") and
cairnflow speaks instants (Unix nanoseconds). croniter, asked with aware
datetimes, fires a wall time that occurs twice on a fall-back day twice
(02:30 CEST and 02:30 CET), so the ticks are found here in *naive* wall time,
where croniter does no zone arithmetic, and each wall time is mapped to an
instant by one rule (see :meth:`Schedule.next_fire`):

* a wall time that does not exist (the spring-forward gap) fires at the first
  instant after the gap, once however many ticks fall in it;
* a wall time that occurs twice fires once, at its first occurrence.

Cron syntax: five fields (minute hour day-of-month month day-of-week) and an
optional sixth for *seconds*, last: ``"0 * * * * 30"`` is half past every
minute. That is croniter's default (``second_at_beginning=False``, left unset
because croniter 2.0 does not have the parameter), and the field stays where
five-field expressions end, so appending it never reorders the others.
The aliases ``@hourly``, ``@daily``, ``@midnight``, ``@weekly``, ``@monthly``,
``@yearly`` and ``@annually`` are expanded here. croniter's ``L``, ``W`` and
``#`` extensions are accepted; its ``H`` (hashed) and ``R`` (random) fields are
refused, because ticks must be the same on every node and every boot.

The module is long because the tick rule, the policies and the pass planner
belong together: each policy is defined by what :func:`plan_ticks` does with it.
"""

from __future__ import annotations

import enum
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from ._names import check_labels, check_name, check_tenant
from .clock import from_ns, to_ns

__all__ = [
    "DEFAULT_MISFIRE_WINDOW",
    "MAX_TICKS_PER_PASS",
    "Misfire",
    "MisfireKind",
    "Overlap",
    "Schedule",
    "Tick",
    "TickPlan",
    "TickPredicate",
    "TickReason",
    "Window",
    "plan_ticks",
    "schedule_id",
]

TickPredicate = Callable[[datetime], bool]
"""A schedule's ``when``: called with each tick as an aware datetime in the schedule's
zone, on the node that fires it; the tick fires when it returns True."""

MAX_TICKS_PER_PASS = 1000
"""The most ticks one pass fires, and the most it lists as skipped or misfired."""

DEFAULT_MISFIRE_WINDOW = 60.0
"""How late, in seconds, a tick may be and still fire as itself (Quartz's misfire threshold)."""

_NS = 1_000_000_000
_RULES_VERSION = "cairnflow.schedule.v1"
"""Part of every fingerprint: a change to the tick rules above bumps it."""

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week", "second")
_NODE_DEPENDENT = re.compile(r"^[hr](?:$|[(/])")
"""A comma-separated part of a field that croniter reads as hashed (H) or random (R)."""

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME = re.compile(r"(\d\d):(\d\d)(?::(\d\d))?")
_DAY_SECONDS = 86_400


class MisfireKind(enum.StrEnum):
    """What a pass does with *missed* ticks: those due longer ago than the policy's window."""

    SKIP = "skip"
    """Fire none of them; the schedule resumes at its next tick."""
    FIRE_ONCE = "fire_once"
    """Fire one run for all of them: the latest (in a window, if the schedule has windows)."""
    CATCH_UP = "catch_up"
    """Fire none of them: the window is the catch-up window, and every tick inside it fires."""


@dataclass(frozen=True)
class Misfire:
    """The misfire policy: which late ticks still fire.

    A tick is *on time* when it is due no longer than ``window_seconds`` before
    the pass that finds it, and then it fires whatever the kind: the default
    window of 60 seconds (Quartz's misfire threshold) absorbs the lateness of
    an ordinary pass. Older ticks are *missed* (no client ran, the store was
    down) and the kind decides:

    * :attr:`SKIP`: none fires (each is reported misfired). This is cron's and
      Oban's behaviour: a report missed yesterday is not made today.
    * :attr:`FIRE_ONCE`, the default: one run stands for all of them, at the
      latest missed tick; the others are reported coalesced. This is Quartz's
      default for cron triggers (its "smart policy" is "fire once now") and
      what a Kubernetes CronJob does after downtime (it starts the most recent
      missed schedule), and it is close to Temporal's defaults (a one-year
      catch-up window with overlap SKIP: one run after an outage). Work that
      was due is done, once; a long outage does not flood the queue.
    * :meth:`CATCH_UP` (``window_seconds``): the window is a catch-up window,
      hours or days: every tick no older than it fires, oldest first (at most
      :data:`MAX_TICKS_PER_PASS` a pass, the rest in the passes that follow);
      older ones are missed and reported misfired. By the rules it is SKIP
      with a wide window; the two names say different intents.
    """

    kind: MisfireKind
    window_seconds: float = DEFAULT_MISFIRE_WINDOW
    """How late a tick may be and still fire as itself, in seconds."""

    SKIP: ClassVar[Misfire]
    FIRE_ONCE: ClassVar[Misfire]

    def __post_init__(self) -> None:
        if not isinstance(self.kind, MisfireKind):
            raise TypeError(f"misfire kind must be a MisfireKind, got {self.kind!r}")
        window = self.window_seconds
        if isinstance(window, bool) or not isinstance(window, int | float):
            raise TypeError(f"misfire window must be a number of seconds, got {window!r}")
        if not math.isfinite(window) or window <= 0:
            raise ValueError(f"misfire window must be a positive number of seconds, got {window!r}")

    @classmethod
    def CATCH_UP(cls, window_seconds: float) -> Misfire:  # noqa: N802 - reads like SKIP and FIRE_ONCE
        """Fire every missed tick no older than ``window_seconds``, oldest first."""
        return cls(MisfireKind.CATCH_UP, window_seconds)

    @property
    def window_ns(self) -> int:
        """:attr:`window_seconds` in nanoseconds."""
        return int(self.window_seconds * _NS)


Misfire.SKIP = Misfire(MisfireKind.SKIP)
Misfire.FIRE_ONCE = Misfire(MisfireKind.FIRE_ONCE)


class Overlap(enum.StrEnum):
    """What a tick does while the schedule's previous run is unfinished."""

    ALLOW = "allow"
    """Fire anyway: runs of the schedule may overlap."""
    SKIP = "skip"
    """Skip the tick (reported with reason ``overlap``); one pass fires at most one tick."""


@dataclass(frozen=True)
class Window:
    """A weekly period in the schedule's zone; a schedule with windows fires only inside one.

    ``days`` is ``"*"`` or a comma-separated list of days and ranges of days
    (``"mon-fri"``, ``"sat,sun"``, ``"fri-mon"`` wraps round the week).
    ``start`` and ``end`` are ``"HH:MM"`` or ``"HH:MM:SS"`` wall times; ``end``
    is exclusive and may be ``"24:00"``. An ``end`` before ``start`` crosses
    midnight: ``Window("fri", "22:00", "02:00")`` runs from Friday 22:00 to
    Saturday 02:00, and belongs to the day it starts on. A tick is judged by
    the wall time of its instant, so a tick moved out of a spring-forward gap
    is judged at the time it fires.
    """

    days: str = "*"
    start: str = "00:00"
    end: str = "24:00"
    _days: frozenset[int] = field(init=False, repr=False, compare=False)
    _start: int = field(init=False, repr=False, compare=False)
    _end: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        start = _parse_time(self, "start", self.start)
        end = _parse_time(self, "end", self.end)
        if start == _DAY_SECONDS:
            raise ValueError(f"invalid {self!r}: a window cannot start at 24:00")
        if start == end:
            raise ValueError(
                f"invalid {self!r}: start and end are equal; a whole day is "
                "start='00:00', end='24:00'"
            )
        object.__setattr__(self, "_days", _parse_days(self))
        object.__setattr__(self, "_start", start)
        object.__setattr__(self, "_end", end)

    def contains(self, local: datetime) -> bool:
        """Whether the wall time of ``local`` (a datetime in the schedule's zone) is inside."""
        second = local.hour * 3600 + local.minute * 60 + local.second
        day = local.weekday()
        if self._start < self._end:
            return day in self._days and self._start <= second < self._end
        return (day in self._days and second >= self._start) or (
            (day - 1) % 7 in self._days and second < self._end
        )

    def _canonical(self) -> str:
        return f"{sorted(self._days)}/{self._start}/{self._end}"


def _parse_time(window: Window, which: str, value: object) -> int:
    match = _TIME.fullmatch(value) if isinstance(value, str) else None
    if match is not None:
        hours, minutes, seconds = (int(part or 0) for part in match.groups())
        total = hours * 3600 + minutes * 60 + seconds
        if minutes < 60 and seconds < 60 and (hours < 24 or (which == "end" and total == 86_400)):
            return total
    raise ValueError(
        f"invalid {window!r}: {which} {value!r} is not a wall time 'HH:MM' or 'HH:MM:SS' "
        "from 00:00 to 23:59:59 (and 24:00 for an end)"
    )


def _parse_days(window: Window) -> frozenset[int]:
    spec = window.days
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(
            f"invalid {window!r}: days is a string such as '*', 'mon-fri' or 'sat,sun'"
        )
    if spec.strip() == "*":
        return frozenset(range(7))
    days: set[int] = set()
    for part in spec.lower().split(","):
        first, _, last = part.strip().partition("-")
        if first not in _DAYS or (last and last not in _DAYS):
            raise ValueError(
                f"invalid {window!r}: {part.strip()!r} is not a day or a range of days "
                f"(days are {', '.join(_DAYS)})"
            )
        begin = _DAYS.index(first)
        span = (_DAYS.index(last) - begin) % 7 if last else 0
        days.update((begin + offset) % 7 for offset in range(span + 1))
    return frozenset(days)


@dataclass(frozen=True)
class Schedule:
    """A cron schedule declared with a workflow; each tick starts one run with ``payload``.

    ``name`` follows the rule of workflow names; ``cron`` is a cron expression
    (see the module's docstring); ``tz`` an IANA zone name, in which ``cron``
    and ``windows`` are read; ``payload`` any JSON value, kept as given;
    ``misfire`` and ``overlap`` the policies; ``windows`` restrict the ticks
    that fire (none: every tick may fire); ``labels`` are put on every run;
    ``tenant`` is the tenant of every run it fires (``Cap.TENANT``);
    ``paused`` declares the schedule paused when it is first stored (after that
    the stored state, which pause and resume change, is the engine's, and
    reaches :func:`plan_ticks` as its ``paused``). Everything is checked here,
    and a refusal says what is wrong.
    """

    name: str
    cron: str
    tz: str = "UTC"
    payload: Any = field(default=None, hash=False)
    misfire: Misfire = Misfire.FIRE_ONCE
    overlap: Overlap = Overlap.ALLOW
    windows: tuple[Window, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    paused: bool = False
    tenant: str | None = None
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)
    _expr: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_name("schedule", self.name)
        object.__setattr__(self, "_expr", _check_cron(self.cron))
        object.__setattr__(self, "_zone", _zone(self.tz))
        if not isinstance(self.misfire, Misfire):
            raise TypeError(f"misfire must be a Misfire policy, got {self.misfire!r}")
        if not isinstance(self.overlap, Overlap):
            raise TypeError(f"overlap must be an Overlap policy, got {self.overlap!r}")
        if isinstance(self.windows, Window) or not isinstance(self.windows, Iterable):
            raise TypeError(f"windows must be a sequence of Window, got {self.windows!r}")
        windows = tuple(self.windows)
        for window in windows:
            if not isinstance(window, Window):
                raise TypeError(f"windows must be a sequence of Window, got {window!r} in it")
        object.__setattr__(self, "windows", windows)
        object.__setattr__(self, "labels", check_labels(self.labels))
        if self.tenant is not None:
            check_tenant(self.tenant)
        if not isinstance(self.paused, bool):
            raise TypeError(f"paused must be a bool, got {self.paused!r}")
        try:  # "0 0 31 4 *" parses and never fires: refuse it now, not at the first pass
            croniter(self._expr, datetime(2000, 1, 1)).get_next(datetime)
        except CroniterBadDateError:
            raise ValueError(f"invalid cron expression {self.cron!r}: it never fires") from None

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return self._zone

    @property
    def fingerprint(self) -> str:
        """A hash of what decides the ticks and which fire: the cron expression, zone and windows.

        A redeploy whose fingerprint equals the stored one keeps the stored next
        fire; a different one recomputes it. The payload, labels and policies are
        left out: changing them does not move a tick. Equivalent spellings that
        normalise differently (``"*/30"`` and ``"0,30"``) differ, which costs
        only a recomputation.
        """
        windows = sorted({window._canonical() for window in self.windows})
        parts = [_RULES_VERSION, self._expr, self.tz, *windows]
        return _hash(parts)[:32]

    def next_fire(self, after_ns: int) -> int:
        """The first tick strictly after ``after_ns``, in Unix nanoseconds.

        Ticks are whole seconds of wall time in the schedule's zone, mapped to
        instants by two rules for the days the clocks change:

        * Spring forward: a wall time in the gap (02:30 in Europe/Berlin on the
          last Sunday of March) fires at the instant the clocks jump to (03:00
          CEST), once however many ticks fall in the gap and once with a tick
          at 03:00 itself. A daily job keeps its day, as ISC cron does for
          fixed-time jobs, and an hourly ``0 * * * *`` fires at 01:00 CET then
          03:00 CEST: every real hour. A schedule with ticks both in and after
          the gap fires sooner than usual: ``30 * * * *`` fires at 01:30 CET,
          03:00 CEST and 03:30 CEST.
        * Fall back: a wall time that occurs twice (02:30 on the last Sunday of
          October) fires once, at its first occurrence (``fold=0``). Hourly and
          minutely schedules go through the repeated hour once: ``0 * * * *``
          fires at 02:00 CEST and next at 03:00 CET, two real hours later;
          nothing fires twice for one wall time.
        """
        second = after_ns // _NS
        local = _local(second, self._zone)
        start = _naive(local)
        if local.fold:  # the repeated hour's second pass: its wall times fired the first time
            start = _naive(_local(_end_of_repeat(local, self._zone) - 1, self._zone))
        ticks = croniter(self._expr, start)
        while True:  # once, unless another clock change lies just ahead
            tick = self._instant(ticks.get_next(datetime))
            if tick > second:
                return tick * _NS

    def prev_fire(self, at_ns: int) -> int:
        """The last tick at or before ``at_ns``, in Unix nanoseconds (see :meth:`next_fire`)."""
        second = at_ns // _NS
        local = _local(second, self._zone)
        start = _naive(local) + timedelta(seconds=1)
        if local.fold:  # every wall time of the repeated hour fired in its first pass
            start = _naive(_local(_end_of_repeat(local, self._zone), self._zone))
        ticks = croniter(self._expr, start)
        while True:
            tick = self._instant(ticks.get_prev(datetime))
            if tick <= second:
                return tick * _NS

    def in_window(self, tick_ns: int) -> bool:
        """Whether ``tick_ns`` falls inside one of the windows (always, with none)."""
        if not self.windows:
            return True
        local = _local(tick_ns // _NS, self._zone)
        return any(window.contains(local) for window in self.windows)

    def _instant(self, wall: datetime) -> int:
        """The Unix second at which wall time ``wall`` (naive, in the zone) fires."""
        first = to_ns(wall.replace(tzinfo=self._zone, fold=0)) // _NS
        if _naive(_local(first, self._zone)) == wall:
            return first  # it exists; fold=0 is its first occurrence if it is repeated
        # In a gap, fold=0 reads it with the offset from before the jump, which lands
        # after the jump, and fold=1 with the offset from after, which lands before.
        before = to_ns(wall.replace(tzinfo=self._zone, fold=1)) // _NS
        return _first_change(self._zone, before, first)


def schedule_id(workflow: str, name: str) -> str:
    """The id of schedule ``name`` of ``workflow``: the same on every node and every boot."""
    check_name("workflow", workflow)
    check_name("schedule", name)
    return "sch_" + _hash(["cairnflow.schedule", workflow, name])[:32]


def _hash(parts: Iterable[str]) -> str:
    """SHA-256 (hex) over length-prefixed parts, so no two lists of parts collide."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(4, "big"))
        digest.update(data)
    return digest.hexdigest()


def _check_cron(cron: object) -> str:
    """Return ``cron`` normalised for croniter (aliases expanded), or say what is wrong."""
    if not isinstance(cron, str):
        raise TypeError(f"a cron expression is a str, got {type(cron).__name__}")
    expr = " ".join(cron.lower().split())
    if expr.startswith("@"):
        if expr not in _ALIASES:
            raise ValueError(
                f"invalid cron expression {cron!r}: unknown alias; the aliases are "
                f"{', '.join(_ALIASES)}"
            )
        expr = _ALIASES[expr]
    fields = expr.split(" ")
    if len(fields) not in (5, 6):
        raise ValueError(
            f"invalid cron expression {cron!r}: {len(fields) if expr else 0} fields; a cron "
            "expression has 5 (minute hour day-of-month month day-of-week) and an optional "
            "6th for seconds, last"
        )
    for index, text in enumerate(fields):
        if any(_NODE_DEPENDENT.match(part) for part in text.split(",")):
            raise ValueError(
                f"invalid cron expression {cron!r}: the {_FIELDS[index]} field {text!r} is "
                "hashed (H) or random (R), which would tick differently on every node"
            )
        alone = ["*"] * len(fields)
        alone[index] = text
        _expand(cron, " ".join(alone), f"the {_FIELDS[index]} field {text!r}: ")
    _expand(cron, expr, "")
    return expr


def _expand(cron: str, expr: str, where: str) -> None:
    try:
        croniter.expand(expr)
    except ValueError as exc:  # croniter's errors are ValueErrors, with its reason
        raise ValueError(f"invalid cron expression {cron!r}: {where}{exc}") from None


def _zone(tz: object) -> ZoneInfo:
    if not isinstance(tz, str):
        raise TypeError(f"a time zone is an IANA name (str), got {type(tz).__name__}")
    if tz.lower() == "localtime":
        raise ValueError("time zone 'localtime' is each machine's own: name the zone")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {tz!r}: give an IANA name such as 'UTC' or 'Europe/Berlin'"
        ) from None


def _local(second: int, zone: ZoneInfo) -> datetime:
    """Unix second ``second`` as an aware datetime in ``zone`` (``fold`` set on a repeat)."""
    return from_ns(second * _NS).astimezone(zone)


def _naive(local: datetime) -> datetime:
    """The wall time of ``local``, without zone or fold."""
    return local.replace(tzinfo=None, fold=0)


def _offset(local: datetime) -> int:
    """The UTC offset of ``local`` in seconds."""
    offset = local.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _first_change(zone: ZoneInfo, before: int, after: int) -> int:
    """The first Unix second in (``before``, ``after``] whose UTC offset differs from
    ``before``'s: the clock change between them (found by bisection)."""
    offset = _offset(_local(before, zone))
    while after - before > 1:
        middle = (before + after) // 2
        if _offset(_local(middle, zone)) == offset:
            before = middle
        else:
            after = middle
    return after


def _end_of_repeat(local: datetime, zone: ZoneInfo) -> int:
    """The Unix second at which the repeated hour that ``local`` (``fold=1``) is in ends."""
    repeat = _offset(local.replace(fold=0)) - _offset(local)
    now = to_ns(local) // _NS
    # The clocks went back at some second in (now - repeat, now]; the repeat lasts `repeat`.
    return _first_change(zone, now - repeat, now) + repeat


class TickReason(enum.StrEnum):
    """Why a tick is in the list it is in."""

    DUE = "due"
    """Fires: due no longer ago than the misfire window."""
    LATE = "late"
    """Fires for all the missed ticks (:attr:`Misfire.FIRE_ONCE`)."""
    PAUSED = "paused"
    """Skipped: the schedule was paused when it came due. It never fires, not on resume either."""
    WINDOW = "window"
    """Skipped: outside every window."""
    OVERLAP = "overlap"
    """Skipped: a run of the schedule was unfinished (:attr:`Overlap.SKIP`)."""
    MISSED = "missed"
    """Misfired: missed, and the policy does not fire it."""
    WHEN = "when"
    """Skipped: the schedule's ``when`` predicate said no (applied by the engine)."""
    TRIGGERED = "triggered"
    """Fired by hand, outside the cron (``Client.trigger_schedule``)."""
    COALESCED = "coalesced"
    """Misfired: missed, and stood for by the latest missed tick (``LATE``, unless the
    overlap policy holds that one back)."""


@dataclass(frozen=True)
class Tick:
    """One tick of a schedule, and why it fires or not."""

    at_ns: int
    """The tick's instant, Unix nanoseconds."""
    reason: TickReason


@dataclass(frozen=True)
class TickPlan:
    """What one pass over a schedule decides (see :func:`plan_ticks`).

    The engine starts a run for each tick of ``fire`` (oldest first), records
    or logs the others, and stores ``next_fire_ns`` with the runs, in one
    transaction guarded by the stored next fire it read, so that two nodes
    never both fire a tick. An engine that supports a ``when`` predicate applies
    it to ``fire``.
    """

    fire: tuple[Tick, ...]
    skipped: tuple[Tick, ...]
    """Ticks not fired because of the pause, the windows or an unfinished run."""
    misfired: tuple[Tick, ...]
    """Missed ticks that the misfire policy does not fire."""
    next_fire_ns: int
    """The next fire to store: strictly after now, unless ``complete`` is false."""
    complete: bool = True
    """False when the pass stopped at :data:`MAX_TICKS_PER_PASS` with ticks still due:
    ``next_fire_ns`` is then the first of them, and the engine runs another pass at once."""
    truncated: bool = False
    """True when more ticks were skipped or misfired than the lists hold (they hold the oldest)."""


def plan_ticks(
    schedule: Schedule,
    stored_next_ns: int,
    now_ns: int,
    *,
    previous_unfinished: bool = False,
    paused: bool = False,
    resumed_at_ns: int | None = None,
) -> TickPlan:
    """Decide one pass: which ticks due in [``stored_next_ns``, ``now_ns``] fire.

    ``stored_next_ns`` is the schedule's stored next fire (first stored as
    ``schedule.next_fire(now)``, and again when the fingerprint changes); only
    real ticks at or after it count, so an unaligned value fires nothing early.
    ``now_ns`` is the scheduling clock's now. ``previous_unfinished`` says a
    run the schedule started is unfinished; ``paused`` that the schedule is
    paused now; ``resumed_at_ns`` when it was last resumed, if it ever was. The rules, in order:

    1. A tick due while the schedule was paused (every due tick if it is paused
       now, else those before ``resumed_at_ns``) never fires: ``paused``.
    2. A tick outside every window does not fire: ``window``.
    3. A tick due longer ago than ``schedule.misfire.window_seconds`` is missed,
       and the misfire policy decides (:class:`Misfire`): ``missed``, or
       ``coalesced`` into the one ``late`` tick that fires.
    4. The others fire (``due``), oldest first, unless ``Overlap.SKIP`` holds
       them back (``overlap``): all of them while a run is unfinished, else all
       but the first to fire.

    Nothing fires before it is due. Ticks that can never fire (paused, missed)
    are listed up to :data:`MAX_TICKS_PER_PASS` and then jumped over, however
    many there are. A pass looks at no more than :data:`MAX_TICKS_PER_PASS` of
    the ticks that may fire; if more are due, it stops (``complete`` false) and
    the next pass goes on from there. FIRE_ONCE looks back at most as many ticks
    for one inside a window.
    """
    tick = schedule.next_fire(stored_next_ns - 1)
    if tick > now_ns:
        return TickPlan((), (), (), tick)
    plan = _Pass(schedule, previous_unfinished)
    if paused:
        resumed_at_ns = now_ns + 1
    if resumed_at_ns is not None:
        tick = plan.pass_over(tick, min(resumed_at_ns, now_ns + 1), lambda _: TickReason.PAUSED)
    missed_until = now_ns - schedule.misfire.window_ns
    if schedule.misfire.kind is MisfireKind.FIRE_ONCE and tick < missed_until:
        late = plan.latest_in_window(tick, missed_until)
        tick = plan.pass_over(
            tick, missed_until, lambda t: None if t == late else TickReason.COALESCED
        )
        if late is not None:
            plan.offer(late, TickReason.LATE)
    else:
        tick = plan.pass_over(tick, missed_until, lambda _: TickReason.MISSED)
    for _ in range(MAX_TICKS_PER_PASS):
        if tick > now_ns:
            return plan.result(tick)
        plan.offer(tick, TickReason.DUE)
        tick = schedule.next_fire(tick)
    return plan.result(tick, complete=tick > now_ns)


class _Pass:
    """The lists one :func:`plan_ticks` call builds, within their bounds."""

    def __init__(self, schedule: Schedule, previous_unfinished: bool) -> None:
        self.schedule = schedule
        self.previous_unfinished = previous_unfinished
        self.fire: list[Tick] = []
        self.skipped: list[Tick] = []
        self.misfired: list[Tick] = []
        self.truncated = False

    def note(self, tick: int, reason: TickReason) -> None:
        """List a tick that does not fire, if the lists have room."""
        if len(self.skipped) + len(self.misfired) >= MAX_TICKS_PER_PASS:
            self.truncated = True
        elif reason in (TickReason.MISSED, TickReason.COALESCED):
            self.misfired.append(Tick(tick, reason))
        else:
            self.skipped.append(Tick(tick, reason))

    def pass_over(self, tick: int, until: int, reason: Callable[[int], TickReason | None]) -> int:
        """List the ticks from ``tick`` up to ``until`` (excluded), which never fire.

        ``reason(tick)`` gives each one's reason (None: leave it out); a tick outside
        every window is listed ``window`` instead, except a paused one. Once the
        lists are full the rest are jumped over. Return the first tick at or after
        ``until``.
        """
        while tick < until:
            if self.truncated:
                return self.schedule.next_fire(until - 1)
            why = reason(tick)
            if why is not None:
                if why is not TickReason.PAUSED and not self.schedule.in_window(tick):
                    why = TickReason.WINDOW
                self.note(tick, why)
            tick = self.schedule.next_fire(tick)
        return tick

    def latest_in_window(self, tick: int, until: int) -> int | None:
        """The latest tick in [``tick``, ``until``) inside a window (looking back a bounded way)."""
        candidate = self.schedule.prev_fire(until - 1)
        for _ in range(MAX_TICKS_PER_PASS):
            if candidate < tick:
                return None
            if self.schedule.in_window(candidate):
                return candidate
            candidate = self.schedule.prev_fire(candidate - 1)
        return None

    def offer(self, tick: int, reason: TickReason) -> None:
        """Fire ``tick`` unless its window or the overlap policy holds it back."""
        if not self.schedule.in_window(tick):
            self.note(tick, TickReason.WINDOW)
        elif self.schedule.overlap is Overlap.SKIP and (self.previous_unfinished or self.fire):
            self.note(tick, TickReason.OVERLAP)
        else:
            self.fire.append(Tick(tick, reason))

    def result(self, next_fire_ns: int, *, complete: bool = True) -> TickPlan:
        """The plan, with ``next_fire_ns`` to store."""
        return TickPlan(
            tuple(self.fire),
            tuple(self.skipped),
            tuple(self.misfired),
            next_fire_ns,
            complete=complete,
            truncated=self.truncated,
        )
