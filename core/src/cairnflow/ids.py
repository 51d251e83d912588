"""Identifiers of runs, steps and schedules.

Stores take an ``id_generator(kind)``; the default makes the kind, an
underscore and 32 hex characters (``run_3f2a...``). A custom generator can make
time-sortable ids (UUIDv7, ULID) or ids that line up with the application's.
Every id is checked (1 to 64 bytes of printable ASCII) before any row is
written, so a broken generator refuses the operation instead of storing junk.
Lease tokens are not ids: they are always 128 random bits.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Literal

from ._errors import InvalidName

__all__ = ["IdGenerator", "IdKind", "default_id_generator", "new_id", "new_token"]

IdKind = Literal["run", "step", "sched", "sch"]
"""``run``: a run; ``step``: a step row; ``sched``: a delayed start; ``sch``: a schedule."""

IdGenerator = Callable[[IdKind], str]

_ID = re.compile(r"[\x21-\x7e]{1,64}")


def default_id_generator(kind: IdKind) -> str:
    """Return ``kind``, an underscore and 32 random hex characters."""
    return f"{kind}_{secrets.token_hex(16)}"


def new_id(generator: IdGenerator, kind: IdKind) -> str:
    """Call ``generator`` for ``kind`` and check what it returned."""
    value = generator(kind)
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidName(
            f"the id generator returned {value!r} for kind {kind!r}: an id is 1 to 64 "
            f"printable ASCII characters without spaces"
        )
    return value


def new_token() -> str:
    """A fresh lease token: 128 random bits as 32 hex characters."""
    return secrets.token_hex(16)
