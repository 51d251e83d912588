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

    # One encoder and one decoder for every call (json.dumps with options builds an
    # encoder per call); both are safe to share between threads.
    _encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    _decoder = json.JSONDecoder()

    def encode(self, value: Any) -> bytes:
        """Encode ``value`` as compact JSON (``TypeError`` for what JSON cannot hold)."""
        if value is None:  # what most steps return, and most payloads: skip the encoder
            return b"null"
        return self._encoder.encode(value).encode()

    def decode(self, data: bytes) -> Any:
        """Decode JSON ``data``, exactly as ``json.loads`` would."""
        if data == b"null":
            return None
        if isinstance(data, bytes) and b"\x00" not in data[:4] and data[:1] not in _BOMS:
            # Plain UTF-8 (what encode makes): skip json.loads's encoding detection.
            return self._decoder.decode(data.decode("utf-8"))
        return json.loads(data)  # a BOM, UTF-16 or UTF-32: json.loads detects which


_BOMS = (b"\xef", b"\xfe", b"\xff")
"""First bytes of the byte order marks ``json.loads`` recognises."""
