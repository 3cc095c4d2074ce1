"""Conformance: Framing, Frame Header, Metadata Optional Header, frame types
and their fields, Error Codes (spec: the RSocket protocol 1.0).

Each test names the rule it checks; docs/rsocket-conformance.md maps every
normative sentence to its test. These fill the gaps left by the codec and
connection tests: the rules checked here at the connection, on the wire.
"""

from __future__ import annotations

import pytest

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.rsocket import (
    CancelFrame,
    Connection,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
    ExtFrame,
    Frame,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    Role,
    SetupFrame,
    UnknownFrame,
    decode_frame,
    encode_frame,
)
from sansrs.rsocket.events import (
    ConnectionTerminated,
    ErrorReceived,
    PayloadReceived,
    SetupReceived,
)
from tests.rsocket.pair import Pair
from tests.rsocket.test_unexpected import feed, quiet, sent_frames

FLAG_IGNORE = 0x200
FLAG_METADATA = 0x100


def prefixed(body: bytes) -> bytes:
    return len(body).to_bytes(3, "big") + body


def closed_with(conn: Connection, code: int) -> None:
    """The connection queued ERROR[code] on stream 0 as its last frame and closed."""
    frames = sent_frames(conn)
    assert frames, "no ERROR frame was queued"
    last = frames[-1]
    assert isinstance(last, ErrorFrame)
    assert (last.stream_id, last.error_code) == (0, code)
    assert conn.state is ConnectionState.CLOSED
    assert isinstance(conn.events()[-1], ConnectionTerminated)


# --------------------------------------------------------------------------
# Framing Protocol Usage / Framing Format


def test_rsocket_framing_length_must_be_prepended_on_byte_streams() -> None:
    """Spec: "the Frame Length MUST be prepended": each frame the core queues for a
    byte stream is a 24-bit length (excluding itself) and exactly that many bytes."""
    pair = Pair.established()
    pair.client.request_fnf(b"a" * 300, b"m")
    pair.client.metadata_push(b"push")
    pair.client.send_keepalive(b"k")
    out = pair.client.data_to_send()
    off, bodies = 0, []
    while off < len(out):
        n = int.from_bytes(out[off : off + 3], "big")
        bodies.append(out[off + 3 : off + 3 + n])
        off += 3 + n
    assert off == len(out)
    assert [type(decode_frame(b)) for b in bodies] == [
        RequestFnfFrame,
        MetadataPushFrame,
        KeepaliveFrame,
    ]


def test_rsocket_framing_length_must_be_omitted_on_message_transports() -> None:
    """Spec: "The frame length field MUST be omitted if the transport protocol
    preserves message boundaries": Framing.MESSAGES hands out one encoded
    frame per message, without a prefix."""
    from sansrs.rsocket import ConnectionConfig, Framing

    cfg = ConnectionConfig(framing=Framing.MESSAGES)
    pair = Pair.established(client_config=cfg, server_config=cfg)
    pair.client.request_fnf(b"hello")
    (body,) = pair.client.frames_to_send()
    assert body[4] >> 2 == 0x05  # the frame type is at offset 4: no length in front
    assert decode_frame(body) == RequestFnfFrame(1, b"hello")
    with pytest.raises(LocalProtocolError):
        pair.client.data_to_send()


# --------------------------------------------------------------------------
# Frame Header Format: "all frame types MUST provide space for ... (I)gnore
# ... (M)etadata"

EVERY_FRAME_WITH_I: list[Frame] = [
    SetupFrame(100, 1000, "a", "b", metadata=b"m", ignore=True),
    LeaseFrame(100, 1, b"m", ignore=True),
    KeepaliveFrame(True, 0, b"d", ignore=True),
    RequestResponseFrame(1, b"d", b"m", ignore=True),
    RequestFnfFrame(1, b"d", b"m", ignore=True),
    RequestStreamFrame(1, 1, b"d", b"m", ignore=True),
    RequestChannelFrame(1, 1, b"d", b"m", ignore=True),
    RequestNFrame(1, 1, ignore=True),
    CancelFrame(1, ignore=True),
    PayloadFrame(1, b"d", b"m", next=True, ignore=True),
    ErrorFrame(1, ErrorCode.APPLICATION_ERROR, b"e", ignore=True),
    MetadataPushFrame(b"m", ignore=True),
    ExtFrame(1, 7, b"d", b"m", ignore=True),
]


