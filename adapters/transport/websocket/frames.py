"""WebSocket data frames built beside wsproto: masking, masking keys, one
whole data frame.

wsproto handles a frame in ~10-15 us of Python (generators, events, copies),
which caps a WebSocket transport far below what the RSocket core does over
TCP. :func:`encode_data_frame` builds the frame wsproto would (FIN set, no
extensions), masked with a fresh random key on the client side (RFC 6455,
5.3: keys from a strong source, here ``os.urandom``, via
:class:`KeySource`). Batches of messages are framed by :mod:`.runs`;
received frames are split by :mod:`.splitter`.

Masking runs in C when the optional extension ``_speedups`` was built at
install (a C compiler and the Python headers were there): Python has no XOR
of byte strings, and its integer conversions alone cost a 28-byte frame
~90 ns at each end (``benchmarks/bench_websocket.py --fnf-ends``;
docs/performance.md, "Masking in C"). :data:`C_MASKING` is what runs;
``None`` runs the pure-Python paths, which give the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from struct import Struct
from typing import Protocol

from typing_extensions import Buffer

__all__ = [
    "C_EXTENSION",
    "C_MASKING",
    "TRANSLATE_FROM",
    "CMasking",
    "KeySource",
    "binary_head",
    "encode_data_frame",
    "mask",
]


class CMasking(Protocol):
    """The functions of the C extension (``_speedups.c``)."""

    def mask(self, key: Buffer, payload: Buffer, /) -> bytes: ...
    def mask_run(self, data: Buffer, off: int, count: int, n: int, keys: Buffer, /) -> bytes: ...
    def unmask_run(self, data: Buffer, off: int, count: int, n: int, head: Buffer, /) -> bytes: ...


#: The C extension, if it was built at install (else ``None``).
C_EXTENSION: CMasking | None
try:
    from . import _speedups as C_EXTENSION
except ImportError:  # built without a C compiler: the pure-Python paths
    C_EXTENSION = None

#: The masking in use: :data:`C_EXTENSION`, or ``None`` for the pure-Python
#: paths (set it to run those; both give the same bytes).
C_MASKING: CMasking | None = C_EXTENSION

_U16 = Struct(">H")
_U64 = Struct(">Q")


#: Payloads from this long are masked a byte column at a time by
#: ``bytes.translate`` (a table per key byte: XOR by that byte), shorter ones
#: as integers: CPU per message 17 % less at 4 KiB, 26 % at 64 KiB, half at
#: 1 MiB, and more below 2 KiB (``benchmarks/bench_websocket.py --mask``).
TRANSLATE_FROM = 2048


@lru_cache(maxsize=1)
def _xor_tables() -> tuple[bytes, ...]:
    """The 256 translation tables ``i -> i ^ k`` (64 KiB, made on first use)."""
    return tuple(bytes(i ^ k for i in range(256)) for k in range(256))


def mask(key: bytes, payload: bytes | bytearray) -> bytes:
    """``payload`` XOR the 4-byte ``key`` repeated (masking and unmasking)."""
    if C_MASKING is not None:
        return C_MASKING.mask(key, payload)
    n = len(payload)
    if not n:
        return b""
    if n >= TRANSLATE_FROM:
        tables = _xor_tables()
        out = bytearray(payload)
        for i in range(4):
            out[i::4] = payload[i::4].translate(tables[key[i]])
        return bytes(out)
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
    """Masking keys from a strong source of entropy (``source``, by default
    ``os.urandom``; RFC 6455, 5.3), fetched 1024 at a time, up to 16384 at
    a time for a connection that takes many at once. Every random byte is
    part of at most one key."""

    __slots__ = ("_fields", "_keys", "_off", "_phase", "_phases", "_pool", "_source", "_window")

    def __init__(self, source: Callable[[int], bytes] = os.urandom) -> None:
        self._source = source
        self._keys = b""
        self._off = 0
        self._pool = _POOL
        # spread(): the random window of the key fields last asked for.
        self._fields = 0
        self._window = 0
        self._phase = 0
        self._phases = 0

    def next(self) -> bytes:
        off = self._off
        if off >= len(self._keys):
            self._keys = self._source(self._pool)
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
                return self._source(size)
            self._keys = self._source(pool)
            off = 0
        self._off = off + size
        return self._keys[off : off + size]

    def spread(self, fields: int, stride: int, count: int) -> int:
        """Fresh keys in place for ``count`` frames of ``stride`` bytes (6 or
        more), as one integer (little-endian bytes): a key in bytes 2-5
        of each frame, where ``fields`` (that integer's mask: 0xFF over those
        bytes, a cached object) has them, and zeros elsewhere.

        What a masked batch needs, without cutting keys apart and putting
        them in place one by one: random bytes as long as the frames (a
        *window*), ANDed with ``fields``. The window serves ``stride // 4``
        batches of that shape in turn, each shifted 4 bytes further (its
        phase): the key of frame ``i`` in phase ``p`` is window bytes
        ``stride * i + 2 + 4 * p`` to ``+ 6``, which no other frame or phase
        takes (``4 * p <= stride - 4``), so no random byte is ever used
        twice. Another shape draws a new window."""
        phase = self._phase
        if fields is self._fields and phase < self._phases:
            self._phase = phase + 1
            return (self._window >> 32 * phase) & fields
        self._window = int.from_bytes(self.take((stride * count + 5) // 4), "little")
        self._fields = fields
        self._phase = 1
        self._phases = stride // 4
        return self._window & fields


def binary_head(n: int) -> bytes:
    """The header of an unmasked, unfragmented binary frame of ``n`` payload
    bytes (a server's): what an engine puts in front of each message of a
    run it frames itself (``Connection.frame_runs`` of the RSocket core)."""
    if n < 126:
        return bytes((0x82, n))
    if n < 0x10000:
        return bytes((0x82, 126)) + _U16.pack(n)
    return bytes((0x82, 127)) + _U64.pack(n)


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
