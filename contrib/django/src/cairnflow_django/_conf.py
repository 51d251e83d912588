"""The ``CAIRNFLOW`` setting, read and checked in one place.

::

    CAIRNFLOW = {
        "URL": "postgresql://app@db/shop",   # the store (default: from DATABASES, see below)
        "APP": "shop.workflows:workflows",   # the workflows, as `cairn worker --app` takes them
        "OPTIONS": {"table_prefix": "cf_"},  # the driver's options (open_store(url, **OPTIONS))
        "CLIENT": {"poll_interval": 1.0},    # the application's Client(...) options
    }

The runs are enqueued on a Django database connection, inside its transaction, so the
store must live in that same database. Without ``URL`` (and for any database alias but the
default one) the store's URL is built from ``DATABASES``: ``sqlite:///NAME`` for SQLite,
``postgresql://USER:PASSWORD@HOST:PORT/NAME`` for Postgres (psycopg 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS

__all__ = ["Config", "config"]

_KEYS = frozenset({"URL", "APP", "OPTIONS", "CLIENT"})


@dataclass(frozen=True)
class Config:
    """The checked ``CAIRNFLOW`` setting."""

    url: str | None
    app: str | None
    options: Mapping[str, Any] = field(default_factory=dict)
    client: Mapping[str, Any] = field(default_factory=dict)

    def store_url(self, using: str = DEFAULT_DB_ALIAS) -> str:
        """The URL of the store in the database ``using``."""
        if using == DEFAULT_DB_ALIAS and self.url is not None:
            return self.url
        return _url_of(using)


def config() -> Config:
    """``settings.CAIRNFLOW``, checked: a clear ``ImproperlyConfigured`` naming what is wrong."""
    raw = getattr(settings, "CAIRNFLOW", {})
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(f"CAIRNFLOW must be a dict, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ImproperlyConfigured(
            f"CAIRNFLOW has unknown key(s) {', '.join(map(repr, unknown))}; "
            f"the keys are {', '.join(sorted(_KEYS))}"
        )
    url, app = raw.get("URL"), raw.get("APP")
    if url is not None and (not isinstance(url, str) or "://" not in url):
        raise ImproperlyConfigured(
            f"CAIRNFLOW['URL'] must be a store URL (scheme://...), got {url!r}"
        )
    if app is not None and (not isinstance(app, str) or ":" not in app):
        raise ImproperlyConfigured(
            f"CAIRNFLOW['APP'] must be 'module:attribute' naming the workflows, got {app!r}"
        )
    options, client = raw.get("OPTIONS", {}), raw.get("CLIENT", {})
    for name, value in (("OPTIONS", options), ("CLIENT", client)):
        if not isinstance(value, Mapping):
            raise ImproperlyConfigured(f"CAIRNFLOW[{name!r}] must be a dict, got {value!r}")
    return Config(url=url, app=app, options=dict(options), client=dict(client))


def _url_of(using: str) -> str:
    """The store URL of Django's database ``using``, from ``DATABASES``."""
    databases: Mapping[str, Mapping[str, Any]] = settings.DATABASES
    if using not in databases:
        raise ImproperlyConfigured(f"no database {using!r} in DATABASES")
    db = databases[using]
    engine = str(db.get("ENGINE", ""))
    name = str(db.get("NAME") or "")
    if engine.endswith("sqlite3"):
        if not name or name == ":memory:" or name.startswith("file:"):
            raise ImproperlyConfigured(
                f"database {using!r} is an in-memory SQLite database: cairnflow needs a file "
                f"(or set CAIRNFLOW['URL'])"
            )
        return f"sqlite:///{name}"
    if engine.endswith("postgresql"):
        user, password = str(db.get("USER") or ""), str(db.get("PASSWORD") or "")
        host, port = str(db.get("HOST") or ""), str(db.get("PORT") or "")
        auth = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "")
        netloc = (f"{auth}@" if auth else "") + host + (f":{port}" if port else "")
        return f"postgresql://{netloc}/{quote(name, safe='')}"
    raise ImproperlyConfigured(
        f"cannot build a store URL from database {using!r} ({engine or 'no ENGINE'}): "
        f"set CAIRNFLOW['URL'] (SQLite and Postgres are derived)"
    )
