"""Every speed trick of the RSocket core, in one place.

Each builds an ordinary value a cheaper way, or lets a hot path test a few
bits instead of decoding a frame, and each names the figure that pays for it:
``benchmarks/bench_core_fast_paths.py`` (ns per operation, the trick against
the plain code it replaces; "Core fast paths" in docs/performance.md) and
``benchmarks/bench_connection.py`` (payloads/s through two connections; "RSocket
connection core" there). Outside this module the core is plain Python; the
hot paths that use these (``Connection.send_payload``, ``Receiver._parse``)
say so where they do.

- Named masks of the 16-bit type/flags field (``PAYLOAD_ITEM_MASK`` ...): the
  receive loop recognises the frames it can take whole from their header.
- ``pack_prefix_header`` & co: bound ``Struct`` methods (``rsocket_pack_bound``
  vs ``rsocket_pack_imported``: a struct imported by name loses CPython 3.11's
  method-call fast path).
- ``payload_event``, ``fnf_event``, ``rr_event``, ``payload_run``: events
  filled through a same-layout builder class and ``__class__`` assignment,
  without the frozen dataclass ``__init__`` (``rsocket_event_builder`` vs
  ``rsocket_event_call``): one event per frame received.
- ``payload_frame``: a ``PayloadFrame`` by ``object.__new__`` and one store per
  slot, its flags from a table (``rsocket_frame_new`` vs
  ``rsocket_frame_call``): every PAYLOAD decoded.
- ``identity_hash``: enums hashed by identity for the state-table lookups
  (``enum_identity_hash`` vs ``enum_default_hash``).
- The frame codec's public functions (``encode_frame``, ``encode_frame_prefixed``,
  ``encode_frames_prefixed``, ``decode_frame``, ``FrameReader.feed``) each
  carry their own copy of the PAYLOAD-without-metadata path, built from the
  pieces below (``PAYLOAD_FLAGS``, ``pack_frame_header``,
  ``pack_short_prefix_header``): a call per frame is 10-25 % of these
  functions (``benchmarks/bench_codec.py``, "RSocket frame codec" in
  docs/performance.md). Each copy says which row pays for it; the plain
  paths (``_encode.encode_payload``, ``_codec._dec_payload``) stay the
  reference the fuzz and codec tests compare them with.
- ``payload_run_data``: the receiving twin of ``queue_payload_run``, with
  ``ConnectionConfig.payload_runs``: a run of PAYLOAD(N) frames on one stream
  becomes one list of data; frames of one length are checked and cut by C
  calls alone (nine strided slices compared with the first header, then
  structs of whole frames giving each one's data: ``_span``), no bytecode
  per item, up to a frame of another shape (found by ``_same_shape``: the
  stream's last, another stream's; ``bench_opcodes.py --items stream16b``)
  (``bench_tcp.py`` rows
  ``stream16``, ``stream16b``, ``stream1k``, ``stream1kb``; "Items at the
  application's end" in docs/performance.md). ``payload_run`` (one event
  per item) stays the reference the differential tests compare it with.
- ``span_items``: ``payload_run_data``'s span cutter for a message
  transport's frames as they arrived (``Connection.receive_span``: each
  frame behind the transport's own header, e.g. a WebSocket client's
  reads), so they are not re-headed into a prefixed copy first; and
  ``queue_payload_run`` joins a run behind the transport's header instead of
  the length prefix when ``Connection.frame_runs`` asks (a WebSocket
  server's): the run is its frames, no framing pass. ``bench_websocket.py
  --ends`` (ns per item of each end, ws:// against TCP; "WebSocket ends in
  process" in docs/performance.md). ``receive_data`` of the same frames
  prefixed, and ``send_payload`` one by one, stay the references the
  differential tests compare them with.
- ``fnf_run``: the receiving twin of ``queue_fnf_run``, with
  ``ConnectionConfig.fnf_runs``: consecutive REQUEST_FNF frames become one
  event of three lists; frames of one length without metadata are checked
  and cut by C calls alone (strided slices against the first header, then
  structs of whole frames giving each one's stream ID and data), no
  bytecode per request (``bench_tcp.py``
  rows ``fnf16`` and ``fnf16m``: the server's end; "Items at the
  application's end" in docs/performance.md). ``fnf_event`` (one event per
  frame) stays the reference the differential tests compare it with.
- ``queue_fnf_run``: fire-and-forgets sent as a batch
  (``Connection.request_fnf_many``): their headers packed and interleaved
  with the data by C calls alone, one piece for the batch (``bench_tcp.py``
  row ``fnf16m``; "Items at the application's end" in docs/performance.md).
  ``request_fnf`` one by one stays the reference the differential tests
  compare it with.
- ``queue_payload_run``: a stream's items sent as a batch
  (``Connection.send_payloads``): items of one length share one header and
  are joined behind it in one call, a fraction of a ``send_payload`` each
  (``benchmarks/bench_stream_server.py``; "Streaming server" in
  docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from itertools import chain, repeat
from operator import add, and_, countOf, rshift
from struct import Struct
from typing import Any, Protocol

from .._enums import identity_hash
from ._frames import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_IGNORE,
    FLAG_METADATA,
    FLAG_NEXT,
    FLAGS_MASK,
    MAX_STREAM_ID,
    TYPE_SHIFT,
    FrameType,
    PayloadFrame,
)
from .events import FireAndForgetReceived, PayloadReceived, RequestResponseReceived

__all__ = [
    "PAYLOAD_FLAGS",
    "PAYLOAD_ITEM",
    "PAYLOAD_ITEM_MASK",
    "PAYLOAD_LAST_ITEM",
    "PAYLOAD_NO_METADATA_MASK",
    "PAYLOAD_PLAIN_ITEM_MASK",
    "REQUEST_FNF_BIT",
    "T_PAYLOAD",
    "T_REQUEST_FNF",
    "T_REQUEST_RESPONSE",
    "WHOLE_REQUEST_MASK",
    "fnf_event",
    "fnf_run",
    "identity_hash",
    "new_object",
    "pack_frame_header",
    "pack_prefix_header",
    "pack_short_prefix_header",
    "payload_event",
    "payload_frame",
    "payload_run",
    "queue_payload_run",
    "rr_event",
    "span_items",
    "unpack_frame_header",
    "unpack_prefix_header",
]

# ----------------------------------------------------------------------------
# Named masks of the type/flags field (6 type bits, then 10 flag bits)

_TYPE_MASK = 0x3F << TYPE_SHIFT
T_PAYLOAD = FrameType.PAYLOAD << TYPE_SHIFT
T_REQUEST_RESPONSE = FrameType.REQUEST_RESPONSE << TYPE_SHIFT
T_REQUEST_FNF = FrameType.REQUEST_FNF << TYPE_SHIFT

#: ``tf & PAYLOAD_NO_METADATA_MASK == T_PAYLOAD``: a PAYLOAD without metadata.
PAYLOAD_NO_METADATA_MASK = _TYPE_MASK | FLAG_METADATA
#: ``tf & PAYLOAD_ITEM_MASK == PAYLOAD_ITEM``: a PAYLOAD with N, without M or
#: F (C and I may be anything): one item, whole, no metadata.
PAYLOAD_ITEM_MASK = _TYPE_MASK | FLAG_METADATA | FLAG_FOLLOWS | FLAG_NEXT
PAYLOAD_ITEM = T_PAYLOAD | FLAG_NEXT
#: The same, C clear too: an item that does not complete its stream.
PAYLOAD_PLAIN_ITEM_MASK = PAYLOAD_ITEM_MASK | FLAG_COMPLETE
#: An item that completes its stream (PAYLOAD with N and C).
PAYLOAD_LAST_ITEM = PAYLOAD_ITEM | FLAG_COMPLETE
#: ``tf & WHOLE_REQUEST_MASK == T_REQUEST_RESPONSE``: REQUEST_RESPONSE or
#: REQUEST_FNF (types 0x04 and 0x05 differ in ``REQUEST_FNF_BIT`` only), not
#: fragmented (F clear), the two flag bits neither type defines clear; M may
#: be set (a routed request's metadata).
REQUEST_FNF_BIT = T_REQUEST_FNF ^ T_REQUEST_RESPONSE
WHOLE_REQUEST_MASK = (_TYPE_MASK & ~REQUEST_FNF_BIT) | FLAG_FOLLOWS | FLAG_COMPLETE | FLAG_NEXT
#: ``tf & WHOLE_FNF_MASK == T_REQUEST_FNF``: a REQUEST_FNF the fast path of a
#: REQUEST_FNF takes (``WHOLE_REQUEST_MASK``'s rule, the type exactly).
WHOLE_FNF_MASK = WHOLE_REQUEST_MASK | REQUEST_FNF_BIT

# ----------------------------------------------------------------------------
# Structs of the hot paths, as bound methods (rsocket_pack_bound): ``name.pack``
# on a struct imported by name compiles without CPython 3.11's method-call
# fast path; a bound method imported by name is a plain fast call.

_PREFIX_HEADER = Struct(">BHIH")  # 24-bit length (hi byte, lo 16 bits), stream ID, type/flags
pack_prefix_header: Callable[[int, int, int, int], bytes] = _PREFIX_HEADER.pack
unpack_prefix_header: Callable[[bytes, int], tuple[int, int, int, int]] = _PREFIX_HEADER.unpack_from
_FRAME_HEADER = Struct(">IH")  # stream ID, type/flags
pack_frame_header: Callable[[int, int], bytes] = _FRAME_HEADER.pack
unpack_frame_header: Callable[[bytes], tuple[int, int]] = _FRAME_HEADER.unpack_from
#: 24-bit length (its high byte 0) + stream ID + type/flags: the prefixed
#: header of a frame below 64 KiB in one pack.
pack_short_prefix_header: Callable[[int, int, int], bytes] = Struct(">xHIH").pack

# ----------------------------------------------------------------------------
# Events without the frozen __init__ (rsocket_event_builder: the frozen
# dataclass __init__ goes through object.__setattr__ per field)

_new = object.__new__
#: ``object.__new__``: the codec's PAYLOAD fast paths build a frame with it.
new_object: Callable[[type], Any] = object.__new__


def _builder(cls: type) -> Any:
    """A plain class with ``cls``'s slots, in the same order. An instance
    filled with plain stores becomes a ``cls`` by ``__class__`` assignment
    (allowed: the layouts are the same): an ordinary frozen event, equal to
    one built by ``cls(...)``."""
    return type(f"_{cls.__name__}Builder", (), {"__slots__": cls.__dict__["__slots__"]})


_PayloadBuilder: Any = _builder(PayloadReceived)
_FnfBuilder: Any = _builder(FireAndForgetReceived)
_RrBuilder: Any = _builder(RequestResponseReceived)


# One filler per event shape, alike on purpose: a generic one (fields by
# name) would cost what the builder saves.


def payload_event(
    stream_id: int, data: bytes, metadata: bytes | None, complete: bool, next: bool
) -> PayloadReceived:
    """``PayloadReceived(...)``."""
    ev = _new(_PayloadBuilder)
    ev.stream_id = stream_id
    ev.data = data
    ev.metadata = metadata
    ev.complete = complete
    ev.next = next
    ev.__class__ = PayloadReceived
    return ev  # type: ignore[no-any-return]


def _request_event(
    builder: Any, cls: type, stream_id: int, data: bytes, metadata: bytes | None
) -> Any:
    ev = _new(builder)
    ev.stream_id = stream_id
    ev.data = data
    ev.metadata = metadata
    ev.__class__ = cls
    return ev


#: ``FireAndForgetReceived(stream_id=, data=, metadata=)``.
fnf_event: Callable[[int, bytes, bytes | None], FireAndForgetReceived] = partial(
    _request_event, _FnfBuilder, FireAndForgetReceived
)
#: ``RequestResponseReceived(stream_id=, data=, metadata=)``.
rr_event: Callable[[int, bytes, bytes | None], RequestResponseReceived] = partial(
    _request_event, _RrBuilder, RequestResponseReceived
)


def payload_run(
    buf: bytes,
    off: int,
    stop: int,
    length: int,
    end: int,
    limit: int,
    sid: int,
    credit: int,
    append: Callable[[Any], None],
) -> tuple[int, int, int]:
    """Events for a run of items on stream ``sid`` (bench_connection: the
    receive half of every payload): the PAYLOAD(N) frame at ``off`` (``length``
    bytes without its prefix, ending at ``stop``: checked by the caller) and
    each whole PAYLOAD(N) right behind it on the same stream, within
    ``credit`` (> 0) and ``limit`` (the maximum frame size). Returns where the
    run ended, the credit left and the bytes of the run (its position)."""
    unpack = unpack_prefix_header
    builder = _PayloadBuilder
    event = PayloadReceived
    position = 0
    while True:
        credit -= 1
        ev = _new(builder)
        ev.stream_id = sid
        ev.data = buf[off + 9 : stop]
        ev.metadata = None
        ev.complete = False
        ev.next = True
        ev.__class__ = event
        append(ev)
        position += length
        off = stop
        if not credit or end - off < 9:
            return off, credit, position
        hi, lo, next_sid, tf = unpack(buf, off)
        length = hi << 16 | lo
        stop = off + 3 + length
        if (
            next_sid != sid
            or tf & PAYLOAD_PLAIN_ITEM_MASK != PAYLOAD_ITEM
            or stop > end
            or length > limit
            or length < 6
        ):
            return off, credit, position  # the caller takes this frame


def payload_run_data(
    buf: bytes,
    off: int,
    stop: int,
    length: int,
    end: int,
    limit: int,
    sid: int,
    credit: int,
) -> tuple[int, int, int, list[bytes]]:
    """:func:`payload_run` as one list: the data of the PAYLOAD(N) frame at
    ``off`` and of each whole PAYLOAD(N) on the same stream right behind it,
    within ``credit`` (> 0) and ``limit``. Returns where the run ended, the
    credit left, the bytes of the run and the data. Frames whose 9-byte
    header is the first one's (same length, stream, flags) are checked and
    cut by C calls alone, up to a frame of another shape (then from it on,
    if a span of its shape follows); the rest of a run goes frame by frame."""
    unpack = unpack_prefix_header
    data: list[bytes] = []
    append = data.append
    position = 0
    spans = True  # at the run's start, and after each span of one shape
    while True:
        if spans:
            stride = length + 3
            count = min(credit, (end - off) // stride)
            if count > 1:
                last = off + count * stride
                head = buf[off : off + 9]
                # Byte k of every header in the span equals byte k of the
                # first (at the run's start: the common case, one check).
                if data or not all(
                    buf[off + k : last : stride] == head[k : k + 1] * count for k in range(9)
                ):
                    # A frame of another shape among them (the stream's last,
                    # one of another stream, a KEEPALIVE): the frames before
                    # it, by C calls still (frame by frame, the items of a
                    # read ending a stream cost about 180 bytecodes each:
                    # bench_opcodes.py --items stream16b). Probed by growing
                    # prefixes: linear in the run, whatever its shapes.
                    count = _same_shape(buf, off, stride, count, _WHOLE_HEADER)
                    last = off + count * stride
            if count > 1:
                # The data of every frame by structs of whole frames: no slice
                # object, no call per item (bench_tcp.py stream1kb: cutting by
                # slices cost about 3x as much per 1 KiB item).
                span = _span(buf, off, count, _PAYLOAD_SPAN, length - 6)
                if data:
                    data += span
                else:
                    data = span
                    append = data.append
                credit -= count
                position += count * length
                off = last
            else:
                # Frame by frame from here on: lengths differ.
                spans = False
        if not spans:
            # payload_run's loop, appending data instead of events (a hot loop each).
            credit -= 1
            append(buf[off + 9 : stop])
            position += length
            off = stop
        if not credit or end - off < 9:
            return off, credit, position, data
        hi, lo, next_sid, tf = unpack(buf, off)
        length = hi << 16 | lo
        stop = off + 3 + length
        if (
            next_sid != sid
            or tf & PAYLOAD_PLAIN_ITEM_MASK != PAYLOAD_ITEM
            or stop > end
            or length > limit
            or length < 6
        ):
            return off, credit, position, data


def span_items(
    buf: bytes, off: int, count: int, size: int, skip: int
) -> tuple[int, list[bytes]] | None:
    """A message transport's span (``Connection.receive_span``): ``count``
    frames of ``size`` bytes (6 to the caller's limit), each behind ``skip``
    bytes of the transport's own, from ``off`` on. When every frame is a
    whole PAYLOAD(N) without metadata, not completing, with the first
    frame's header (so the same stream), returns its stream ID and the data
    of each, cut by structs of whole frames as ``payload_run_data`` cuts a
    prefixed run: no re-heading of the frames into length-prefixed ones
    first (bench_tcp.py stream1k, stream1kb over WebSocket: the client's
    end). None for anything else (the caller takes the frames one by one)."""
    at = off + skip
    stream_id, tf = _FRAME_HEADER.unpack_from(buf, at)
    if tf & PAYLOAD_PLAIN_ITEM_MASK != PAYLOAD_ITEM or stream_id > MAX_STREAM_ID:
        return None
    if count > 1:
        stride = skip + size
        last = at + count * stride
        head = buf[at : at + 6]
        # Byte k of every frame's header equals byte k of the first's.
        if not all(buf[at + k : last : stride] == head[k : k + 1] * count for k in range(6)):
            return None
    return stream_id, _span(buf, off, count, f"{skip + 6}x{{}}s", size - 6)


#: Bytes of a prefixed header (length, stream ID, type/flags) that frames
#: of one shape share: all but the stream ID (``fnf_run``), or all of them
#: (a stream's items, ``payload_run_data``).
_SHAPE_BYTES = (0, 1, 2, 7, 8)
_WHOLE_HEADER = tuple(range(9))


def _same_shape(
    buf: bytes, off: int, stride: int, count: int, positions: tuple[int, ...] = _SHAPE_BYTES
) -> int:
    """How many of the ``count`` frames of ``stride`` bytes from ``off`` on
    share the first one's length and type/flags (bytes 0-2 and 7-8 of each
    prefixed header; 3-6 are its stream ID; or the header bytes at
    ``positions``), by strided slices: frames 1, 2-3, 4-7... (each block
    doubling what held; then the rest up to ``count`` at once), then halving
    the block after the last that held. Each frame is looked at about
    twice: a span of m such frames costs O(m) C work and one frame of
    another shape after them O(1), whatever follows (rechecking the whole
    prefix at every step cost ~13 looks per frame: ``bench_tcp.py`` row
    ``fnf16m``, the server)."""
    head = buf[off : off + 9]

    def same(first: int, stop: int) -> bool:
        """Frames ``first`` to ``stop - 1`` have the head's shape."""
        n = stop - first
        start = off + first * stride
        last = off + stop * stride
        return all(buf[start + k : last : stride] == head[k : k + 1] * n for k in positions)

    good, n = 1, 2  # frames [0, good) hold; try [good, n)
    while n < count and same(good, n):
        good, n = n, n * 2
    if n < count:
        bad = n  # a frame in [good, n) is of another shape
    elif same(good, count):  # the rest of the run (a read's: the common case)
        return count
    else:
        bad = count
    while bad - good > 1:
        mid = (good + bad) // 2
        if same(good, mid):
            good = mid
        else:
            bad = mid
    return good


