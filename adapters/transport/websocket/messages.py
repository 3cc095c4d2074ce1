"""Message records: how a message transport (WebSocket) and an engine talk
through the driver loop's byte interface.

Driver loops (``threads``, ``selector``) only move bytes between
``transport.recv()`` / ``transport.send()`` and ``engine.receive_data()`` /
``engine.data_to_send()``. A transport that keeps message boundaries marks
itself ``message_framed = True`` and passes *records* instead of a raw byte
stream::

    record = kind (1 byte) | length (4 bytes, big-endian) | payload

``kind`` reuses the WebSocket opcodes: TEXT (UTF-8 payload), BINARY, CLOSE
(payload: 2-byte close code, then a UTF-8 reason), PING (engine -> transport)
and PONG (transport -> engine, only in answer to an engine's PING); and
BINARY_RUN / TEXT_RUN, messages each behind its 3-byte big-endian length
(one WebSocket message each, :mod:`.runs`): a transport delivers
consecutive messages of one kind as one run, an engine may send runs; and
TEXT_LINES, text messages each followed by the byte 0xFF (which UTF-8 never
contains), what a transport with ``WebSocketOptions(text_lines=True)``
delivers instead of TEXT_RUN: an engine splits it with one ``split`` (a C
loop) instead of a Python step per message (docs/performance.md, "Ditto
history into Spark"); BINARY_SPAN, binary messages of one length each
behind the WebSocket header they arrived with (payload: that header's size,
1 byte; the messages' length, 4 bytes; the frames as received), what a
transport with ``WebSocketOptions(binary_spans=True)`` delivers for a batch
of equal unmasked messages instead of re-heading them into a BINARY_RUN;
and FRAMED (engine -> transport, a server's), WebSocket frames made by the
engine, written as they are. With ``binary_spans`` a read that is nothing
but equal unmasked binary frames reaches the engine as it arrived: a
BINARY_FRAMES chunk, not a record (its first byte, 0x82, is the first
frame's, which starts no record), always a ``recv()`` result of its own.
``MessageReader`` hands a run's or a span's messages out one by one unless
asked to keep runs. docs/adapters.md has the rules of the record stream.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from struct import Struct

__all__ = [
    "HEADER_LENGTH",
    "CloseCode",
    "MessageKind",
    "MessageReader",
    "RecordError",
    "decode_close",
    "encode_binaries",
    "encode_binary",
    "encode_close",
    "encode_lines",
    "encode_ping",
    "encode_record",
    "encode_run",
    "encode_span",
    "encode_text",
    "frames_fields",
    "record_head",
    "span_fields",
    "split_frames",
    "split_lines",
    "split_run",
    "split_span",
]

_HEADER = Struct(">BI")
HEADER_LENGTH = _HEADER.size
_CODE = Struct(">H")
_MAX_LENGTH = 0xFFFFFFFF


class MessageKind(enum.IntEnum):
    """Record kinds (the WebSocket opcodes of the same meaning)."""

    TEXT = 0x1
    BINARY = 0x2
    CLOSE = 0x8
    #: Engine -> transport: send a WebSocket ping with this payload (engines
    #: that run their own keepalive timers use it).
    PING = 0x9
    #: Transport -> engine: the pong answering one of the engine's pings.
    PONG = 0xA
    #: Text messages (UTF-8), each behind its length (3 bytes, big-endian);
    #: each is one WebSocket message (not an opcode: WebSocket's are 4 bits).
    TEXT_RUN = 0x11
    #: Binary messages, each behind its length, as TEXT_RUN.
    BINARY_RUN = 0x12
    #: Text messages (UTF-8), each followed by the byte 0xFF (never part of
    #: UTF-8): transport -> engine, with ``WebSocketOptions(text_lines=True)``.
    TEXT_LINES = 0x13
    #: Binary messages of one length, each behind the WebSocket header it
    #: arrived with: header size (1 byte), message length (4 bytes), then
    #: the frames: transport -> engine, with
    #: ``WebSocketOptions(binary_spans=True)``.
    BINARY_SPAN = 0x14
    #: WebSocket frames, unmasked, written as they are: engine -> transport,
    #: a server's only (a client masks each frame with a fresh key).
    FRAMED = 0x15
    #: Transport -> engine, with ``WebSocketOptions(binary_spans=True)``: a
    #: read that is nothing but equal unmasked FIN binary frames, back to
    #: back, handed over as it arrived. Not a record: no length field; the
    #: value is the first frame's first byte (FIN and the binary opcode),
    #: which starts no record, and such a chunk is always a whole ``recv()``
    #: result of its own. The read reaches the engine without a copy.
    BINARY_FRAMES = 0x82


class CloseCode(enum.IntEnum):
    """WebSocket close codes used by sansrs (RFC 6455, 7.4.1)."""

    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    UNSUPPORTED_DATA = 1003
    NO_STATUS = 1005  # never sent: a Close frame without a code
    ABNORMAL = 1006  # never sent: the connection ended without a Close frame
    INVALID_DATA = 1007
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011


#: Kinds that start a record (BINARY_FRAMES starts a chunk, not a record).
_KINDS = frozenset(int(k) for k in MessageKind) - {MessageKind.BINARY_FRAMES}
_FRAMES_BYTE = bytes((MessageKind.BINARY_FRAMES,))


class RecordError(ValueError):
    """Bytes that are not a record stream (a bug in a transport or engine, not
    something a remote peer can cause: records never cross the network)."""


def encode_record(kind: int, payload: bytes) -> bytes:
    if len(payload) > _MAX_LENGTH:
        raise ValueError(f"a record holds at most {_MAX_LENGTH} bytes, not {len(payload)}")
    return _HEADER.pack(kind, len(payload)) + payload


def record_head(kind: int, length: int) -> bytes:
    """The 5 bytes that start a record of ``kind`` holding ``length`` bytes
    (for a producer that writes the payload behind them itself)."""
    return _HEADER.pack(kind, length)


def encode_binary(data: bytes) -> bytes:
    """One BINARY record."""
    return _HEADER.pack(2, len(data)) + data


def encode_binaries(messages: Iterable[bytes]) -> bytes:
    """BINARY records for each message, joined once."""
    parts: list[bytes] = []
    append = parts.append
    pack = _HEADER.pack
    for data in messages:
        append(pack(2, len(data)))
        append(data)
    return b"".join(parts)


def encode_run(run: bytes | bytearray, *, text: bool = False) -> bytes:
    """One BINARY_RUN record (``text``: TEXT_RUN): ``run`` is messages, each
    behind its length in 3 bytes (big-endian), e.g. what an RSocket core
    writes for TCP."""
    return _HEADER.pack(0x11 if text else 0x12, len(run)) + run


_SPAN_FIELDS = Struct(">BI")


def encode_span(
    frames: bytes | bytearray | memoryview,
    skip: int,
    size: int,
    before: bytes = b"",
    lead: bytes = b"",
) -> bytes:
    """One BINARY_SPAN record: ``lead`` then ``frames``, messages of
    ``size`` bytes each behind ``skip`` bytes (its WebSocket header);
    behind ``before`` (records that go first), joined in one copy."""
    length = len(lead) + len(frames)
    count, rest = divmod(length, skip + size) if skip + size else (0, length)
    if rest or not count:
        raise ValueError(f"{length} bytes are not frames of {skip} + {size} bytes")
    head = _HEADER.pack(0x14, 5 + length) + _SPAN_FIELDS.pack(skip, size)
    return b"".join((before, head, lead, frames))


def span_fields(payload: bytes, off: int = 0, end: int = -1) -> tuple[int, int, int]:
    """(count, size, skip) of the BINARY_SPAN record payload at ``off`` (up
    to ``end``; -1: its end): its messages start at ``off + 5``."""
    if end < 0:
        end = len(payload)
    if end - off < 5:
        raise RecordError("a BINARY_SPAN record is shorter than its fields")
    skip, size = _SPAN_FIELDS.unpack_from(payload, off)
    count, rest = divmod(end - off - 5, skip + size) if skip + size else (0, 1)
    if rest or not count:
        raise RecordError("a BINARY_SPAN record's frames do not fill it")
    return count, size, skip


def frames_fields(data: bytes, off: int = 0, end: int = -1) -> tuple[int, int, int]:
    """(count, size, skip) of the BINARY_FRAMES chunk ``data[off:end]`` (-1:
    its end): equal frames, each ``skip`` bytes of header (its first
    frame's: 2 or 4) then ``size`` bytes of message."""
    if end < 0:
        end = len(data)
    if end - off < 2 or data[off] != MessageKind.BINARY_FRAMES:
        raise RecordError("a BINARY_FRAMES chunk must start with a FIN binary frame")
    size = data[off + 1]
    skip = 2
    if size == 126 and end - off >= 4:
        size = data[off + 2] << 8 | data[off + 3]
        skip = 4
    elif size >= 126:
        raise RecordError("a BINARY_FRAMES chunk holds unmasked frames under 64 KiB")
    count, rest = divmod(end - off, skip + size)
    if rest or not count:
        raise RecordError("a BINARY_FRAMES chunk's frames do not fill it")
    return count, size, skip


def split_frames(data: bytes, off: int = 0, end: int = -1) -> list[tuple[int, bytes]]:
    """The messages of a BINARY_FRAMES chunk as BINARY records."""
    count, size, skip = frames_fields(data, off, end)
    stride = skip + size
    first = off + skip
    return [(2, data[at : at + size]) for at in range(first, first + count * stride, stride)]


def split_span(payload: bytes, off: int = 0, end: int = -1) -> list[tuple[int, bytes]]:
    """The messages of a BINARY_SPAN record's payload as BINARY records."""
    count, size, skip = span_fields(payload, off, end)
    start = off + 5 + skip
    stride = skip + size
    return [(2, payload[at : at + size]) for at in range(start, start + count * stride, stride)]


def encode_lines(lines: bytes | bytearray) -> bytes:
    """One TEXT_LINES record: ``lines`` is UTF-8 messages, each followed by 0xFF."""
    return _HEADER.pack(0x13, len(lines)) + lines


def encode_text(text: str) -> bytes:
    """One TEXT record (UTF-8)."""
    data = text.encode("utf-8")
    return _HEADER.pack(1, len(data)) + data


def encode_close(code: int = CloseCode.NORMAL, reason: str = "") -> bytes:
    """One CLOSE record. The reason is cut to fit a Close frame (123 bytes)."""
    if not 1000 <= code <= 4999:
        raise ValueError(f"close code {code} is outside 1000..4999")
    payload = _CODE.pack(code) + _truncate_reason(reason)
    return _HEADER.pack(8, len(payload)) + payload


def encode_ping(payload: bytes = b"") -> bytes:
    """One PING record (at most 125 bytes of payload, as a WebSocket ping)."""
    if len(payload) > 125:
        raise ValueError("a ping carries at most 125 bytes")
    return _HEADER.pack(9, len(payload)) + payload


def _truncate_reason(reason: str) -> bytes:
    # A Close frame's payload is at most 125 bytes: 2 for the code, 123 of
    # reason, cut at a character boundary.
    data = reason.encode("utf-8")
    if len(data) <= 123:
        return data
    return data[:123].decode("utf-8", "ignore").encode("utf-8")


def decode_close(payload: bytes) -> tuple[int, str]:
    """(code, reason) of a CLOSE record; 1005 (no status) when it has no code."""
    if len(payload) < 2:
        return CloseCode.NO_STATUS, ""
    (code,) = _CODE.unpack_from(payload)
    return code, payload[2:].decode("utf-8", "replace")


class MessageReader:
    """Incremental record parser: ``feed(data)`` returns every complete record
    as ``(kind, payload)``. Transports hand over whole records, so the buffer
    is normally empty between calls; it is there for any other producer.

    A BINARY_RUN record comes out as one BINARY record per message, unless
    ``keep_runs`` (an engine that reads runs as a byte stream)."""

    __slots__ = ("_buffer", "_keep_runs")

    def __init__(self, *, keep_runs: bool = False) -> None:
        self._buffer = bytearray()
        self._keep_runs = keep_runs

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def feed_whole(self, data: bytes) -> tuple[bytes, list[tuple[int, int, int]]]:
        """:meth:`feed` without cutting anything out: the bytes the complete
        records lie in (``data``, or it behind what was buffered) and each
        record's ``(kind, start, stop)`` of its payload, runs and spans
        whole (an engine that reads them in place: a span's messages are
        cut by its protocol core as they lie; stream1k over WebSocket)."""
        buffer = self._buffer
        if buffer:
            buffer += data
            data = bytes(buffer)
            buffer.clear()
        elif data[:1] == _FRAMES_BYTE:  # a read of whole frames, as it arrived
            return data, [(MessageKind.BINARY_FRAMES, 0, len(data))]
        out: list[tuple[int, int, int]] = []
        unpack = _HEADER.unpack_from
        end = len(data)
        off = 0
        while end - off >= 5:
            kind, length = unpack(data, off)
            if kind not in _KINDS:
                raise RecordError(f"unknown record kind {kind:#x} at offset {off}")
            stop = off + 5 + length
            if stop > end:
                break
            out.append((kind, off + 5, stop))
            off = stop
        if off < end:
            buffer += memoryview(data)[off:]
        return data, out

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buffer = self._buffer
        if (  # the common read: one whole run (or lines), kept as it is
            not buffer
            and self._keep_runs
            and len(data) > 5
            and data[0] in (0x12, 0x13)
            and _HEADER.unpack_from(data)[1] == len(data) - 5
        ):
            return [(data[0], data[5:])]
        data, records = self.feed_whole(data)
        out: list[tuple[int, bytes]] = []
        append = out.append
        for kind, start, stop in records:
            if kind & 0x90 and kind != 0x15 and not self._keep_runs:
                # A run or a span: its messages one by one.
                if kind == 0x13:
                    out += [(1, line) for line in split_lines(data[start:stop])]
                elif kind == 0x14:
                    out += split_span(data, start, stop)
                elif kind == 0x82:
                    out += split_frames(data, start, stop)
                else:
                    out += split_run(data, start, stop, kind & 0x0F)
            else:
                append((kind, data[start:stop]))
        return out


def split_lines(payload: bytes) -> list[bytes]:
    """The messages of a TEXT_LINES record's payload (each followed by 0xFF),
    cut by one ``split``."""
    if payload[-1:] != b"\xff":
        raise RecordError("a TEXT_LINES record must end with the byte 0xFF")
    lines = payload.split(b"\xff")
    del lines[-1]  # the empty piece after the last 0xFF
    return lines


def split_run(data: bytes, off: int, end: int, kind: int = 2) -> list[tuple[int, bytes]]:
    """The messages of the run ``data[off:end]`` as ``kind`` records (BINARY
    or TEXT)."""
    out: list[tuple[int, bytes]] = []
    while off < end:
        if end - off < 3:
            raise RecordError("a run ends inside a message length")
        stop = off + 3 + (data[off] << 16 | data[off + 1] << 8 | data[off + 2])
        if stop > end:
            raise RecordError("a run's message overruns its record")
        out.append((kind, data[off + 3 : stop]))
        off = stop
    return out
