"""Codecs: how payloads, step outputs and signal payloads become bytes.

Stores only ever see bytes. The default is :class:`JSONCodec`; cairnflow never
unpickles anything unless you hand it a codec that does.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

__all__ = ["Codec", "JSONCodec"]


@runtime_checkable
class Codec(Protocol):
    """Turns Python values into bytes and back.

    Every client of one store must use the same codec, since one client decodes
    what another encoded. ``encode`` raises ``TypeError`` or ``ValueError`` for
    a value it cannot represent.
    """

    name: str

    def encode(self, value: Any) -> bytes:
        """Return the bytes for ``value``."""
        ...

    def decode(self, data: bytes) -> Any:
        """Return the value ``data`` was encoded from."""
        ...


class JSONCodec:
    """Compact UTF-8 JSON; refuses NaN and infinities, which JSON cannot carry."""

    name = "json"

    def encode(self, value: Any) -> bytes:
        """Encode ``value`` as compact JSON (``TypeError`` for what JSON cannot hold)."""
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()

    def decode(self, data: bytes) -> Any:
        """Decode JSON ``data``."""
        return json.loads(data)
