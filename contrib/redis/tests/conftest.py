"""Fixtures: a real Redis (``CAIRNFLOW_TEST_REDIS_URL``, default 127.0.0.1:6379), MariaDB for
the kit (``CAIRNFLOW_TEST_MARIADB_URL``, through the kit's ``databases``), SQLite files.

An unreachable Redis skips these tests, or fails them when ``$CI`` is set: a CI run that
silently skips its broker proves nothing. Every session uses a prefix of its own, so
other suites sharing the Redis never wake these stores, nor these theirs.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

pytest_plugins = ["cairnflow_conformance.plugin"]

REDIS_URL = os.environ.get("CAIRNFLOW_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The Redis under test, checked to answer."""
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError as error:
        why = f"Redis at {REDIS_URL} is unreachable ({error})"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; $CI is set, so this fails instead of skipping")
        pytest.skip(why)
    return REDIS_URL


@pytest.fixture(scope="session")
def session_prefix() -> str:
    """A channel prefix of this test session's own."""
    return f"cftest-{uuid.uuid4().hex[:8]}:"


@pytest.fixture
def admin(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client on the test side (to look at and kill the notifier's connections)."""
    client = redis.Redis.from_url(redis_url, socket_timeout=10)
    try:
        yield client
    finally:
        client.close()