#: The frame layouts ``_span`` unpacks, as a struct format of one frame
#: (length prefix included) given its data size: a PAYLOAD's data, a
#: REQUEST_FNF's stream ID and data.
_PAYLOAD_SPAN = "9x{}s"
_FNF_SPAN = "3xI2x{}s"
#: A REQUEST_FNF frame without metadata as ``queue_fnf_run`` packs it: the
#: length prefix (two fields), stream ID, type/flags, data.
_FNF_PACK = "BHIH{}s"
#: Frames (length field) that long at most are packed so: the cost per frame
#: matters for small ones; a larger one would be copied twice (block, join).
_FNF_PACK_MAX = 1030
#: Frames one span struct covers at most (a longer span: blocks of these).
_SPAN_BLOCK = 128
#: (layout, data size, frames) -> its struct, made on first use. Bounded:
#: cleared when full (the shapes in use come back at once); a struct of n
#: frames is made only to unpack n frames, so its cost follows the input.
_span_structs: dict[tuple[str, int, int], Struct] = {}
_SPAN_CACHE = 64


def _span_struct(layout: str, size: int, count: int) -> Struct:
    key = (layout, size, count)
    block = _span_structs.get(key)
    if block is None:
        if len(_span_structs) >= _SPAN_CACHE:
            _span_structs.clear()
        block = _span_structs[key] = Struct(">" + layout.format(size) * count)
    return block


