"""``mysql://user:password@host:port/database?option=value``, parsed and redacted.

``mariadb://`` is the same URL. User and password are percent-decoded
(``p%40ss`` is ``p@ss``); IPv6 hosts go in brackets (``mysql://[::1]/db``); a
Unix socket is ``mysql://user@localhost/db?unix_socket=/run/mysqld/mysqld.sock``.
The query string carries connection settings and store options, as strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from cairnflow import CairnError

__all__ = ["SCHEMES", "MySQLURL", "parse_url"]

SCHEMES = ("mysql", "mariadb")
DEFAULT_PORT = 3306


@dataclass(frozen=True, slots=True)
class MySQLURL:
    """The parts of a ``mysql://`` URL."""

    scheme: str
    host: str
    port: int
    user: str | None
    password: str | None = field(repr=False)
    database: str
    options: dict[str, str]
    """The query string, one value per name."""

    def redacted(self) -> str:
        """The URL with the password masked and without its query string."""
        auth = ""
        if self.user is not None:
            auth = quote(self.user, safe="")
            if self.password is not None:
                auth += ":***"
            auth += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{auth}{host}:{self.port}/{self.database}"


def parse_url(url: str) -> MySQLURL:
    """Split a ``mysql://`` or ``mariadb://`` URL; raise :class:`cairnflow.CairnError` if bad."""
    if not isinstance(url, str):
        raise CairnError(f"a MySQL URL is a string, got {type(url).__name__}")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        raise CairnError(
            f"not a MySQL URL: {_safe(url)!r}; expected mysql://user:password@host:port/database "
            f"(or mariadb://...)"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise CairnError(f"invalid MySQL URL {_safe(url)!r}: {error}") from None
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise CairnError(
            f"the MySQL URL {_safe(url)!r} names no database: the tables live in the database "
            f"the URL names, e.g. mysql://user@host:3306/app"
        )
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if name in options:
            raise CairnError(f"option {name!r} appears twice in the MySQL URL")
        options[name] = value
    if parts.fragment:
        raise CairnError(f"a MySQL URL has no #fragment: {_safe(url)!r}")
    return MySQLURL(
        scheme=scheme,
        host=parts.hostname or "localhost",
        port=port or DEFAULT_PORT,
        user=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
        database=database,
        options=options,
    )


def _safe(url: str) -> str:
    """``url`` with any password replaced, for error messages."""
    head, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at == -1:
        return url
    auth = rest[:at]
    user = auth.split(":", 1)[0]
    masked = f"{user}:***" if ":" in auth else user
    return f"{head}://{masked}@{rest[at + 1 :]}"
