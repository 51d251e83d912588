"""cairnflow-dashboard: a web dashboard over any cairnflow store.

``cairn dashboard URL`` starts it (:mod:`._cli`); :func:`create_app` builds the
Starlette application for mounting or testing. See the distribution's README.
"""

from ._app import PUBLIC_PATHS, DashboardSettings, create_app, route_paths
from ._auth import Credentials, MissingCredentials, credentials_from_env

__all__ = [
    "PUBLIC_PATHS",
    "Credentials",
    "DashboardSettings",
    "MissingCredentials",
    "create_app",
    "credentials_from_env",
    "route_paths",
]

__version__ = "0.1.0"
