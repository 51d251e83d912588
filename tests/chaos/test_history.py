"""The history checker catches each kind of violation, and passes a clean history.

Each test starts from one clean diamond run (``a`` → ``b``, ``c`` → ``d``, a
fan-in at ``d``) as the workers would log it and the store would keep it,
breaks it the way a bug would, and checks that the checker names exactly
that violation.
"""

from __future__ import annotations

import json
from pathlib import Path

import chaos_history as h
import pytest

DIAMOND = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")}


def nonce(run: str, step: str, attempt: int = 1) -> str:
    return f"{run}.{step}.{attempt}"


def clean(run: str = "r1") -> tuple[h.History, h.Stored]:
    """One diamond run that went right: enqueued, each step run and committed once."""
    history = h.History(enqueues=[h.Enqueued(f"k-{run}", "diamond", run, 1)])
    stored = h.Stored(runs=[h.StoredRun(run, "diamond", f"k-{run}", "succeeded", None)])
    for at, (step, parents) in enumerate(DIAMOND.items(), start=10):
        history.starts.append(h.Started(run, step, 1, "w1", 100, at))
        history.completions.append(h.Completed(run, step, 1, "w1", 100, nonce(run, step), at))
        stored.steps.append(h.StoredStep(run, step, "succeeded", 1, parents, nonce(run, step)))
        stored.commits.append(h.Commit(run, step, 1, "task", nonce(run, step)))
    return history, stored


def kinds(verdict: h.Verdict) -> set[h.Kind]:
    return {v.kind for v in verdict.violations}


def test_a_clean_history_has_no_violation() -> None:
    history, stored = clean()
    verdict = h.check(history, stored)
    assert verdict.violations == []
    assert verdict.counts["runs"] == 1
    assert verdict.counts["commits"] == 4


def test_a_retaken_attempt_is_no_violation() -> None:
    # At least once: attempt 1 of b was killed mid-body, attempt 2 ran and committed.
    history, stored = clean()
    history.starts.append(h.Started("r1", "b", 2, "w2", 200, 50))
    history.completions.append(h.Completed("r1", "b", 2, "w2", 200, nonce("r1", "b", 2), 51))
    stored.commits = [c for c in stored.commits if c.step != "b"]
    stored.commits.append(h.Commit("r1", "b", 2, "task", nonce("r1", "b", 2)))
    verdict = h.check(history, stored)
    assert verdict.violations == []
    assert verdict.counts["re-executions"] == 1


def test_an_acknowledged_run_missing_from_the_store_is_lost() -> None:
    history, stored = clean()
    history.enqueues.append(h.Enqueued("k-gone", "diamond", "r-gone", 2))
    verdict = h.check(history, stored)
    assert kinds(verdict) == {h.Kind.LOST}
    assert verdict.of(h.Kind.LOST)[0].run_id == "r-gone"


def test_an_enqueue_of_unknown_outcome_missing_from_the_store_is_not_lost() -> None:
    history, stored = clean()
    history.enqueues.append(h.Enqueued("k-maybe", "diamond", None, 2))
    verdict = h.check(history, stored)
    assert verdict.violations == []
    assert verdict.counts["enqueues unknown"] == 1


def test_an_unfinished_run_is_stuck() -> None:
    history, stored = clean()
    stored.runs[0] = stored.runs[0]._replace(state="active")
    assert kinds(h.check(history, stored)) == {h.Kind.STUCK}


def test_a_run_that_ended_otherwise_than_its_workflow_must_is_a_wrong_end() -> None:
    history, stored = clean()
    stored.runs[0] = stored.runs[0]._replace(state="failed", error="OutcomeRefused")
    assert kinds(h.check(history, stored)) == {h.Kind.WRONG_END}
    # The poison workflow must fail, abandoned; failing for another reason is wrong too.
    expected = {"diamond": h.Expected("failed", "Abandoned")}
    assert kinds(h.check(history, stored, expected)) == {h.Kind.WRONG_END}
    stored.runs[0] = stored.runs[0]._replace(error="Abandoned")
    assert h.check(history, stored, expected).violations == []


def test_a_success_committed_twice_is_a_duplicate_outcome() -> None:
    history, stored = clean()
    # A stalled attempt 1 of b came back and overwrote the success of attempt 2.
    history.starts.append(h.Started("r1", "b", 2, "w2", 200, 50))
    history.completions.append(h.Completed("r1", "b", 2, "w2", 200, nonce("r1", "b", 2), 51))
    stored.commits.append(h.Commit("r1", "b", 2, "task", nonce("r1", "b", 2)))
    verdict = h.check(history, stored)
    assert kinds(verdict) == {h.Kind.DUPLICATE_OUTCOME}
    assert verdict.of(h.Kind.DUPLICATE_OUTCOME)[0].step == "b"


def test_an_output_no_body_completed_is_a_phantom_outcome() -> None:
    history, stored = clean()
    stored.commits[1] = stored.commits[1]._replace(nonce="made-up")
    assert kinds(h.check(history, stored)) == {h.Kind.PHANTOM_OUTCOME}


