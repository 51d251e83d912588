"""Codecs: how payloads, step outputs and signal payloads become bytes.

Stores only ever see bytes. The default is :class:`JSONCodec`; cairnflow never
unpickles anything unless you hand it a codec that does.
"""

from __future__ import annotations

import json
import threading
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, Protocol, runtime_checkable

try:
    from _json import make_encoder
except ImportError:  # no C accelerator (PyPy): JSONEncoder.encode alone
    make_encoder = None  # type: ignore[assignment,misc]

from ._errors import PayloadTooLarge

__all__ = ["Codec", "JSONCodec", "encode_within"]


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
        kind = type(value)
        if kind is int:  # as json writes an int (not a bool, an IntEnum): 0.2 us, not 1.7
            return int.__repr__(value).encode()
        if kind is str or make_encoder is None:
            return self._encoder.encode(value).encode()
        return _c_encode(value)

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


_ENCODERS = threading.local()


def _c_encode(value: Any) -> bytes:
    """``value`` as :attr:`JSONCodec._encoder` encodes it, by a C encoder made once per thread.

    ``JSONEncoder.encode`` makes a C encoder at every call, with a new dict of the
    containers being encoded (its circular-reference check): 1.2 us of the 3.0 an
    encode of a small dict took, 1.2 of the 2.2 of a list of three ints (``timeit``,
    2026-12-04, #20). That dict is empty again after every encode that succeeds, so the
    encoder is kept, one per thread (each encode fills and empties its own); one that
    raised may have left entries in it, and is dropped. The encoder is made as
    ``JSONEncoder.iterencode`` makes it from :attr:`JSONCodec._encoder`'s options.
    """
    encoder = getattr(_ENCODERS, "encoder", None)
    if encoder is None:
        base = JSONCodec._encoder
        encoder = _ENCODERS.encoder = make_encoder(
            {},
            base.default,
            encode_basestring_ascii if base.ensure_ascii else encode_basestring,
            None,  # no indentation: iterencode uses the C encoder only then
            base.key_separator,
            base.item_separator,
            base.sort_keys,
            base.skipkeys,
            base.allow_nan,
        )
    try:
        return "".join(encoder(value, 0)).encode()
    except BaseException:
        del _ENCODERS.encoder
        raise


def encode_within(codec: Codec, value: object, what: str, limit: int | None) -> bytes:
    """``value`` encoded by ``codec``, within ``limit`` bytes (None: no limit).

    The one check of every value a client writes (payloads, signal payloads,
    step outputs, progress, memoised results): ``TypeError`` naming ``what``
    when the codec cannot encode it (a value nested too deep included), and
    :class:`~cairnflow.PayloadTooLarge` when it is over ``limit``.
    """
    try:
        data = codec.encode(value)
    except PayloadTooLarge:
        raise
    except (TypeError, ValueError, RecursionError) as error:
        reason = "it is nested too deep" if isinstance(error, RecursionError) else str(error)
        message = f"{what} cannot be encoded by the {codec.name} codec: {reason}"
        raise TypeError(message) from error
    if limit is not None and len(data) > limit:
        raise PayloadTooLarge(len(data), limit, what)
    return data
