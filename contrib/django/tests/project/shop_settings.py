"""The test project's settings: SQLite as ``default``, Postgres as ``postgres``.

``conftest.py`` sets the environment first: the SQLite file, the Postgres server, and a
table prefix of the test process's own (the shop's table and the store's), so test
processes and other suites share the servers without meeting.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from shop.notifier import NOTIFIER

PREFIX = os.environ["CAIRNFLOW_DJANGO_PREFIX"]

SECRET_KEY = "cairnflow-django-tests"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "cairnflow_django", "shop"]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["CAIRNFLOW_DJANGO_SQLITE"],
    }
}
_postgres = os.environ.get("CAIRNFLOW_TEST_POSTGRES_URL")
if _postgres:
    _url = urlsplit(_postgres)
    DATABASES["postgres"] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": unquote(_url.username or ""),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
    }

CAIRNFLOW = {
    "APP": "shop.workflows:workflows",
    "OPTIONS": {"table_prefix": PREFIX},
    "CLIENT": {"notifier": NOTIFIER},
}
