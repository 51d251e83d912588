"""The Django app (``INSTALLED_APPS = [..., "cairnflow_django"]``): checks ``CAIRNFLOW`` at once."""

from __future__ import annotations

from django.apps import AppConfig

from ._conf import config


class CairnflowConfig(AppConfig):
    """Checks the ``CAIRNFLOW`` setting when Django starts (a typo fails early, not at enqueue)."""

    name = "cairnflow_django"
    label = "cairnflow"
    verbose_name = "cairnflow"

    def ready(self) -> None:
        config()