def _span(buf: bytes, off: int, count: int, layout: str, size: int) -> list[Any]:
    """The fields of ``count`` frames of ``layout`` with ``size`` data bytes
    from ``off`` on, in order (all frames checked alike by the caller), by
    structs of whole frames: a C call per ``_SPAN_BLOCK`` frames, no slice
    per frame (``bench_tcp.py`` rows ``stream1kb``, ``stream16b``,
    ``fnf16``, ``fnf16m``)."""
    fields: list[Any] = []
    if count >= _SPAN_BLOCK:
        block = _span_struct(layout, size, _SPAN_BLOCK)
        unpack = block.unpack_from
        step = block.size
        while count >= _SPAN_BLOCK:
            fields += unpack(buf, off)
            off += step
            count -= _SPAN_BLOCK
    if count:
        fields += _span_struct(layout, size, count).unpack_from(buf, off)
    return fields


def _fnf_span(buf: bytes, off: int, count: int, size: int) -> tuple[list[int], list[bytes]]:
    """The stream IDs and the data of ``count`` frames of one shape from
    ``off`` on (``_same_shape``), unpacked by structs of whole frames, no
    slice per frame (``bench_tcp.py`` rows ``fnf16``, ``fnf16m``)."""
    fields = _span(buf, off, count, _FNF_SPAN, size)
    return fields[0::2], fields[1::2]


