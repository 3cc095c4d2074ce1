"""The rsio message codec (docs/protocols/rsio.md §2-§3).

Messages carry no length: each delimits itself by its type and fields. A
fixed-size onNext / onNextPacked can only be parsed knowing the
subscription's ``elementSize``, so :func:`decode_message` takes a lookup.
The connection parses its hot messages inline; this module is the reference
codec (tests, fuzzing, trace dissection) and holds the shared primitives.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from .._errors import RemoteProtocolError

#: The only protocol version (docs §4).
VERSION = 0
#: Largest value a varint may carry (docs §2.1).
MAX_VARINT = 2**63 - 1


class MessageType(enum.IntEnum):
    CLIENT_HELLO = 0x01
    SERVER_HELLO = 0x02
    GOODBYE = 0x03
    GOODBYE_ACK = 0x04
    SUBSCRIBE = 0x10
    REQUEST = 0x11
    CANCEL = 0x12
    ON_SUBSCRIBE = 0x20
    ON_NEXT = 0x21
    ON_NEXT_PACKED = 0x22
    ON_NEXT_PART = 0x23
    ON_NEXT_LAST_PART = 0x24
    ON_COMPLETE = 0x25
    ON_ERROR = 0x26


class ErrorCode(enum.IntEnum):
    """Why a connection failed (``RemoteProtocolError.error_code``); docs §9.
    Not sent on the wire: goodbye carries only a reason."""

    MALFORMED = 1
    UNKNOWN_MESSAGE = 2
    UNSUPPORTED_VERSION = 3
    UNEXPECTED_MESSAGE = 4
    DEMAND_EXCEEDED = 5
    LIMIT_EXCEEDED = 6


class Incomplete(Exception):
    """The buffer ends inside a message; ``need``: total bytes the message
    needs from its start, when known (else the bytes seen + 1)."""

    def __init__(self, need: int) -> None:
        self.need = need


def _error(code: ErrorCode, message: str) -> RemoteProtocolError:
    return RemoteProtocolError(message, int(code))


# ----------------------------------------------------------------------------
# varint


#: A varint byte with this bit set is followed by another; the low 7 bits carry.
_MORE = 0x80
_LOW7 = 0x7F


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128, shortest form. ``ValueError`` outside 0..2**63-1."""
    if value < _MORE:
        if value < 0:
            raise ValueError(f"varint must be >= 0, got {value}")
        return bytes((value,))
    if value > MAX_VARINT:
        raise ValueError(f"varint must be <= 2**63-1, got {value}")
    out = bytearray()
    while value >= _MORE:
        out.append((value & _LOW7) | _MORE)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it). Raises :class:`Incomplete` at the end of
    ``buf`` and ``RemoteProtocolError`` (MALFORMED) for an oversized or
    overlong varint (docs §2.1)."""
    try:
        b = buf[pos]
    except IndexError:
        raise Incomplete(pos + 1) from None
    if b < _MORE:
        return b, pos + 1
    return _decode_varint_slow(buf, pos)


def _decode_varint_slow(buf: bytes, pos: int) -> tuple[int, int]:
    # At most 9 octets: loops over a few bytes, never per payload byte.
    value = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise Incomplete(pos + 1)
        b = buf[pos]
        pos += 1
        value |= (b & _LOW7) << shift
        if b < _MORE:
            if b == 0:
                raise _error(ErrorCode.MALFORMED, "overlong varint (a shorter encoding exists)")
            return value, pos
        shift += 7
        if shift >= 63:
            raise _error(ErrorCode.MALFORMED, "varint above 2**63-1")


# ----------------------------------------------------------------------------
# messages (reference representation; positional, frozen, slotted)


# Declarations alike in shape by design (the duplicates scan lists them): one
# frozen dataclass per message, its fields as docs/protocols/rsio.md §3 names them.


@dataclass(frozen=True, slots=True)
class ClientHello:
    version: int
    extensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ServerHello:
    version: int
    extensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Goodbye:
    reason: str


@dataclass(frozen=True, slots=True)
class GoodbyeAck:
    reason: str


@dataclass(frozen=True, slots=True)
class Subscribe:
    publisher: str
    subscriber_id: int
    initial_demand: int = 0


@dataclass(frozen=True, slots=True)
class Request:
    subscriber_id: int
    demand: int


@dataclass(frozen=True, slots=True)
class Cancel:
    subscriber_id: int


@dataclass(frozen=True, slots=True)
class OnSubscribe:
    subscriber_id: int
    element_size: int = 0


@dataclass(frozen=True, slots=True)
class OnNext:
    subscriber_id: int
    element: bytes


@dataclass(frozen=True, slots=True)
class OnNextPacked:
    """``elements``: ``count * element_size`` bytes (count from the length)."""

    subscriber_id: int
    elements: bytes


@dataclass(frozen=True, slots=True)
class OnNextPart:
    subscriber_id: int
    element_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class OnNextLastPart:
    subscriber_id: int
    element_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class OnComplete:
    subscriber_id: int


@dataclass(frozen=True, slots=True)
class OnError:
    subscriber_id: int
    error: str


Message = (
    ClientHello
    | ServerHello
    | Goodbye
    | GoodbyeAck
    | Subscribe
    | Request
    | Cancel
    | OnSubscribe
    | OnNext
    | OnNextPacked
    | OnNextPart
    | OnNextLastPart
    | OnComplete
    | OnError
)

_v = encode_varint
_T = MessageType


#: Each message code as the one byte a message starts with.
_CODE = {t: bytes((t,)) for t in MessageType}


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError (a ValueError)
    return _v(len(raw)) + raw


def encode_message(msg: Message, element_size: int = 0) -> bytes:
    """One message. ``element_size``: the subscription's size, for onNext
    and onNextPacked (fixed-size mode when > 0). ``ValueError`` for a value
    the wire cannot carry."""
    t = type(msg)
    if t is OnNext:
        assert isinstance(msg, OnNext)
        head = _CODE[_T.ON_NEXT] + _v(msg.subscriber_id)
        if element_size:
            if len(msg.element) != element_size:
                raise ValueError(f"element must be {element_size} bytes, got {len(msg.element)}")
            return head + msg.element
        return head + _v(len(msg.element)) + msg.element
    if t is OnNextPacked:
        assert isinstance(msg, OnNextPacked)
        if element_size <= 0:
            raise ValueError("onNextPacked needs fixed-size mode (element_size > 0)")
        count, rest = divmod(len(msg.elements), element_size)
        if rest or not count:
            raise ValueError("packed elements must be a positive multiple of element_size")
        return _CODE[_T.ON_NEXT_PACKED] + _v(msg.subscriber_id) + _v(count) + msg.elements
    if t is ClientHello or t is ServerHello:
        assert isinstance(msg, ClientHello | ServerHello)
        if not 0 <= msg.version <= 255:
            raise ValueError("version is one byte")
        code = _T.CLIENT_HELLO if t is ClientHello else _T.SERVER_HELLO
        return (
            bytes((code, msg.version))
            + _v(len(msg.extensions))
            + b"".join(_v(e) for e in msg.extensions)
        )
    if t is Goodbye:
        assert isinstance(msg, Goodbye)
        return _CODE[_T.GOODBYE] + _string(msg.reason)
    if t is GoodbyeAck:
        assert isinstance(msg, GoodbyeAck)
        return _CODE[_T.GOODBYE_ACK] + _string(msg.reason)
    if t is Subscribe:
        assert isinstance(msg, Subscribe)
        return (
            _CODE[_T.SUBSCRIBE]
            + _string(msg.publisher)
            + _v(msg.subscriber_id)
            + _v(msg.initial_demand)
        )
    if t is Request:
        assert isinstance(msg, Request)
        return _CODE[_T.REQUEST] + _v(msg.subscriber_id) + _v(msg.demand)
    if t is Cancel:
        assert isinstance(msg, Cancel)
        return _CODE[_T.CANCEL] + _v(msg.subscriber_id)
    if t is OnSubscribe:
        assert isinstance(msg, OnSubscribe)
        return _CODE[_T.ON_SUBSCRIBE] + _v(msg.subscriber_id) + _v(msg.element_size)
    if t is OnNextPart or t is OnNextLastPart:
        assert isinstance(msg, OnNextPart | OnNextLastPart)
        part_code = _CODE[_T.ON_NEXT_PART] if t is OnNextPart else _CODE[_T.ON_NEXT_LAST_PART]
        return part_code + _v(msg.subscriber_id) + _v(msg.element_id) + _v(len(msg.data)) + msg.data
    if t is OnComplete:
        assert isinstance(msg, OnComplete)
        return _CODE[_T.ON_COMPLETE] + _v(msg.subscriber_id)
    if t is OnError:
        assert isinstance(msg, OnError)
        return _CODE[_T.ON_ERROR] + _v(msg.subscriber_id) + _string(msg.error)
    raise TypeError(f"not an rsio message: {msg!r}")


# ----------------------------------------------------------------------------
# decoding


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeLimits:
    """The size limits a decoder enforces as soon as a length is known."""

    max_message_size: int = 16 * 1024 * 1024
    max_string_size: int = 64 * 1024
    max_extensions: int = 64


_DEFAULT_LIMITS = DecodeLimits()


def read_bytes(buf: bytes, pos: int, limit: int, what: str) -> tuple[bytes, int]:
    """A varint-length-prefixed field; the length is checked before waiting."""
    b = buf[pos] if pos < len(buf) else -1
    if 0 <= b < _MORE:
        n, pos = b, pos + 1
    else:
        n, pos = decode_varint(buf, pos)
    if n > limit:
        raise _error(ErrorCode.LIMIT_EXCEEDED, f"{what} of {n} bytes exceeds the limit {limit}")
    end = pos + n
    if end > len(buf):
        raise Incomplete(end)
    return buf[pos:end], end


def read_string(buf: bytes, pos: int, limit: int, what: str) -> tuple[str, int]:
    raw, pos = read_bytes(buf, pos, limit, what)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError:
        raise _error(ErrorCode.MALFORMED, f"{what} is not valid UTF-8") from None


def decode_message(
    buf: bytes,
    pos: int = 0,
    element_size_of: Callable[[int], int | None] = lambda sid: 0,
    limits: DecodeLimits = _DEFAULT_LIMITS,
) -> tuple[Message, int]:
    """Decode the message starting at ``buf[pos]``: (message, position after it).

    ``element_size_of(subscriber_id)``: the subscription's element size (0:
    variable size), or None if not known yet (before onSubscribe: an onNext
    or onNextPacked for it is then an error, rule 1.9). Raises
    :class:`Incomplete` or ``RemoteProtocolError``.
    """
    if pos >= len(buf):
        raise Incomplete(pos + 1)
    t = buf[pos]
    p = pos + 1
    if t == _T.ON_NEXT:
        sid, p = decode_varint(buf, p)
        size = element_size_of(sid)
        if size is None:
            raise _error(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"onNext for subscriber {sid} before its onSubscribe (rule 1.9)",
            )
        if size:
            end = p + size
            if end > len(buf):
                raise Incomplete(end)
            return OnNext(sid, buf[p:end]), end
        element, p = read_bytes(buf, p, limits.max_message_size, "onNext element")
        return OnNext(sid, element), p
    if t == _T.ON_NEXT_PACKED:
        sid, p = decode_varint(buf, p)
        count, p = decode_varint(buf, p)
        size = element_size_of(sid)
        if not size:
            raise _error(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"onNextPacked for subscriber {sid}, which is not in fixed-size mode",
            )
        if count == 0:
            raise _error(ErrorCode.MALFORMED, "onNextPacked with count 0")
        n = count * size
        if n > limits.max_message_size:
            raise _error(
                ErrorCode.LIMIT_EXCEEDED,
                f"onNextPacked of {n} bytes exceeds the limit {limits.max_message_size}",
            )
        end = p + n
        if end > len(buf):
            raise Incomplete(end)
        return OnNextPacked(sid, buf[p:end]), end
    if t == _T.REQUEST:
        sid, p = decode_varint(buf, p)
        demand, p = decode_varint(buf, p)
        return Request(sid, demand), p
    if t == _T.CLIENT_HELLO or t == _T.SERVER_HELLO:
        if p >= len(buf):
            raise Incomplete(p + 1)
        version = buf[p]
        count, p = decode_varint(buf, p + 1)
        if count > limits.max_extensions:
            raise _error(
                ErrorCode.LIMIT_EXCEEDED,
                f"{count} extension Ids exceed the limit {limits.max_extensions}",
            )
        ids = []
        for _ in range(count):
            e, p = decode_varint(buf, p)
            ids.append(e)
        cls = ClientHello if t == _T.CLIENT_HELLO else ServerHello
        return cls(version, tuple(ids)), p
    if t == _T.GOODBYE or t == _T.GOODBYE_ACK:
        reason, p = read_string(buf, p, limits.max_string_size, "goodbye reason")
        return (Goodbye(reason) if t == _T.GOODBYE else GoodbyeAck(reason)), p
    if t == _T.SUBSCRIBE:
        name, p = read_string(buf, p, limits.max_string_size, "publisher name")
        sid, p = decode_varint(buf, p)
        demand, p = decode_varint(buf, p)
        return Subscribe(name, sid, demand), p
    if t == _T.CANCEL:
        sid, p = decode_varint(buf, p)
        return Cancel(sid), p
    if t == _T.ON_SUBSCRIBE:
        sid, p = decode_varint(buf, p)
        size, p = decode_varint(buf, p)
        if size > limits.max_message_size:
            raise _error(
                ErrorCode.LIMIT_EXCEEDED,
                f"elementSize {size} exceeds the limit {limits.max_message_size}",
            )
        return OnSubscribe(sid, size), p
    if t == _T.ON_NEXT_PART or t == _T.ON_NEXT_LAST_PART:
        sid, p = decode_varint(buf, p)
        eid, p = decode_varint(buf, p)
        data, p = read_bytes(buf, p, limits.max_message_size, "element part")
        return (
            OnNextPart(sid, eid, data) if t == _T.ON_NEXT_PART else OnNextLastPart(sid, eid, data)
        ), p
    if t == _T.ON_COMPLETE:
        sid, p = decode_varint(buf, p)
        return OnComplete(sid), p
    if t == _T.ON_ERROR:
        sid, p = decode_varint(buf, p)
        error, p = read_string(buf, p, limits.max_string_size, "onError message")
        return OnError(sid, error), p
    raise _error(ErrorCode.UNKNOWN_MESSAGE, f"unknown message type 0x{t:02x}")
