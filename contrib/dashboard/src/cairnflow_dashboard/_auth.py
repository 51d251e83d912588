"""Who may look and who may act: credentials from the environment, checked on every request.

The dashboard refuses to start without credentials (:func:`credentials_from_env`):
a token (``CAIRNFLOW_DASHBOARD_TOKEN``), or a user and a password
(``CAIRNFLOW_DASHBOARD_USER`` / ``CAIRNFLOW_DASHBOARD_PASSWORD``), or both.

Two ways in, both read by one Starlette ``AuthenticationBackend``:

* a browser signs in on ``/login`` (the token as the password, or the user and
  password) and carries a signed session cookie (Starlette's ``SessionMiddleware``);
  its POSTs carry a CSRF token that ``asgi-csrf`` checks;
* a script sends ``Authorization: Bearer <token>``. No browser adds that header on
  its own, so a forged cross-site request cannot carry it, and ``asgi-csrf``
  lets such requests through without a CSRF token (its documented rule).

HTTP Basic is deliberately not accepted: a browser resends Basic credentials on
a cross-site POST without any cookie, which is the one request ``asgi-csrf``
does not check. Secrets are compared in constant time.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
    SimpleUser,
)
from starlette.requests import HTTPConnection

__all__ = [
    "ENV_PASSWORD",
    "ENV_TOKEN",
    "ENV_USER",
    "Credentials",
    "DashboardAuth",
    "MissingCredentials",
    "credentials_from_env",
]

ENV_TOKEN = "CAIRNFLOW_DASHBOARD_TOKEN"  # noqa: S105 - a variable name, not a secret
ENV_USER = "CAIRNFLOW_DASHBOARD_USER"
ENV_PASSWORD = "CAIRNFLOW_DASHBOARD_PASSWORD"  # noqa: S105 - a variable name

MIN_SECRET = 8
"""The shortest token or password accepted: a shorter one is a typo or a placeholder."""

SESSION_USER = "cairnflow_dashboard_user"
"""The session key holding the signed-in user's name."""


class MissingCredentials(RuntimeError):
    """No usable credentials: the dashboard does not start open to anyone."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """What the dashboard accepts: a token, a user and password, or both."""

    token: str | None = None
    user: str | None = None
    password: str | None = None

    def __post_init__(self) -> None:
        if self.token is None and (self.user is None or self.password is None):
            raise MissingCredentials(
                f"the dashboard needs credentials: set {ENV_TOKEN}, or {ENV_USER} and "
                f"{ENV_PASSWORD} (it never starts open to anyone)"
            )
        if (self.user is None) != (self.password is None):
            raise MissingCredentials(f"set both {ENV_USER} and {ENV_PASSWORD}, or neither")
        for name, secret in (("token", self.token), ("password", self.password)):
            if secret is not None and len(secret) < MIN_SECRET:
                raise MissingCredentials(f"the {name} must be at least {MIN_SECRET} characters")

    def check_token(self, token: str) -> bool:
        """True when ``token`` is the configured token."""
        return self.token is not None and _same(token, self.token)

    def check_login(self, user: str, password: str) -> str | None:
        """The signed-in user's name when the form's ``user``/``password`` are accepted.

        The user and password configured; or the token as the password, under any name.
        """
        if (
            self.user is not None
            and self.password is not None
            and _same(user, self.user)
            and _same(password, self.password)
        ):
            return self.user
        if self.check_token(password):
            return user or "token"
        return None


def credentials_from_env(environ: Mapping[str, str] | None = None) -> Credentials:
    """The credentials in the environment; :class:`MissingCredentials` when there are none."""
    env = os.environ if environ is None else environ
    return Credentials(
        token=env.get(ENV_TOKEN) or None,
        user=env.get(ENV_USER) or None,
        password=env.get(ENV_PASSWORD) or None,
    )


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class DashboardAuth(AuthenticationBackend):
    """A session signed in on ``/login`` or a bearer token; nothing else.

    Scopes: ``read`` for everyone signed in, ``act`` too unless the dashboard is
    read-only. A request with neither credential is refused by the middleware's
    ``on_error`` (401), except the public routes (the login form, the stylesheet).
    """

    def __init__(self, credentials: Credentials, *, read_only: bool, public: frozenset[str]):
        self._credentials = credentials
        self._scopes = ["authenticated", "read"] + ([] if read_only else ["act"])
        self._public = public

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        header = conn.headers.get("authorization")
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer" and self._credentials.check_token(value.strip()):
                return AuthCredentials(self._scopes), SimpleUser("token")
            raise AuthenticationError("bad credentials: send Authorization: Bearer <token>")
        user = conn.session.get(SESSION_USER) if "session" in conn.scope else None
        if isinstance(user, str) and user:
            return AuthCredentials(self._scopes), SimpleUser(user)
        if _is_public(conn.url.path, self._public):
            return None
        raise AuthenticationError("sign in first")


def _is_public(path: str, public: frozenset[str]) -> bool:
    return any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in public)