#: Bytes to delete from a column of stream IDs' low bytes to leave those
#: of the other parity, and from their high bytes to leave those of IDs
#: beyond 2**31-1 (spec: Stream Identifiers).
_OF_PARITY = (bytes(range(0, 256, 2)), bytes(range(1, 256, 2)))
_LOW_HALF = bytes(range(0x80))


def _ids_in_range(buf: bytes, off: int, last: int, stride: int, parity: int) -> bool:
    """Whether the frames of ``stride`` bytes in ``buf[off:last]`` all have
    a stream ID of ``parity`` and at most 2**31-1 (nonzero for odd
    ``parity``): two byte columns of the IDs checked in C (their ints
    looked at one by one three times cost the server a third of its CPU
    per fire-and-forget: bench_websocket.py --fnf-ends, server TCP)."""
    # (bytes() of a bytes slice is that slice; of a view's, its bytes.)
    return not (
        bytes(buf[off + 6 : last : stride]).translate(None, _OF_PARITY[parity])
        or bytes(buf[off + 3 : last : stride]).translate(None, _LOW_HALF)
    )


def fnf_run(
    buf: bytes, off: int, end: int, limit: int, parity: int, in_use: dict[int, Any]
) -> tuple[int, int, list[int], list[bytes], list[bytes | None]]:
    """The REQUEST_FNF frames from ``off`` on that the receive loop's
    fire-and-forget fast path would take one by one (``Receiver._parse``:
    whole, within ``limit``, a stream ID in 1..2**31-1 of the peer's
    ``parity`` not ``in_use``, well-formed metadata), as lists: returns
    where the run ended, its bytes (its position), the stream IDs, the data
    and the metadata. The frame at ``off`` is one (checked by the caller).
    A span of frames of one length and type/flags without metadata is
    checked and cut by C calls alone (``_same_shape``, ``_fnf_span``);
    other frames one by one."""
    unpack = unpack_prefix_header
    ids: list[int] = []
    data: list[bytes] = []
    metadata: list[bytes | None] = []
    position = 0
    # Frames before this offset go one by one: a span whose stream IDs did
    # not all pass (each span is looked at once: linear in the input).
    one_by_one = off
    while end - off >= 9:
        hi, lo, sid, tf = unpack(buf, off)
        length = hi << 16 | lo
        stop = off + 3 + length
        if (
            tf & WHOLE_FNF_MASK != T_REQUEST_FNF
            or stop > end
            or length > limit
            or length < 6
            or sid & 1 != parity
            or not 0 < sid <= MAX_STREAM_ID
            or sid in in_use
        ):
            break
        stride = length + 3
        if off >= one_by_one and not tf & FLAG_METADATA and end - off >= 2 * stride:
            count = _same_shape(buf, off, stride, (end - off) // stride)
            if count > 1:
                last = off + count * stride
                span, span_data = _fnf_span(buf, off, count, length - 6)
                if (
                    _ids_in_range(buf, off, last, stride, parity)
                    and (parity or min(span) > 0)
                    and (not in_use or in_use.keys().isdisjoint(span))
                ):
                    ids += span
                    data += span_data
                    metadata += repeat(None, count)
                    position += count * length
                    off = last
                    continue
                one_by_one = last
        start = off + 9
        md = None
        if tf & FLAG_METADATA:  # a 24-bit metadata length, then the metadata
            room = length - 9
            if room < 0:
                break
            md_len = buf[start] << 16 | buf[start + 1] << 8 | buf[start + 2]
            if md_len > room:
                break
            md = buf[start + 3 : start + 3 + md_len]
            start += 3 + md_len
        ids.append(sid)
        data.append(buf[start:stop])
        metadata.append(md)
        position += length
        off = stop
    return off, position, ids, data, metadata


# ----------------------------------------------------------------------------
# PAYLOAD frames without the dataclass __init__ (rsocket_frame_new)

_PAYLOAD_FIELDS = ("stream_id", "data", "metadata", "follows", "complete", "next", "ignore")
if PayloadFrame.__slots__ != _PAYLOAD_FIELDS:  # pragma: no cover
    raise ImportError("PayloadFrame fields changed: update payload_frame")

#: (follows, complete, next, ignore) for each value of the 10 flag bits.
PAYLOAD_FLAGS: tuple[tuple[bool, bool, bool, bool], ...] = tuple(
    (bool(f & FLAG_FOLLOWS), bool(f & FLAG_COMPLETE), bool(f & FLAG_NEXT), bool(f & FLAG_IGNORE))
    for f in range(FLAGS_MASK + 1)
)


def payload_frame(stream_id: int, data: bytes, tf: int) -> PayloadFrame:
    """``PayloadFrame`` without metadata, flags from the type/flags field ``tf``."""
    frame = _new(PayloadFrame)
    frame.stream_id = stream_id
    frame.data = data
    frame.metadata = None
    frame.follows, frame.complete, frame.next, frame.ignore = PAYLOAD_FLAGS[tf & FLAGS_MASK]
    return frame


# ----------------------------------------------------------------------------
# Enums hashed by identity (enum_identity_hash)



class _Queued(Protocol):
    """What ``queue_payload_run`` uses of ``_output.Output`` (not imported:
    ``_output`` imports this module's neighbours)."""

    pieces: list[bytes]
    framed: list[int]
    framed_head: Callable[[int], bytes] | None
    size: int
    limit: int
    sent_position: int
    fast_payload_max: int


def queue_fnf_run(out: _Queued, stream_ids: range, items: list[bytes]) -> None:
    """Queue a REQUEST_FNF frame (no metadata) for each of ``items`` (bytes,
    each within ``fast_request_max``: checked by the caller) on
    ``stream_ids``, byte for byte as ``request_fnf`` would one by one, as one
    piece (the output retains nothing: not resumable)."""
    count = len(items)
    sizes = set(map(len, items))
    pieces: list[bytes] = []
    if len(sizes) == 1:  # the common case: no length per frame computed
        n = sizes.pop() + 6
        total = n * count
        whole = count - count % _SPAN_BLOCK if n <= _FNF_PACK_MAX else 0
        if whole:
            # Blocks of frames packed whole by one struct each: no header
            # bytes, zip tuple or join item per frame (``bench_tcp.py`` rows
            # ``fnf16m``, ``fnf16``: the client's connection thread).
            pack = _span_struct(_FNF_PACK, n - 6, _SPAN_BLOCK).pack
            # The fields laid out by strided list assignments, one C call
            # per column (zipped and chained they cost a third of the
            # client's CPU per fire-and-forget: bench_websocket.py --fnf-ends).
            fields: list[Any] = [None] * (5 * whole)
            fields[0::5] = [n >> 16] * whole
            fields[1::5] = [n & 0xFFFF] * whole
            fields[2::5] = stream_ids[:whole]
            fields[3::5] = [T_REQUEST_FNF] * whole
            fields[4::5] = items if whole == count else items[:whole]
            step = 5 * _SPAN_BLOCK  # (list slices: a tuple from an iterator grows by reallocs)
            pieces = [pack(*fields[at : at + step]) for at in range(0, len(fields), step)]
            stream_ids, items = stream_ids[whole:], items[whole:]
        heads = map(pack_prefix_header, repeat(n >> 16), repeat(n & 0xFFFF), stream_ids,
                    repeat(T_REQUEST_FNF))
    else:
        lengths = list(map(add, map(len, items), repeat(6)))
        total = sum(lengths)
        heads = map(pack_prefix_header, map(rshift, lengths, repeat(16)),
                    map(and_, lengths, repeat(0xFFFF)), stream_ids, repeat(T_REQUEST_FNF))
    pieces += chain.from_iterable(zip(heads, items, strict=True))
    out.pieces.append(b"".join(pieces))
    out.size += total + 3 * count
    out.sent_position += total


def queue_payload_run(out: _Queued, stream_id: int, items: list[bytes], credit: int) -> int:
    """Queue PAYLOAD (NEXT) frames for a leading run of ``items`` on
    ``out``, as ``send_payload``'s first path would one by one: at most
    ``credit``, while the output is below its limit before each, each item
    within ``fast_payload_max`` (-1 while frames are retained: none).
    Returns how many were queued (the caller takes them off the credit)."""
    if out.size >= out.limit:
        return 0
    count = min(len(items), credit)
    batch = items if count == len(items) else items[:count]
    largest = out.fast_payload_max
    # Equal lengths (the common run): counted in C, no set of them built
    # (benchmarks/bench_stream_pump.py: 0.235 -> 0.225 µs CPU per 1 KiB item).
    n = len(batch[0]) + 6 if batch else 0
    if batch and countOf(map(len, batch), n - 6) == count:
        if n - 6 > largest:
            return 0
        fit = -(-(out.limit - out.size) // (n + 3))  # items that start below the limit
        if fit < count:
            count = fit
            batch = batch[:count]
        header = pack_prefix_header(n >> 16, n & 0xFFFF, stream_id, PAYLOAD_ITEM)
        head = out.framed_head
        if head is not None:
            # Joined behind the message transport's own headers, the run is
            # its frames: the transport writes it as it is, no pass that
            # frames each message (bench_tcp.py stream1k, stream1kb over
            # WebSocket: the server's end).
            header = head(n) + header[3:]
            out.framed.append(len(out.pieces))
        out.pieces += (header, header.join(batch))
        out.size += count * (n + 3)
        out.sent_position += count * n
        return count
    pieces = out.pieces
    size, limit, position, sent = out.size, out.limit, out.sent_position, 0
    for data in batch:
        if size >= limit or len(data) > largest:
            break
        n = len(data) + 6
        pieces += (pack_prefix_header(n >> 16, n & 0xFFFF, stream_id, PAYLOAD_ITEM), data)
        size += n + 3
        position += n
        sent += 1
    out.size, out.sent_position = size, position
    return sent
