"""The engine: client, dispatcher, workers and lease keeper (private; see ``cairnflow.Client``)."""

from ._client import Client
from ._reads import RunList, RunOverview

__all__ = ["Client", "RunList", "RunOverview"]
