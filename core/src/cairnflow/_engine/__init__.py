"""The engine: client, dispatcher, workers and lease keeper (private; see ``cairnflow.Client``)."""

from ._client import Client, RunList, RunOverview

__all__ = ["Client", "RunList", "RunOverview"]
