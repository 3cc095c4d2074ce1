"""RSocket 1.0 frame codec: frame bytes -> frame objects (no length prefix),
and the wire shapes shared with the encoder (``_encode``).

``encode_frame`` (in ``_encode``) and ``decode_frame`` are pure functions. The 24-bit length
prefix of byte-stream transports lives in ``_framing``; WebSocket carries the
bytes produced here as they are.

Decoding validates every field and raises ``RemoteProtocolError`` whose
``error_code`` is the ERROR code to answer with: ``INVALID_SETUP`` for a
malformed SETUP, ``CONNECTION_ERROR`` for everything else. No other exception
escapes ``decode_frame`` on any input. Two exceptions to "raise":

- a frame type this codec does not know (RESERVED 0x00, unassigned
  0x0F-0x3E) decodes to ``UnknownFrame``; the connection ignores it when its
  I flag is set and otherwise answers ERROR[CONNECTION_ERROR];
- a known frame that fails validation but has its (I)gnore flag set also
  decodes to ``UnknownFrame(ignore=True)`` (spec: a malformed frame is a
  connection error "unless the frame's IGNORE flag is set").

Flag bits a frame type does not define are ignored on reception (spec:
"Handling the Unexpected" 8) and sent as 0. Reserved high bits of 31/63-bit
fields (stream ID included) must be 0, and a frame must end exactly where its
layout ends (no trailing bytes after fixed-size frames). Encoding applies the
same field rules and raises ``LocalProtocolError``, so ``encode_frame``
accepts a frame exactly when ``decode_frame`` would give it back unchanged.
docs/rsocket-wire.md lists every check and its code.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct

from .._errors import RemoteProtocolError
from ._fast import PAYLOAD_NO_METADATA_MASK, T_PAYLOAD, payload_frame
from ._frames import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_IGNORE,
    FLAG_LEASE,
    FLAG_METADATA,
    FLAG_NEXT,
    FLAG_RESPOND,
    FLAG_RESUME_ENABLE,
    FLAGS_MASK,
    MAX_POSITION,
    MAX_U31,
    TYPE_SHIFT,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    ExtFrame,
    Frame,
    FrameType,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    UnknownFrame,
)

__all__ = ["HEADER_LENGTH", "decode_frame"]

#: Stream ID (4 bytes) + frame type and flags (2 bytes).
HEADER_LENGTH = 6

_CONNECTION_ERROR = ErrorCode.CONNECTION_ERROR
_INVALID_SETUP = ErrorCode.INVALID_SETUP

_MAX_U16 = 0xFFFF
_MAX_U32 = 0xFFFFFFFF
_MAX_MIME_LENGTH = 0xFF
_BIT31 = 0x80000000

# One Struct per wire shape, built once.
_HEADER = Struct(">IH")  # stream id, type << TYPE_SHIFT | flags
_HEADER_U24 = Struct(">IHBH")  # header + 24-bit length (hi byte, lo 16 bits)
_HEADER_U32 = Struct(">IHI")  # header + one 32-bit field
_HEADER_U32_U24 = Struct(">IHIBH")  # header + 32-bit field + 24-bit length
_HEADER_U32_U32 = Struct(">IHII")  # header + two 32-bit fields (LEASE)
_HEADER_U64 = Struct(">IHQ")  # header + 63-bit position
_SETUP_FIXED = Struct(">IHHHII")  # header, major, minor, keepalive, lifetime
_RESUME_FIXED = Struct(">IHHHH")  # header, major, minor, token length
_U8 = Struct(">B")
_U16 = Struct(">H")
_U24 = Struct(">BH")
_U64_U64 = Struct(">QQ")

_T_SETUP = FrameType.SETUP << TYPE_SHIFT
_T_LEASE = FrameType.LEASE << TYPE_SHIFT
_T_KEEPALIVE = FrameType.KEEPALIVE << TYPE_SHIFT
_T_REQUEST_RESPONSE = FrameType.REQUEST_RESPONSE << TYPE_SHIFT
_T_REQUEST_FNF = FrameType.REQUEST_FNF << TYPE_SHIFT
_T_REQUEST_STREAM = FrameType.REQUEST_STREAM << TYPE_SHIFT
_T_REQUEST_CHANNEL = FrameType.REQUEST_CHANNEL << TYPE_SHIFT
_T_REQUEST_N = FrameType.REQUEST_N << TYPE_SHIFT
_T_CANCEL = FrameType.CANCEL << TYPE_SHIFT
_T_PAYLOAD = FrameType.PAYLOAD << TYPE_SHIFT
_T_ERROR = FrameType.ERROR << TYPE_SHIFT
_T_METADATA_PUSH = FrameType.METADATA_PUSH << TYPE_SHIFT
_T_RESUME = FrameType.RESUME << TYPE_SHIFT
_T_RESUME_OK = FrameType.RESUME_OK << TYPE_SHIFT
_T_EXT = FrameType.EXT << TYPE_SHIFT

_ERROR_CODES: dict[int, int] = {int(code): code for code in ErrorCode}


# --------------------------------------------------------------------------
# decoding


def _bad(message: str, code: int = _CONNECTION_ERROR) -> RemoteProtocolError:
    return RemoteProtocolError(message, error_code=code)


def _check_stream_id(name: str, sid: int, code: int = _CONNECTION_ERROR) -> None:
    """Connection-level frames: stream ID 0 (which also excludes the reserved bit)."""
    if sid != 0:
        if sid & _BIT31:
            raise _bad(f"{name}: reserved bit of the stream ID is set", code)
        raise _bad(f"{name}: stream ID must be 0, got {sid}", code)


def _check_request_stream_id(name: str, sid: int) -> None:
    if sid & _BIT31:
        raise _bad(f"{name}: reserved bit of the stream ID is set")
    if sid == 0:
        raise _bad(f"{name}: stream ID must be > 0 for a request")


def _check_u31(name: str, field: str, value: int, code: int = _CONNECTION_ERROR) -> None:
    if value & _BIT31:
        raise _bad(f"{name}: reserved bit of {field} is set", code)


def _check_positive_u31(name: str, field: str, value: int, code: int = _CONNECTION_ERROR) -> None:
    _check_u31(name, field, value, code)
    if value == 0:
        raise _bad(f"{name}: {field} must be > 0", code)


def _check_u63(name: str, field: str, value: int) -> None:
    if value > MAX_POSITION:
        raise _bad(f"{name}: reserved bit of {field} is set")


def _exact_length(name: str, data: bytes, expected: int) -> None:
    n = len(data)
    if n < expected:
        raise _bad(f"{name}: frame too short ({n} bytes, needs {expected})")
    if n > expected:
        raise _bad(f"{name}: {n - expected} trailing bytes after the frame")


def _min_length(name: str, data: bytes, expected: int, code: int = _CONNECTION_ERROR) -> None:
    if len(data) < expected:
        raise _bad(f"{name}: frame too short ({len(data)} bytes, needs {expected})", code)


def _split_metadata(
    name: str, data: bytes, offset: int, code: int = _CONNECTION_ERROR
) -> tuple[bytes, bytes]:
    """Metadata with its 24-bit length at ``offset``, then data to the end."""
    end = len(data)
    if end < offset + 3:
        raise _bad(f"{name}: frame too short for the metadata length", code)
    hi, lo = _U24.unpack_from(data, offset)
    start = offset + 3
    stop = start + (hi << 16 | lo)
    if stop > end:
        raise _bad(
            f"{name}: metadata length {hi << 16 | lo} exceeds the {end - start} bytes left",
            code,
        )
    return data[start:stop], data[stop:]


def _dec_setup(data: bytes, sid: int, tf: int) -> SetupFrame:
    name = "SETUP"
    code = _INVALID_SETUP
    _check_stream_id(name, sid, code)
    _min_length(name, data, 20, code)  # fixed part + two MIME lengths
    _, _, major, minor, keepalive, lifetime = _SETUP_FIXED.unpack_from(data)
    _check_positive_u31(name, "keepalive interval", keepalive, code)
    _check_positive_u31(name, "max lifetime", lifetime, code)
    end = len(data)
    off = 18
    token = None
    if tf & FLAG_RESUME_ENABLE:
        (tlen,) = _U16.unpack_from(data, off)
        off += 2
        if off + tlen > end:
            raise _bad(f"{name}: resume token length {tlen} exceeds the frame", code)
        token = data[off : off + tlen]
        off += tlen
    mimes = []
    for field in ("metadata MIME type", "data MIME type"):
        if off >= end:
            raise _bad(f"{name}: frame too short for the {field} length", code)
        mlen = data[off]
        off += 1
        if off + mlen > end:
            raise _bad(f"{name}: {field} length {mlen} exceeds the frame", code)
        raw = data[off : off + mlen]
        off += mlen
        if not raw.isascii():
            raise _bad(f"{name}: {field} is not US-ASCII: {raw!r}", code)
        mimes.append(raw.decode("ascii"))
    if tf & FLAG_METADATA:
        metadata, payload = _split_metadata(name, data, off, code)
    else:
        metadata, payload = None, data[off:]
    return SetupFrame(
        keepalive,
        lifetime,
        mimes[0],
        mimes[1],
        metadata,
        payload,
        token,
        bool(tf & FLAG_LEASE),
        major,
        minor,
        bool(tf & FLAG_IGNORE),
        0,
    )


def _dec_lease(data: bytes, sid: int, tf: int) -> LeaseFrame:
    name = "LEASE"
    _check_stream_id(name, sid)
    _min_length(name, data, 14)
    _, _, ttl, number = _HEADER_U32_U32.unpack_from(data)
    _check_u31(name, "time-to-live", ttl)
    _check_u31(name, "number of requests", number)
    if tf & FLAG_METADATA:
        metadata: bytes | None = data[14:]  # metadata-only frame: no length field
    else:
        _exact_length(name, data, 14)
        metadata = None
    return LeaseFrame(ttl, number, metadata, bool(tf & FLAG_IGNORE), 0)


def _dec_keepalive(data: bytes, sid: int, tf: int) -> KeepaliveFrame:
    name = "KEEPALIVE"
    _check_stream_id(name, sid)
    _min_length(name, data, 14)
    (_, _, position) = _HEADER_U64.unpack_from(data)
    _check_u63(name, "last received position", position)
    return KeepaliveFrame(bool(tf & FLAG_RESPOND), position, data[14:], bool(tf & FLAG_IGNORE), 0)


def _dec_request_response(data: bytes, sid: int, tf: int) -> RequestResponseFrame:
    _check_request_stream_id("REQUEST_RESPONSE", sid)
    if tf & FLAG_METADATA:
        metadata, payload = _split_metadata("REQUEST_RESPONSE", data, 6)
    else:
        metadata, payload = None, data[6:]
    return RequestResponseFrame(
        sid, payload, metadata, bool(tf & FLAG_FOLLOWS), bool(tf & FLAG_IGNORE)
    )


def _dec_request_fnf(data: bytes, sid: int, tf: int) -> RequestFnfFrame:
    _check_request_stream_id("REQUEST_FNF", sid)
    if tf & FLAG_METADATA:
        metadata, payload = _split_metadata("REQUEST_FNF", data, 6)
    else:
        metadata, payload = None, data[6:]
    return RequestFnfFrame(sid, payload, metadata, bool(tf & FLAG_FOLLOWS), bool(tf & FLAG_IGNORE))


def _dec_request_stream(data: bytes, sid: int, tf: int) -> RequestStreamFrame:
    name = "REQUEST_STREAM"
    _check_request_stream_id(name, sid)
    _min_length(name, data, 10)
    (_, _, n) = _HEADER_U32.unpack_from(data)
    _check_positive_u31(name, "initial request N", n)
    if tf & FLAG_METADATA:
        metadata, payload = _split_metadata(name, data, 10)
    else:
        metadata, payload = None, data[10:]
    return RequestStreamFrame(
        sid, n, payload, metadata, bool(tf & FLAG_FOLLOWS), bool(tf & FLAG_IGNORE)
    )


def _dec_request_channel(data: bytes, sid: int, tf: int) -> RequestChannelFrame:
    name = "REQUEST_CHANNEL"
    _check_request_stream_id(name, sid)
    _min_length(name, data, 10)
    (_, _, n) = _HEADER_U32.unpack_from(data)
    _check_positive_u31(name, "initial request N", n)
    if tf & FLAG_METADATA:
        metadata, payload = _split_metadata(name, data, 10)
    else:
        metadata, payload = None, data[10:]
    return RequestChannelFrame(
        sid,
        n,
        payload,
        metadata,
        bool(tf & FLAG_FOLLOWS),
        bool(tf & FLAG_COMPLETE),
        bool(tf & FLAG_IGNORE),
    )


def _dec_request_n(data: bytes, sid: int, tf: int) -> RequestNFrame:
    name = "REQUEST_N"
    _check_u31(name, "the stream ID", sid)
    _exact_length(name, data, 10)
    (_, _, n) = _HEADER_U32.unpack_from(data)
    _check_positive_u31(name, "request N", n)
    return RequestNFrame(sid, n, bool(tf & FLAG_IGNORE))


def _dec_cancel(data: bytes, sid: int, tf: int) -> CancelFrame:
    _check_u31("CANCEL", "the stream ID", sid)
    _exact_length("CANCEL", data, 6)
    return CancelFrame(sid, bool(tf & FLAG_IGNORE))


def _dec_payload(data: bytes, sid: int, tf: int) -> PayloadFrame:
    _check_u31("PAYLOAD", "the stream ID", sid)
    if tf & FLAG_METADATA:
        metadata, payload = _split_metadata("PAYLOAD", data, 6)
    else:
        metadata, payload = None, data[6:]
    return PayloadFrame(
        sid,
        payload,
        metadata,
        bool(tf & FLAG_FOLLOWS),
        bool(tf & FLAG_COMPLETE),
        bool(tf & FLAG_NEXT),
        bool(tf & FLAG_IGNORE),
    )


def _dec_error(data: bytes, sid: int, tf: int) -> ErrorFrame:
    _check_u31("ERROR", "the stream ID", sid)
    _min_length("ERROR", data, 10)
    (_, _, code) = _HEADER_U32.unpack_from(data)
    return ErrorFrame(sid, _ERROR_CODES.get(code, code), data[10:], bool(tf & FLAG_IGNORE))


def _dec_metadata_push(data: bytes, sid: int, tf: int) -> MetadataPushFrame:
    _check_u31("METADATA_PUSH", "the stream ID", sid)
    if not tf & FLAG_METADATA:
        raise _bad("METADATA_PUSH: the (M)etadata flag must be set")
    return MetadataPushFrame(data[6:], bool(tf & FLAG_IGNORE), sid)


def _dec_resume(data: bytes, sid: int, tf: int) -> ResumeFrame:
    name = "RESUME"
    _check_stream_id(name, sid)
    _min_length(name, data, 12)
    _, _, major, minor, tlen = _RESUME_FIXED.unpack_from(data)
    _exact_length(name, data, 12 + tlen + 16)
    token = data[12 : 12 + tlen]
    server_pos, client_pos = _U64_U64.unpack_from(data, 12 + tlen)
    _check_u63(name, "last received server position", server_pos)
    _check_u63(name, "first available client position", client_pos)
    return ResumeFrame(token, server_pos, client_pos, major, minor, bool(tf & FLAG_IGNORE), 0)


def _dec_resume_ok(data: bytes, sid: int, tf: int) -> ResumeOkFrame:
    name = "RESUME_OK"
    _check_stream_id(name, sid)
    _exact_length(name, data, 14)
    (_, _, position) = _HEADER_U64.unpack_from(data)
    _check_u63(name, "last received client position", position)
    return ResumeOkFrame(position, bool(tf & FLAG_IGNORE), 0)


def _dec_ext(data: bytes, sid: int, tf: int) -> ExtFrame:
    name = "EXT"
    _check_u31(name, "the stream ID", sid)
    _min_length(name, data, 10)
    (_, _, ext_type) = _HEADER_U32.unpack_from(data)
    _check_positive_u31(name, "extended type", ext_type)
    if tf & FLAG_METADATA:
        metadata, payload = _split_metadata(name, data, 10)
    else:
        metadata, payload = None, data[10:]
    return ExtFrame(sid, ext_type, payload, metadata, bool(tf & FLAG_IGNORE))


_DECODERS: dict[int, Callable[[bytes, int, int], Frame]] = {
    FrameType.SETUP: _dec_setup,
    FrameType.LEASE: _dec_lease,
    FrameType.KEEPALIVE: _dec_keepalive,
    FrameType.REQUEST_RESPONSE: _dec_request_response,
    FrameType.REQUEST_FNF: _dec_request_fnf,
    FrameType.REQUEST_STREAM: _dec_request_stream,
    FrameType.REQUEST_CHANNEL: _dec_request_channel,
    FrameType.REQUEST_N: _dec_request_n,
    FrameType.CANCEL: _dec_cancel,
    FrameType.PAYLOAD: _dec_payload,
    FrameType.ERROR: _dec_error,
    FrameType.METADATA_PUSH: _dec_metadata_push,
    FrameType.RESUME: _dec_resume,
    FrameType.RESUME_OK: _dec_resume_ok,
    FrameType.EXT: _dec_ext,
}


def decode_frame(data: bytes) -> Frame:
    """Decode one frame (without length prefix).

    Raises ``RemoteProtocolError`` (and nothing else) on a malformed frame;
    see the module docstring for ``UnknownFrame``.
    """
    if type(data) is not bytes:
        data = bytes(data)
    if len(data) < HEADER_LENGTH:
        raise _bad(f"frame too short ({len(data)} bytes, the header needs {HEADER_LENGTH})")
    sid, tf = _HEADER.unpack_from(data)
    if tf & PAYLOAD_NO_METADATA_MASK == T_PAYLOAD and sid <= MAX_U31:
        return payload_frame(sid, data[6:], tf)  # what _dec_payload does, faster
    decoder = _DECODERS.get(tf >> TYPE_SHIFT)
    if decoder is None:
        return UnknownFrame(
            sid, tf >> TYPE_SHIFT, tf & FLAGS_MASK, data[6:], bool(tf & FLAG_IGNORE)
        )
    try:
        return decoder(data, sid, tf)
    except RemoteProtocolError:
        if tf & FLAG_IGNORE:
            return UnknownFrame(sid, tf >> TYPE_SHIFT, tf & FLAGS_MASK, data[6:], True)
        raise
