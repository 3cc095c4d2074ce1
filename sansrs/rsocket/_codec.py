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
from . import _frames as fr
from ._fast import PAYLOAD_FLAGS, PAYLOAD_NO_METADATA_MASK, T_PAYLOAD, new_object

__all__ = ["HEADER_LENGTH", "decode_frame"]

#: Stream ID (4 bytes) + frame type and flags (2 bytes).
HEADER_LENGTH = 6

_CONNECTION_ERROR = fr.ErrorCode.CONNECTION_ERROR
_INVALID_SETUP = fr.ErrorCode.INVALID_SETUP

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

_T_SETUP = fr.FrameType.SETUP << fr.TYPE_SHIFT
_T_LEASE = fr.FrameType.LEASE << fr.TYPE_SHIFT
_T_KEEPALIVE = fr.FrameType.KEEPALIVE << fr.TYPE_SHIFT
_T_REQUEST_RESPONSE = fr.FrameType.REQUEST_RESPONSE << fr.TYPE_SHIFT
_T_REQUEST_FNF = fr.FrameType.REQUEST_FNF << fr.TYPE_SHIFT
_T_REQUEST_STREAM = fr.FrameType.REQUEST_STREAM << fr.TYPE_SHIFT
_T_REQUEST_CHANNEL = fr.FrameType.REQUEST_CHANNEL << fr.TYPE_SHIFT
_T_REQUEST_N = fr.FrameType.REQUEST_N << fr.TYPE_SHIFT
_T_CANCEL = fr.FrameType.CANCEL << fr.TYPE_SHIFT
_T_PAYLOAD = fr.FrameType.PAYLOAD << fr.TYPE_SHIFT
_T_ERROR = fr.FrameType.ERROR << fr.TYPE_SHIFT
_T_METADATA_PUSH = fr.FrameType.METADATA_PUSH << fr.TYPE_SHIFT
_T_RESUME = fr.FrameType.RESUME << fr.TYPE_SHIFT
_T_RESUME_OK = fr.FrameType.RESUME_OK << fr.TYPE_SHIFT
_T_EXT = fr.FrameType.EXT << fr.TYPE_SHIFT

_ERROR_CODES: dict[int, int] = {int(code): code for code in fr.ErrorCode}


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
    if value > fr.MAX_POSITION:
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


def _dec_setup(data: bytes, sid: int, tf: int) -> fr.SetupFrame:
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
    if tf & fr.FLAG_RESUME_ENABLE:
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
    if tf & fr.FLAG_METADATA:
        metadata, payload = _split_metadata(name, data, off, code)
    else:
        metadata, payload = None, data[off:]
    return fr.SetupFrame(
        keepalive,
        lifetime,
        mimes[0],
        mimes[1],
        metadata,
        payload,
        token,
        bool(tf & fr.FLAG_LEASE),
        major,
        minor,
        bool(tf & fr.FLAG_IGNORE),
        0,
    )


def _dec_lease(data: bytes, sid: int, tf: int) -> fr.LeaseFrame:
    name = "LEASE"
    _check_stream_id(name, sid)
    _min_length(name, data, 14)
    _, _, ttl, number = _HEADER_U32_U32.unpack_from(data)
    _check_u31(name, "time-to-live", ttl)
    _check_u31(name, "number of requests", number)
    if tf & fr.FLAG_METADATA:
        metadata: bytes | None = data[14:]  # metadata-only frame: no length field
    else:
        _exact_length(name, data, 14)
        metadata = None
    return fr.LeaseFrame(ttl, number, metadata, bool(tf & fr.FLAG_IGNORE), 0)


def _field(name: str, data: bytes, field: str, *, position: bool, exact: bool) -> int:
    """The field right after the header: a 63-bit ``position`` (KEEPALIVE,
    RESUME_OK) or a 31-bit value > 0 (initial request N, REQUEST_N, the EXT
    type); ``exact``: nothing may follow it."""
    end = 14 if position else 10
    if exact:
        _exact_length(name, data, end)
    else:
        _min_length(name, data, end)
    value: int = (_HEADER_U64 if position else _HEADER_U32).unpack_from(data)[2]
    if position:
        _check_u63(name, field, value)
    else:
        _check_positive_u31(name, field, value)
    return value


