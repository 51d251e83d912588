"""Prometheus metrics for cairnflow clients.

::

    from cairnflow_prometheus import Metrics

    metrics = Metrics()              # prometheus_client's default registry
    metrics.install(client)          # before client.start()
    metrics.serve(9464)              # http://127.0.0.1:9464/metrics

Why the metrics come from two seams: an attempt's start and duration are measured by
a step middleware around the step's code (:mod:`cairnflow.middleware`), but whether an
attempt succeeded, failed or was retried is what the engine hands to be written (an
output the codec refuses fails the attempt after the step returned), and a claim's
round trip or a lease taken over happen outside any step: those come from an
:class:`~cairnflow.middleware.EngineObserver`. Queue depth is read at scrape time
through the store's ``STATS`` facet (one transaction over its indexes, never a scan of
the runs), so a scrape costs one round trip however many runs the store holds, and
every client of the cluster reports the same numbers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

import cairnflow as cf
from cairnflow.middleware import EngineObserver
from cairnflow.store import ClaimedAttempt, Failed, Outcome, Succeeded

__all__ = ["Exporter", "Metrics", "QueueDepth", "__version__"]

__version__ = "0.1.0"

_log = logging.getLogger("cairnflow.prometheus")

ATTEMPT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
"""Seconds: steps run from milliseconds (a row written) to minutes (a report made)."""
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
"""Seconds: a claim is one round trip, a fraction of a millisecond on SQLite to tens of ms."""


class Exporter(NamedTuple):
    """A running ``/metrics`` endpoint: its port, and how to stop it."""

    port: int
    stop: Callable[[], None]


class Metrics(EngineObserver):
    """The metrics of the clients it is installed on, in ``registry``.

    Counters by workflow and step: ``cairnflow_attempts_started_total``,
    ``..._succeeded_total``, ``..._failed_total`` (every failed attempt, retried
    or not) and ``..._retried_total`` (failed attempts whose retry was scheduled);
    ``cairnflow_attempt_duration_seconds`` (by workflow, step and ``result``:
    ``returned`` or ``raised``); ``cairnflow_claim_duration_seconds`` (``joined``:
    ``"true"`` for a claim made in the transaction that wrote outcomes);
    ``cairnflow_lease_takeovers_total`` and ``cairnflow_attempts_abandoned_total``;
    and, per client installed on a store declaring ``STATS``, queue depth gauges
    (:class:`QueueDepth`, read through the first such client).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        namespace: str = "cairnflow",
        attempt_buckets: Sequence[float] = ATTEMPT_BUCKETS,
        claim_buckets: Sequence[float] = CLAIM_BUCKETS,
    ) -> None:
        self.registry = REGISTRY if registry is None else registry
        reg = self.registry
        by_step = ("workflow", "step")
        self.started = Counter(
            "attempts_started", "Step attempts begun.", by_step, namespace=namespace, registry=reg
        )
        self.succeeded = Counter(
            "attempts_succeeded", "Step attempts that succeeded.", by_step,
            namespace=namespace, registry=reg,
        )  # fmt: skip
        self.failed = Counter(
            "attempts_failed", "Step attempts that failed (retried or not).", by_step,
            namespace=namespace, registry=reg,
        )  # fmt: skip
        self.retried = Counter(
            "attempts_retried", "Failed step attempts whose retry was scheduled.", by_step,
            namespace=namespace, registry=reg,
        )  # fmt: skip
        self.duration = Histogram(
            "attempt_duration_seconds", "How long a step's code ran, per attempt.",
            (*by_step, "result"), namespace=namespace, registry=reg, buckets=attempt_buckets,
        )  # fmt: skip
        self.claims = Histogram(
            "claim_duration_seconds", "Round trip of a claim (joined: with outcomes written).",
            ("joined",), namespace=namespace, registry=reg, buckets=claim_buckets,
        )  # fmt: skip
        self.takeovers = Counter(
            "lease_takeovers", "Attempts taken back from expired leases.",
            namespace=namespace, registry=reg,
        )  # fmt: skip
        self.abandoned = Counter(
            "attempts_abandoned", "Attempts failed for having been taken over too often.",
            namespace=namespace, registry=reg,
        )  # fmt: skip
        self._namespace = namespace
        self._depth: QueueDepth | None = None
        self._lock = threading.Lock()

    # -- installing --------------------------------------------------------------------------
    def install(self, client: cf.Client, *, queue_depth: bool = True) -> None:
        """Measure ``client``: its step middleware, its engine observer and, where the store
        declares ``STATS`` and ``queue_depth``, queue depth gauges read at scrape time.

        Install before ``client.start()``. One :class:`Metrics` may measure several clients
        of one store (counters add up); the queue depth is read through the first one only,
        since every client of a store reads the same queues.
        """
        client.use(self.middleware)
        client.observe(self)
        if queue_depth and cf.Cap.STATS in client.capabilities:
            with self._lock:
                if self._depth is None:  # every client of a store would report the same
                    self._depth = QueueDepth(client, namespace=self._namespace)
                    self.registry.register(self._depth)

    def serve(self, port: int, addr: str = "127.0.0.1") -> Exporter:
        """Serve ``/metrics`` of this registry on ``addr:port`` (loopback unless told otherwise,
        since metrics name workflows and queues; port 0 picks a free one)."""
        server, thread = start_http_server(port, addr=addr, registry=self.registry)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(10)

        return Exporter(server.server_port, stop)

    # -- the step middleware -----------------------------------------------------------------
    def middleware(self, ctx: cf.StepContext, call_next: Callable[[], Any]) -> Any:
        """Count the attempt as started and time the step's code (a step middleware)."""
        self.started.labels(ctx.workflow, ctx.step).inc()
        began = time.perf_counter()
        result = "raised"
        try:
            value = call_next()
            result = "returned"
            return value
        finally:
            self.duration.labels(ctx.workflow, ctx.step, result).observe(
                time.perf_counter() - began
            )

    # -- the engine observer -----------------------------------------------------------------
    def claimed(self, attempts: Sequence[ClaimedAttempt], seconds: float, *, joined: bool) -> None:
        self.claims.labels("true" if joined else "false").observe(seconds)

    def took_over(self, requeued: int, abandoned: int) -> None:
        if requeued:
            self.takeovers.inc(requeued)
        if abandoned:
            self.takeovers.inc(abandoned)
            self.abandoned.inc(abandoned)

    def outcome(self, claimed: ClaimedAttempt, outcome: Outcome) -> None:
        labels = (claimed.workflow, claimed.step)
        if isinstance(outcome, Succeeded):
            self.succeeded.labels(*labels).inc()
        elif isinstance(outcome, Failed):
            self.failed.labels(*labels).inc()
            if outcome.retry_at is not None:
                self.retried.labels(*labels).inc()


