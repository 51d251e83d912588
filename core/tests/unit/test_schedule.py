"""The schedule model: cron parsing, ticks across clock changes, windows, policies, passes.

Every time is an explicit instant; nothing here reads a clock or sleeps.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

import cairnflow as cf
from cairnflow.clock import from_ns, to_ns
from cairnflow.schedule import (
    MAX_TICKS_PER_PASS,
    MisfireKind,
    Schedule,
    Tick,
    TickPlan,
    TickReason,
    Window,
    plan_ticks,
    schedule_id,
)

S = 1_000_000_000
MINUTE = 60 * S
HOUR = 60 * MINUTE
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    *,
    tz: ZoneInfo | None = None,
    fold: int = 0,
) -> int:
    """Unix ns of a wall time in ``tz`` (UTC by default)."""
    return to_ns(datetime(year, month, day, hour, minute, second, tzinfo=tz or UTC, fold=fold))


def wall(ns: int, tz: ZoneInfo) -> str:
    """The wall time and offset of ``ns`` in ``tz``, e.g. '2024-03-31T03:00:00+02:00'."""
    return from_ns(ns).astimezone(tz).isoformat()


def walls(instants: list[int], tz: ZoneInfo) -> list[str]:
    return [wall(ns, tz) for ns in instants]


def fires(schedule: Schedule, after_ns: int, count: int) -> list[str]:
    """The wall times of the next ``count`` ticks after ``after_ns``, in the schedule's zone."""
    return walls(ticks(schedule, after_ns, count), ZoneInfo(schedule.tz))


def ticks(schedule: Schedule, after_ns: int, count: int) -> list[int]:
    result: list[int] = []
    for _ in range(count):
        after_ns = schedule.next_fire(after_ns)
        result.append(after_ns)
    return result


def ticks_between(schedule: Schedule, start_ns: int, end_ns: int) -> list[int]:
    """Every tick in (start_ns, end_ns]."""
    result: list[int] = []
    tick = schedule.next_fire(start_ns)
    while tick <= end_ns:
        result.append(tick)
        tick = schedule.next_fire(tick)
    return result


def hourly(**kwargs: object) -> Schedule:
    return Schedule("hourly", "0 * * * *", **kwargs)  # type: ignore[arg-type]


def reasons(entries: tuple[Tick, ...]) -> list[tuple[int, TickReason]]:
    return [(t.at_ns, t.reason) for t in entries]