def test_a_stale_attempts_output_committed_under_a_later_attempt_is_a_phantom_outcome() -> None:
    history, stored = clean()
    history.starts.append(h.Started("r1", "b", 2, "w2", 200, 50))
    # The store moved on to attempt 2, yet the output committed is attempt 1's.
    stored.commits[1] = stored.commits[1]._replace(attempt=2)
    verdict = h.check(history, stored)
    assert kinds(verdict) == {h.Kind.PHANTOM_OUTCOME}
    assert "stale" in verdict.of(h.Kind.PHANTOM_OUTCOME)[0].detail


def test_outputs_of_sleeps_and_waits_are_not_bodies_and_are_not_checked() -> None:
    history, stored = clean()
    stored.commits.append(h.Commit("r1", "nap", 1, "sleep", nonce("r1", "a")))
    assert h.check(history, stored).violations == []


def test_one_attempt_started_twice_is_a_lease_that_ran_twice() -> None:
    history, stored = clean()
    history.starts.append(h.Started("r1", "b", 1, "w2", 200, 50))
    verdict = h.check(history, stored)
    assert kinds(verdict) == {h.Kind.LEASE_RAN_TWICE}


def test_a_fan_in_child_started_twice_under_one_attempt_ran_twice() -> None:
    # Both parents released d: two workers took it under the same claim.
    history, stored = clean()
    history.starts.append(h.Started("r1", "d", 1, "w2", 200, 50))
    assert kinds(h.check(history, stored)) == {h.Kind.FAN_IN_TWICE}


def test_a_fan_in_child_committed_twice_ran_twice() -> None:
    # The second parent released d again after it had succeeded: it ran and committed again.
    history, stored = clean()
    history.starts.append(h.Started("r1", "d", 2, "w2", 200, 50))
    history.completions.append(h.Completed("r1", "d", 2, "w2", 200, nonce("r1", "d", 2), 51))
    stored.commits.append(h.Commit("r1", "d", 2, "task", nonce("r1", "d", 2)))
    verdict = h.check(history, stored)
    assert kinds(verdict) == {h.Kind.FAN_IN_TWICE, h.Kind.DUPLICATE_OUTCOME}


def test_a_fan_in_child_no_parent_released_never_ran() -> None:
    history, stored = clean()
    history.starts = [s for s in history.starts if s.step != "d"]
    history.completions = [c for c in history.completions if c.step != "d"]
    stored.commits = [c for c in stored.commits if c.step != "d"]
    stored.steps[3] = stored.steps[3]._replace(status="pending", nonce=None)
    stored.runs[0] = stored.runs[0]._replace(state="active")
    verdict = h.check(history, stored)
    assert kinds(verdict) == {h.Kind.FAN_IN_NEVER, h.Kind.STUCK}
    assert verdict.of(h.Kind.FAN_IN_NEVER)[0].step == "d"


def test_a_fan_in_child_of_a_failed_run_may_never_run() -> None:
    history, stored = clean()
    stored.commits = [c for c in stored.commits if c.step != "d"]
    stored.runs[0] = stored.runs[0]._replace(state="failed", error="Boom")
    expected = {"diamond": h.Expected("failed", "Boom")}
    assert h.check(history, stored, expected).violations == []


def test_the_counts_name_every_kind_even_when_none_is_found() -> None:
    history, stored = clean()
    counts = h.check(history, stored).counts
    assert {kind.value for kind in h.Kind} <= counts.keys()
    assert all(counts[kind.value] == 0 for kind in h.Kind)


def test_logs_are_read_back_and_a_line_cut_by_a_kill_is_skipped(tmp_path: Path) -> None:
    events = [
        {"ev": "enqueue", "key": "k", "workflow": "diamond", "run": "r1", "at": 1},
        {"ev": "start", "run": "r1", "step": "a", "attempt": 1, "node": "w", "pid": 9, "at": 2},
        {
            "ev": "done",
            "run": "r1",
            "step": "a",
            "attempt": 1,
            "node": "w",
            "pid": 9,
            "nonce": "n",
            "at": 3,
        },
        {
            "ev": "fault",
            "point": "outcome.before_commit",
            "action": "kill",
            "node": "w",
            "pid": 9,
            "at": 4,
        },
    ]
    text = "".join(json.dumps(e) + "\n" for e in events)
    (tmp_path / "w-9.jsonl").write_text(text + '{"ev": "start", "run": "r1", "st')
    history = h.read_history(tmp_path)
    assert (len(history.enqueues), len(history.starts)) == (1, 1)
    assert (len(history.completions), len(history.faults)) == (1, 1)
    assert history.faults[0].action == "kill"


def test_a_deliberate_failure_and_its_retry_are_no_re_execution() -> None:
    history, stored = clean()
    history.failures.append(history.starts[1])
    history.starts.append(h.Started("r1", "b", 2, "w1", 100, 60))
    verdict = h.check(history, stored)
    assert verdict.violations == []
    assert verdict.counts["re-executions"] == 0


def test_an_unknown_event_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown history event"):
        h.History().add({"ev": "teleport"})