class QueueDepth(Collector):
    """Queue depth of one client's store, read through ``client.stats()`` at scrape time.

    ``cairnflow_queue_ready`` (steps ready to run), ``cairnflow_queue_running``,
    ``cairnflow_queue_waiting`` (asleep or waiting for a signal) and
    ``cairnflow_queue_oldest_ready_seconds`` (how long the oldest ready step has been
    due), by queue. One read of the STATS facet (a transaction over its indexes) with a
    window of one bucket: the throughput a dashboard draws is not asked for.
    """

    def __init__(self, client: cf.Client, *, namespace: str = "cairnflow") -> None:
        client.stats(hours=1 / 60)  # refused at once (cf.Unsupported) on a store without STATS
        self._client = client
        self._namespace = namespace

    def collect(self) -> Iterable[Any]:
        """The gauges, read now; none (and a log line) when the store cannot be read."""
        try:
            stats = self._client.stats(hours=1 / 60, bucket=60.0)
        except Exception:  # noqa: BLE001 - a scrape answers without the gauges, logged
            _log.warning("could not read queue statistics for a scrape", exc_info=True)
            return []
        now = stats.since + stats.width
        ns = self._namespace
        families = {
            "ready": GaugeMetricFamily(
                f"{ns}_queue_ready", "Steps ready to run.", labels=["queue"]
            ),
            "running": GaugeMetricFamily(f"{ns}_queue_running", "Steps running.", labels=["queue"]),
            "waiting": GaugeMetricFamily(
                f"{ns}_queue_waiting", "Steps asleep or waiting for a signal.", labels=["queue"]
            ),
            "oldest": GaugeMetricFamily(
                f"{ns}_queue_oldest_ready_seconds",
                "How long the oldest ready step of the queue has been due.",
                labels=["queue"],
            ),
        }
        for queue in stats.queues:
            families["ready"].add_metric([queue.queue], queue.queued)
            families["running"].add_metric([queue.queue], queue.running)
            families["waiting"].add_metric([queue.queue], queue.waiting)
            oldest = 0.0 if queue.oldest_queued_at is None else (now - queue.oldest_queued_at) / 1e9
            families["oldest"].add_metric([queue.queue], max(0.0, oldest))
        return list(families.values())
