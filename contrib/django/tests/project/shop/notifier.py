"""The application's notifier: the in-process bus, counting what is sent through it.

The tests assert on the count: a wake-up is sent after the commit, never before it, and
never after a rollback.
"""

from __future__ import annotations

from collections.abc import Callable

from cairnflow.notify import LocalNotifier


class CountingNotifier:
    def __init__(self) -> None:
        self.bus = LocalNotifier()
        self.sent = 0

    def notify(self, channel: str) -> None:
        self.sent += 1
        self.bus.notify(channel)

    def listen(self, channel: str, wake: Callable[[], None]) -> Callable[[], None]:
        return self.bus.listen(channel, wake)


NOTIFIER = CountingNotifier()
