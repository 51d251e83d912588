"""cairnflow-redis: wake-ups over Redis pub/sub for stores without LISTEN/NOTIFY.

::

    import cairnflow as cf
    from cairnflow_redis import RedisNotifier

    store = cf.open_store("mysql://app@db/app", notifier=RedisNotifier("redis://cache:6379/0"))
    # the store now declares cf.Cap.NOTIFY: idle workers anywhere start new work at once
"""

from ._notifier import RedisNotifier, channel_name
from ._version import __version__

__all__ = ["RedisNotifier", "__version__", "channel_name"]
