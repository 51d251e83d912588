"""Retry policies, backoff, codecs, clocks, ids, labels and the capability vocabulary."""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

import cairnflow as cf
from cairnflow import ids
from cairnflow._names import check_key, check_labels, check_sql_identifier


class TestBackoff:
    def test_exponential_and_capped(self) -> None:
        backoff = cf.Backoff(initial=1, factor=2, max=60)
        assert [backoff.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]

    def test_jitter_spreads_both_ways(self) -> None:
        backoff = cf.Backoff(initial=10, factor=1, max=10, jitter=0.2)
        assert backoff.delay(1, rand=0.0) == pytest.approx(8.0)
        assert backoff.delay(1, rand=0.5) == pytest.approx(10.0)
        assert backoff.delay(1, rand=0.999999) == pytest.approx(12.0, rel=1e-5)

    def test_huge_exponents_do_not_overflow(self) -> None:
        assert cf.Backoff(initial=1, factor=10, max=5).delay(10_000) == 5

    @pytest.mark.parametrize(
        "kwargs",
        [{"initial": -1}, {"factor": 0.5}, {"max": 0.1, "initial": 1}, {"jitter": 1.5}],
    )
    def test_invalid(self, kwargs: dict[str, float]) -> None:
        with pytest.raises(ValueError, match="Backoff"):
            cf.Backoff(**kwargs)


class TestRetryPolicy:
    def test_counts_failures(self) -> None:
        policy = cf.RetryPolicy(max_attempts=3, backoff=cf.Backoff(initial=1, factor=2))
        error = RuntimeError("x")
        assert policy.next_delay(error, failures=1, rand=0.5) == 1
        assert policy.next_delay(error, failures=2, rand=0.5) == 2
        assert policy.next_delay(error, failures=3, rand=0.5) is None

    def test_permanent_and_no_retry_on_stop_at_once(self) -> None:
        policy = cf.RetryPolicy(max_attempts=9, no_retry_on=lambda e: isinstance(e, KeyError))
        assert policy.next_delay(cf.Permanent(RuntimeError("x")), 1, 0.5) is None
        assert policy.next_delay(KeyError("k"), 1, 0.5) is None
        assert policy.next_delay(RuntimeError("x"), 1, 0.5) is not None

    def test_default_does_not_retry(self) -> None:
        assert cf.NO_RETRY.retries is False
        assert cf.RetryPolicy().next_delay(RuntimeError(), 1, 0.5) is None

    @pytest.mark.parametrize("bad", [0, -1, 1.5, True])
    def test_invalid_max_attempts(self, bad: int) -> None:
        with pytest.raises(ValueError, match="max_attempts"):
            cf.RetryPolicy(max_attempts=bad)

    def test_until_is_a_deadline_or_a_span_after_the_run_start(self) -> None:
        at = datetime(2030, 1, 1, tzinfo=UTC)
        absolute = cf.RetryPolicy(until=at)
        assert (absolute.deadline_ns, absolute.window_ns) == (int(at.timestamp()) * 10**9, None)
        assert cf.RetryPolicy(until=1.5).window_ns == 1_500_000_000
        assert cf.RetryPolicy(until=timedelta(minutes=1)).window_ns == 60 * 10**9
        assert cf.RetryPolicy().deadline_ns is None

    @pytest.mark.parametrize(
        "bad", [0, -1, float("inf"), True, "60", timedelta(0), datetime(2030, 1, 1)]
    )
    def test_invalid_until(self, bad: object) -> None:
        with pytest.raises(ValueError, match="until"):
            cf.RetryPolicy(until=bad)  # type: ignore[arg-type]

    def test_on_exhausted_discards_only_what_ran_out_of_retries(self) -> None:
        policy = cf.RetryPolicy(max_attempts=3, on_exhausted="discard")
        assert policy.discards
        assert policy.permanent(cf.Permanent(RuntimeError("x")))
        assert not policy.permanent(RuntimeError("x"))
        assert not cf.RetryPolicy().discards
        with pytest.raises(ValueError, match="on_exhausted"):
            cf.RetryPolicy(on_exhausted="drop")  # type: ignore[arg-type]

    def test_a_failure_judged_by_the_store(self) -> None:
        error = cf.ErrorInfo("E", "m")
        assert not cf.store.Failed(error, retry_at=5).judged
        budget = cf.store.Failed(error, retry_at=5, max_errors=3)
        assert budget.judged
        assert budget.retry_stands(run_at=0, failures=1)
        assert not budget.retry_stands(run_at=0, failures=2)  # this failure is the third
        assert cf.store.Failed(error, retry_at=5, retry_deadline=5).retry_stands(0, 0)
        assert not cf.store.Failed(error, retry_at=6, retry_deadline=5).retry_stands(0, 0)
        assert not cf.store.Failed(error, retry_at=6, retry_window=5).retry_stands(0, 0)
        assert cf.store.Failed(error, retry_at=6, retry_window=5).retry_stands(1, 0)
        assert cf.store.Failed(error, discard=True).final_status is cf.Status.DISCARDED
        assert cf.store.Failed(error).final_status is cf.Status.FAILED

    def test_max_errors_of_a_workflow(self) -> None:
        wf = cf.Workflow("w", max_errors=2, steps=[cf.Step("a", lambda c, d: d)])
        assert wf.required_capabilities() == {cf.Cap.RETRY_MAX_ERRORS: "max_errors of workflow 'w'"}
        for bad in (0, True, 1.5):
            with pytest.raises(ValueError, match="max_errors"):
                cf.Workflow("w", max_errors=bad)  # type: ignore[arg-type]


