"""Fixtures: a real NATS (``CAIRNFLOW_TEST_NATS_URL``, default 127.0.0.1:4222), MariaDB for
the kit (``CAIRNFLOW_TEST_MARIADB_URL``, through the kit's ``databases``), SQLite files.

An unreachable NATS skips these tests, or fails them when ``$CI`` is set: a CI run that
silently skips its broker proves nothing. Every session uses a subject prefix of its own,
so other suites sharing the NATS never wake these stores, nor these theirs.
"""

from __future__ import annotations

import os
import socket
import uuid
from urllib.parse import urlsplit

import pytest

pytest_plugins = ["cairnflow_conformance.plugin"]

NATS_URL = os.environ.get("CAIRNFLOW_TEST_NATS_URL", "nats://127.0.0.1:4222")


@pytest.fixture(scope="session")
def nats_url() -> str:
    """The NATS under test, checked to greet a client (its INFO line)."""
    parts = urlsplit(NATS_URL)
    try:
        with socket.create_connection((parts.hostname, parts.port or 4222), timeout=3) as sock:
            sock.settimeout(3)
            greeting = sock.recv(5)
        if greeting != b"INFO ":
            raise OSError(f"it answered {greeting!r}, not a NATS INFO")
    except OSError as error:
        why = f"NATS at {NATS_URL} is unreachable ({error})"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; $CI is set, so this fails instead of skipping")
        pytest.skip(why)
    return NATS_URL


@pytest.fixture(scope="session")
def session_prefix() -> str:
    """A subject prefix of this test session's own."""
    return f"cftest.s{uuid.uuid4().hex[:8]}"
