"""OpenTelemetry traces for cairnflow: a span per step attempt, in the enqueuer's trace.

::

    from cairnflow_otel import Tracing

    Tracing().install(client)   # on the clients that enqueue and on those that run steps

Why through run headers: a run's steps run later, on other threads or machines, so the
trace context of the code that enqueued it (a web request's span) cannot be passed in
memory. An enqueue hook writes it into the run's headers (``Cap.HEADERS``: kept with
the run, in the same transaction), and a step middleware reads it back from
``ctx.headers`` in every attempt, on any client, so each attempt's span is a child of
the enqueuing span and one trace shows the request and the steps it caused. The step's
code runs inside the span (sync and async steps alike), so spans it makes are children.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator

import cairnflow as cf
from cairnflow.middleware import MAX_HEADER_VALUE, MAX_HEADERS

__all__ = ["Tracing", "__version__"]

__version__ = "0.1.0"

_log = logging.getLogger("cairnflow.otel")


class Tracing:
    """Trace context into run headers at enqueue, and a span around every step attempt.

    ``tracer_provider``: where spans go (default: the global provider);
    ``propagator``: how context is written into headers (default: the global one,
    W3C ``traceparent``/``tracestate`` and ``baggage``).

    Each attempt's span is named ``"<workflow>.<step>"``, kind ``CONSUMER``, with the
    attributes ``cairnflow.run_id``, ``cairnflow.workflow``, ``cairnflow.step``,
    ``cairnflow.attempt``, ``cairnflow.node_id``, ``cairnflow.queue`` and
    ``messaging.system = "cairnflow"``; an exception of the attempt is recorded on it
    and sets its status to ``ERROR``.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(
            "cairnflow_otel", __version__, tracer_provider=tracer_provider
        )
        self._propagator = propagator

    @property
    def propagator(self) -> TextMapPropagator:
        """The propagator in use (the global one, read when used, unless one was given)."""
        return self._propagator or propagate.get_global_textmap()

    def install(self, client: cf.Client) -> None:
        """Add the enqueue hook and the step middleware to ``client`` (before ``start()``).

        Needs ``Cap.HEADERS`` (:class:`cairnflow.Unsupported` otherwise, nothing added).
        """
        client.add_enqueue_hook(self.enqueue_hook)
        client.use(self.middleware)

    def enqueue_hook(self, workflow: str, headers: dict[str, str]) -> None:
        """Write the current trace context into a new run's ``headers``.

        An entry the run cannot keep (past the core's limits on headers) is left out
        and logged: a trace cut short is better than an enqueue refused.
        """
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier)
        for name, value in carrier.items():
            if len(value) > MAX_HEADER_VALUE or len(headers) >= MAX_HEADERS:
                _log.warning("trace header %r of a %r run is left out: too long", name, workflow)
                continue
            headers[name] = value

    def middleware(self, ctx: cf.StepContext, call_next: Callable[[], Any]) -> Any:
        """Run the attempt inside a span whose parent is the context the run was enqueued in."""
        parent = self.propagator.extract(ctx.headers)
        attributes: dict[str, str | int] = {
            "messaging.system": "cairnflow",
            "cairnflow.run_id": ctx.run_id,
            "cairnflow.workflow": ctx.workflow,
            "cairnflow.step": ctx.step,
            "cairnflow.attempt": ctx.attempt,
            "cairnflow.node_id": ctx.node_id,
            "cairnflow.queue": ctx.queue,
        }
        with self._tracer.start_as_current_span(
            f"{ctx.workflow}.{ctx.step}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            attributes=attributes,
        ):
            return call_next()