class TestParsing:
    def test_five_fields_strictly_after(self) -> None:
        every15 = Schedule("q", "*/15 * * * *")
        start = at(2026, 1, 1, 10, 0)
        assert every15.next_fire(start) == start + 15 * MINUTE
        assert every15.next_fire(start - 1) == start
        assert every15.next_fire(start + 1) == start + 15 * MINUTE
        assert every15.prev_fire(start) == start
        assert every15.prev_fire(start - 1) == start - 15 * MINUTE

    def test_sixth_field_is_seconds_last(self) -> None:
        half = Schedule("half", "* * * * * 30")
        start = at(2026, 1, 1, 10, 0)
        assert ticks(half, start, 3) == [start + 30 * S, start + 90 * S, start + 150 * S]
        every = Schedule("every", "* * * * * */20")
        assert ticks(every, start, 3) == [start + 20 * S, start + 40 * S, start + 60 * S]

    @pytest.mark.parametrize(
        ("alias", "expanded"),
        [
            ("@hourly", "0 * * * *"),
            ("@daily", "0 0 * * *"),
            ("@midnight", "0 0 * * *"),
            ("@weekly", "0 0 * * 0"),
            ("@monthly", "0 0 1 * *"),
            ("@yearly", "0 0 1 1 *"),
            ("@annually", "0 0 1 1 *"),
        ],
    )
    def test_aliases(self, alias: str, expanded: str) -> None:
        by_alias = Schedule("a", alias, tz="Europe/Berlin")
        by_fields = Schedule("a", expanded, tz="Europe/Berlin")
        start = at(2026, 2, 10, 13, 17)
        assert ticks(by_alias, start, 3) == ticks(by_fields, start, 3)
        assert by_alias.fingerprint == by_fields.fingerprint
        assert Schedule("a", alias.upper()).cron == alias.upper()  # kept as given

    def test_names_and_extensions(self) -> None:
        weekdays = Schedule("w", "0 9 * * MON-FRI")
        friday = at(2026, 1, 2, 9, 0)  # a Friday
        assert weekdays.next_fire(friday) == at(2026, 1, 5, 9, 0)
        last_day = Schedule("l", "0 0 L * *")
        assert last_day.next_fire(at(2026, 2, 1)) == at(2026, 2, 28)

    @pytest.mark.parametrize(
        ("cron", "message"),
        [
            ("* * * *", "4 fields; a cron expression has 5"),
            ("* * * * * * *", "7 fields"),
            ("", "0 fields"),
            ("61 * * * *", "the minute field '61'"),
            ("* 25 * * *", "the hour field '25'"),
            ("* * 32 * *", "the day-of-month field '32'"),
            ("* * * 13 *", "the month field '13'"),
            ("* * * * mon-xyz", "the day-of-week field 'mon-xyz'"),
            ("* * * * * 61", "the second field '61'"),
            ("@reboot", "unknown alias; the aliases are @yearly"),
            ("H * * * *", "the minute field 'h' is hashed (H) or random (R)"),
            ("0 R * * *", "the hour field 'r' is hashed (H) or random (R)"),
            ("0 0 31 4 *", "it never fires"),
            ("0 0 30 2 *", "it never fires"),
        ],
    )
    def test_invalid_cron_says_why(self, cron: str, message: str) -> None:
        with pytest.raises(ValueError, match="invalid cron expression") as raised:
            Schedule("bad", cron)
        assert message in str(raised.value)

    def test_refusals(self) -> None:
        with pytest.raises(TypeError, match="a cron expression is a str"):
            Schedule("s", 5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
            Schedule("s", "@daily", tz="Mars/Olympus")
        with pytest.raises(ValueError, match=r"unknown time zone '\.\./etc'"):
            Schedule("s", "@daily", tz="../etc")
        with pytest.raises(ValueError, match="'localtime' is each machine's own"):
            Schedule("s", "@daily", tz="localtime")
        with pytest.raises(cf.InvalidName, match="invalid schedule name 'no spaces'"):
            Schedule("no spaces", "@daily")
        with pytest.raises(cf.InvalidName, match="invalid label key 'Bad'"):
            Schedule("s", "@daily", labels={"Bad": "x"})
        with pytest.raises(TypeError, match="windows must be a sequence of Window"):
            Schedule("s", "@daily", windows=Window())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="got 'mon' in it"):
            Schedule("s", "@daily", windows=("mon",))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="misfire must be a Misfire policy"):
            Schedule("s", "@daily", misfire="skip")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="overlap must be an Overlap policy"):
            Schedule("s", "@daily", overlap="skip")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="paused must be a bool"):
            Schedule("s", "@daily", paused=1)  # type: ignore[arg-type]

    def test_declaration_is_kept(self) -> None:
        payload = {"report": ["a", 1, None]}
        schedule = Schedule(
            "nightly",
            "30 2 * * *",
            tz="Europe/Berlin",
            payload=payload,
            labels={"team": "data"},
            windows=(Window("mon-fri"),),
            paused=True,
        )
        assert schedule.payload is payload
        assert schedule.labels == {"team": "data"}
        assert schedule.windows == (Window("mon-fri"),)
        assert schedule.misfire == cf.Misfire.FIRE_ONCE
        assert schedule.overlap is cf.Overlap.ALLOW
        assert schedule.paused
        twin = Schedule(
            "nightly", "30 2 * * *", tz="Europe/Berlin", windows=(Window("mon-fri"),), paused=True
        )
        assert hash(schedule) == hash(twin)  # payload and labels are left out of the hash


