"""RSocket frame codec: exact byte layouts per frame type, every validation.

The hex strings are written by hand from the layouts in the spec
(the RSocket protocol, Framing), field by field: stream ID (4 bytes),
frame type << 10 | flags (2 bytes), then the frame's own fields.
"""

from __future__ import annotations

import pytest

from sansrs.rsocket import (
    MAX_POSITION,
    MAX_REQUEST_N,
    MAX_STREAM_ID,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    ExtFrame,
    Frame,
    KeepaliveFrame,
    LeaseFrame,
    LocalProtocolError,
    MetadataPushFrame,
    PayloadFrame,
    RemoteProtocolError,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    UnknownFrame,
    decode_frame,
    encode_frame,
)

CONNECTION_ERROR = ErrorCode.CONNECTION_ERROR
INVALID_SETUP = ErrorCode.INVALID_SETUP


def h(text: str) -> bytes:
    """Hex with spaces between fields."""
    return bytes.fromhex(text.replace(" ", ""))


# SETUP fixed part used below: version 1.0, keepalive 500 ms, max lifetime 90 s.
SETUP_FIXED = "0001 0000 000001f4 00015f90"

LAYOUTS: list[tuple[str, str, Frame]] = [
    (
        "setup",
        f"00000000 0400 {SETUP_FIXED} 03 612f62 03 742f70 6869",
        SetupFrame(500, 90000, "a/b", "t/p", None, b"hi"),
    ),
    (
        "setup-M-R-L",  # flags M 0x100 | R 0x80 | L 0x40
        f"00000000 05c0 {SETUP_FIXED} 0002 746b 03 612f62 03 742f70 000002 6d64 64",
        SetupFrame(500, 90000, "a/b", "t/p", b"md", b"d", resume_token=b"tk", lease=True),
    ),
    (
        "setup-empty-mime-and-token",
        f"00000000 0480 {SETUP_FIXED} 0000 00 00",
        SetupFrame(500, 90000, "", "", resume_token=b""),
    ),
    ("lease", "00000000 0800 000003e8 00000005", LeaseFrame(1000, 5)),
    (
        "lease-M",  # metadata-only frame: no metadata length
        "00000000 0900 000003e8 00000005 6d6d",
        LeaseFrame(1000, 5, b"mm"),
    ),
    (
        "keepalive-R",
        "00000000 0c80 0000000000000007 6b61",
        KeepaliveFrame(True, 7, b"ka"),
    ),
    ("keepalive", "00000000 0c00 0000000000000000", KeepaliveFrame(False)),
    (
        "request-response-M",
        "00000001 1100 000001 6d 64",
        RequestResponseFrame(1, b"d", b"m"),
    ),
    ("request-fnf-F", "00000003 1480 78", RequestFnfFrame(3, b"x", None, follows=True)),
    ("request-stream", "00000005 1800 00000010 73", RequestStreamFrame(5, 16, b"s")),
    (
        "request-channel-M-C",  # M set with empty metadata, max initial N
        "00000007 1d40 7fffffff 000000",
        RequestChannelFrame(7, MAX_REQUEST_N, b"", b"", complete=True),
    ),
    ("request-n", "00000007 2000 00000003", RequestNFrame(7, 3)),
    ("cancel", "00000009 2400", CancelFrame(9)),
    (
        "payload-C-N",
        "00000001 2860 68656c6c6f",
        PayloadFrame(1, b"hello", None, complete=True, next=True),
    ),
    (
        "payload-M-F-N",
        "00000002 29a0 000002 6162 63",
        PayloadFrame(2, b"c", b"ab", follows=True, next=True),
    ),
    (
        "error",
        "00000000 2c00 00000101 6f6f7073",
        ErrorFrame(0, ErrorCode.CONNECTION_ERROR, b"oops"),
    ),
    ("error-application-code", "00000005 2c00 00000301", ErrorFrame(5, 0x301)),
    ("metadata-push", "00000000 3100 6d70", MetadataPushFrame(b"mp")),
    (
        "resume",
        "00000000 3400 0001 0000 0002 746b 0000000000000010 0000000000000020",
        ResumeFrame(b"tk", 0x10, 0x20),
    ),
    ("resume-ok", "00000000 3800 0000000000000030", ResumeOkFrame(0x30)),
    (
        "ext-I-M",
        "00000003 ff00 0000abcd 000001 6d 65",
        ExtFrame(3, 0xABCD, b"e", b"m", ignore=True),
    ),
    ("ext", "00000000 fc00 00000001", ExtFrame(0, 1)),
    ("unknown-type-I", "00000001 8200 7a7a", UnknownFrame(1, 0x20, 0x200, b"zz", True)),
    ("reserved-type", "00000000 0000", UnknownFrame(0, 0, 0, b"", False)),
    ("cancel-I", "0000000b 2600", CancelFrame(11, ignore=True)),
]


