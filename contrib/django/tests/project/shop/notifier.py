"""The application client's notifier (``CAIRNFLOW['CLIENT']``): the in-process bus,
counting what is sent through it. The tests assert on the count: a wake-up is sent after
the commit, never before it, and never after a rollback."""

from __future__ import annotations

from cairnflow.testing import CountingNotifier

NOTIFIER = CountingNotifier()