class TestIdsAndFingerprints:
    def test_schedule_id_is_stable(self) -> None:
        sid = schedule_id("reports", "nightly")
        assert re.fullmatch(r"sch_[0-9a-f]{32}", sid)
        assert sid == "sch_26a9ed0d5754e04e3e08238a093093e1"  # pinned: stored rows depend on it
        code = (
            "from cairnflow.schedule import schedule_id; print(schedule_id('reports', 'nightly'))"
        )
        other = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert other.stdout.strip() == sid

    def test_schedule_ids_are_distinct(self) -> None:
        ids = {
            schedule_id("ab", "c"),
            schedule_id("a", "bc"),
            schedule_id("a", "b"),
            schedule_id("b", "a"),
        }
        assert len(ids) == 4
        with pytest.raises(cf.InvalidName, match="invalid workflow name"):
            schedule_id("", "x")
        with pytest.raises(cf.InvalidName, match="invalid schedule name"):
            schedule_id("w", "a b")

    def test_fingerprint_follows_what_moves_ticks(self) -> None:
        base = Schedule("s", "0 9 * * *", tz="Europe/Berlin", windows=(Window("mon-fri"),))
        same = Schedule("s", " 0  9 * * * ", tz="Europe/Berlin", windows=(Window("mon-fri"),))
        assert base.fingerprint == same.fingerprint
        assert re.fullmatch(r"[0-9a-f]{32}", base.fingerprint)
        for changed in (
            Schedule("s", "0 10 * * *", tz="Europe/Berlin", windows=(Window("mon-fri"),)),
            Schedule("s", "0 9 * * *", tz="America/New_York", windows=(Window("mon-fri"),)),
            Schedule("s", "0 9 * * *", tz="Europe/Berlin", windows=(Window("mon-sat"),)),
            Schedule("s", "0 9 * * *", tz="Europe/Berlin", windows=(Window("mon-fri", "08:00"),)),
            Schedule("s", "0 9 * * *", tz="Europe/Berlin"),
        ):
            assert changed.fingerprint != base.fingerprint, changed
        for unchanged in (
            Schedule("s", "0 9 * * *", "Europe/Berlin", {"x": 1}, windows=(Window("mon-fri"),)),
            Schedule(
                "s",
                "0 9 * * *",
                tz="Europe/Berlin",
                windows=(Window("mon-fri"),),
                labels={"a": "b"},
                misfire=cf.Misfire.SKIP,
                overlap=cf.Overlap.SKIP,
                paused=True,
            ),
            Schedule("other", "0 9 * * *", tz="Europe/Berlin", windows=(Window("fri,mon-thu"),)),
        ):
            assert unchanged.fingerprint == base.fingerprint, unchanged


