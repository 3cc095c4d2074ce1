"""An RSocket dissector: byte streams in, one ``FrameInfo`` per frame out.

Unlike ``FrameReader`` (which stops a connection at the first bad frame),
the dissector reports a malformed frame and carries on with the next one
whenever the length prefix lets it find the next frame. A length prefix out
of range loses synchronisation: the rest of that direction is reported once
as undecodable.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from struct import Struct

from .. import rsocket as rs
from .._errors import RemoteProtocolError
from ._format import DataRecord, Direction, EndRecord, Record

__all__ = ["FrameInfo", "StreamDissector", "dissect_records", "format_frame_info"]

_U24 = Struct(">BH")
_HEADER = Struct(">IH")
_CONNECTION_ERROR = rs.ErrorCode.CONNECTION_ERROR

# Flag letters each frame type defines (bit, letter), besides I and M.
_FLAG_LETTERS: dict[int, tuple[tuple[int, str], ...]] = {
    rs.FrameType.SETUP: ((rs.FLAG_RESUME_ENABLE, "R"), (rs.FLAG_LEASE, "L")),
    rs.FrameType.KEEPALIVE: ((rs.FLAG_RESPOND, "R"),),
    rs.FrameType.REQUEST_RESPONSE: ((rs.FLAG_FOLLOWS, "F"),),
    rs.FrameType.REQUEST_FNF: ((rs.FLAG_FOLLOWS, "F"),),
    rs.FrameType.REQUEST_STREAM: ((rs.FLAG_FOLLOWS, "F"),),
    rs.FrameType.REQUEST_CHANNEL: ((rs.FLAG_FOLLOWS, "F"), (rs.FLAG_COMPLETE, "C")),
    rs.FrameType.PAYLOAD: ((rs.FLAG_FOLLOWS, "F"), (rs.FLAG_COMPLETE, "C"), (rs.FLAG_NEXT, "N")),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameInfo:
    """One frame (or undecodable stretch) of one direction.

    ``raw`` is the frame without its length prefix; ``offset`` is where its
    prefix starts in that direction's byte stream. Exactly one of ``frame``
    and ``error`` is set; ``frame`` is an ``UnknownFrame`` for a frame type
    sansrs does not know. ``framed`` is False when ``raw`` is not a frame but
    a stretch of the stream that could not be framed (a length prefix out of
    range, or bytes left when the stream ended), prefix included.
    """

    index: int
    direction: Direction | None
    timestamp: float | None
    offset: int
    raw: bytes
    frame: rs.Frame | None = None
    error: RemoteProtocolError | None = None
    framed: bool = True

    @property
    def invalid(self) -> bool:
        """True when a connection would fail on this frame."""
        if self.error is not None:
            return True
        return isinstance(self.frame, rs.UnknownFrame) and not self.frame.ignore


class StreamDissector:
    """Dissects one direction of a length-prefixed byte stream, incrementally.

    ``framing="message"`` treats each chunk as one whole frame without a
    prefix (transports that keep message boundaries, e.g. WebSocket).
    """

    def __init__(
        self,
        direction: Direction | None = None,
        *,
        max_frame_size: int = rs.MAX_FRAME_LENGTH,
        framing: str = "length-prefixed",
    ) -> None:
        if framing not in ("length-prefixed", "message"):
            raise ValueError(f"unknown framing {framing!r}")
        self.direction = direction
        self.max_frame_size = max_frame_size
        self.framing = framing
        self._buffer = bytearray()
        self._offset = 0  # stream offset of _buffer[0]
        self._index = 0
        self._lost = False

    def _info(
        self,
        timestamp: float | None,
        offset: int,
        raw: bytes,
        frame: rs.Frame | None = None,
        error: RemoteProtocolError | None = None,
        framed: bool = True,
    ) -> FrameInfo:
        info = FrameInfo(
            framed=framed,
            index=self._index,
            direction=self.direction,
            timestamp=timestamp,
            offset=offset,
            raw=raw,
            frame=frame,
            error=error,
        )
        self._index += 1
        return info

    def _decode(self, timestamp: float | None, offset: int, raw: bytes) -> FrameInfo:
        try:
            return self._info(timestamp, offset, raw, frame=rs.decode_frame(raw))
        except RemoteProtocolError as exc:
            return self._info(timestamp, offset, raw, error=exc)

    def feed(self, data: bytes, timestamp: float | None = None) -> list[FrameInfo]:
        """Every frame ``data`` completes (valid or not)."""
        if self.framing == "message":
            out = [self._decode(timestamp, self._offset, bytes(data))]
            self._offset += len(data)
            return out
        if self._lost:
            self._offset += len(data)
            return []
        buf = self._buffer
        buf += data
        out = []
        off = 0
        end = len(buf)
        while end - off >= rs.PREFIX_LENGTH:
            hi, lo = _U24.unpack_from(buf, off)
            length = hi << 16 | lo
            if not rs.HEADER_LENGTH <= length <= self.max_frame_size:
                problem = (
                    f"frame length {length} outside {rs.HEADER_LENGTH}..{self.max_frame_size}; "
                    f"cannot find the next frame, {end - off} bytes skipped so far"
                )
                rest = bytes(buf[off:])
                out.append(
                    self._info(
                        timestamp,
                        self._offset + off,
                        rest,
                        error=RemoteProtocolError(problem, _CONNECTION_ERROR),
                        framed=False,
                    )
                )
                self._lost = True
                off = end
                break
            stop = off + rs.PREFIX_LENGTH + length
            if stop > end:
                break
            out.append(self._decode(timestamp, self._offset + off, bytes(buf[off + 3 : stop])))
            off = stop
        # One compaction per chunk keeps buffering linear.
        del buf[:off]
        self._offset += off
        return out

    def end(self, timestamp: float | None = None) -> list[FrameInfo]:
        """The stream ended: a partial frame still buffered is reported."""
        if self._lost or not self._buffer:
            return []
        rest = bytes(self._buffer)
        self._buffer.clear()
        problem = f"stream ended inside a frame ({len(rest)} bytes pending)"
        info = self._info(
            timestamp,
            self._offset,
            rest,
            error=RemoteProtocolError(problem, _CONNECTION_ERROR),
            framed=False,
        )
        self._offset += len(rest)
        return [info]


def dissect_records(
    records: Iterable[Record],
    *,
    max_frame_size: int = rs.MAX_FRAME_LENGTH,
    framing: str = "length-prefixed",
) -> Iterator[FrameInfo]:
    """Frames of both directions of a trace, in the order they completed.

    A direction without an end record is still checked for a partial frame
    when the records run out.
    """
    dissectors = {
        d: StreamDissector(d, max_frame_size=max_frame_size, framing=framing) for d in Direction
    }
    ended: set[Direction] = set()
    last = 0.0
    for record in records:
        last = record.timestamp
        dissector = dissectors[record.direction]
        if isinstance(record, DataRecord):
            yield from dissector.feed(record.data, record.timestamp)
        elif isinstance(record, EndRecord):
            ended.add(record.direction)
            yield from dissector.end(record.timestamp)
    for direction, dissector in dissectors.items():
        if direction not in ended:
            yield from dissector.end(last)


def _preview(data: bytes, limit: int) -> str:
    shown = data[:limit]
    text = "".join(
        chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\x{b:02x}" for b in shown
    )
    return '"' + text + ('..."' if len(data) > limit else '"')


def _flags(frame_type: int, flags: int) -> str:
    letters = []
    if flags & rs.FLAG_IGNORE:
        letters.append("I")
    if flags & rs.FLAG_METADATA:
        letters.append("M")
    letters.extend(letter for bit, letter in _FLAG_LETTERS.get(frame_type, ()) if flags & bit)
    return f"{flags:#05x}" + (" " + "".join(letters) if letters else "")


def _code_name(code: int) -> str:
    try:
        return f"{rs.ErrorCode(code).name}({code:#x})"
    except ValueError:
        return f"{code:#x}"


def _type_name(frame_type: int) -> str:
    try:
        return rs.FrameType(frame_type).name
    except ValueError:
        return f"UNKNOWN({frame_type:#04x})"


def _details(frame: rs.Frame, preview: int) -> list[str]:
    out: list[str] = []
    if isinstance(frame, rs.SetupFrame):
        out.append(
            f"v{frame.major_version}.{frame.minor_version} keepalive={frame.keepalive_interval}ms"
            f" lifetime={frame.max_lifetime}ms mime={frame.metadata_mime_type}"
            f"|{frame.data_mime_type}"
        )
        if frame.resume_token is not None:
            out.append(f"token={len(frame.resume_token)}B")
    elif isinstance(frame, rs.LeaseFrame):
        out.append(f"ttl={frame.ttl}ms requests={frame.number_of_requests}")
    elif isinstance(frame, rs.KeepaliveFrame):
        out.append(f"position={frame.last_received_position}")
    elif isinstance(frame, rs.RequestStreamFrame | rs.RequestChannelFrame):
        out.append(f"n={frame.initial_request_n}")
    elif isinstance(frame, rs.RequestNFrame):
        out.append(f"n={frame.request_n}")
    elif isinstance(frame, rs.ErrorFrame):
        out.append(f"code={_code_name(frame.error_code)}")
    elif isinstance(frame, rs.ResumeFrame):
        out.append(
            f"token={len(frame.resume_token)}B server_pos={frame.last_received_server_position}"
            f" client_pos={frame.first_available_client_position}"
        )
    elif isinstance(frame, rs.ResumeOkFrame):
        out.append(f"client_pos={frame.last_received_client_position}")
    elif isinstance(frame, rs.ExtFrame):
        out.append(f"ext={frame.extended_type:#x}")
    elif isinstance(frame, rs.UnknownFrame):
        out.append(f"body={len(frame.body)}B " + ("ignored (I flag)" if frame.ignore else ""))
    metadata = getattr(frame, "metadata", None)
    if isinstance(frame, rs.MetadataPushFrame):
        metadata = frame.metadata
    data = getattr(frame, "data", None)
    if metadata is not None:
        out.append(f"meta={len(metadata)}")
    if isinstance(data, bytes):
        out.append(f"data={len(data)}")
    if preview > 0:
        if metadata:
            out.append("m=" + _preview(metadata, preview))
        if data:
            out.append("d=" + _preview(data, preview))
    return out


def format_frame_info(info: FrameInfo, *, preview: int = 24) -> str:
    """One dissector line: time, direction, frame number, stream, type, flags, sizes."""
    when = f"{info.timestamp:10.6f}" if info.timestamp is not None else "         -"
    arrow = info.direction.arrow if info.direction is not None else "----"
    head = f"{when} {arrow} #{info.index:<4} @{info.offset:<7}"
    raw = info.raw
    if info.framed and len(raw) >= rs.HEADER_LENGTH:
        sid, tf = _HEADER.unpack_from(raw)
        frame_type, flags = tf >> rs.TYPE_SHIFT, tf & rs.FLAGS_MASK
        head += f" sid={sid:<6} {_type_name(frame_type):<16} flags={_flags(frame_type, flags):<9}"
    else:
        head += f" {'':10} {'?':<16} {'':15}"
    head += f" len={len(raw)}"
    if info.error is not None:
        code = info.error.error_code
        return f"{head} INVALID {_code_name(code)}: {info.error.message}"
    assert info.frame is not None
    parts = [head, *_details(info.frame, preview)]
    if info.invalid:
        parts.append(f"INVALID {_code_name(_CONNECTION_ERROR)}: unknown frame type without I flag")
    return " ".join(parts)
