"""Validation of every name and identifier that comes from users.

Names end up in rows, in logs and (for identifiers) in SQL text, so each has a
strict rule, checked where it is defined, with an error that states the rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ._errors import InvalidName

__all__ = [
    "MAX_KEY_BYTES",
    "check_key",
    "check_labels",
    "check_name",
    "check_sql_identifier",
    "check_tenant",
    "tenant_scoped",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")
_NAME_RULE = (
    "1 to 128 characters of letters, digits, '_', '.', ':' and '-', "
    "starting with a letter or a digit"
)

_LABEL_KEY = re.compile(r"[a-z0-9][a-z0-9_.:/\-]{0,62}")
_LABEL_KEY_RULE = (
    "1 to 63 characters of lowercase letters, digits, '_', '.', ':', '/' and '-', "
    "starting with a letter or a digit"
)
MAX_LABEL_VALUE = 256
MAX_LABELS = 32
MAX_KEY_BYTES = 255


def check_name(kind: str, value: object) -> str:
    """Return ``value`` if it is a valid workflow, step, queue or signal name.

    ``kind`` names what is checked ("workflow", "step", ...) in the error.
    """
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InvalidName(f"invalid {kind} name {value!r}: a {kind} name is {_NAME_RULE}")
    return value


def check_tenant(value: object) -> str:
    """Return ``value`` if it is a valid tenant (``Cap.TENANT``): a name, as a queue's.

    A tenant is kept in its own column of the run, filtered on, and put in front of
    per-tenant concurrency keys and rate buckets (:func:`tenant_scoped`), so it has a
    name's rule: no separator, no control character.
    """
    return check_name("tenant", value)


TENANT_SEPARATOR = "\x1f"
"""Between a tenant and a name in a per-tenant concurrency key or rate bucket (ASCII unit
separator): a tenant never contains it (a name's rule), nor does a concurrency key
(:func:`cairnflow._concurrency.check_concurrency_key`) or a bucket name, so a per-tenant key
never equals a key shared by every tenant."""


def tenant_scoped(tenant: str | None, name: str, *, most: int, what: str) -> str:
    """``name`` as tenant ``tenant`` holds it: the name the store keeps for a per-tenant key or
    bucket (``name`` itself for a run without a tenant: the one shared by every such run).

    ``most`` is the longest stored name; a longer composed one is refused, naming both parts.
    """
    if tenant is None:
        return name
    scoped = f"{tenant}{TENANT_SEPARATOR}{name}"
    if len(scoped) > most:
        raise ValueError(
            f"{what} {name!r} of tenant {tenant!r}: the per-tenant name has {len(scoped)} "
            f"characters (tenant, one separator, name), over the limit of {most}"
        )
    return scoped


def check_key(value: object) -> str:
    """Return ``value`` if it is a valid idempotency key (1 to 255 UTF-8 bytes)."""
    if not isinstance(value, str) or not value:
        raise InvalidName(f"invalid idempotency key {value!r}: a key is a non-empty string")
    size = len(value.encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise InvalidName(
            f"invalid idempotency key: {size} bytes, over the limit of {MAX_KEY_BYTES} bytes"
        )
    if "\x00" in value:
        raise InvalidName("invalid idempotency key: it contains a NUL character")
    return value


def check_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    """Return a plain dict of ``labels`` once every key and value is valid."""
    return _check_strings("label", labels, MAX_LABELS, _LABEL_KEY, _LABEL_KEY_RULE, MAX_LABEL_VALUE)


MAX_HEADERS = 16
MAX_HEADER_VALUE = 1024
_HEADER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_HEADER_KEY_RULE = "1-64 letters, digits, '_', '.', '-', starting with a letter or digit"


def check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """Return a plain dict of run ``headers`` once every key and value is valid.

    Headers carry context from the enqueuing code to every step (a trace
    context, a tenant): a few short strings, kept with the run as one JSON object.
    """
    return _check_strings(
        "header", headers, MAX_HEADERS, _HEADER_KEY, _HEADER_KEY_RULE, MAX_HEADER_VALUE
    )


def _check_strings(
    noun: str,
    given: Mapping[str, str] | None,
    most: int,
    key_pattern: re.Pattern[str],
    key_rule: str,
    longest: int,
) -> dict[str, str]:
    """The one check of a run's string maps (labels, headers): a plain dict, or InvalidName."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise InvalidName(f"{noun}s must be a mapping of str to str, got {type(given).__name__}")
    if len(given) > most:
        raise InvalidName(f"a run has at most {most} {noun}s, got {len(given)}")
    checked: dict[str, str] = {}
    for key, value in given.items():
        if not isinstance(key, str) or not key_pattern.fullmatch(key):
            raise InvalidName(f"invalid {noun} key {key!r}: a {noun} key is {key_rule}")
        if not isinstance(value, str):
            raise InvalidName(
                f"invalid value for {noun} {key!r}: a {noun} value is a str, "
                f"got {type(value).__name__}"
            )
        if len(value) > longest or "\x00" in value:
            raise InvalidName(
                f"invalid value for {noun} {key!r}: at most {longest} characters, no NUL"
            )
        checked[key] = value
    return checked


def check_sql_identifier(kind: str, value: object, pattern: str, max_len: int) -> str:
    """Return ``value`` if it matches ``pattern`` (a full match) and ``max_len``.

    Used for table prefixes and schema names, which are written into SQL text
    (quoted as well, but never trusted).
    """
    if not isinstance(value, str) or len(value) > max_len or not re.fullmatch(pattern, value):
        raise InvalidName(
            f"invalid {kind} {value!r}: it must match {pattern} and be at most {max_len} characters"
        )
    return value