class TestDaylightSaving:
    def test_berlin_daily_spring_forward_fires_when_the_clock_jumps(self) -> None:
        daily = Schedule("d", "30 2 * * *", tz="Europe/Berlin")
        assert fires(daily, at(2024, 3, 30, 12, tz=BERLIN), 3) == [
            "2024-03-31T03:00:00+02:00",
            "2024-04-01T02:30:00+02:00",
            "2024-04-02T02:30:00+02:00",
        ]

    def test_berlin_daily_fall_back_fires_once_at_the_first_occurrence(self) -> None:
        daily = Schedule("d", "30 2 * * *", tz="Europe/Berlin")
        assert fires(daily, at(2024, 10, 26, 12, tz=BERLIN), 3) == [
            "2024-10-27T02:30:00+02:00",
            "2024-10-28T02:30:00+01:00",
            "2024-10-29T02:30:00+01:00",
        ]
        # Asked from inside the second 02:30 hour, the tick is the next day's.
        second_pass = at(2024, 10, 27, 2, 15, tz=BERLIN, fold=1)
        assert wall(daily.next_fire(second_pass), BERLIN) == "2024-10-28T02:30:00+01:00"
        assert wall(daily.prev_fire(second_pass), BERLIN) == "2024-10-27T02:30:00+02:00"

    def test_berlin_hourly_across_both_changes(self) -> None:
        berlin = hourly(tz="Europe/Berlin")
        spring = ticks(berlin, at(2024, 3, 31, 0, 30, tz=BERLIN), 3)
        assert walls(spring, BERLIN) == [
            "2024-03-31T01:00:00+01:00",
            "2024-03-31T03:00:00+02:00",
            "2024-03-31T04:00:00+02:00",
        ]
        assert spring[1] - spring[0] == HOUR  # every real hour
        fall = ticks(berlin, at(2024, 10, 27, 0, 30, tz=BERLIN), 4)
        assert walls(fall, BERLIN) == [
            "2024-10-27T01:00:00+02:00",
            "2024-10-27T02:00:00+02:00",
            "2024-10-27T03:00:00+01:00",  # 02:00 CET is not fired again
            "2024-10-27T04:00:00+01:00",
        ]
        assert fall[2] - fall[1] == 2 * HOUR

    def test_half_past_hourly_fires_at_the_jump_and_on_its_minute(self) -> None:
        half = Schedule("h", "30 * * * *", tz="Europe/Berlin")
        assert fires(half, at(2024, 3, 31, 1, 0, tz=BERLIN), 3) == [
            "2024-03-31T01:30:00+01:00",
            "2024-03-31T03:00:00+02:00",
            "2024-03-31T03:30:00+02:00",
        ]

    @pytest.mark.parametrize(
        ("zone", "spring", "fall", "repeated"),
        [
            ("Europe/Berlin", (2024, 3, 31), (2024, 10, 27), 2),
            ("America/New_York", (2024, 3, 10), (2024, 11, 3), 1),
        ],
    )
    def test_every_minute_covers_each_wall_minute_once(
        self, zone: str, spring: tuple[int, int, int], fall: tuple[int, int, int], repeated: int
    ) -> None:
        tz = ZoneInfo(zone)
        minutely = Schedule("m", "* * * * *", tz=zone)
        short_day = ticks_between(minutely, at(*spring, tz=tz) - 1, at(*spring, 23, 59, tz=tz))
        assert len(short_day) == 23 * 60  # the gap's 60 wall minutes fire once, with 03:00
        assert len(set(short_day)) == len(short_day)
        long_day = ticks_between(minutely, at(*fall, tz=tz) - 1, at(*fall, 23, 59, tz=tz))
        assert len(long_day) == 24 * 60  # every wall minute once, none twice
        walls = [from_ns(t).astimezone(tz).replace(tzinfo=None) for t in long_day]
        assert len(set(walls)) == len(walls)
        # The repeated hour is covered in its first pass; its second pass has no tick.
        end_of_first = at(*fall, repeated, 59, tz=tz)
        assert minutely.next_fire(end_of_first) - end_of_first == HOUR + MINUTE

    def test_new_york_daily_0230_and_0130(self) -> None:
        daily = Schedule("d", "30 2 * * *", tz="America/New_York")
        assert fires(daily, at(2024, 3, 9, 12, tz=NEW_YORK), 2) == [
            "2024-03-10T03:00:00-04:00",
            "2024-03-11T02:30:00-04:00",
        ]
        assert fires(daily, at(2024, 11, 2, 12, tz=NEW_YORK), 2) == [  # 02:30 exists once there
            "2024-11-03T02:30:00-05:00",
            "2024-11-04T02:30:00-05:00",
        ]
        repeated = Schedule("r", "30 1 * * *", tz="America/New_York")
        assert fires(repeated, at(2024, 11, 2, 12, tz=NEW_YORK), 2) == [
            "2024-11-03T01:30:00-04:00",
            "2024-11-04T01:30:00-05:00",
        ]

    def test_new_york_hourly(self) -> None:
        assert fires(hourly(tz="America/New_York"), at(2024, 3, 10, 0, 30, tz=NEW_YORK), 3) == [
            "2024-03-10T01:00:00-05:00",
            "2024-03-10T03:00:00-04:00",
            "2024-03-10T04:00:00-04:00",
        ]
        assert fires(hourly(tz="America/New_York"), at(2024, 11, 3, 0, 30, tz=NEW_YORK), 3) == [
            "2024-11-03T01:00:00-04:00",
            "2024-11-03T02:00:00-05:00",
            "2024-11-03T03:00:00-05:00",
        ]

    @pytest.mark.parametrize(
        ("cron", "zone", "day"),
        [
            ("*/7 * * * *", "Europe/Berlin", (2024, 3, 31)),
            ("*/7 * * * *", "Europe/Berlin", (2024, 10, 27)),
            ("30 2 * * *", "Europe/Berlin", (2024, 10, 27)),
            ("0,30 1,2 * * *", "America/New_York", (2024, 11, 3)),
            ("15 2 * * *", "America/New_York", (2024, 3, 10)),
            ("0 * * * * 45", "Australia/Lord_Howe", (2024, 4, 7)),
            ("0 * * * * 45", "Australia/Lord_Howe", (2024, 10, 6)),
        ],
    )
    def test_next_and_prev_agree_everywhere(
        self, cron: str, zone: str, day: tuple[int, int, int]
    ) -> None:
        schedule = Schedule("p", cron, tz=zone)
        start = at(*day, tz=ZoneInfo(zone)) - 6 * HOUR
        for probe in range(start, start + 36 * HOUR, 7 * MINUTE + 3 * S):
            after, before = schedule.next_fire(probe), schedule.prev_fire(probe)
            assert before <= probe < after
            assert schedule.prev_fire(after) == after
            assert schedule.next_fire(before) == after  # no tick between them
            assert schedule.prev_fire(after - 1) == before

    def test_leap_day(self) -> None:
        leap = Schedule("leap", "0 0 29 2 *")
        assert leap.next_fire(at(2024, 3, 1)) == at(2028, 2, 29)
        assert leap.next_fire(at(2096, 3, 1)) == at(2104, 2, 29)  # 2100 is not a leap year
        assert leap.prev_fire(at(2028, 2, 28)) == at(2024, 2, 29)