def _dec_keepalive(data: bytes, sid: int, tf: int) -> fr.KeepaliveFrame:
    _check_stream_id("KEEPALIVE", sid)
    position = _field("KEEPALIVE", data, "last received position", position=True, exact=False)
    return fr.KeepaliveFrame(
        bool(tf & fr.FLAG_RESPOND), position, data[14:], bool(tf & fr.FLAG_IGNORE), 0
    )


def _dec_request(data: bytes, sid: int, tf: int) -> fr.RequestFrame:
    """REQUEST_RESPONSE, _FNF, _STREAM and _CHANNEL: one layout, the last two
    with the initial request N (and a channel with C)."""
    frame_type = tf >> fr.TYPE_SHIFT
    name = _REQUEST_NAMES[frame_type]
    _check_request_stream_id(name, sid)
    n = 0
    offset = 6
    if frame_type == fr.FrameType.REQUEST_STREAM or frame_type == fr.FrameType.REQUEST_CHANNEL:
        n = _field(name, data, "initial request N", position=False, exact=False)
        offset = 10
    if tf & fr.FLAG_METADATA:
        metadata, payload = _split_metadata(name, data, offset)
    else:
        metadata, payload = None, data[offset:]
    follows = bool(tf & fr.FLAG_FOLLOWS)
    ignore = bool(tf & fr.FLAG_IGNORE)
    if frame_type == fr.FrameType.REQUEST_RESPONSE:
        return fr.RequestResponseFrame(sid, payload, metadata, follows, ignore)
    if frame_type == fr.FrameType.REQUEST_FNF:
        return fr.RequestFnfFrame(sid, payload, metadata, follows, ignore)
    if frame_type == fr.FrameType.REQUEST_STREAM:
        return fr.RequestStreamFrame(sid, n, payload, metadata, follows, ignore)
    complete = bool(tf & fr.FLAG_COMPLETE)
    return fr.RequestChannelFrame(sid, n, payload, metadata, follows, complete, ignore)


_REQUEST_NAMES = {
    t.value: t.name
    for t in (
        fr.FrameType.REQUEST_RESPONSE,
        fr.FrameType.REQUEST_FNF,
        fr.FrameType.REQUEST_STREAM,
        fr.FrameType.REQUEST_CHANNEL,
    )
}


def _dec_request_n(data: bytes, sid: int, tf: int) -> fr.RequestNFrame:
    name = "REQUEST_N"
    _check_u31(name, "the stream ID", sid)
    n = _field(name, data, "request N", position=False, exact=True)
    return fr.RequestNFrame(sid, n, bool(tf & fr.FLAG_IGNORE))


def _dec_cancel(data: bytes, sid: int, tf: int) -> fr.CancelFrame:
    _check_u31("CANCEL", "the stream ID", sid)
    _exact_length("CANCEL", data, 6)
    return fr.CancelFrame(sid, bool(tf & fr.FLAG_IGNORE))


def _dec_payload(data: bytes, sid: int, tf: int) -> fr.PayloadFrame:
    _check_u31("PAYLOAD", "the stream ID", sid)
    if tf & fr.FLAG_METADATA:
        metadata, payload = _split_metadata("PAYLOAD", data, 6)
    else:
        metadata, payload = None, data[6:]
    return fr.PayloadFrame(
        sid,
        payload,
        metadata,
        bool(tf & fr.FLAG_FOLLOWS),
        bool(tf & fr.FLAG_COMPLETE),
        bool(tf & fr.FLAG_NEXT),
        bool(tf & fr.FLAG_IGNORE),
    )


def _dec_error(data: bytes, sid: int, tf: int) -> fr.ErrorFrame:
    _check_u31("ERROR", "the stream ID", sid)
    _min_length("ERROR", data, 10)
    (_, _, code) = _HEADER_U32.unpack_from(data)
    return fr.ErrorFrame(sid, _ERROR_CODES.get(code, code), data[10:], bool(tf & fr.FLAG_IGNORE))


def _dec_metadata_push(data: bytes, sid: int, tf: int) -> fr.MetadataPushFrame:
    _check_u31("METADATA_PUSH", "the stream ID", sid)
    if not tf & fr.FLAG_METADATA:
        raise _bad("METADATA_PUSH: the (M)etadata flag must be set")
    return fr.MetadataPushFrame(data[6:], bool(tf & fr.FLAG_IGNORE), sid)


