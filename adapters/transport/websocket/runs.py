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
at 0.26x-0.43x TCP (docs/performance.md, "WebSocket near TCP";
``benchmarks/bench_websocket.py`` measures each path). Messages of the same
length are the common case (a stream's items, a pipeline of requests), and
for them every step runs in C over the whole batch:

* frames of the same length are found with strided slices of their header
  columns (``data[off + i : lim : stride]``) and ``lstrip``;
* one cached ``struct`` (``"3x22s"`` repeated: skip the old header, keep
  the payload) cuts the payloads out, and ``header.join`` puts them behind
  their new headers;
* masking runs in C when the optional extension was built (one pass over a
  batch: ``frames.C_MASKING``, docs/adapters.md "Masking in C"); the pure-
  Python paths below are the fallback and the reference the tests hold it
  to. They XOR all frames at once, as integers: the keys are picked out of
  the frames (an AND with a cached mask of the key fields) and copied over
  their payloads by doublings (:func:`_copies`: ``ceil(log2(words + 1))``
  shifts, the last overlapping; the copies of two frames never overlap
  where it matters: no carries); one conversion to an integer and one
  back per batch (a shift costs 4-5 XORs of the batch, a conversion 10-15:
  a key's copy over itself zeroes a server's key field, no shift first);
* long batches (a stream's writes and reads: stream16, stream1k, fnf16m of
  ``benchmarks/bench_tcp.py``) are re-headed in place, without an object
  per message: a strided deletion (``del b[i::stride]``) takes a header
  byte out of every frame at once, a strided assignment writes one, and a
  header that grows (a short unmasked frame read into a run, a client's
  short masked frame of fnf16m) gets its room by copying the frames a byte
  column at a time (:func:`frames_to_run`, :func:`_batch_to_frames`).

*Shaped* batches (4-64 messages of one length under 126 bytes: what a
request-response pipeline writes and reads, 16-64 a call) have one cached
shape per length and count (:func:`shape_of`), and whole records of them
take one call each way: :func:`frame_record` (a BINARY_RUN record alone ->
frames), :func:`record_of_frames` (a read of nothing but such frames -> the
record). Their masks are tiled by one multiplication of the keys in place
(copies 4 bytes apart, never reaching the next frame's key: no carries);
their fresh keys come spread in place from a random window
(:meth:`.frames.KeySource.spread`).

A batch is tried where a message has the length of the one before it (and
not again inside a stretch a try found too short), so mixed lengths cost
nothing extra. Anything else (a lone message, payloads of 64 KiB and more,
masked ones over 125 bytes, messages under 4 bytes) takes the per-message
path, whose output is the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from struct import Struct
from typing import NamedTuple

from . import frames as _frames
from .frames import KeySource, encode_data_frame
from .messages import MessageKind, split_lines

__all__ = [
    "MAX_BATCH",
    "MAX_MASKED_BATCH",
    "MAX_MASKED_COUNT",
    "MAX_RUN_MESSAGE",
    "MIN_BATCH",
    "SHAPED",
    "SINGLE_HEADS",
    "all_alike",
    "count_uniform",
    "encode_batch",
    "encode_run",
    "frame_lines",
    "frame_record",
    "frames_to_run",
    "most_at_once",
    "prefix",
    "record_of_frames",
    "shape_of",
]

#: Largest message a run can hold (its length must fit in 3 bytes).
MAX_RUN_MESSAGE = 0xFFFFFF
#: Same-length frames from which the batch path beats the per-message one
#: (benchmarks/bench_websocket.py).
MIN_BATCH = 4
#: Largest payload framed in batches: masked ones up to 125 bytes (beyond,
#: tiling the keys costs more than masking one by one), others below 64 KiB;
#: with the C extension, masked ones below 64 KiB too (and any count).
MAX_MASKED_BATCH = 125
MAX_BATCH = 0xFFFF
#: Most masked frames converted at once (longer batches go in several): the
#: cached masks of key and payload fields are this many frames long.
MAX_MASKED_COUNT = 2048
#: Records cut per ``struct`` call (one compiled format per record shape).
_GROUP = 64
_BINARY_FIN = 0x82
_TEXT_FIN = 0x81
_BINARY_RUN_RECORD = MessageKind.BINARY_RUN

_PREFIXES = tuple(n.to_bytes(3, "big") for n in range(126))
_HEADERS = tuple(bytes((_BINARY_FIN, n)) for n in range(126))  # unmasked, FIN binary
#: A BINARY_RUN record of one message of each length under 126, up to the message.
SINGLE_HEADS = tuple(
    bytes((_BINARY_RUN_RECORD,)) + (n + 3).to_bytes(4, "big") + _PREFIXES[n] for n in range(126)
)
_TEXT_HEADERS = tuple(bytes((_TEXT_FIN, n)) for n in range(126))  # unmasked, FIN text
_TEXT_16 = bytes((_TEXT_FIN, 126))  # then the 16-bit length
_TEXT_64 = bytes((_TEXT_FIN, 127))  # then the 64-bit length


def prefix(n: int) -> bytes:
    """The 3-byte length of a run message of ``n`` bytes."""
    return _PREFIXES[n] if n < 126 else n.to_bytes(3, "big")


def count_uniform(
    data: bytes | bytearray, off: int, end: int, stride: int, header: bytes | bytearray,
    most: int = 1 << 62,
) -> int:
    """How many consecutive records of ``stride`` bytes from ``off`` (whole
    ones, before ``end``, at most ``most``) start with ``header``. Frame
    ``i`` sits at ``off + i * stride`` exactly when frames ``0..i-1`` had
    that length, so the count of leading matches in each header column is
    the answer. Windows (64 records, then growing fourfold) keep the work
    proportional to the count; records of 1 KiB and more start with 256
    (a read holds at most a hundred or so: one window, stream1k of
    bench_tcp.py)."""
    whole = min((end - off) // stride, most)
    count = 0
    window = _GROUP if stride < 1024 else 4 * _GROUP
    columns = range(len(header))
    while count < whole:
        m = min(window, whole - count)
        start = off + count * stride
        lim = start + m * stride
        good = m
        for i in columns:
            column = data[start + i : lim : stride]
            byte = header[i : i + 1]
            # Compared whole first (a memcmp): lstrip tests its bytes one
            # call at a time, costlier than the rest of the count.
            if column != byte * m:
                same = len(column) - len(column.lstrip(byte))
                if same < good:
                    good = same
        count += good
        if good < m:
            break
        window *= 4
    return count


def all_alike(data: bytes | bytearray, start: int, end: int, stride: int, width: int) -> bool:
    """Whether the records of ``stride`` bytes filling ``data[start:end]``
    all begin with the ``width`` bytes the first one begins with (checked a
    header column at a time, in C)."""
    for i in range(start, start + width):
        column = data[i:end:stride]
        if column != column[:1] * len(column):  # (a memcmp: see count_uniform)
            return False
    return True


@lru_cache(maxsize=1024)
def _cutter(unit: str, count: int) -> Struct:
    return Struct(unit * count)


def _cut(data: bytes | bytearray, off: int, unit: str, size: int, count: int) -> Sequence[bytes]:
    """The fields of ``count`` records of ``size`` bytes from ``off``, each
    unpacked with the struct format ``unit``; cut in C."""
    if count <= _GROUP:
        return _cutter(unit, count).unpack_from(data, off)
    whole = count // _GROUP * _GROUP
    view = memoryview(data)[off : off + whole * size]
    fields = list(chain.from_iterable(_cutter(unit, _GROUP).iter_unpack(view)))
    if count > whole:
        fields += _cutter(unit, count - whole).unpack_from(data, off + whole * size)
    return fields


def _copies(keys: int, last: int) -> int:
    """``keys`` (4-byte keys in place in their frames, little-endian) OR
    their copies 32, 64, ..., ``32 * last`` bits higher, in
    ``ceil(log2(last + 1))`` doublings (the last overlapping: equal bits
    ORed, no carries). With ``last`` a payload's words, the copies cover
    key field and payload and at most the next frame's first 3 bytes, only
    in the last step (no copy is copied on across a frame)."""
    have = 1
    want = last + 1
    while have < want:
        step = min(have, want - have)
        keys |= keys << 32 * step
        have += step
    return keys


class _Masked(NamedTuple):
    """What masked batches of frames of one payload length need (integers
    are little-endian bytes)."""

    header: bytes  # FIN binary, mask bit and length, a zero key
    keys: int  # 0xFF over the key field of each of a number of frames
    payloads: int  # 0xFF over the payload of each of them
    words: int  # key repetitions that cover a payload
    run_unit: str  # struct unit of a run message: skip its length, keep it
    frame_unit: str  # struct unit of a frame: skip header and key, keep it


#: Frames a mask of fields covers for batches up to that long: an AND is as
#: long as its shorter operand, so one mask serves every shorter count.
_SMALL = 64
#: Batches of at most this many messages (of under 126 bytes) have a cached
#: shape (:func:`shape_of`).
SHAPED = _SMALL


def _plan(n: int, frames: int) -> _Masked:
    stride = n + 6
    keys = (bytes(2) + b"\xff" * 4 + bytes(n)) * frames
    payloads = (bytes(6) + b"\xff" * n) * frames
    return _Masked(
        header=bytes((_BINARY_FIN, 0x80 | n, 0, 0, 0, 0)),
        keys=int.from_bytes(keys, "little"),
        payloads=int.from_bytes(payloads, "little"),
        words=(n + 3) // 4,
        run_unit=f"3x{n}s",
        frame_unit=f"6x{stride - 6}s",
    )


@lru_cache(maxsize=128)
def _small_plan(n: int) -> _Masked:
    return _plan(n, _SMALL)  # at most 16 KiB each: every length fits


@lru_cache(maxsize=8)
def _large_plan(n: int, frames: int) -> _Masked:
    return _plan(n, frames)  # at most 0.5 MiB each (115 KiB for 2048 16-byte items)


def _masked(n: int, count: int) -> _Masked:
    """The :class:`_Masked` for ``count`` frames of ``n``-byte payloads.
    Short batches share one plan per length; a long one gets masks of the
    next power of two frames, so building them (for lengths that take
    turns) costs at most twice what the batch weighs."""
    if count <= _SMALL:
        return _small_plan(n)
    return _large_plan(n, 1 << (count - 1).bit_length())


class _Shape(NamedTuple):
    """Everything a batch of ``count`` messages of ``n`` bytes (``4 <= n <
    126``, ``count <= _SMALL``) needs, built once: one cache lookup per call
    instead of one per step. What a pipeline of request-responses sends and
    reads, 16-64 messages a call, where the fixed cost of a call is most of
    its cost (docs/performance.md, "WebSocket near TCP")."""

    frames: int  # messages in the batch
    stride: int  # bytes of a masked frame
    zeros: bytes  # the high bytes of each run length (a column)
    lengths: bytes  # the low byte of each run length; an unmasked frame's 2nd byte
    fins: bytes  # each frame's first byte: FIN binary
    masked_lengths: bytes  # each masked frame's second byte
    header: bytes  # an unmasked frame's header
    length: bytes  # a run message's length
    record_head: bytes  # a BINARY_RUN record of the batch up to its first payload
    run_payloads: Struct  # cuts the payloads out of a run
    frame_payloads: Struct  # ... out of unmasked frames
    # ... out of masked frames (unmasked in place); packing puts payloads in
    # masked frames of zero headers and keys
    masked_frames: Struct
    heads: int  # the headers of the masked frames, zero keys
    key_fields: int  # 0xFF over each masked frame's key
    payload_fields: int  # 0xFF over each masked frame's payload
    tile: int  # times a frame's key (alone): copies of it over its payload
    masked_size: int  # bytes of the masked frames


#: At most 256 shapes kept (a few KiB each; 36 KiB for 64 frames of 125 bytes).
@lru_cache(maxsize=256)
def shape_of(n: int, count: int) -> _Shape:
    stride = n + 6
    head = bytes((_BINARY_FIN, 0x80 | n, 0, 0, 0, 0))
    return _Shape(
        frames=count,
        stride=stride,
        zeros=bytes(count),
        lengths=bytes((n,)) * count,
        fins=bytes((_BINARY_FIN,)) * count,
        masked_lengths=bytes((0x80 | n,)) * count,
        header=_HEADERS[n],
        length=prefix(n),
        record_head=bytes((_BINARY_RUN_RECORD,)) + (count * (n + 3)).to_bytes(4, "big") + prefix(n),
        run_payloads=Struct(f"3x{n}s" * count),
        frame_payloads=Struct(f"2x{n}s" * count),
        masked_frames=Struct(f"6x{n}s" * count),
        heads=int.from_bytes((head + bytes(n)) * count, "little"),
        key_fields=int.from_bytes((bytes(2) + b"\xff" * 4 + bytes(n)) * count, "little"),
        payload_fields=int.from_bytes((bytes(6) + b"\xff" * n) * count, "little"),
        # The copies of a key cover its payload and at most 3 bytes more,
        # never a copy of the next frame's key: no carries.
        tile=sum(1 << 32 * i for i in range(1, (n + 3) // 4 + 1)),
        masked_size=count * stride,
    )


def frame_record(data: bytes | bytearray, keys: KeySource | None) -> bytes | None:
    """The frames of ``data`` when it is one BINARY_RUN record (alone) of a
    shaped batch (:func:`shape_of`: 4-64 messages of one length, 4-125
    bytes) or of one message under 126 bytes, masked with fresh keys from
    ``keys`` or not (``None``); ``None`` for anything else. What an RSocket
    engine hands a WebSocket transport on every write of a request-response
    exchange: checked and framed in one call, a handful of C steps."""
    n = data[7] if len(data) > 7 else 0
    count, rest = divmod(len(data) - 5, n + 3)
    if count == 1 and not rest and n < 126:  # one message (a sequential exchange's)
        if data[:8] != SINGLE_HEADS[n]:
            return None
        return encode_data_frame(2, data[8:], keys.next() if keys is not None else None)
    if rest or not MIN_BATCH <= count <= _SMALL or not 4 <= n < 126:
        return None
    shape = shape_of(n, count)
    if data[:8] != shape.record_head:  # not one record of this batch alone
        return None
    return _frame_shaped(data, 5, shape, keys)


def _frame_shaped(
    data: bytes | bytearray, start: int, shape: _Shape, keys: KeySource | None
) -> bytes | None:
    """The frames of the shaped batch that is ``data[start:]``, if every
    length is the batch's (a column of each length byte at a time against
    the cached column it must equal: three compares, in C). Masked: the
    payloads in blank frames, the fresh keys in place
    (:meth:`KeySource.spread`), each tiled over its payload by one
    multiplication; one XOR puts keys and headers in and masks the
    payloads."""
    size = shape.stride - 3
    if (
        data[start + 2 :: size] != shape.lengths
        or data[start::size] != shape.zeros
        or data[start + 1 :: size] != shape.zeros
    ):
        return None
    if keys is not None and (c := _frames.C_MASKING) is not None:
        return c.mask_run(data, start, shape.frames, shape.stride - 6, keys.take(shape.frames))
    payloads = shape.run_payloads.unpack_from(data, start)
    if keys is None:
        return shape.header.join((b"", *payloads))
    frames = int.from_bytes(shape.masked_frames.pack(*payloads), "little")
    keyed = keys.spread(shape.key_fields, shape.stride, shape.frames)
    stream = keyed * shape.tile & shape.payload_fields | keyed | shape.heads
    return (frames ^ stream).to_bytes(shape.masked_size, "little")


def record_of_frames(data: bytes, shape: _Shape, masked: bool) -> bytes:
    """The BINARY_RUN record of ``data``: nothing but the frames of a shaped
    batch (headers checked by the caller), unmasked if ``masked``."""
    if masked and (c := _frames.C_MASKING) is not None:
        return c.unmask_run(data, 0, shape.frames, shape.stride - 6, shape.record_head[:5])
    payloads = _shaped_payloads(data, 0, shape, masked)
    return shape.length.join((shape.record_head[:5], *payloads))  # (5: the record's own header)


def _shaped_payloads(data: bytes, off: int, shape: _Shape, masked: bool) -> Sequence[bytes]:
    """The payloads of the frames of a shaped batch at ``off``, unmasked if
    ``masked``."""
    if not masked:
        return shape.frame_payloads.unpack_from(data, off)
    size = shape.masked_size
    frames = data if not off and len(data) == size else memoryview(data)[off : off + size]
    # Each key tiled over its payload by one multiplication; a copy reaching
    # into the next frame only spoils header bytes that are not cut out
    # (the last frame's: up to 3 bytes past the end).
    whole = int.from_bytes(frames, "little")
    plain = (whole ^ (whole & shape.key_fields) * shape.tile).to_bytes(size + 3, "little")
    return shape.masked_frames.unpack_from(plain)


def _column(byte: int, count: int) -> bytes:
    """``count`` times ``byte``: a column of one header byte, written into
    ``count`` records by one strided slice assignment."""
    return bytes((byte,)) * count


# -- sending: a run -> WebSocket frames ---------------------------------------


#: Masked batches of at least ``_MASK_COLUMNS_FROM`` payloads up to this long
#: are built a byte column at a time (bench_websocket.py --transport: fnf16m).
_MASK_COLUMNS_MAX = 24
_MASK_COLUMNS_FROM = 256


#: Run messages whose payloads one cached getter picks out of a run at once.
_VIEW_GROUP = 512


@lru_cache(maxsize=16)  # (at most 512 slices each: ~60 KiB)
def _payload_getter(n: int, count: int) -> Callable[[memoryview], tuple[memoryview, ...]]:
    size = n + 3
    getter: Callable[[memoryview], tuple[memoryview, ...]] = itemgetter(
        *[slice(i * size + 3, (i + 1) * size) for i in range(count)]
    )
    return getter


def _payload_views(data: bytes | bytearray, off: int, n: int, count: int) -> list[memoryview]:
    """Views of the payloads of ``count`` run messages of ``n`` bytes at
    ``off``, picked by cached getters (``count`` views in one C call a
    group): a server's frames of 1 KiB items are the views joined behind
    their headers, one copy and no ``bytes`` object per message, where
    cutting each payload out first cost a copy and an allocation of 1 KiB
    more (stream1k of bench_tcp.py). The caller drops the views before
    returning (a view would pin a bytearray it was given)."""
    size = n + 3
    views: list[memoryview] = []
    with memoryview(data) as whole:
        while count:
            k = min(count, _VIEW_GROUP)
            if k == 1:  # (a getter of one slice returns the view alone)
                views.append(whole[off + 3 : off + size])
            else:
                views += _payload_getter(n, k)(whole[off : off + k * size])
            off += k * size
            count -= k
    return views


def _batch_to_frames(
    data: bytes | bytearray, off: int, count: int, n: int, keys: KeySource | None
) -> bytes:
    if keys is None:
        if n < 126:  # each 3-byte length loses its first byte (0), the next becomes 0x82
            frames = bytearray(memoryview(data)[off : off + count * (n + 3)])
            del frames[:: n + 3]
            frames[:: n + 2] = _column(_BINARY_FIN, count)
            return bytes(frames)
        # (the empty first piece puts a header in front, without a copy)
        header = bytes((_BINARY_FIN, 126, n >> 8, n & 0xFF))
        views = _payload_views(data, off, n, count)
        try:
            return header.join(chain((b"",), views))
        finally:
            del views  # (no view of the caller's buffer outlives the call)
    c = _frames.C_MASKING
    if c is not None:
        return c.mask_run(data, off, count, n, keys.take(count))
    # Masked (n < 126): frames with their keys in place, then one XOR of the
    # payloads (the stream cut to them: a copy must not touch a header). The
    # keys are picked out of the frames and copied over their payloads.
    plan = _masked(n, count)
    stride = n + 6
    if n <= _MASK_COLUMNS_MAX and count >= _MASK_COLUMNS_FROM:
        # Short payloads (fnf16m's 22 bytes) moved a byte column at a time:
        # no object per message, as cutting and joining them makes.
        frames = bytearray(count * stride)
        end = off + count * (n + 3)
        for i in range(3, n + 3):
            frames[i + 3 :: stride] = data[off + i : end : n + 3]
        frames[::stride] = _column(_BINARY_FIN, count)
        frames[1::stride] = _column(0x80 | n, count)
    else:
        header = plan.header
        frames = bytearray(header)
        frames += header.join(_cut(data, off, plan.run_unit, n + 3, count))
    key_bytes = keys.take(count)
    for i in range(4):
        frames[2 + i :: stride] = key_bytes[i::4]
    whole = int.from_bytes(frames, "little")
    stream = _copies(whole & plan.keys, plan.words) & plan.payloads
    return (whole ^ stream).to_bytes(count * stride, "little")


def _integer_masking(masked: bool) -> bool:
    """Masked frames made or read by the pure-Python paths, whose masks
    bound a batch (``MAX_MASKED_BATCH``, ``MAX_MASKED_COUNT``); the C
    extension takes any batch of lengths up to ``MAX_BATCH`` in one call."""
    return masked and _frames.C_MASKING is None


def most_at_once(masked: bool) -> int:
    """Most frames of a batch converted in one call: ``MAX_MASKED_COUNT``
    masked ones with the pure-Python paths, else no bound."""
    return MAX_MASKED_COUNT if _integer_masking(masked) else 1 << 62


def encode_batch(data: bytes | bytearray, start: int, keys: KeySource | None) -> bytes | None:
    """:func:`encode_run` for the common case, without its message loop:
    the run ``data[start:]`` is nothing but a batch of messages of one
    length. ``None`` when it is anything else."""
    end = len(data)
    if end - start < 3:
        return None
    n = data[start] << 16 | data[start + 1] << 8 | data[start + 2]
    size = n + 3
    count, rest = divmod(end - start, size)
    if rest or count < MIN_BATCH or n < 4:
        return None
    if n < 126 and count <= _SMALL:
        return _frame_shaped(data, start, shape_of(n, count), keys)
    if (
        (n > MAX_MASKED_BATCH or count > MAX_MASKED_COUNT if _integer_masking(keys is not None)
         else n > MAX_BATCH)
        or not all_alike(data, start, end, size, 3)
    ):
        return None
    return _batch_to_frames(data, start, count, n, keys)


def encode_run(
    data: bytes | bytearray,
    keys: KeySource | None,
    *,
    text: bool = False,
    start: int = 0,
    stop: int | None = None,
) -> tuple[bytes, int]:
    """WebSocket frames (FIN binary, or text if ``text``; one per message;
    masked with keys from ``keys``, or not when ``None``) for the whole
    messages of the run ``data[start:stop]`` from its start; returns them and
    how many bytes of the run they took (a message cut off at the end is
    left). Text is checked (``UnicodeDecodeError``): a bad engine must not
    make us send invalid UTF-8."""
    end = len(data) if stop is None else stop
    if text:
        return _encode_text_run(data, keys, start, end)
    parts: list[bytes] = []
    off = start
    largest = MAX_MASKED_BATCH if _integer_masking(keys is not None) else MAX_BATCH
    most = most_at_once(keys is not None)
    last = -1  # the previous message's length: a batch is tried when it repeats
    tried = 0  # no batch before this offset (a try found too few)
    while end - off >= 3:
        n = data[off] << 16 | data[off + 1] << 8 | data[off + 2]
        size = n + 3
        if (
            (n == last or off == start)  # a length repeats (or a chunk starts)
            and off >= tried
            and 4 <= n <= largest
            and end - off >= MIN_BATCH * size
        ):
            count = count_uniform(data, off, end, size, data[off : off + 3], most)
            if count >= MIN_BATCH:
                parts.append(_batch_to_frames(data, off, count, n, keys))
                off += count * size
                last = n
                continue
            tried = off + count * size
        last = n
        stop = off + size
        if stop > end:
            break
        key = keys.next() if keys is not None else None
        parts.append(encode_data_frame(2, data[off + 3 : stop], key))
        off = stop
    return parts[0] if len(parts) == 1 else b"".join(parts), off - start


def _encode_text_run(
    data: bytes | bytearray, keys: KeySource | None, start: int, end: int
) -> tuple[bytes, int]:
    """:func:`encode_run` for text (text messages seldom share a length).
    Unmasked (a server's): one pass over the lengths cuts the payloads out
    and writes each frame header (a 16-bit length is the run's own two
    bytes behind ``81 7E``); then one check of all the payloads at once
    (ASCII is valid UTF-8; anything else is checked message by message,
    as each must be valid alone) and one ``join``. Masked (a client's):
    one frame at a time (few text messages go that way)."""
    if keys is not None:
        return _encode_masked_text_run(data, keys, start, end)
    heads: list[bytes | bytearray] = []
    payloads: list[bytes | bytearray] = []
    head, payload = heads.append, payloads.append
    short = _TEXT_HEADERS
    off = start
    while end - off >= 3:
        n = data[off] << 16 | data[off + 1] << 8 | data[off + 2]
        stop = off + 3 + n
        if stop > end:
            break
        if n < 126:
            head(short[n])
        elif n < 0x10000:
            head(_TEXT_16 + data[off + 1 : off + 3])
        else:
            head(_TEXT_64 + n.to_bytes(8, "big"))
        payload(data[off + 3 : stop])
        off = stop
    if not b"".join(payloads).isascii():
        for text in payloads:
            text.decode("utf-8")
    return b"".join(chain.from_iterable(zip(heads, payloads, strict=True))), off - start


class _TextHeads(dict[int, bytes]):
    """Payload length -> header of an unmasked FIN text frame, made on a
    miss (kept for at most ``_MAX_HEADS`` lengths), so the headers of a
    batch come from one C-level ``map`` of lookups."""

    def __missing__(self, n: int) -> bytes:
        if n < 126:
            head = _TEXT_HEADERS[n]
        elif n < 0x10000:
            head = _TEXT_16 + n.to_bytes(2, "big")
        else:
            head = _TEXT_64 + n.to_bytes(8, "big")
        if len(self) < _MAX_HEADS:
            self[n] = head
        return head


_MAX_HEADS = 4096
_TEXT_HEADS = _TextHeads()


def frame_lines(lines: bytes, keys: KeySource | None) -> bytes:
    """WebSocket frames (FIN text, one per message; masked with keys from
    ``keys``, or not when ``None``) of a TEXT_LINES record's payload
    (:func:`.messages.split_lines`). No Python step per message when
    unmasked: one ``split``, the headers by a ``map`` of cached lookups,
    one ``join``. Text is checked (``UnicodeDecodeError``) as in
    :func:`encode_run`: ASCII at once, anything else message by message."""
    payloads = split_lines(lines)
    if not all(map(bytes.isascii, payloads)):
        for text in payloads:
            text.decode("utf-8")
    if keys is not None:
        return b"".join([encode_data_frame(1, text, keys.next()) for text in payloads])
    heads = map(_TEXT_HEADS.__getitem__, map(len, payloads))
    return b"".join(chain.from_iterable(zip(heads, payloads, strict=True)))


def _encode_masked_text_run(
    data: bytes | bytearray, keys: KeySource, start: int, end: int
) -> tuple[bytes, int]:
    parts: list[bytes] = []
    off = start
    while end - off >= 3:
        stop = off + 3 + (data[off] << 16 | data[off + 1] << 8 | data[off + 2])
        if stop > end:
            break
        payload = data[off + 3 : stop]
        payload.decode("utf-8")
        parts.append(encode_data_frame(1, payload, keys.next()))
        off = stop
    return b"".join(parts), off - start


# -- receiving: WebSocket frames -> a run ----------------------------------------


#: Unmasked frames of at most this many payload bytes, at least
#: ``_COLUMNS_FROM`` of them, become run messages a byte column at a time
#: (one strided copy per byte of a frame, no object per message); longer
#: payloads take fewer steps cut out one by one (benchmarks/bench_websocket.py).
_COLUMNS_MAX = 32
_COLUMNS_FROM = 512


def frames_to_run(
    data: bytes, off: int, count: int, n: int, masked: bool, head: bytes = b""
) -> bytes:
    """``head``, then ``count`` FIN binary frames of ``n`` payload bytes each
    (``4 <= n < 0x10000``; if ``masked`` and the masking is pure Python,
    ``n`` at most 125 and ``count`` at most ``MAX_MASKED_COUNT``; headers
    checked by the caller, e.g. with :func:`count_uniform`) at ``off``, as
    run messages; ``masked``: the frames carry keys (we are the server) and
    are unmasked. ``head`` (a record's header and the messages before them)
    goes in front without a copy of the whole run to put it there.

    Frames and run messages differ only in their headers, so the long
    batches (a stream's reads: stream16, stream1k, fnf16m of bench_tcp.py)
    are re-headed in place, by C passes over the whole batch and no object
    per message: a header longer than the 3-byte length (16-bit lengths,
    masked frames) loses its extra bytes by strided deletions
    (``del out[i::stride]``, one column of every frame at a time) and gets
    the length's bytes by strided assignments (a masked frame's key field
    is zeroed by the unmasking XOR itself: one column written, the length's
    low byte); a shorter one (unmasked,
    under 126 bytes) gets its room by copying the frames' byte columns into
    place, for payloads up to ``_COLUMNS_MAX`` bytes."""
    if masked and (c := _frames.C_MASKING) is not None:
        return c.unmask_run(data, off, count, n, head)
    length = prefix(n)
    if n < 126 and count <= _SMALL:
        payloads = _shaped_payloads(data, off, shape_of(n, count), masked)
        return length.join((head, *payloads))
    h = len(head)
    if not masked:
        if n >= 126:  # 82 7E hi lo -> 00 hi lo
            out = bytearray(head)
            out += memoryview(data)[off : off + count * (n + 4)]
            del out[h :: n + 4]
            out[h :: n + 3] = bytes(count)
            return bytes(out)
        if n <= _COLUMNS_MAX and count >= _COLUMNS_FROM:  # 82 n -> 00 00 n
            out = bytearray(h + count * (n + 3))
            out[:h] = head
            end = off + count * (n + 2)
            for i in range(1, n + 2):  # the length byte, then the payload's
                out[h + 1 + i :: n + 3] = data[off + i : end : n + 2]
            return bytes(out)
        return length.join(chain((head,), _cut(data, off, f"2x{n}s", 2 + n, count)))
    plan = _masked(n, count)
    stride = n + 6
    size = count * stride
    frames = data if not off and len(data) == size else memoryview(data)[off : off + size]
    whole = int.from_bytes(frames, "little")
    # Each key copied over its payload and itself (copy 0: the key field
    # becomes zeros); a copy reaching into the next frame only spoils the
    # header bytes that go.
    plain = (whole ^ _copies(whole & plan.keys, plan.words)).to_bytes(size + 3, "little")
    out = bytearray(head)
    out += memoryview(plain)[:size]
    for step in range(stride, n + 3, -1):  # 82 8n k0 00 00 00 -> 00 00 00
        del out[h::step]
    out[h + 2 :: n + 3] = _column(n, count)  # -> 00 00 n
    return bytes(out)
