"""cairnflow-otel on a real SQLite file, spans caught by the SDK's in-memory exporter.

The enqueuing client and the working client are two clients of one file: the trace
context reaches the steps only through what the store kept with the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from cairnflow_otel import Tracing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import cairnflow as cf
from cairnflow_sqlite import SQLiteStore

TIMEOUT = 30.0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "traces.db"
    SQLiteStore(path).migrate()
    return path


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _orders(inner: trace.Tracer) -> cf.Workflow:
    wf = cf.Workflow("orders")

    @wf.step(retry=cf.RetryPolicy(max_attempts=2, backoff=cf.Backoff(initial=0.01, max=0.01)))
    def charge(ctx: cf.StepContext, n: int) -> int:
        if ctx.attempt == 1:
            raise ValueError("card declined once")
        return n

    @wf.step(after=[charge])
    async def ship(ctx: cf.StepContext, n: int) -> int:
        await asyncio.sleep(0)
        with inner.start_as_current_span("carrier api"):  # a span of the step's own code
            return n

    return wf


def _by_name(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return sorted(
        (s for s in finished if s.name == name),
        key=lambda s: int(s.attributes["cairnflow.attempt"]) if s.attributes else 0,  # type: ignore[arg-type]
    )


def test_one_trace_shows_the_enqueuing_request_and_every_attempt(
    db: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    tracing = Tracing(tracer_provider=provider)
    app_tracer = provider.get_tracer("the-web-app")
    web = cf.Client(SQLiteStore(db))  # never started: it only enqueues
    tracing.install(web)
    web.register(_orders(app_tracer))
    with app_tracer.start_as_current_span("POST /orders") as request:
        ref = web.enqueue("orders", 7)
    request_context = request.get_span_context()
    assert "traceparent" in web.info(ref).headers  # kept with the run

    worker = cf.Client(SQLiteStore(db), poll_interval=0.05, node_id="worker-1")
    tracing.install(worker)
    worker.register(_orders(app_tracer))
    with worker:
        info = worker.wait(ref, timeout=TIMEOUT)
    assert info.status is cf.Status.SUCCEEDED

    finished = exporter.get_finished_spans()
    charges = _by_name(finished, "orders.charge")
    ships = _by_name(finished, "orders.ship")
    assert [s.attributes["cairnflow.attempt"] for s in charges if s.attributes] == [1, 2]
    assert len(ships) == 1
    for span in (*charges, *ships):
        assert span.context is not None
        assert span.context.trace_id == request_context.trace_id
        assert span.parent is not None
        assert span.parent.span_id == request_context.span_id  # the request is the parent
        assert span.kind is trace.SpanKind.CONSUMER
        attributes = dict(span.attributes or {})
        assert attributes["cairnflow.run_id"] == ref.id
        assert attributes["cairnflow.workflow"] == "orders"
        assert attributes["cairnflow.node_id"] == "worker-1"
        assert attributes["cairnflow.queue"] == "default"
        assert attributes["cairnflow.step"] == span.name.split(".")[1]
    assert charges[0].status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in charges[0].events)
    assert charges[1].status.status_code is not StatusCode.ERROR
    # The async step's own span is a child of its attempt's span, in the same trace.
    (inner,) = [s for s in finished if s.name == "carrier api"]
    assert inner.parent is not None and ships[0].context is not None
    assert inner.parent.span_id == ships[0].context.span_id
    assert inner.context is not None
    assert inner.context.trace_id == request_context.trace_id


def test_a_run_enqueued_outside_any_span_has_root_spans(
    db: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    tracing = Tracing(tracer_provider=provider)
    wf = cf.Workflow("plain", steps=[cf.Step("a", lambda c, d: d), cf.Step("b", lambda c, d: d)])
    client = cf.Client(SQLiteStore(db), poll_interval=0.05)
    tracing.install(client)
    client.register(wf)
    with client:
        ref = client.enqueue("plain", 1, headers={"tenant": "acme"})
        info = client.wait(ref, timeout=TIMEOUT)
    assert dict(info.headers) == {"tenant": "acme"}  # no trace context to keep
    finished = exporter.get_finished_spans()
    assert {s.name for s in finished} == {"plain.a", "plain.b"}
    assert all(s.parent is None for s in finished)


def test_a_store_without_headers_refuses_install() -> None:
    class NoHeaders(cf.MemoryStore):
        capabilities = cf.MemoryStore.capabilities - {cf.Cap.HEADERS}

    client = cf.Client(NoHeaders())
    with pytest.raises(cf.Unsupported, match="HEADERS"):
        Tracing().install(client)