class TestWindows:
    def test_office_hours(self) -> None:
        office = Schedule(
            "o", "@hourly", tz="Europe/Berlin", windows=(Window("mon-fri", "09:00", "17:00"),)
        )
        assert office.in_window(at(2026, 3, 6, 9, 0, tz=BERLIN))  # Friday
        assert office.in_window(at(2026, 3, 6, 16, 59, 59, tz=BERLIN))
        assert not office.in_window(at(2026, 3, 6, 17, 0, tz=BERLIN))  # the end is exclusive
        assert not office.in_window(at(2026, 3, 6, 8, 59, tz=BERLIN))
        assert not office.in_window(at(2026, 3, 7, 12, 0, tz=BERLIN))  # Saturday
        assert office.in_window(at(2026, 3, 6, 8, 0))  # 08:00 UTC is 09:00 in Berlin
        assert not office.in_window(at(2026, 3, 6, 7, 30))

    def test_weekends_and_wrapping_ranges(self) -> None:
        weekend = Schedule("w", "@hourly", windows=(Window("sat,sun"),))
        assert [weekend.in_window(at(2026, 3, day, 12)) for day in range(2, 10)] == [
            False, False, False, False, False, True, True, False,
        ]  # fmt: skip
        long_weekend = Schedule("l", "@hourly", windows=(Window("fri-mon"),))
        assert [long_weekend.in_window(at(2026, 3, day, 12)) for day in range(2, 10)] == [
            True, False, False, False, True, True, True, True,
        ]  # fmt: skip
        assert Schedule("a", "@hourly", windows=(Window("*"),)).in_window(at(2026, 3, 4, 0))
        assert Schedule("n", "@hourly").in_window(at(2026, 3, 4, 0))  # no windows: always

    def test_window_across_midnight_belongs_to_its_first_day(self) -> None:
        late = Schedule("n", "@hourly", windows=(Window("fri", "22:00", "02:00"),))
        assert late.in_window(at(2026, 3, 6, 23, 0))  # Friday night
        assert late.in_window(at(2026, 3, 7, 1, 59, 59))  # Saturday morning
        assert not late.in_window(at(2026, 3, 7, 2, 0))
        assert not late.in_window(at(2026, 3, 7, 23, 0))  # Saturday night
        assert not late.in_window(at(2026, 3, 6, 1, 0))  # Friday morning: Thursday's night

    def test_several_windows(self) -> None:
        either = Schedule(
            "e", "@hourly", windows=(Window("mon", "08:00", "09:00"), Window("tue", "18:00"))
        )
        assert either.in_window(at(2026, 3, 2, 8, 30))
        assert either.in_window(at(2026, 3, 3, 23, 0))
        assert not either.in_window(at(2026, 3, 3, 8, 30))

    def test_a_tick_moved_out_of_a_gap_is_judged_where_it_fires(self) -> None:
        night = Schedule(
            "n", "30 2 * * *", tz="Europe/Berlin", windows=(Window("*", "02:00", "03:00"),)
        )
        moved = night.next_fire(at(2024, 3, 30, 12, tz=BERLIN))
        assert wall(moved, BERLIN) == "2024-03-31T03:00:00+02:00"
        assert not night.in_window(moved)
        assert night.in_window(night.next_fire(moved))

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"days": "mon-xyz"}, "'mon-xyz' is not a day or a range of days"),
            ({"days": "1-5"}, "'1-5' is not a day"),
            ({"days": ""}, "days is a string such as"),
            ({"start": "9:00"}, "start '9:00' is not a wall time"),
            ({"start": "24:00"}, "start '24:00' is not a wall time"),
            ({"end": "24:01"}, "end '24:01' is not a wall time"),
            ({"end": "12:60"}, "end '12:60' is not a wall time"),
            ({"start": "10:00", "end": "10:00"}, "start and end are equal"),
        ],
    )
    def test_bad_windows(self, kwargs: dict[str, str], message: str) -> None:
        with pytest.raises(ValueError, match="invalid Window") as raised:
            Window(**kwargs)
        assert message in str(raised.value)

    def test_seconds_in_window_times(self) -> None:
        window = Window("*", "00:00:30", "23:59:59")
        assert window.contains(datetime(2026, 1, 1, 0, 0, 30))
        assert not window.contains(datetime(2026, 1, 1, 0, 0, 29))
        assert not window.contains(datetime(2026, 1, 1, 23, 59, 59))