@pytest.mark.parametrize("frame", EVERY_FRAME_WITH_I, ids=lambda f: type(f).__name__)
def test_rsocket_frame_header_every_frame_type_has_the_ignore_and_metadata_bits(
    frame: Frame,
) -> None:
    body = encode_frame(frame)
    flags = int.from_bytes(body[4:6], "big") & 0x3FF
    assert flags & FLAG_IGNORE
    has_metadata = getattr(frame, "metadata", None) is not None
    assert bool(flags & FLAG_METADATA) is has_metadata
    assert decode_frame(body) == frame


# --------------------------------------------------------------------------
# Metadata Optional Header

DATA_AND_METADATA: list[Frame] = [
    SetupFrame(100, 1000, "", "", metadata=b"MM"),
    RequestResponseFrame(1, b"", b"MM"),
    RequestFnfFrame(1, b"", b"MM"),
    RequestStreamFrame(1, 1, b"", b"MM"),
    RequestChannelFrame(1, 1, b"", b"MM"),
    PayloadFrame(1, b"", b"MM", next=True),
    ExtFrame(1, 7, b"", b"MM"),
]


@pytest.mark.parametrize("frame", DATA_AND_METADATA, ids=lambda f: type(f).__name__)
def test_rsocket_metadata_header_must_be_included_when_the_frame_supports_data(
    frame: Frame,
) -> None:
    """Spec: "If that Frame Type supports both Data and Metadata, the optional
    Metadata header MUST be included", also when the data is empty."""
    body = encode_frame(frame)
    assert body.endswith(b"\x00\x00\x02MM")  # 24-bit length 2, metadata, no data


@pytest.mark.parametrize(
    ("frame", "fixed"),
    [(LeaseFrame(100, 1, b"MM"), 6 + 8), (MetadataPushFrame(b"MM"), 6)],
    ids=["LEASE", "METADATA_PUSH"],
)
def test_rsocket_metadata_only_frames_must_not_include_the_metadata_length(
    frame: Frame, fixed: int
) -> None:
    """LEASE and METADATA_PUSH: "the Metadata Length header MUST NOT be included"."""
    body = encode_frame(frame)
    assert body[fixed:] == b"MM"


def test_rsocket_metadata_length_mismatch_must_send_connection_error_and_close() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=3)
    pair.pump()
    pair.take()
    # PAYLOAD M+N, metadata length 9, one byte left in the frame.
    bad = sid.to_bytes(4, "big") + bytes.fromhex("2920 000009 6d")
    with pytest.raises(RemoteProtocolError) as info:
        pair.client.receive_data(prefixed(bad))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    closed_with(pair.client, ErrorCode.CONNECTION_ERROR)


def test_rsocket_metadata_length_mismatch_with_ignore_flag_is_ignored() -> None:
    """Spec: "... unless the frame's IGNORE flag is set"."""
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=3)
    pair.pump()
    pair.take()
    bad = sid.to_bytes(4, "big") + bytes.fromhex("2b20 000009 6d")  # same, with I
    pair.client.receive_data(prefixed(bad))
    quiet(pair.client)
    assert pair.client.stream_state(sid) is not None