@pytest.mark.parametrize(
    ("hexstr", "frame"), [(x, f) for _, x, f in LAYOUTS], ids=[n for n, _, _ in LAYOUTS]
)
def test_exact_layout(hexstr: str, frame: Frame) -> None:
    data = h(hexstr)
    assert encode_frame(frame) == data
    decoded = decode_frame(data)
    assert decoded == frame
    assert type(decoded) is type(frame)


def test_every_frame_class_has_a_layout() -> None:
    covered = {type(f) for _, _, f in LAYOUTS}
    from typing import get_args

    assert covered == set(get_args(Frame))


def test_error_code_known_is_member_unknown_is_int() -> None:
    known = decode_frame(h("00000000 2c00 00000001"))
    assert isinstance(known, ErrorFrame)
    assert known.error_code is ErrorCode.INVALID_SETUP
    unknown = decode_frame(h("00000003 2c00 00012345 6869"))
    assert isinstance(unknown, ErrorFrame)
    assert type(unknown.error_code) is int and unknown.error_code == 0x12345
    assert unknown.message == "hi"
    top = decode_frame(h("00000000 2c00 ffffffff"))
    assert isinstance(top, ErrorFrame)
    assert top.error_code is ErrorCode.RESERVED_FOR_EXTENSION


def test_decode_accepts_bytearray_and_memoryview() -> None:
    data = h("00000001 2860 68656c6c6f")
    for buf in (bytearray(data), memoryview(data)):
        frame = decode_frame(buf)  # type: ignore[arg-type]
        assert isinstance(frame, PayloadFrame) and type(frame.data) is bytes


# -- what decode accepts although a strict reading might not ----------------

LENIENT: list[tuple[str, str, Frame]] = [
    # "Flag bits not specified for a particular frame MUST be ignored" (9.8).
    ("cancel-undefined-flags", "00000009 24ff", CancelFrame(9)),
    ("error-M-flag", "00000001 2d00 00000201", ErrorFrame(1, ErrorCode.APPLICATION_ERROR)),
    (
        "keepalive-undefined-flags",
        "00000000 0d7f 0000000000000001",
        KeepaliveFrame(False, 1),
    ),
    ("payload-undefined-flags", "00000001 281f", PayloadFrame(1)),
    # 9.2 / 9.4: CANCEL or PAYLOAD on stream 0 MUST be ignored (by the connection).
    ("cancel-stream-0", "00000000 2400", CancelFrame(0)),
    ("payload-stream-0", "00000000 2820", PayloadFrame(0, next=True)),
    ("request-n-stream-0", "00000000 2000 00000001", RequestNFrame(0, 1)),
    # 9.5: METADATA_PUSH with a non-0 stream ID MUST be ignored (by the connection).
    ("metadata-push-stream-5", "00000005 3100 6d", MetadataPushFrame(b"m", stream_id=5)),
    # LEASE: 0 requests or 0 TTL stops all requests (spec: LEASE frame).
    ("lease-zeros", "00000000 0800 00000000 00000000", LeaseFrame(0, 0)),
    # KEEPALIVE position: "Set to all 0s when not supported".
    ("keepalive-position-0", "00000000 0c00 0000000000000000", KeepaliveFrame(False, 0)),
    # Versions are not checked by the codec (the connection answers UNSUPPORTED_SETUP).
    (
        "setup-version-0.2",
        "00000000 0400 0000 0002 00000001 00000001 00 00",
        SetupFrame(1, 1, "", "", major_version=0, minor_version=2),
    ),
    # PAYLOAD with neither C nor N: a stream-level rule for the connection.
    ("payload-no-C-no-N", "00000001 2800", PayloadFrame(1)),
    ("metadata-push-empty", "00000000 3100", MetadataPushFrame(b"")),
    ("max-stream-id", "7fffffff 2400", CancelFrame(MAX_STREAM_ID)),
]


