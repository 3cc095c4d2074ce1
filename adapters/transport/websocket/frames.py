"""WebSocket data frames built beside wsproto: masking, masking keys, one
whole data frame.

wsproto handles a frame in ~10-15 us of Python (generators, events, copies),
which caps a WebSocket transport far below what the RSocket core does over
TCP. :func:`encode_data_frame` builds the frame wsproto would (FIN set, no
extensions), masked with a fresh random key on the client side (RFC 6455,
5.3: keys from a strong source, here ``os.urandom``, via
:class:`KeySource`). Batches of messages are framed by :mod:`.runs`;
received frames are split by :mod:`.splitter`.
"""

from __future__ import annotations

import os
from struct import Struct

__all__ = ["KeySource", "encode_data_frame", "mask"]

_U16 = Struct(">H")
_U64 = Struct(">Q")


def mask(key: bytes, payload: bytes | bytearray) -> bytes:
    """``payload`` XOR the 4-byte ``key`` repeated (masking and unmasking)."""
    n = len(payload)
    if not n:
        return b""
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(
        n, "little"
    )


#: Random bytes a KeySource fetches at first, and at most (a connection that
#: sends big batches fetches more at a time: each ``os.urandom`` call lets
#: other threads take the GIL, which a busy sender pays for in latency).
_POOL = 4096
_MAX_POOL = 64 * 1024


class KeySource:
    """Masking keys from ``os.urandom``, fetched 1024 at a time, up to 16384
    at a time for a connection that takes many at once."""

    __slots__ = ("_keys", "_off", "_pool")

    def __init__(self) -> None:
        self._keys = b""
        self._off = 0
        self._pool = _POOL

    def next(self) -> bytes:
        off = self._off
        if off >= len(self._keys):
            self._keys = os.urandom(self._pool)
            off = 0
        self._off = off + 4
        return self._keys[off : off + 4]

    def take(self, count: int) -> bytes:
        """``count`` keys, 4 bytes each, as one ``bytes``."""
        size = 4 * count
        off = self._off
        if off + size > len(self._keys):
            pool = self._pool
            if 4 * size > pool < _MAX_POOL:  # big takes: fetch more per call
                pool = self._pool = min(_MAX_POOL, 4 * size)
            if size > pool:
                return os.urandom(size)
            self._keys = os.urandom(pool)
            off = 0
        self._off = off + size
        return self._keys[off : off + size]


def encode_data_frame(opcode: int, payload: bytes | bytearray, key: bytes | None) -> bytes:
    """One unfragmented data frame (``opcode`` 1 text, 2 binary); masked with
    ``key`` (a client) or not (``None``, a server)."""
    n = len(payload)
    first = 0x80 | opcode
    bit = 0x80 if key is not None else 0
    if n < 126:
        header = bytes((first, bit | n))
    elif n < 0x10000:
        header = bytes((first, bit | 126)) + _U16.pack(n)
    else:
        header = bytes((first, bit | 127)) + _U64.pack(n)
    if key is None:
        return header + payload
    return header + key + mask(key, payload)