# --------------------------------------------------------------------------
# Frames that "MUST always use Stream ID 0", received on another stream


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (encode_frame(LeaseFrame(100, 1)), ErrorCode.CONNECTION_ERROR),
        (encode_frame(KeepaliveFrame(True, 0, b"x")), ErrorCode.CONNECTION_ERROR),
    ],
    ids=["LEASE", "KEEPALIVE"],
)
def test_rsocket_connection_frames_must_use_stream_0(body: bytes, code: int) -> None:
    pair = Pair.established(lease=(10_000, 1))
    raw = bytearray(body)
    raw[3] = 3  # stream ID 3
    with pytest.raises(RemoteProtocolError) as info:
        pair.client.receive_data(prefixed(bytes(raw)))
    assert info.value.error_code == code
    closed_with(pair.client, code)


def test_rsocket_setup_frame_must_use_stream_0_else_invalid_setup() -> None:
    server = Connection(Role.SERVER)
    raw = bytearray(encode_frame(SetupFrame(100, 1000, "a", "b")))
    raw[3] = 1
    with pytest.raises(RemoteProtocolError) as info:
        server.receive_data(prefixed(bytes(raw)))
    assert info.value.error_code == ErrorCode.INVALID_SETUP
    closed_with(server, ErrorCode.INVALID_SETUP)


def test_rsocket_metadata_push_must_use_stream_0_when_sent() -> None:
    pair = Pair.established()
    pair.client.metadata_push(b"md")
    assert pair.client.data_to_send() == bytes.fromhex("000008 00000000 3100") + b"md"


# --------------------------------------------------------------------------
# SETUP fields


def test_rsocket_setup_keepalive_interval_and_max_lifetime_must_be_positive() -> None:
    for bad in ({"keepalive_interval": 0}, {"max_lifetime": 0}, {"keepalive_interval": -5}):
        client = Connection(Role.CLIENT)
        with pytest.raises(LocalProtocolError):
            client.setup(**bad)  # type: ignore[arg-type]
        assert client.data_to_send() == b""
    # Received: a 0 interval is ERROR[INVALID_SETUP].
    server = Connection(Role.SERVER)
    body = bytes.fromhex("00000000 0400 0001 0000 00000000 00015f90 00 00")
    with pytest.raises(RemoteProtocolError) as info:
        server.receive_data(prefixed(body))
    assert info.value.error_code == ErrorCode.INVALID_SETUP
    closed_with(server, ErrorCode.INVALID_SETUP)


@pytest.mark.parametrize(
    ("metadata_mime", "data_mime"),
    [("", ""), ("not a mime type", 'x;y="z" ,,'), ("application/json", "text/plain; charset=x")],
)
def test_rsocket_setup_mime_type_must_not_be_interpreted(
    metadata_mime: str, data_mime: str
) -> None:
    """Spec: "The protocol implementation MUST NOT interpret the MIME type itself":
    any ASCII string reaches the server application verbatim and the
    connection works the same."""
    pair = Pair()
    pair.client.setup(metadata_mime_type=metadata_mime, data_mime_type=data_mime)
    pair.pump()
    (event,) = pair.server_events
    assert isinstance(event, SetupReceived)
    assert (event.metadata_mime_type, event.data_mime_type) == (metadata_mime, data_mime)
    pair.server.accept_setup()
    sid = pair.client.request_response(b"\xff\x00 not json")
    pair.pump()
    pair.server.send_payload(sid, b"\x00")
    pair.pump()
    assert pair.client_events[-1] == PayloadReceived(
        stream_id=sid, data=b"\x00", metadata=None, complete=True, next=True
    )


def test_rsocket_setup_mime_type_must_not_be_null_terminated() -> None:
    client = Connection(Role.CLIENT)
    client.setup(keepalive_interval=1, max_lifetime=1, metadata_mime_type="ab", data_mime_type="c")
    out = client.data_to_send()
    # header 6, versions 4, keepalive 4, lifetime 4, then length-prefixed MIME types
    assert out[3 + 18 :] == b"\x02ab\x01c"


# --------------------------------------------------------------------------
# ERROR frame and Error Codes