@pytest.mark.parametrize(
    ("hexstr", "frame"), [(x, f) for _, x, f in LENIENT], ids=[n for n, _, _ in LENIENT]
)
def test_decode_lenient(hexstr: str, frame: Frame) -> None:
    assert decode_frame(h(hexstr)) == frame


# -- every validation error and its code ------------------------------------

S = "00000000 0400"  # SETUP header
BAD: list[tuple[str, str, int, str]] = [
    ("empty", "", CONNECTION_ERROR, "too short"),
    ("five-bytes", "00000001 28", CONNECTION_ERROR, "too short"),
    # SETUP -> INVALID_SETUP
    ("setup-stream-1", f"00000001 0400 {SETUP_FIXED} 00 00", INVALID_SETUP, "stream ID must be 0"),
    ("setup-stream-bit31", f"80000000 0400 {SETUP_FIXED} 00 00", INVALID_SETUP, "reserved bit"),
    ("setup-short", f"{S} 0001 0000 000001f4", INVALID_SETUP, "too short"),
    ("setup-keepalive-0", f"{S} 0001 0000 00000000 00015f90 00 00", INVALID_SETUP, "keepalive"),
    (
        "setup-keepalive-bit31",
        f"{S} 0001 0000 800001f4 00015f90 00 00",
        INVALID_SETUP,
        "reserved bit of keepalive",
    ),
    ("setup-lifetime-0", f"{S} 0001 0000 000001f4 00000000 00 00", INVALID_SETUP, "max lifetime"),
    (
        "setup-lifetime-bit31",
        f"{S} 0001 0000 000001f4 80015f90 00 00",
        INVALID_SETUP,
        "reserved bit of max lifetime",
    ),
    (
        "setup-token-beyond-frame",
        f"00000000 0480 {SETUP_FIXED} 00ff 7474 00 00",
        INVALID_SETUP,
        "resume token length",
    ),
    (
        "setup-token-no-room-for-mime",
        f"00000000 0480 {SETUP_FIXED} 0002 7474",
        INVALID_SETUP,
        "metadata MIME type length",
    ),
    (
        "setup-mime-beyond-frame",
        f"{S} {SETUP_FIXED} 03 612f",
        INVALID_SETUP,
        "metadata MIME type length 3",
    ),
    (
        "setup-no-data-mime",
        f"{S} {SETUP_FIXED} 02 612f",
        INVALID_SETUP,
        "data MIME type length",
    ),
    ("setup-mime-not-ascii", f"{S} {SETUP_FIXED} 01 ff 00", INVALID_SETUP, "not US-ASCII"),
    ("setup-data-mime-not-ascii", f"{S} {SETUP_FIXED} 00 02 c3a9", INVALID_SETUP, "not US-ASCII"),
    (
        "setup-metadata-beyond-frame",
        f"00000000 0500 {SETUP_FIXED} 00 00 000005 6d6d",
        INVALID_SETUP,
        "metadata length 5",
    ),
    (
        "setup-metadata-length-cut",
        f"00000000 0500 {SETUP_FIXED} 00 00 0000",
        INVALID_SETUP,
        "metadata length",
    ),
    # LEASE
    ("lease-stream-1", "00000001 0800 000003e8 00000005", CONNECTION_ERROR, "stream ID must be 0"),
    ("lease-short", "00000000 0800 000003e8", CONNECTION_ERROR, "too short"),
    ("lease-ttl-bit31", "00000000 0800 800003e8 00000005", CONNECTION_ERROR, "time-to-live"),
    ("lease-n-bit31", "00000000 0800 000003e8 80000005", CONNECTION_ERROR, "number of requests"),
    ("lease-trailing", "00000000 0800 000003e8 00000005 6d", CONNECTION_ERROR, "trailing"),
    # KEEPALIVE
    ("keepalive-stream-1", "00000001 0c80 0000000000000000", CONNECTION_ERROR, "stream ID"),
    ("keepalive-short", "00000000 0c80 00000000", CONNECTION_ERROR, "too short"),
    (
        "keepalive-position-bit63",
        "00000000 0c80 8000000000000000",
        CONNECTION_ERROR,
        "last received position",
    ),
    # REQUEST_*
    ("request-response-stream-0", "00000000 1000 64", CONNECTION_ERROR, "stream ID must be > 0"),
    ("request-fnf-stream-0", "00000000 1400", CONNECTION_ERROR, "stream ID must be > 0"),
    ("request-fnf-stream-bit31", "80000001 1400", CONNECTION_ERROR, "reserved bit"),
    (
        "request-response-metadata-beyond",
        "00000001 1100 000003 6d6d",
        CONNECTION_ERROR,
        "metadata length 3",
    ),
    ("request-response-metadata-cut", "00000001 1100 0000", CONNECTION_ERROR, "metadata length"),
    (
        "request-stream-stream-0",
        "00000000 1800 00000001",
        CONNECTION_ERROR,
        "stream ID must be > 0",
    ),
    ("request-stream-short", "00000001 1800 0000", CONNECTION_ERROR, "too short"),
    ("request-stream-n-0", "00000001 1800 00000000", CONNECTION_ERROR, "must be > 0"),
    ("request-stream-n-bit31", "00000001 1800 80000001", CONNECTION_ERROR, "reserved bit"),
    (
        "request-stream-metadata-beyond",
        "00000001 1900 00000001 000009",
        CONNECTION_ERROR,
        "metadata length 9",
    ),
    ("request-channel-n-0", "00000001 1c00 00000000", CONNECTION_ERROR, "must be > 0"),
    (
        "request-channel-stream-0",
        "00000000 1c00 00000001",
        CONNECTION_ERROR,
        "stream ID must be > 0",
    ),
    ("request-channel-short", "00000001 1c00", CONNECTION_ERROR, "too short"),
    # REQUEST_N
    ("request-n-0", "00000001 2000 00000000", CONNECTION_ERROR, "request N must be > 0"),
    ("request-n-bit31", "00000001 2000 ffffffff", CONNECTION_ERROR, "reserved bit of request N"),
    ("request-n-short", "00000001 2000 0000", CONNECTION_ERROR, "too short"),
    ("request-n-trailing", "00000001 2000 00000001 00", CONNECTION_ERROR, "trailing"),
    ("request-n-stream-bit31", "80000001 2000 00000001", CONNECTION_ERROR, "stream ID"),
    # CANCEL
    ("cancel-trailing", "00000001 2400 00", CONNECTION_ERROR, "trailing"),
    ("cancel-stream-bit31", "ffffffff 2400", CONNECTION_ERROR, "stream ID"),
    # PAYLOAD
    ("payload-metadata-beyond", "00000001 2920 000002 6d", CONNECTION_ERROR, "metadata length 2"),
    ("payload-metadata-cut", "00000001 2920 00", CONNECTION_ERROR, "metadata length"),
    ("payload-stream-bit31", "80000001 2820 64", CONNECTION_ERROR, "stream ID"),
    # ERROR
    ("error-short", "00000000 2c00 0000", CONNECTION_ERROR, "too short"),
    ("error-stream-bit31", "80000000 2c00 00000101", CONNECTION_ERROR, "stream ID"),
    # METADATA_PUSH
    ("metadata-push-no-M", "00000000 3000 6d", CONNECTION_ERROR, "(M)etadata flag"),
    ("metadata-push-stream-bit31", "80000000 3100 6d", CONNECTION_ERROR, "stream ID"),
    # RESUME
    (
        "resume-stream-1",
        "00000001 3400 0001 0000 0000 0000000000000000 0000000000000000",
        CONNECTION_ERROR,
        "stream ID must be 0",
    ),
    ("resume-short", "00000000 3400 0001 0000", CONNECTION_ERROR, "too short"),
    (
        "resume-token-beyond",
        "00000000 3400 0001 0000 0010 746b 0000000000000000 0000000000000000",
        CONNECTION_ERROR,
        "too short",
    ),
    (
        "resume-trailing",
        "00000000 3400 0001 0000 0000 0000000000000000 0000000000000000 00",
        CONNECTION_ERROR,
        "trailing",
    ),
    (
        "resume-server-position-bit63",
        "00000000 3400 0001 0000 0000 8000000000000000 0000000000000000",
        CONNECTION_ERROR,
        "last received server position",
    ),
    (
        "resume-client-position-bit63",
        "00000000 3400 0001 0000 0000 0000000000000000 ffffffffffffffff",
        CONNECTION_ERROR,
        "first available client position",
    ),
    # RESUME_OK
    ("resume-ok-stream-1", "00000001 3800 0000000000000000", CONNECTION_ERROR, "stream ID"),
    ("resume-ok-short", "00000000 3800 00000000", CONNECTION_ERROR, "too short"),
    ("resume-ok-trailing", "00000000 3800 0000000000000000 00", CONNECTION_ERROR, "trailing"),
    (
        "resume-ok-position-bit63",
        "00000000 3800 8000000000000001",
        CONNECTION_ERROR,
        "last received client position",
    ),
    # EXT
    ("ext-type-0", "00000001 fc00 00000000", CONNECTION_ERROR, "extended type must be > 0"),
    ("ext-type-bit31", "00000001 fc00 80000001", CONNECTION_ERROR, "reserved bit of extended type"),
    ("ext-short", "00000001 fc00 0001", CONNECTION_ERROR, "too short"),
    ("ext-metadata-beyond", "00000001 fd00 00000001 000001", CONNECTION_ERROR, "metadata length"),
    ("ext-stream-bit31", "80000001 fc00 00000001", CONNECTION_ERROR, "stream ID"),
]


