"""cairnflow: durable workflows whose whole state is rows in a database you already run.

::

    import cairnflow as cf

    orders = cf.Workflow("process-order")

    @orders.step(retry=cf.RetryPolicy(max_attempts=5))
    def charge(ctx: cf.StepContext, order: dict) -> dict: ...

    store = cf.open_store("sqlite:///orders.db")
    store.migrate()
    with cf.Client(store, workers=8) as client:
        client.register(orders)
        ref = client.enqueue("process-order", {"id": "A-1"})
        print(client.wait(ref).status)
"""

from . import clock, middleware
from ._caps import Cap
from ._engine import (
    ArchivedRuns,
    AsyncClient,
    Client,
    Elector,
    RunList,
    RunOverview,
    ScheduleInfo,
    ScheduleNotFound,
    TickEvent,
)
from ._errors import (
    Abandoned,
    CairnError,
    Cancelled,
    DriverError,
    DuplicateRun,
    InvalidName,
    InvalidQuery,
    LeaseLost,
    OutcomeRefused,
    OutcomeUnknown,
    PayloadTooLarge,
    Permanent,
    RunFailed,
    RunNotFound,
    RunTimeout,
    SchemaNotReady,
    SchemaTooNew,
    Snooze,
    StepNotFound,
    StepTimeout,
    StoreOpenError,
    Unavailable,
    UnknownWorkflow,
    Unsupported,
    ValueRefused,
    WaitTimeout,
)
from ._fleet import HandedBack, Recycle, StopCause, StopReport
from ._models import (
    ErrorInfo,
    Job,
    LifecycleEvent,
    LifecycleSubscription,
    RunError,
    RunFailure,
    RunInfo,
    RunRef,
    Status,
    StepEvent,
    StepInfo,
    StepKind,
    StepStatus,
)
from ._queues import QueueConfig
from ._rates import Rate, RateTake
from ._version import SPI_VERSION, __version__
from .codec import Codec, JSONCodec
from .context import StepContext
from .drivers import open_store
from .notify import LocalNotifier, Notifier
from .retry import NO_RETRY, Backoff, RetryPolicy
from .schedule import Misfire, Overlap, Schedule, Window
from .state import Journal, Locks, RateLimiter
from .store import MemoryStore, SignalResult, Store
from .workflow import (
    DEFAULT_QUEUE,
    Branch,
    Compensation,
    Concurrency,
    Sleep,
    Step,
    Wait,
    Workflow,
)

__all__ = [
    "DEFAULT_QUEUE",
    "NO_RETRY",
    "SPI_VERSION",
    "Abandoned",
    "ArchivedRuns",
    "AsyncClient",
    "Backoff",
    "Branch",
    "CairnError",
    "Cancelled",
    "Cap",
    "Client",
    "Codec",
    "Compensation",
    "Concurrency",
    "DriverError",
    "DuplicateRun",
    "Elector",
    "ErrorInfo",
    "HandedBack",
    "InvalidName",
    "InvalidQuery",
    "JSONCodec",
    "Job",
    "Journal",
    "LeaseLost",
    "LifecycleEvent",
    "LifecycleSubscription",
    "LocalNotifier",
    "Locks",
    "MemoryStore",
    "Misfire",
    "Notifier",
    "OutcomeRefused",
    "OutcomeUnknown",
    "Overlap",
    "PayloadTooLarge",
    "Permanent",
    "QueueConfig",
    "Rate",
    "RateLimiter",
    "RateTake",
    "Recycle",
    "RetryPolicy",
    "RunError",
    "RunFailed",
    "RunFailure",
    "RunInfo",
    "RunList",
    "RunNotFound",
    "RunOverview",
    "RunRef",
    "RunTimeout",
    "Schedule",
    "ScheduleInfo",
    "ScheduleNotFound",
    "SchemaNotReady",
    "SchemaTooNew",
    "SignalResult",
    "Sleep",
    "Snooze",
    "Status",
    "Step",
    "StepContext",
    "StepEvent",
    "StepInfo",
    "StepKind",
    "StepNotFound",
    "StepStatus",
    "StepTimeout",
    "StopCause",
    "StopReport",
    "Store",
    "StoreOpenError",
    "TickEvent",
    "Unavailable",
    "UnknownWorkflow",
    "Unsupported",
    "ValueRefused",
    "Wait",
    "WaitTimeout",
    "Window",
    "Workflow",
    "__version__",
    "clock",
    "middleware",
    "open_store",
]
