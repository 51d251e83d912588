"""The engine: client, dispatcher, workers and lease keeper (private; see ``cairnflow.Client``)."""

from ._async_client import AsyncClient
from ._client import Client
from ._leader import Elector
from ._reads import RunList, RunOverview
from ._schedule_api import ScheduleNotFound
from ._scheduler import ScheduleInfo, TickEvent

__all__ = [
    "AsyncClient",
    "Client",
    "Elector",
    "RunList",
    "RunOverview",
    "ScheduleInfo",
    "ScheduleNotFound",
    "TickEvent",
]
