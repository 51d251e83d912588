"""The brokers W4 measures wake-ups through, on engines without a notification of their own.

MariaDB and several processes on one SQLite file find new work at their next poll
unless a store is given a notifier over a broker (``contrib/redis``, ``contrib/nats``).
Each broker here is measured where its distribution is installed; where it is not, its
row says so and the others still run. The broker's URL comes from
``CAIRNFLOW_BENCH_<NAME>_URL`` (default: the local server). Each run publishes under a
prefix of its own, so a benchmark never wakes (nor is woken by) anything else.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from dataclasses import dataclass
from typing import Any

ENGINES = ("sqlite", "mariadb")
"""The engines without wake-ups across processes of their own (Postgres has LISTEN/NOTIFY)."""


@dataclass(frozen=True)
class Broker:
    name: str
    package: str
    notifier: str
    distribution: str
    default_url: str

    def prefix(self) -> str:
        tag = uuid.uuid4().hex[:8]
        # NATS prefixes are subject tokens; Redis's are any text.
        return f"bench.{tag}" if self.name == "nats" else f"bench-{tag}:"

    def spec(self) -> list[Any] | str:
        """The notifier spec (``cairnflow.testing.build_notifier``), or why it cannot run."""
        if importlib.util.find_spec(self.package) is None:
            return f"{self.distribution} not installed"
        url = os.environ.get(f"CAIRNFLOW_BENCH_{self.name.upper()}_URL", self.default_url)
        return [f"{self.package}:{self.notifier}", {"url": url, "prefix": self.prefix()}]


BROKERS = (
    Broker(
        "redis", "cairnflow_redis", "RedisNotifier", "cairnflow-redis", "redis://127.0.0.1:6379/0"
    ),
    Broker("nats", "cairnflow_nats", "NatsNotifier", "cairnflow-nats", "nats://127.0.0.1:4222"),
)