@pytest.mark.parametrize(
    ("hexstr", "code", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_decode_rejects(hexstr: str, code: int, message: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_frame(h(hexstr))
    assert info.value.error_code == code
    assert message in info.value.message


@pytest.mark.parametrize(
    "hexstr", [b[1] for b in BAD if len(h(b[1])) >= 6], ids=[b[0] for b in BAD if len(h(b[1])) >= 6]
)
def test_malformed_frame_with_ignore_flag_is_unknown_frame(hexstr: str) -> None:
    """Spec (Metadata Optional Header): an invalid frame is a connection error
    "unless the frame's IGNORE flag is set"; sansrs applies that to every check."""
    data = bytearray(h(hexstr))
    data[4] |= 0x02  # the I flag (0x200 of the type/flags field)
    frame = decode_frame(bytes(data))
    assert isinstance(frame, UnknownFrame)
    assert frame.ignore is True
    assert frame.frame_type == data[4] >> 2
    assert frame.flags == int.from_bytes(data[4:6], "big") & 0x3FF
    assert frame.body == bytes(data[6:])
    assert encode_frame(frame) == bytes(data)


# -- encode validation -------------------------------------------------------

BIG_METADATA = bytes(0x1000000)  # one byte over the 24-bit metadata length

ENCODE_BAD: list[tuple[str, Frame]] = [
    ("payload-stream-negative", PayloadFrame(-1)),
    ("payload-stream-2**31", PayloadFrame(MAX_STREAM_ID + 1)),
    ("payload-metadata-too-long", PayloadFrame(1, b"", BIG_METADATA)),
    ("request-response-stream-0", RequestResponseFrame(0)),
    ("request-fnf-stream-0", RequestFnfFrame(0)),
    ("request-stream-stream-0", RequestStreamFrame(0, 1)),
    ("request-channel-stream-0", RequestChannelFrame(0, 1)),
    ("request-stream-n-0", RequestStreamFrame(1, 0)),
    ("request-channel-n-2**31", RequestChannelFrame(1, MAX_REQUEST_N + 1)),
    ("request-response-metadata-too-long", RequestResponseFrame(1, b"", BIG_METADATA)),
    ("request-n-0", RequestNFrame(1, 0)),
    ("request-n-negative", RequestNFrame(1, -5)),
    ("request-n-stream-2**31", RequestNFrame(MAX_STREAM_ID + 1, 1)),
    ("cancel-stream-negative", CancelFrame(-1)),
    ("setup-stream-1", SetupFrame(1, 1, "", "", stream_id=1)),
    ("setup-keepalive-0", SetupFrame(0, 1, "", "")),
    ("setup-lifetime-2**31", SetupFrame(1, MAX_REQUEST_N + 1, "", "")),
    ("setup-mime-not-ascii", SetupFrame(1, 1, "\u00e9", "")),
    ("setup-mime-256", SetupFrame(1, 1, "", "x" * 256)),
    ("setup-token-65536", SetupFrame(1, 1, "", "", resume_token=bytes(65536))),
    ("setup-major-65536", SetupFrame(1, 1, "", "", major_version=65536)),
    ("setup-minor-negative", SetupFrame(1, 1, "", "", minor_version=-1)),
    ("setup-metadata-too-long", SetupFrame(1, 1, "", "", metadata=BIG_METADATA)),
    ("lease-stream-1", LeaseFrame(1, 1, stream_id=1)),
    ("lease-ttl-negative", LeaseFrame(-1, 1)),
    ("lease-n-2**31", LeaseFrame(1, MAX_REQUEST_N + 1)),
    ("keepalive-stream-1", KeepaliveFrame(True, stream_id=1)),
    ("keepalive-position-2**63", KeepaliveFrame(True, MAX_POSITION + 1)),
    ("keepalive-position-negative", KeepaliveFrame(True, -1)),
    ("error-code-negative", ErrorFrame(1, -1)),
    ("error-code-2**32", ErrorFrame(1, 1 << 32)),
    ("error-stream-2**31", ErrorFrame(MAX_STREAM_ID + 1, 1)),
    ("metadata-push-stream-negative", MetadataPushFrame(b"", stream_id=-1)),
    ("resume-stream-1", ResumeFrame(b"", 0, 0, stream_id=1)),
    ("resume-token-65536", ResumeFrame(bytes(65536), 0, 0)),
    ("resume-position-2**63", ResumeFrame(b"", MAX_POSITION + 1, 0)),
    ("resume-client-position-negative", ResumeFrame(b"", 0, -1)),
    ("resume-major-65536", ResumeFrame(b"", 0, 0, major_version=65536)),
    ("resume-ok-stream-1", ResumeOkFrame(0, stream_id=1)),
    ("resume-ok-position-2**63", ResumeOkFrame(MAX_POSITION + 1)),
    ("ext-type-0", ExtFrame(1, 0)),
    ("ext-type-2**31", ExtFrame(1, MAX_REQUEST_N + 1)),
    ("ext-stream-negative", ExtFrame(-1, 1)),
    ("ext-metadata-too-long", ExtFrame(1, 1, b"", BIG_METADATA)),
    ("unknown-type-64", UnknownFrame(0, 64, 0)),
    ("unknown-flags-0x400", UnknownFrame(0, 0x20, 0x400)),
    ("unknown-stream-2**32", UnknownFrame(1 << 32, 0x20, 0)),
    ("unknown-ignore-without-flag", UnknownFrame(0, 0x20, 0, b"", True)),
    ("unknown-flag-without-ignore", UnknownFrame(0, 0x20, 0x200, b"", False)),
]


@pytest.mark.parametrize("frame", [f for _, f in ENCODE_BAD], ids=[n for n, _ in ENCODE_BAD])
def test_encode_rejects(frame: Frame) -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(frame)


def test_encode_rejects_non_frame() -> None:
    with pytest.raises(TypeError):
        encode_frame(object())  # type: ignore[arg-type]


def test_encode_metadata_at_the_24_bit_limit() -> None:
    frame = PayloadFrame(1, b"d", bytes(0xFFFFFF), next=True)
    data = encode_frame(frame)
    assert data[6:9] == b"\xff\xff\xff"
    assert decode_frame(data) == frame


def test_encode_clears_flags_nobody_set() -> None:
    """Only the flags a frame's fields ask for are sent."""
    assert encode_frame(PayloadFrame(1))[4:6] == b"\x28\x00"
    assert encode_frame(MetadataPushFrame(b""))[4:6] == b"\x31\x00"  # M always set
