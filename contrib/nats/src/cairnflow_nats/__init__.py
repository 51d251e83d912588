"""cairnflow-nats: wake-ups over core NATS subjects for stores without LISTEN/NOTIFY.

::

    import cairnflow as cf
    from cairnflow_nats import NatsNotifier

    store = cf.open_store("mysql://app@db/app", notifier=NatsNotifier("nats://nats:4222"))
    # the store now declares cf.Cap.NOTIFY: idle workers anywhere start new work at once
"""

from ._notifier import NatsNotifier, subject_name
from ._version import __version__

__all__ = ["NatsNotifier", "__version__", "subject_name"]
