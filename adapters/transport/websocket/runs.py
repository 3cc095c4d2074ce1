"""Runs: many binary messages in one buffer, converted to and from WebSocket
frames a batch at a time.

A *run* is binary messages, each preceded by its length in 3 bytes
(big-endian): the framing of RSocket over TCP, so an engine whose core
writes that framing hands its output over as one record
(``MessageKind.BINARY_RUN``, :mod:`.messages`) and reads a run as the byte
stream it would read from TCP. The transport turns each message of a run
into one WebSocket binary frame, and consecutive binary frames it receives
into one run.

Why: per message, a Python loop costs 0.3-1.5 µs (header, slice, mask),
more than the RSocket core spends on a 16-byte PAYLOAD, which held WebSocket
at 0.26x-0.43x TCP (docs/performance.md, "WebSocket near TCP"). Messages of
the same length are the common case (a stream's items, a pipeline of
requests), and for them every step is a strided ``bytes`` / ``bytearray``
operation over the whole batch, run in C:

* frames of the same length are found with strided slices of their header
  columns (``data[off + i : lim : stride]``) and ``lstrip``;
* a header that shrinks loses bytes with ``del block[::stride]``; one that
  grows is made room for with ``bytes(d).join`` of the messages cut by a
  cached ``struct`` (``{stride}s`` repeated);
* header columns are written with strided assignment;
* masking XORs the whole batch with one key stream: each frame's key is
  placed before its payload and tiled over it by multiplying the integer
  by ``1 + 2**32 + 2**64 + ...`` (the tiles of two frames never overlap, so
  there are no carries); a tile may run up to 3 bytes into the next
  frame's first header bytes, which are rewritten afterwards.

Anything else (a lone message, lengths of 64 KiB and more, messages under
4 bytes) takes the per-message path, whose output is the same bytes.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import chain
from struct import Struct

from .frames import KeySource, encode_data_frame, mask

__all__ = [
    "MAX_RUN_MESSAGE",
    "MIN_BATCH",
    "count_uniform",
    "encode_run",
    "frames_to_run",
    "prefix",
]

#: Largest message a run can hold (its length must fit in 3 bytes).
MAX_RUN_MESSAGE = 0xFFFFFF
#: Same-length frames from which the batch path beats the per-message one.
MIN_BATCH = 4
#: Messages cut per ``struct`` call when a header grows.
_GROUP = 64
_BINARY_FIN = 0x82

_PREFIXES = tuple(n.to_bytes(3, "big") for n in range(126))


def prefix(n: int) -> bytes:
    """The 3-byte length of a run message of ``n`` bytes."""
    return _PREFIXES[n] if n < 126 else n.to_bytes(3, "big")


def count_uniform(data: bytes, off: int, end: int, stride: int, header: bytes) -> int:
    """How many consecutive records of ``stride`` bytes from ``off`` (whole
    ones, before ``end``) start with ``header``. Frame ``i`` sits at
    ``off + i * stride`` exactly when frames ``0..i-1`` had that length, so
    the count of leading matches in each header column is the answer."""
    whole = (end - off) // stride
    lim = off + whole * stride
    count = whole
    for i in range(len(header)):
        column = data[off + i : lim : stride]
        count = min(count, len(column) - len(column.lstrip(header[i : i + 1])))
        if count < MIN_BATCH:
            break
    return count


@lru_cache(maxsize=512)
def _cutter(size: int, count: int) -> Struct:
    return Struct(f"{size}s" * count)


def _pieces(data: bytes, off: int, size: int, count: int) -> list[bytes]:
    """``count`` pieces of ``size`` bytes from ``data[off:]``, cut in C."""
    whole = count // _GROUP * _GROUP
    pieces: list[bytes] = []
    if whole:
        group = _cutter(size, _GROUP)
        view = memoryview(data)[off : off + whole * size]
        pieces = list(chain.from_iterable(group.iter_unpack(view)))
    if count > whole:
        pieces += _cutter(size, count - whole).unpack_from(data, off + whole * size)
    return pieces


def _grow(data: bytes, off: int, size: int, count: int, extra: int) -> bytearray:
    """The ``count`` records of ``size`` bytes at ``off``, each preceded by
    ``extra`` zero bytes."""
    gap = bytes(extra)
    block = bytearray(gap)
    block += gap.join(_pieces(data, off, size, count))
    return block


def _shrink(data: bytes, off: int, size: int, count: int, drop: int) -> bytearray:
    """The ``count`` records of ``size`` bytes at ``off``, each without its
    first ``drop`` bytes."""
    block = bytearray(data[off : off + count * size])
    for i in range(drop):
        del block[:: size - i]
    return block


def _set_column(block: bytearray, i: int, stride: int, count: int, value: int) -> None:
    block[i::stride] = bytes((value,)) * count


@lru_cache(maxsize=128)
def _tiler(words: int) -> int:
    """``1 + 2**32 + ... + 2**(32 * (words - 1))``: times a key, that key
    repeated ``words`` times (little-endian)."""
    return int.from_bytes(b"\x01\x00\x00\x00" * words, "little")


def _xor_keys(block: bytearray, count: int, stride: int, first: int, n: int,
              keys: list[bytes]) -> bytearray:
    """``block`` (``count`` frames of ``stride`` bytes) with the ``n`` bytes
    at ``first`` of each frame XORed with that frame's key (``keys[i]``: the
    i-th byte of every frame's key). May change up to 3 bytes after each
    payload (the next frame's first header bytes): callers rewrite them."""
    size = count * stride
    placed = bytearray(size)
    for i in range(4):
        placed[first + i :: stride] = keys[i]
    stream = int.from_bytes(placed, "little") * _tiler((n + 3) // 4)
    mixed = (int.from_bytes(block, "little") ^ stream).to_bytes(size + 3, "little")
    out = bytearray(mixed)
    del out[size:]
    return out


# -- sending: a run -> WebSocket frames ---------------------------------------


def _header_of(n: int, masked: bool) -> bytes:
    """The WebSocket header of a FIN binary frame of ``n`` bytes (without key)."""
    bit = 0x80 if masked else 0
    if n < 126:
        return bytes((_BINARY_FIN, bit | n))
    return bytes((_BINARY_FIN, bit | 126, n >> 8, n & 0xFF))


def _batch_to_frames(data: bytes, off: int, count: int, n: int, keys: KeySource | None) -> bytes:
    size = n + 3
    header = _header_of(n, keys is not None)
    head = len(header) + (4 if keys is not None else 0)
    stride = head + n
    if head < 3:
        block = _shrink(data, off, size, count, 3 - head)
    else:
        block = _grow(data, off, size, count, head - 3)
    if keys is not None:
        key_bytes = keys.take(count)
        columns = [key_bytes[i::4] for i in range(4)]
        block = _xor_keys(block, count, stride, head, n, columns)
        for i in range(4):
            block[head - 4 + i :: stride] = columns[i]
    for i, value in enumerate(header):
        _set_column(block, i, stride, count, value)
    return bytes(block)


def encode_run(data: bytes, keys: KeySource | None) -> tuple[bytes, int]:
    """WebSocket frames (FIN binary, one per message; masked with keys from
    ``keys``, or not when ``None``) for the whole messages at the start of
    the run ``data``; returns them and how many bytes of ``data`` they took
    (a message cut off at the end is left)."""
    parts: list[bytes] = []
    end = len(data)
    off = 0
    while end - off >= 3:
        n = data[off] << 16 | data[off + 1] << 8 | data[off + 2]
        size = n + 3
        if 4 <= n < 0x10000 and end - off >= MIN_BATCH * size:
            count = count_uniform(data, off, end, size, data[off : off + 3])
            if count >= MIN_BATCH:
                parts.append(_batch_to_frames(data, off, count, n, keys))
                off += count * size
                continue
        stop = off + size
        if stop > end:
            break
        key = keys.next() if keys is not None else None
        parts.append(encode_data_frame(2, data[off + 3 : stop], key))
        off = stop
    return b"".join(parts), off


# -- receiving: WebSocket frames -> a run ----------------------------------------


def frames_to_run(data: bytes, off: int, count: int, n: int, masked: bool) -> bytearray:
    """``count`` FIN binary frames of ``n`` payload bytes each (``4 <= n <
    0x10000``; headers checked by the caller, e.g. with :func:`count_uniform`)
    at ``off``, as run messages; ``masked``: the frames carry keys (we are
    the server) and are unmasked."""
    head = (2 if n < 126 else 4) + (4 if masked else 0)
    stride = head + n
    size = n + 3
    if masked:
        frames = data[off : off + count * stride]
        columns = [frames[head - 4 + i :: stride] for i in range(4)]
        data = bytes(_xor_keys(bytearray(frames), count, stride, head, n, columns))
        off = 0
    if head > 3:
        block = _shrink(data, off, stride, count, head - 3)
    else:
        block = _grow(data, off, stride, count, 3 - head)
    for i, value in enumerate(prefix(n)):
        _set_column(block, i, size, count, value)
    return block


def unmask_payload(data: bytes, key_at: int, stop: int) -> bytes:
    """The payload from ``key_at + 4`` to ``stop``, unmasked with the key at
    ``key_at`` (one frame)."""
    return mask(data[key_at : key_at + 4], data[key_at + 4 : stop])