class TestMisfirePolicies:
    def test_policy_values(self) -> None:
        assert cf.Misfire.SKIP.kind is MisfireKind.SKIP
        assert cf.Misfire.FIRE_ONCE.window_seconds == 60.0
        catch_up = cf.Misfire.CATCH_UP(3600)
        assert catch_up == cf.Misfire(MisfireKind.CATCH_UP, 3600)
        assert catch_up.window_ns == 3600 * S
        for bad in (0, -1, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="positive number of seconds"):
                cf.Misfire.CATCH_UP(bad)
        with pytest.raises(TypeError, match="a number of seconds"):
            cf.Misfire.CATCH_UP(True)
        with pytest.raises(TypeError, match="must be a MisfireKind"):
            cf.Misfire("skip")  # type: ignore[arg-type]

    T0 = at(2026, 3, 2, 0, 0)  # a Monday

    def test_nothing_is_due_before_its_time(self) -> None:
        plan = plan_ticks(hourly(), self.T0, self.T0 - 1)
        assert plan == TickPlan((), (), (), self.T0)
        plan = plan_ticks(hourly(), self.T0, self.T0)
        assert reasons(plan.fire) == [(self.T0, TickReason.DUE)]
        assert plan.next_fire_ns == self.T0 + HOUR

    def test_an_unaligned_stored_next_fire_waits_for_a_real_tick(self) -> None:
        plan = plan_ticks(hourly(), self.T0 + 1, self.T0 + 30 * MINUTE)
        assert plan == TickPlan((), (), (), self.T0 + HOUR)

    @pytest.mark.parametrize("misfire", [cf.Misfire.SKIP, cf.Misfire.FIRE_ONCE])
    def test_on_time_ticks_fire_under_every_policy(self, misfire: cf.Misfire) -> None:
        plan = plan_ticks(hourly(misfire=misfire), self.T0, self.T0 + 59 * S)
        assert reasons(plan.fire) == [(self.T0, TickReason.DUE)]
        assert plan.skipped == plan.misfired == ()
        assert plan.next_fire_ns == self.T0 + HOUR
        assert plan.complete
        assert not plan.truncated

    def test_skip_drops_missed_ticks(self) -> None:
        schedule = hourly(misfire=cf.Misfire.SKIP)
        plan = plan_ticks(schedule, self.T0, self.T0 + 5 * HOUR + 30 * MINUTE)
        assert plan.fire == ()
        assert reasons(plan.misfired) == [(self.T0 + h * HOUR, TickReason.MISSED) for h in range(6)]
        assert plan.next_fire_ns == self.T0 + 6 * HOUR
        # The latest tick, on time, fires; the missed ones do not.
        plan = plan_ticks(schedule, self.T0, self.T0 + 5 * HOUR + 10 * S)
        assert reasons(plan.fire) == [(self.T0 + 5 * HOUR, TickReason.DUE)]
        assert len(plan.misfired) == 5

    def test_fire_once_fires_the_latest_missed_tick(self) -> None:
        schedule = hourly()
        plan = plan_ticks(schedule, self.T0, self.T0 + 5 * HOUR + 30 * MINUTE)
        assert reasons(plan.fire) == [(self.T0 + 5 * HOUR, TickReason.LATE)]
        assert reasons(plan.misfired) == [
            (self.T0 + h * HOUR, TickReason.COALESCED) for h in range(5)
        ]
        assert plan.next_fire_ns == self.T0 + 6 * HOUR
        plan = plan_ticks(schedule, self.T0, self.T0 + 5 * HOUR + 10 * S)
        assert reasons(plan.fire) == [
            (self.T0 + 4 * HOUR, TickReason.LATE),
            (self.T0 + 5 * HOUR, TickReason.DUE),
        ]

    def test_catch_up_fires_what_is_inside_its_window_oldest_first(self) -> None:
        schedule = hourly(misfire=cf.Misfire.CATCH_UP(3 * 3600))
        plan = plan_ticks(schedule, self.T0, self.T0 + 5 * HOUR + 30 * MINUTE)
        assert reasons(plan.fire) == [(self.T0 + h * HOUR, TickReason.DUE) for h in (3, 4, 5)]
        assert reasons(plan.misfired) == [
            (self.T0 + h * HOUR, TickReason.MISSED) for h in (0, 1, 2)
        ]
        assert plan.next_fire_ns == self.T0 + 6 * HOUR

    def test_judged_against_the_stored_next_fire(self) -> None:
        schedule = hourly(misfire=cf.Misfire.CATCH_UP(10 * 3600))
        now = self.T0 + 5 * HOUR + 30 * MINUTE
        first = plan_ticks(schedule, self.T0, now)
        assert first == plan_ticks(schedule, self.T0, now)  # every node decides alike
        assert len(first.fire) == 6
        # A node that looks after the first stored its next fire finds nothing more.
        assert plan_ticks(schedule, first.next_fire_ns, now + MINUTE).fire == ()

    def test_catch_up_is_bounded_per_pass(self) -> None:
        every_second = Schedule("s", "* * * * * *", misfire=cf.Misfire.CATCH_UP(86_400))
        now = self.T0 + 2500 * S
        fired: list[int] = []
        stored, passes = self.T0, 0
        while True:
            passes += 1
            plan = plan_ticks(every_second, stored, now)
            assert len(plan.fire) <= MAX_TICKS_PER_PASS
            fired += [t.at_ns for t in plan.fire]
            stored = plan.next_fire_ns
            if plan.complete:
                break
            assert stored <= now
        assert passes == 3
        assert fired == [self.T0 + n * S for n in range(2501)]
        assert stored == now + S

    def test_a_huge_backlog_is_listed_in_part_and_jumped_over(self) -> None:
        every_second = Schedule("s", "* * * * * *", misfire=cf.Misfire.SKIP)
        now = self.T0 + 10 * 86_400 * S
        plan = plan_ticks(every_second, self.T0, now)
        assert len(plan.misfired) == MAX_TICKS_PER_PASS
        assert plan.misfired[0] == Tick(self.T0, TickReason.MISSED)
        assert plan.truncated
        assert [t.at_ns for t in plan.fire] == [now - n * S for n in range(60, -1, -1)]
        assert plan.next_fire_ns == now + S
        assert plan.complete
        once = plan_ticks(Schedule("s", "* * * * * *"), self.T0, now)
        assert once.fire[0] == Tick(now - 61 * S, TickReason.LATE)
        assert len(once.fire) == 62

    def test_fire_once_fires_the_latest_missed_tick_inside_a_window(self) -> None:
        office = hourly(windows=(Window("mon-fri", "09:00", "17:00"),))
        friday_9 = at(2026, 3, 6, 9, 0)
        monday_7 = at(2026, 3, 9, 7, 30)
        plan = plan_ticks(office, friday_9, monday_7)
        assert reasons(plan.fire) == [(at(2026, 3, 6, 16, 0), TickReason.LATE)]
        skipped = {t.reason for t in plan.skipped}
        assert skipped == {TickReason.WINDOW}
        assert len(plan.skipped) == len(ticks_between(office, friday_9 - 1, monday_7)) - 8
        assert reasons(plan.misfired) == [
            (at(2026, 3, 6, h, 0), TickReason.COALESCED) for h in range(9, 16)
        ]

    def test_a_tick_outside_every_window_is_skipped(self) -> None:
        weekdays = hourly(windows=(Window("mon-fri"),))
        saturday = at(2026, 3, 7, 12, 0)
        plan = plan_ticks(weekdays, saturday, saturday + S)
        assert plan.fire == ()
        assert reasons(plan.skipped) == [(saturday, TickReason.WINDOW)]
        assert plan.next_fire_ns == saturday + HOUR