def test_rsocket_error_data_must_not_be_null_terminated() -> None:
    pair = Pair.established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    pair.server.send_error(sid, ErrorCode.APPLICATION_ERROR, "caf\u00e9")
    out = pair.server.data_to_send()
    assert out.endswith(b"\x00\x00\x02\x01caf\xc3\xa9")  # code, then UTF-8, no NUL
    pair.server.close("bye")
    assert pair.server.data_to_send().endswith(b"\x00\x00\x01\x02bye")


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.INVALID_SETUP,
        ErrorCode.UNSUPPORTED_SETUP,
        ErrorCode.REJECTED_SETUP,
        ErrorCode.REJECTED_RESUME,
        ErrorCode.CONNECTION_ERROR,
        ErrorCode.CONNECTION_CLOSE,
        ErrorCode.RESERVED,
    ],
)
def test_rsocket_error_codes_stream_id_must_be_0_for_connection_codes_when_sent(
    code: int,
) -> None:
    """Setup and connection codes: "Stream ID MUST be 0": the core never puts
    them on a stream."""
    pair = Pair.established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    with pytest.raises(LocalProtocolError):
        pair.server.send_error(sid, code, "x")
    assert pair.server.data_to_send() == b""


@pytest.mark.parametrize(
    "code",
    [ErrorCode.APPLICATION_ERROR, ErrorCode.REJECTED, ErrorCode.CANCELED, ErrorCode.INVALID],
)
def test_rsocket_error_codes_stream_id_must_be_positive_for_stream_codes_when_sent(
    code: int,
) -> None:
    pair = Pair.established()
    with pytest.raises(LocalProtocolError):
        pair.client.close("x", error_code=code)
    assert pair.client.data_to_send() == b""
    assert pair.client.state is ConnectionState.ESTABLISHED


@pytest.mark.parametrize("code", [ErrorCode.APPLICATION_ERROR, ErrorCode.REJECTED, 0x301])
def test_rsocket_error_codes_stream_code_on_stream_0_closes_the_connection(code: int) -> None:
    """Documented choice (docs/rsocket.md, Closing): "A Stream ID of 0 means
    the error pertains to the connection"; an ERROR on stream 0 that is not a
    setup code or CONNECTION_CLOSE closes the connection, whatever its code."""
    pair = Pair.established()
    feed(pair.client, ErrorFrame(0, code, b"x"))
    closed = ConnectionTerminated(error_code=code, message="x", by_peer=True)
    assert pair.client.events() == [closed]
    assert pair.client.state is ConnectionState.CLOSED
    assert pair.client.data_to_send() == b""


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.RESERVED,
        ErrorCode.INVALID_SETUP,
        ErrorCode.UNSUPPORTED_SETUP,
        ErrorCode.REJECTED_SETUP,
        ErrorCode.REJECTED_RESUME,
        ErrorCode.CONNECTION_ERROR,
        ErrorCode.CONNECTION_CLOSE,
    ],
)
def test_rsocket_error_codes_connection_code_on_a_stream_is_ignored(code: int) -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=3)
    pair.pump()
    pair.take()
    feed(pair.client, ErrorFrame(sid, code, b"x"))
    quiet(pair.client)
    assert pair.client.stream_state(sid) is not None


def test_rsocket_error_data_not_utf8_is_received_without_failing() -> None:
    """Error Data "SHOULD be a UTF-8 encoded string": other bytes still end the
    stream with an error event (decoded with replacement characters)."""
    pair = Pair.established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    feed(pair.client, ErrorFrame(sid, ErrorCode.APPLICATION_ERROR, b"\xff\xfeok"))
    (event,) = pair.client.events()
    assert isinstance(event, ErrorReceived)
    assert event.error_code == ErrorCode.APPLICATION_ERROR and event.message.endswith("ok")
    assert pair.client.stream_state(sid) is None


# --------------------------------------------------------------------------
# REQUEST_N, REQUEST_STREAM, REQUEST_CHANNEL: "Value MUST be > 0"


