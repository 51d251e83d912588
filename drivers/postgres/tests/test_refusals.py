"""Values PostgreSQL will not take: over its 1 GiB message limit, or out of a column's range.

A protocol message over 1 GiB makes the server close the connection without a SQLSTATE,
which looks like an outage: the store refuses such a statement before sending it. The
oversized values here are ``bytes(n)``: zeros the operating system maps lazily, so a GiB
costs no memory until it is read, and a refused value is never read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import cairnflow as cf
from cairnflow.store import ClaimRequest, Succeeded
from cairnflow_postgres import PostgresStore

pytestmark = pytest.mark.timeout(120)

StoreFactory = Callable[..., PostgresStore]
ClientFactory = Callable[..., cf.Client]

GiB = 1 << 30
_QUICK = cf.Backoff(initial=0.01, factor=1.0, max=0.01)
_LIMIT = "PostgreSQL's 1 GiB limit on one message (less 1 MiB kept for its other fields)"


class RawBytes:
    """JSON, except that bytes are stored as they are (so a step can return a lazy GiB)."""

    name = "raw-bytes"
    _json = cf.JSONCodec()

    def encode(self, value: Any) -> bytes:
        return value if isinstance(value, bytes) else self._json.encode(value)

    def decode(self, data: bytes) -> Any:
        return self._json.decode(data)


def make(ctx: cf.StepContext, n: int) -> Any:
    """``n`` zero bytes when ``n`` is a GiB or more, else ``n`` itself."""
    return bytes(n) if n >= GiB else n


def sized() -> cf.Workflow:
    """One step, :func:`make`, retried on failure (a refused output must not be)."""
    retry = cf.RetryPolicy(max_attempts=3, backoff=_QUICK)
    return cf.Workflow("sized", steps=[cf.Step("make", make, retry=retry)])


def test_an_enqueue_over_the_message_limit_is_refused_before_anything_is_sent(
    store: PostgresStore, make_client: ClientFactory
) -> None:
    client = make_client(store, sized(), start=False, codec=RawBytes())
    before = store.stats.snapshot()
    with pytest.raises(cf.PayloadTooLarge) as caught:
        client.enqueue_many([cf.Job("sized", 1), cf.Job("sized", bytes(GiB))])
    assert str(caught.value) == (
        f"a value sent in one statement is {GiB} bytes encoded, over {_LIMIT} of "
        f"{GiB - (1 << 20)} bytes"
    )
    after = store.stats.snapshot()
    assert (after["statements"], after["retries"]) == (before["statements"], before["retries"])
    assert client.runs().runs == ()
    assert client.enqueue("sized", 3)  # the store goes on as before


def test_a_batch_of_outcomes_with_one_over_the_limit_writes_none_and_the_rest_then_go_alone(
    store: PostgresStore, make_client: ClientFactory
) -> None:
    # The batch sends its successes pipelined behind the locking read: the refusal is raised
    # inside psycopg's pipeline, and the connection must come out of it usable.
    client = make_client(store, sized(), start=False, codec=RawBytes())
    refs = [client.enqueue("sized", 1), client.enqueue("sized", 2)]
    now = time.time_ns()
    request = ClaimRequest(frozenset({"sized"}), 2, now, now + 60 * 10**9, "test-node")
    tokens = {attempt.run_id: attempt.token for attempt in store.claim(request)}
    big, small = (tokens[ref.id] for ref in refs)
    with pytest.raises(cf.PayloadTooLarge, match="PostgreSQL's 1 GiB limit"):
        store.finish_many([(big, Succeeded(bytes(GiB))), (small, Succeeded(b"7"))], now)
    assert [client.info(ref).status for ref in refs] == [cf.Status.RUNNING] * 2
    assert store.finish(small, Succeeded(b"7"), now).applied
    assert client.info(refs[1]).result == 7


def test_an_output_over_the_message_limit_fails_its_step_at_once_while_the_others_succeed(
    store: PostgresStore, make_client: ClientFactory
) -> None:
    client = make_client(store, sized(), workers=8, codec=RawBytes())
    refused, *others = [client.enqueue("sized", n) for n in (GiB, 1, 2, 3, 4, 5)]
    info = client.wait(refused, timeout=60)
    assert info.status is cf.Status.FAILED
    step = info.steps["make"]
    assert (step.attempts, step.failures, step.reclaims) == (1, 1, 0)
    assert step.error is not None and step.error.type == "PayloadTooLarge"
    assert step.error.message == (
        f"a value sent in one statement is {GiB} bytes encoded, over {_LIMIT} of "
        f"{GiB - (1 << 20)} bytes"
    )
    assert [client.wait(ref, timeout=60).status for ref in others] == [cf.Status.SUCCEEDED] * 5


def test_an_outcome_the_server_refuses_fails_its_attempt_at_once_with_the_servers_reason(
    store: PostgresStore, make_client: ClientFactory
) -> None:
    wf = cf.Workflow("far")

    @wf.step(retry=cf.RetryPolicy(max_attempts=3, backoff=_QUICK))
    def later(ctx: cf.StepContext, data: Any) -> None:
        raise cf.Snooze(1e12)  # 31,700 years from now: past a BIGINT of nanoseconds (2262)

    client = make_client(store, wf)
    info = client.wait(client.enqueue("far"), timeout=30)
    assert info.status is cf.Status.FAILED
    step = info.steps["later"]
    assert (step.attempts, step.failures, step.reclaims) == (1, 1, 0)
    assert step.error is not None and step.error.type == "ValueRefused"
    assert step.error.message == (
        "postgres store refused a value: NumericValueOutOfRange: bigint out of range"
    )