def test_permanent_wraps_and_records_the_inner_error() -> None:
    try:
        raise cf.Permanent(ValueError("card declined"))
    except cf.Permanent as error:
        info = cf.ErrorInfo.from_exception(error, step="charge", attempt=2)
    assert info.type == "ValueError"
    assert info.message == "card declined"
    assert info.step == "charge"
    assert cf.ErrorInfo.from_json(info.to_json()) == info


def test_a_failure_whose_message_utf8_cannot_encode_is_recorded_as_it_was() -> None:
    # A message made of undecodable bytes (a lone surrogate): no database stores that text,
    # so the JSON escapes it, and the failure is kept instead of being lost with it.
    info = cf.ErrorInfo("ValueError", "bad \udc80 bytes, café", step="parse", attempt=1)
    text = info.to_json()
    text.encode("utf-8")
    assert cf.ErrorInfo.from_json(text) == info
    assert "café" in cf.ErrorInfo("ValueError", "café").to_json()  # kept as it is otherwise


def test_json_codec_round_trips_and_refuses_what_json_cannot_hold() -> None:
    codec = cf.JSONCodec()
    value = {"a": [1, 2.5, None, True], "ü": "é"}
    assert codec.decode(codec.encode(value)) == value
    with pytest.raises(ValueError, match="JSON compliant"):
        codec.encode(float("nan"))
    with pytest.raises(TypeError):
        codec.encode(object())
    # The shortcuts for None agree with json exactly, both ways.
    assert codec.encode(None) == json.dumps(None).encode() == b"null"
    assert codec.decode(b"null") is None
    assert codec.decode(memoryview(b"null")) is None
    assert codec.decode(b" null ") is None