@pytest.mark.parametrize(
    "body",
    [
        bytes.fromhex("00000001 2000 00000000"),  # REQUEST_N n=0
        bytes.fromhex("00000002 1800 00000000"),  # REQUEST_STREAM initial n=0
        bytes.fromhex("00000002 1c00 00000000"),  # REQUEST_CHANNEL initial n=0
    ],
    ids=["REQUEST_N", "REQUEST_STREAM", "REQUEST_CHANNEL"],
)
def test_rsocket_request_n_must_be_positive_received(body: bytes) -> None:
    pair = Pair.established()
    pair.client.request_stream(b"q", initial_n=1)
    pair.pump()
    with pytest.raises(RemoteProtocolError) as info:
        pair.client.receive_data(prefixed(body))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    closed_with(pair.client, ErrorCode.CONNECTION_ERROR)


def test_rsocket_request_n_must_be_positive_sent() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.client.data_to_send()
    for call in (
        lambda: pair.client.request_n(sid, 0),
        lambda: pair.client.request_stream(b"q", initial_n=0),
        lambda: pair.client.request_channel(b"q", initial_n=0),
    ):
        with pytest.raises(LocalProtocolError):
            call()
    assert pair.client.data_to_send() == b""


# --------------------------------------------------------------------------
# PAYLOAD: "A PAYLOAD MUST NOT have both (C)complete and (N)ext empty"


def test_rsocket_payload_must_not_have_neither_complete_nor_next_sent() -> None:
    from sansrs.rsocket import ConnectionConfig

    pair = Pair.established(server_config=ConnectionConfig(fragment_size=64))
    sid = pair.client.request_stream(b"q", initial_n=10)
    pair.pump()
    pair.server.send_payload(sid, b"")  # empty data is still a Next
    pair.server.send_payload(sid, b"d" * 300, b"m" * 100)  # fragmented
    pair.server.send_complete(sid)
    frames = sent_frames(pair.server)
    assert len(frames) > 3
    for frame in frames:
        assert isinstance(frame, PayloadFrame)
        assert frame.complete or frame.next


def test_rsocket_payload_without_complete_or_next_received_is_ignored() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=2)
    pair.pump()
    pair.take()
    feed(pair.client, PayloadFrame(sid, b"neither"))
    quiet(pair.client)
    assert pair.client.stream_state(sid) is not None
    feed(pair.client, PayloadFrame(sid, b"a", next=True), PayloadFrame(sid, b"b", next=True))
    assert len(pair.client.events()) == 2  # the ignored frame took no credit


# --------------------------------------------------------------------------
# EXT: "Extended Type ... Value MUST be > 0"


def test_rsocket_ext_extended_type_must_be_positive() -> None:
    pair = Pair.established()
    for bad in (0, 2**31):
        with pytest.raises(LocalProtocolError):
            pair.client.send_extension(bad, b"")
    assert pair.client.data_to_send() == b""
    with pytest.raises(RemoteProtocolError) as info:
        pair.server.receive_data(prefixed(bytes.fromhex("00000000 fc00 00000000")))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    closed_with(pair.server, ErrorCode.CONNECTION_ERROR)


def test_rsocket_ext_without_ignore_flag_still_reaches_the_extension_hook() -> None:
    """EXT is understood by sansrs (the extension hook), so the I flag does
    not decide: the application gets it either way."""
    from sansrs.rsocket.events import ExtensionReceived

    pair = Pair.established()
    pair.client.send_extension(9, b"d", stream_id=0, ignore=False)
    pair.pump()
    assert pair.server_events == [
        ExtensionReceived(stream_id=0, extended_type=9, data=b"d", metadata=None, ignore=False)
    ]


# --------------------------------------------------------------------------
# Handling Ignore Flag, for a reserved frame type


def test_rsocket_ignore_flag_reserved_frame_type_0_without_i_is_connection_error() -> None:
    pair = Pair.established()
    with pytest.raises(RemoteProtocolError) as info:
        feed(pair.server, UnknownFrame(0, 0x00, 0, b""))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    closed_with(pair.server, ErrorCode.CONNECTION_ERROR)
