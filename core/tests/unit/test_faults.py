"""The named fault points: the spec they are armed with, what firing does, and being off.

What faults do to the engine is proven by the chaos tests (``tests/chaos``);
here, the mechanism itself: parsing, probabilities and limits, observers,
``cairnflow.testing.faults`` restoring what was armed, and the environment
variable arming a fresh process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cairnflow as cf
from cairnflow import _faults
from cairnflow.testing import FAULT_POINTS, FAULTS_ENV, Fault, FaultInjected, faults

CORE = Path(__file__).parents[1].parent


def test_the_points_are_few_named_and_say_where_they_are() -> None:
    assert set(FAULT_POINTS) == {
        "claim.before_commit",
        "outcome.before_commit",
        "sql.after_commit",
        "lifecycle.after_claim",
        "lifecycle.before_renew",
    }
    for point, where in FAULT_POINTS.items():
        assert ".py" in where, f"{point} does not say where it is"


def test_every_point_is_passed_in_the_module_it_names() -> None:
    # The one list and the code agree: each point is fired where POINTS says it sits.
    source = CORE / "src" / "cairnflow"
    constants = {
        _faults.CLAIM_BEFORE_COMMIT: "CLAIM_BEFORE_COMMIT",
        _faults.OUTCOME_BEFORE_COMMIT: "OUTCOME_BEFORE_COMMIT",
        _faults.SQL_AFTER_COMMIT: "SQL_AFTER_COMMIT",
        _faults.LIFECYCLE_AFTER_CLAIM: "LIFECYCLE_AFTER_CLAIM",
        _faults.LIFECYCLE_BEFORE_RENEW: "LIFECYCLE_BEFORE_RENEW",
    }
    for point, where in FAULT_POINTS.items():
        module = where.split("(", 1)[1].split(":", 1)[0]
        text = (source / module).read_text(encoding="utf-8")
        assert f"_faults.fire(_faults.{constants[point]})" in text, (point, module)


def test_nothing_is_armed_without_the_environment_variable() -> None:
    if os.environ.get(FAULTS_ENV):
        pytest.skip(f"{FAULTS_ENV} is set in this environment")
    assert _faults.plan is None
    assert _faults.fired() == {}


def test_a_spec_is_parsed_into_faults() -> None:
    spec = (
        "outcome.before_commit=kill@0.02, sql.after_commit=raise#3,"
        "claim.before_commit=stall:2.5@0.5#1"
    )
    assert _faults.parse(spec) == [
        Fault("outcome.before_commit", _faults.Action.KILL, 0.02),
        Fault("sql.after_commit", _faults.Action.RAISE, times=3),
        Fault("claim.before_commit", _faults.Action.STALL, 0.5, 2.5, 1),
    ]
    assert [str(f) for f in _faults.parse(spec)] == [
        "outcome.before_commit=kill@0.02",
        "sql.after_commit=raise#3",
        "claim.before_commit=stall:2.5@0.5#1",
    ]
    assert _faults.parse("") == []


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nowhere=raise", "POINT one of"),
        ("sql.after_commit", "POINT one of"),
        ("sql.after_commit=explode", "action must be one of"),
        ("sql.after_commit=raise@0", "probability"),
        ("sql.after_commit=raise@1.5", "probability"),
        ("sql.after_commit=raise#0", "times"),
        ("sql.after_commit=raise:3", "only stall"),
        ("sql.after_commit=stall:-1", "0 seconds or more"),
        ("sql.after_commit=raise,sql.after_commit=stall", "armed twice"),
    ],
)
def test_a_bad_spec_is_refused_saying_why(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        _faults.arm(spec)
    assert _faults.plan is None or os.environ.get(FAULTS_ENV)


def test_raise_raises_unavailable_at_its_point_only_and_counts() -> None:
    with faults("sql.after_commit=raise#2") as armed:
        _faults.fire("claim.before_commit")  # not armed: nothing happens
        with pytest.raises(FaultInjected, match=r"sql\.after_commit") as raised:
            _faults.fire("sql.after_commit")
        assert isinstance(raised.value, cf.Unavailable)
        with pytest.raises(FaultInjected):
            _faults.fire("sql.after_commit")
        _faults.fire("sql.after_commit")  # #2: spent
        assert armed.fired("sql.after_commit") == 2
        assert armed.fired() == 2


def test_threads_keeps_a_fault_to_the_threads_named_so() -> None:
    raised: list[str] = []

    def passing() -> None:
        try:
            _faults.fire("sql.after_commit")
        except FaultInjected:
            raised.append(threading.current_thread().name)

    with faults("sql.after_commit=raise#1", threads="cairnflow-committer") as armed:
        for name in ("cairnflow-dispatcher-n", "cairnflow-keeper-n", "cairnflow-committer-n"):
            thread = threading.Thread(target=passing, name=name)
            thread.start()
            thread.join()
        passing()  # the test's own thread: not named so
        assert raised == ["cairnflow-committer-n"]
        assert armed.fired() == 1


def test_stall_sleeps_in_the_calling_thread() -> None:
    with faults("outcome.before_commit=stall:0.2"):
        started = time.monotonic()
        _faults.fire("outcome.before_commit")
        assert time.monotonic() - started >= 0.2


def test_probability_fires_some_of_the_passes() -> None:
    with faults("claim.before_commit=stall:0@0.3") as armed:
        for _ in range(2000):
            _faults.fire("claim.before_commit")
        assert 400 < armed.fired("claim.before_commit") < 800


def test_observers_hear_of_a_fault_before_it_acts() -> None:
    heard: list[str] = []
    with faults("sql.after_commit=raise", observe=lambda f: heard.append(str(f))):
        with pytest.raises(FaultInjected):
            _faults.fire("sql.after_commit")
        assert heard == ["sql.after_commit=raise"]


def test_the_block_restores_what_was_armed_before() -> None:
    before = _faults.plan
    with faults("sql.after_commit=raise"):
        assert _faults.plan is not before
    assert _faults.plan is before


def test_the_environment_arms_a_fresh_process_and_kill_kills_it() -> None:
    code = (
        "import cairnflow._faults as f, sys; print(f.fired() == {} and f.plan is not None, "
        "flush=True); f.fire('outcome.before_commit'); print('survived')"
    )
    env = {**os.environ, FAULTS_ENV: "outcome.before_commit=kill"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["True"], done.stderr
    assert done.returncode == -9