def test_json_codec_writes_what_json_dumps_writes_after_errors_and_across_threads() -> None:
    """The codec's shortcuts (an int written alone, a C encoder kept per thread) write the
    bytes ``json.dumps`` with the codec's options writes, and raise what it raises."""
    import enum

    class Level(enum.IntEnum):
        HIGH = 2

    codec = cf.JSONCodec()

    def dumps(value: object) -> bytes:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()

    values: list[object] = [
        7, -3, 10**30, True, False, 1.5, -0.0, "é\n", Level.HIGH, [], {}, (1, "x"),
        {"a": [1, 2.5, {"b": None}], "ü": "é", 1: Level.HIGH, None: 2, 2.5: True},
    ]  # fmt: skip
    for value in values:
        assert codec.encode(value) == dumps(value), value
    looped: dict[str, object] = {}
    looped["self"] = looped
    refused: list[tuple[object, type[Exception], str]] = [
        (looped, ValueError, "Circular reference detected"),
        ([1, float("inf")], ValueError, "JSON compliant"),
        ({"a": [object()]}, TypeError, "not JSON serializable"),
        ({(1,): 2}, TypeError, "keys must be"),
    ]
    shared = {"shared": [1, 2, 3]}
    for value, error, message in refused:
        with pytest.raises(error, match=message):
            codec.encode(value)
        # An encode that raised left nothing behind: the same containers encode again.
        assert codec.encode(shared) == dumps(shared)
        assert codec.encode([shared, shared]) == dumps([shared, shared])
    # One object encoded by many threads at once is never taken for a circular reference.
    wrong: list[object] = []

    def encode_many() -> None:
        for _ in range(2000):
            try:
                if codec.encode(shared) != b'{"shared":[1,2,3]}':
                    wrong.append(codec.encode(shared))
            except Exception as error:  # a thread's exception would be lost otherwise
                wrong.append(error)

    threads = [threading.Thread(target=encode_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_an_attempts_cancel_event_is_made_on_first_use_and_never_misses_a_cancel() -> None:
    from cairnflow._engine._attempt import End, RunningAttempt
    from cairnflow.store import ClaimedAttempt

    claimed = ClaimedAttempt("s:t", "r", "w", "q", "a", cf.StepKind.TASK, 1, 0, 0, b"", {}, {})
    before = RunningAttempt(claimed, 0.0)
    early = before.cancel_event  # made before the cancel
    assert not before.cancelled and not early.is_set()
    assert before.stop(End.CANCELLED)
    assert before.cancelled and early.is_set() and before.cancel_event is early
    after = RunningAttempt(claimed, 0.0)
    after.cancel()  # cancelled before anyone asked for the event
    assert after.cancelled and after.cancel_event.is_set()
    ctx = cf.StepContext(
        run_id="r",
        workflow="w",
        step="a",
        attempt=1,
        payload=None,
        parents={},
        labels={},
        node_id="n",
        queue="q",
        deadline=None,
        cancel_event=after,
        control=None,  # type: ignore[arg-type]
    )
    assert ctx.cancelled and ctx.cancel_event is after.cancel_event
    with pytest.raises(cf.Cancelled):
        ctx.raise_if_cancelled()
    plain = threading.Event()
    own = cf.StepContext(
        run_id="r",
        workflow="w",
        step="a",
        attempt=1,
        payload=None,
        parents={},
        labels={},
        node_id="n",
        queue="q",
        deadline=None,
        cancel_event=plain,
        control=None,  # type: ignore[arg-type]
    )
    assert not own.cancelled
    plain.set()
    assert own.cancelled and own.cancel_event is plain


def test_fake_clock_moves_only_when_told_and_notifies() -> None:
    clock = cf.clock.Fake(datetime(2026, 5, 1, tzinfo=UTC))
    seen: list[int] = []
    stop = clock.subscribe(lambda: seen.append(clock.now_ns()))
    start = clock.now_ns()
    assert clock.now_ns() == start
    clock.advance(1.5)
    assert clock.now_ns() == start + 1_500_000_000 == seen[0]
    stop()
    clock.advance(1)
    assert len(seen) == 1
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)


def test_ns_conversions_are_exact_to_the_microsecond() -> None:
    moment = datetime(2026, 12, 1, 2, 3, 4, 567891, tzinfo=UTC)
    assert cf.clock.from_ns(cf.clock.to_ns(moment)) == moment
    assert cf.clock.from_ns(cf.clock.to_ns(moment) + 999) == moment
    assert cf.clock.to_ns(moment + timedelta(microseconds=1)) - cf.clock.to_ns(moment) == 1000
    with pytest.raises(ValueError, match="naive"):
        cf.clock.to_ns(datetime(2026, 1, 1))


def test_ids_are_checked() -> None:
    assert ids.new_id(ids.default_id_generator, "run").startswith("run_")
    assert len(ids.new_id(ids.default_id_generator, "step")) == 37
    for bad in ["", "x" * 65, "has space", "tab\t", 7]:
        with pytest.raises(cf.InvalidName, match="1 to 64 printable ASCII"):
            ids.new_id(lambda kind, bad=bad: bad, "run")  # type: ignore[misc]
    assert ids.new_token() != ids.new_token()
    assert len(ids.new_token()) == 32


def test_default_ids_sort_in_the_order_they_were_made() -> None:
    # Time-ordered ids keep rows made together on the same index pages (see cairnflow.ids).
    made = [ids.default_id_generator("run") for _ in range(5000)]
    assert len(set(made)) == len(made)
    assert all(re.fullmatch(r"run_[0-9a-f]{32}", made_id) for made_id in made)
    inversions = sum(1 for a, b in itertools.pairwise(made) if a >= b)
    assert inversions <= 1, "only a wrap of the 16-bit counter may put an id before the last"
    millis = int(made[0][4:16], 16)
    assert abs(millis - time.time_ns() // 1_000_000) < 60_000, "the first 48 bits are Unix ms"
    # Another process's ids differ in their random bits even in the same millisecond.
    assert len({made_id[20:] for made_id in made}) == len(made)


def test_ids_made_together_are_made_as_one_by_one_and_sort_after_them() -> None:
    # A batch enqueue names its runs and steps together (ids.default_ids): one clock read,
    # one hold of the lock. They must be what the generator makes, in the same order.
    before = [ids.default_id_generator("step") for _ in range(3)]
    together = ids.default_ids("step", 700)  # more than one buffer's worth (256 ids)
    after = ids.default_id_generator("step")
    made = [*before, *together, after]
    assert all(re.fullmatch(r"step_[0-9a-f]{32}", made_id) for made_id in made)
    assert len({made_id[21:] for made_id in made}) == len(made), "random bits drawn twice"
    inversions = sum(1 for a, b in itertools.pairwise(made) if a >= b)
    assert inversions <= 1, "only a wrap of the 16-bit counter may put an id before the last"
    assert ids.default_ids("run", 0) == []


def test_a_batch_is_named_by_a_custom_generator_one_id_at_a_time_each_checked() -> None:
    store = cf.MemoryStore()
    asked: list[str] = []

    def generator(kind: ids.IdKind) -> str:
        asked.append(kind)
        return f"{kind}-{len(asked)}" if len(asked) < 6 else "bad id"

    client = cf.Client(store, id_generator=generator)
    wf = cf.Workflow("pair")
    first = wf.step(lambda ctx, data: data, name="first")
    wf.step(lambda ctx, data: data, name="second", after=[first])
    client.register(wf)
    refs = client.enqueue_many([cf.Job("pair", 1)])
    assert refs[0].id == "run-1" and asked == ["run", "step", "step"]
    with pytest.raises(cf.InvalidName, match="1 to 64 printable ASCII"):
        client.enqueue_many([cf.Job("pair", 2), cf.Job("pair", 3)])
    assert [r.id for r in client.runs().runs] == ["run-1"], "a refused id wrote nothing"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_random_bits_of_its_own() -> None:
    # The default generator buffers random bits (cairnflow.ids._RANDOM_IDS at a time): a
    # child forked with bits left in the buffer must not hand out the parent's next ones.
    ids.default_id_generator("run")  # the buffer now holds bits for the ids to come
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(ids.default_id_generator("run") for _ in range(4)).encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    child = os.read(read, 4096).decode().split()
    os.close(read)
    assert status == 0 and len(child) == 4
    parent = [ids.default_id_generator("run") for _ in range(4)]
    assert not {made[20:] for made in child} & {made[20:] for made in parent}


def test_keys_and_labels_are_checked() -> None:
    assert check_key("order-1") == "order-1"
    for bad in ["", "x" * 256, "nul\x00", None]:
        with pytest.raises(cf.InvalidName, match="idempotency key"):
            check_key(bad)
    assert check_labels({"tenant": "acme", "team/x": ""}) == {"tenant": "acme", "team/x": ""}
    with pytest.raises(cf.InvalidName, match="invalid label key 'Bad Key'"):
        check_labels({"Bad Key": "v"})
    with pytest.raises(cf.InvalidName, match="label value is a str"):
        check_labels({"n": 1})  # type: ignore[dict-item]
    with pytest.raises(cf.InvalidName, match="at most 32 labels"):
        check_labels({f"k{i}": "v" for i in range(33)})


@pytest.mark.parametrize("bad", ['cf"; DROP TABLE x; --', "UPPER", "1abc", "a" * 49, "", "a-b"])
def test_sql_identifiers_are_validated(bad: str) -> None:
    with pytest.raises(cf.InvalidName, match="invalid table prefix"):
        check_sql_identifier("table prefix", bad, r"[a-z_][a-z0-9_]{0,47}", 48)


def test_every_capability_is_documented_in_one_line() -> None:
    # LOCKS, RETENTION (#16), STATS, SERVERS, STEP_HISTORY, WAIT_BRANCH, COMPENSATION (#17),
    # HEADERS (#19)
    assert len(cf.Cap) == 69
    for cap in cf.Cap:
        assert cap.value == cap.name.lower()
        assert cap.doc and "\n" not in cap.doc and cap.doc.endswith(".")
    assert cf.Cap("sleep") is cf.Cap.SLEEP
    assert isinstance(cf.Cap.SLEEP, str)


def test_error_hierarchy() -> None:
    for error in [
        cf.Permanent,
        cf.DuplicateRun,
        cf.Unsupported,
        cf.Abandoned,
        cf.LeaseLost,
        cf.Unavailable,
        cf.SchemaNotReady,
        cf.PayloadTooLarge,
        cf.ValueRefused,
        cf.StepTimeout,
        cf.Cancelled,
        cf.Snooze,
        cf.RunNotFound,
        cf.UnknownWorkflow,
        cf.InvalidName,
        cf.WaitTimeout,
        cf.RunFailed,
    ]:
        assert issubclass(error, cf.CairnError)
    assert issubclass(cf.InvalidName, ValueError)
    assert issubclass(cf.PayloadTooLarge, cf.ValueRefused)  # one rule for refused values
    assert issubclass(cf.ValueRefused, ValueError)
    assert issubclass(cf.StepTimeout, TimeoutError)
    too_large = cf.PayloadTooLarge(20, 16, "the output", limit_name="MariaDB's max_allowed_packet")
    assert str(too_large) == (
        "the output is 20 bytes encoded, over MariaDB's max_allowed_packet of 16 bytes"
    )
    assert (too_large.size, too_large.limit) == (20, 16)
    assert issubclass(cf.OutcomeUnknown, cf.Unavailable)
    assert "SLEEP" in str(cf.Unsupported(cf.Cap.SLEEP, "a sleep step"))


def test_status_finished() -> None:
    assert {s for s in cf.Status if s.finished} == {"succeeded", "failed", "cancelled", "discarded"}
    assert {s for s in cf.StepStatus if s.finished} == {
        "succeeded",
        "failed",
        "cancelled",
        "timed_out",
        "skipped",
    }


def test_database_clock_reads_then_advances_on_the_monotonic_clock() -> None:
    readings = iter([5_000_000_000_000, 9_000_000_000_000])
    calls: list[int] = []

    def read() -> int:
        value = next(readings)
        calls.append(value)
        return value

    clock = cf.clock.DatabaseClock(read, resync=3600)
    first = clock.now_ns()
    second = clock.now_ns()
    assert 5_000_000_000_000 <= first <= second < 5_000_000_000_000 + 10**9
    assert calls == [5_000_000_000_000]  # read once: no resync within the hour
    clock.sync()
    assert clock.now_ns() >= 9_000_000_000_000
    assert clock.uncertainty_ns >= 0


def test_database_clock_keeps_its_reading_when_a_resync_fails() -> None:
    state = {"fail": False}

    def read() -> int:
        if state["fail"]:
            raise ConnectionError("database went away")
        return 1_000

    clock = cf.clock.DatabaseClock(read, resync=1e-9)  # every call resyncs
    state["fail"] = True
    assert clock.now_ns() >= 1_000


def test_database_clock_needs_its_capability() -> None:
    with pytest.raises(cf.Unsupported, match="DATABASE_CLOCK"):
        cf.Client(cf.MemoryStore(), database_clock=True)