def _dec_resume(data: bytes, sid: int, tf: int) -> fr.ResumeFrame:
    name = "RESUME"
    _check_stream_id(name, sid)
    _min_length(name, data, 12)
    _, _, major, minor, tlen = _RESUME_FIXED.unpack_from(data)
    _exact_length(name, data, 12 + tlen + 16)
    token = data[12 : 12 + tlen]
    server_pos, client_pos = _U64_U64.unpack_from(data, 12 + tlen)
    _check_u63(name, "last received server position", server_pos)
    _check_u63(name, "first available client position", client_pos)
    return fr.ResumeFrame(token, server_pos, client_pos, major, minor, bool(tf & fr.FLAG_IGNORE), 0)


def _dec_resume_ok(data: bytes, sid: int, tf: int) -> fr.ResumeOkFrame:
    _check_stream_id("RESUME_OK", sid)
    field = "last received client position"
    position = _field("RESUME_OK", data, field, position=True, exact=True)
    return fr.ResumeOkFrame(position, bool(tf & fr.FLAG_IGNORE), 0)


def _dec_ext(data: bytes, sid: int, tf: int) -> fr.ExtFrame:
    name = "EXT"
    _check_u31(name, "the stream ID", sid)
    ext_type = _field(name, data, "extended type", position=False, exact=False)
    if tf & fr.FLAG_METADATA:
        metadata, payload = _split_metadata(name, data, 10)
    else:
        metadata, payload = None, data[10:]
    return fr.ExtFrame(sid, ext_type, payload, metadata, bool(tf & fr.FLAG_IGNORE))


_DECODERS: dict[int, Callable[[bytes, int, int], fr.Frame]] = {
    fr.FrameType.SETUP: _dec_setup,
    fr.FrameType.LEASE: _dec_lease,
    fr.FrameType.KEEPALIVE: _dec_keepalive,
    fr.FrameType.REQUEST_RESPONSE: _dec_request,
    fr.FrameType.REQUEST_FNF: _dec_request,
    fr.FrameType.REQUEST_STREAM: _dec_request,
    fr.FrameType.REQUEST_CHANNEL: _dec_request,
    fr.FrameType.REQUEST_N: _dec_request_n,
    fr.FrameType.CANCEL: _dec_cancel,
    fr.FrameType.PAYLOAD: _dec_payload,
    fr.FrameType.ERROR: _dec_error,
    fr.FrameType.METADATA_PUSH: _dec_metadata_push,
    fr.FrameType.RESUME: _dec_resume,
    fr.FrameType.RESUME_OK: _dec_resume_ok,
    fr.FrameType.EXT: _dec_ext,
}


# Module globals for decode_frame's PAYLOAD path.
_PayloadFrame = fr.PayloadFrame
_MAX_STREAM_ID = fr.MAX_U31
_FLAGS_MASK = fr.FLAGS_MASK


def decode_frame(data: bytes) -> fr.Frame:
    """Decode one frame (without length prefix).

    Raises ``RemoteProtocolError`` (and nothing else) on a malformed frame;
    see the module docstring for ``UnknownFrame``.
    """
    if type(data) is not bytes:
        data = bytes(data)
    if len(data) < HEADER_LENGTH:
        raise _bad(f"frame too short ({len(data)} bytes, the header needs {HEADER_LENGTH})")
    sid, tf = _HEADER.unpack_from(data)
    if tf & PAYLOAD_NO_METADATA_MASK == T_PAYLOAD and sid <= _MAX_STREAM_ID:
        # _fast.payload_frame inline (what _dec_payload does): bench_codec
        # "decode per frame, each dropped" 11.2x rsocket-py against 10.2x
        # through the call (see _fast's docstring).
        frame = new_object(_PayloadFrame)
        frame.stream_id = sid
        frame.data = data[6:]
        frame.metadata = None
        frame.follows, frame.complete, frame.next, frame.ignore = PAYLOAD_FLAGS[tf & _FLAGS_MASK]
        return frame  # type: ignore[no-any-return]
    decoder = _DECODERS.get(tf >> fr.TYPE_SHIFT)
    if decoder is None:
        return fr.UnknownFrame(
            sid, tf >> fr.TYPE_SHIFT, tf & fr.FLAGS_MASK, data[6:], bool(tf & fr.FLAG_IGNORE)
        )
    try:
        return decoder(data, sid, tf)
    except RemoteProtocolError:
        if tf & fr.FLAG_IGNORE:
            return fr.UnknownFrame(sid, tf >> fr.TYPE_SHIFT, tf & fr.FLAGS_MASK, data[6:], True)
        raise