class TestPauseAndOverlap:
    T0 = at(2026, 3, 2, 0, 0)

    def test_paused_ticks_never_fire(self) -> None:
        schedule = hourly(misfire=cf.Misfire.CATCH_UP(86_400))
        now = self.T0 + 3 * HOUR + 10 * S
        plan = plan_ticks(schedule, self.T0, now, paused=True)
        assert plan.fire == ()
        assert reasons(plan.skipped) == [(self.T0 + h * HOUR, TickReason.PAUSED) for h in range(4)]
        assert plan.next_fire_ns == self.T0 + 4 * HOUR

    @pytest.mark.parametrize(
        "misfire", [cf.Misfire.SKIP, cf.Misfire.FIRE_ONCE, cf.Misfire.CATCH_UP(86_400)]
    )
    def test_not_even_on_resume(self, misfire: cf.Misfire) -> None:
        schedule = hourly(misfire=misfire, windows=(Window("mon-fri"),))
        resumed = self.T0 + 2 * HOUR + 30 * MINUTE
        now = self.T0 + 3 * HOUR + 10 * S
        plan = plan_ticks(schedule, self.T0, now, resumed_at_ns=resumed)
        assert reasons(plan.skipped) == [(self.T0 + h * HOUR, TickReason.PAUSED) for h in range(3)]
        assert reasons(plan.fire) == [(self.T0 + 3 * HOUR, TickReason.DUE)]
        assert plan.misfired == ()

    def test_a_paused_weekend_is_paused_not_window(self) -> None:
        weekdays = hourly(windows=(Window("mon-fri"),))
        saturday = at(2026, 3, 7, 12, 0)
        plan = plan_ticks(weekdays, saturday, saturday, paused=True)
        assert reasons(plan.skipped) == [(saturday, TickReason.PAUSED)]

    def test_overlap_skip_holds_ticks_back_while_a_run_is_unfinished(self) -> None:
        schedule = hourly(overlap=cf.Overlap.SKIP)
        plan = plan_ticks(schedule, self.T0, self.T0 + S, previous_unfinished=True)
        assert plan.fire == ()
        assert reasons(plan.skipped) == [(self.T0, TickReason.OVERLAP)]
        assert plan.next_fire_ns == self.T0 + HOUR
        plan = plan_ticks(schedule, self.T0, self.T0 + S, previous_unfinished=False)
        assert reasons(plan.fire) == [(self.T0, TickReason.DUE)]

    def test_overlap_skip_fires_one_tick_a_pass(self) -> None:
        schedule = hourly(overlap=cf.Overlap.SKIP, misfire=cf.Misfire.CATCH_UP(86_400))
        plan = plan_ticks(schedule, self.T0, self.T0 + 2 * HOUR)
        assert reasons(plan.fire) == [(self.T0, TickReason.DUE)]
        assert reasons(plan.skipped) == [(self.T0 + h * HOUR, TickReason.OVERLAP) for h in (1, 2)]
        once = hourly(overlap=cf.Overlap.SKIP)
        plan = plan_ticks(once, self.T0, self.T0 + 2 * HOUR + S, previous_unfinished=True)
        assert plan.fire == ()
        assert [t.reason for t in plan.skipped] == [TickReason.OVERLAP, TickReason.OVERLAP]

    def test_overlap_allow_fires_anyway(self) -> None:
        plan = plan_ticks(hourly(), self.T0, self.T0 + S, previous_unfinished=True)
        assert reasons(plan.fire) == [(self.T0, TickReason.DUE)]


def test_public_names() -> None:
    assert cf.Schedule is Schedule
    assert cf.Window is Window
    assert isinstance(cf.Misfire.FIRE_ONCE, cf.Misfire)
    assert cf.Overlap("skip") is cf.Overlap.SKIP
    assert Schedule("s", "@daily").next_fire(at(2026, 1, 1)) == at(2026, 1, 2)
