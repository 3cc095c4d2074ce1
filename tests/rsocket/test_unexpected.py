"""Spec: Handling the Unexpected (items 1-9), the I flag, EXT frames."""

from __future__ import annotations

import pytest

from sansrs import RemoteProtocolError
from sansrs.rsocket import (
    CancelFrame,
    Connection,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
    Frame,
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
    Role,
    SetupFrame,
    UnknownFrame,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import (
    ConnectionTerminated,
    ExtensionReceived,
    PayloadReceived,
    RequestStreamReceived,
)
from tests.rsocket.pair import Pair


def feed(conn: Connection, *frames: Frame) -> None:
    conn.receive_data(b"".join(encode_frame_prefixed(f) for f in frames))


def sent_frames(conn: Connection) -> list[Frame]:
    data = conn.data_to_send()
    out: list[Frame] = []
    off = 0
    while off < len(data):
        n = int.from_bytes(data[off : off + 3], "big")
        out.append(decode_frame(data[off + 3 : off + 3 + n]))
        off += 3 + n
    return out


def quiet(conn: Connection) -> None:
    """Nothing happened: no event, nothing to send, still established."""
    assert conn.events() == []
    assert conn.data_to_send() == b""
    assert conn.state is ConnectionState.ESTABLISHED


def test_rsocket_unexpected_1_dead_transport_detected_by_keepalive() -> None:
    pair = Pair.established(keepalive_interval=100, max_lifetime=1000)
    pair.client.handle_timeout(0.0)
    pair.client.handle_timeout(1.5)  # nothing heard for 1.5 s > 1 s
    assert pair.client.state is ConnectionState.CLOSED


def test_rsocket_unexpected_3_lack_of_request_n_just_stalls() -> None:
    pair = Pair.established(keepalive_interval=100, max_lifetime=10_000)
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.pump()
    pair.server.send_payload(sid, b"a")
    pair.pump()
    pair.server.handle_timeout(0.0)
    pair.server.handle_timeout(5.0)
    # The stream stays open; no timeout, no error: the application's concern.
    assert pair.server.send_credit(sid) == 0
    assert pair.server.state is ConnectionState.ESTABLISHED
    assert pair.server.stream_state(sid) is not None


def test_rsocket_unexpected_5_response_payload_without_complete_assumed_complete() -> None:
    pair = Pair.established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    feed(pair.client, PayloadFrame(sid, b"r", next=True))
    assert pair.client.events() == [
        PayloadReceived(stream_id=sid, data=b"r", metadata=None, complete=True, next=True)
    ]
    assert pair.client.stream_state(sid) is None


def test_rsocket_unexpected_7_payload_with_follows_and_complete_ignores_follows() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    feed(pair.client, PayloadFrame(sid, b"r", follows=True, complete=True, next=True))
    assert pair.client.events() == [
        PayloadReceived(stream_id=sid, data=b"r", metadata=None, complete=True, next=True)
    ]
    assert pair.client.stream_state(sid) is None


def test_rsocket_unexpected_8_undefined_flag_bits_ignored() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    raw = bytearray(encode_frame_prefixed(PayloadFrame(sid, b"r", next=True)))
    raw[8] |= 0x1F  # the five low flag bits PAYLOAD does not define
    pair.client.receive_data(bytes(raw))
    assert pair.client.events() == [
        PayloadReceived(stream_id=sid, data=b"r", metadata=None, complete=False, next=True)
    ]


@pytest.mark.parametrize(
    "frame",
    [
        RequestResponseFrame(1, b"again"),
        RequestStreamFrame(1, 3, b"again"),
        RequestChannelFrame(1, 3, b"again"),
        RequestFnfFrame(1, b"again"),
    ],
)
def test_rsocket_unexpected_9_1_request_on_stream_id_in_use_ignored(frame: Frame) -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    assert pair.server_events == [
        RequestStreamReceived(stream_id=sid, data=b"q", metadata=None, initial_n=5)
    ]
    feed(pair.server, frame)
    quiet(pair.server)
    assert pair.server.send_credit(sid) == 5


@pytest.mark.parametrize("sid", [0, 7, 2])
def test_rsocket_unexpected_9_2_cancel_on_unknown_stream_ignored(sid: int) -> None:
    pair = Pair.established()
    feed(pair.server, CancelFrame(sid))
    quiet(pair.server)


@pytest.mark.parametrize("code", [ErrorCode.APPLICATION_ERROR, ErrorCode.CANCELED, 0x999])
def test_rsocket_unexpected_9_3_error_on_unknown_stream_ignored(code: int) -> None:
    pair = Pair.established()
    feed(pair.server, ErrorFrame(9, code, b"?"))
    quiet(pair.server)


@pytest.mark.parametrize("sid", [0, 9, 2])
def test_rsocket_unexpected_9_4_payload_on_unknown_stream_ignored(sid: int) -> None:
    pair = Pair.established()
    feed(pair.server, PayloadFrame(sid, b"x", next=True), PayloadFrame(sid, b"", complete=True))
    quiet(pair.server)


def test_rsocket_unexpected_9_5_metadata_push_non_zero_stream_ignored() -> None:
    pair = Pair.established()
    feed(pair.server, MetadataPushFrame(b"m", stream_id=3))
    quiet(pair.server)


def test_rsocket_unexpected_9_6_server_ignores_second_setup() -> None:
    pair = Pair.established()
    feed(pair.server, SetupFrame(100, 1000, "x", "y"))
    quiet(pair.server)


def test_rsocket_unexpected_9_6_setup_while_awaiting_accept_ignored() -> None:
    pair = Pair()
    pair.client.setup()
    pair.pump()
    feed(pair.server, SetupFrame(100, 1000, "x", "y"))
    assert pair.server.events() == []
    pair.server.accept_setup()
    assert pair.server.events() == []
    assert pair.server.setup_frame is not None
    assert pair.server.setup_frame.metadata_mime_type == "application/octet-stream"


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.INVALID_SETUP,
        ErrorCode.UNSUPPORTED_SETUP,
        ErrorCode.REJECTED_SETUP,
        ErrorCode.REJECTED_RESUME,
    ],
)
def test_rsocket_unexpected_9_7_server_ignores_setup_errors(code: int) -> None:
    pair = Pair.established()
    feed(pair.server, ErrorFrame(0, code, b"no"))
    quiet(pair.server)


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.INVALID_SETUP,
        ErrorCode.UNSUPPORTED_SETUP,
        ErrorCode.REJECTED_SETUP,
        ErrorCode.REJECTED_RESUME,
    ],
)
def test_rsocket_unexpected_9_8_client_ignores_setup_errors_after_establishment(
    code: int,
) -> None:
    pair = Pair.established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    pair.server.send_payload(sid, b"r")  # a response: the SETUP was accepted
    pair.pump()
    pair.take()
    feed(pair.client, ErrorFrame(0, code, b"late"))
    quiet(pair.client)


@pytest.mark.parametrize("kind", ["stream", "channel"])
def test_rsocket_unexpected_9_8_client_ignores_setup_errors_after_a_stream_item(kind: str) -> None:
    """A stream's item is a response too (the hot path takes a run of them
    without decoding frames): after it the SETUP was accepted."""
    pair = Pair.established()
    if kind == "stream":
        sid = pair.client.request_stream(b"q", initial_n=4)
    else:
        sid = pair.client.request_channel(b"q", initial_n=4)
    pair.pump()
    pair.server.send_payload(sid, b"a")
    pair.server.send_payload(sid, b"b")
    pair.pump()
    pair.take()
    assert pair.client.setup_confirmed
    feed(pair.client, ErrorFrame(0, ErrorCode.REJECTED_SETUP, b"late"))
    quiet(pair.client)


def test_rsocket_unexpected_9_8_client_before_establishment_treats_setup_error_as_rejection() -> (
    None
):
    client = Connection(Role.CLIENT)
    client.setup()
    client.data_to_send()
    feed(client, ErrorFrame(0, ErrorCode.REJECTED_SETUP, b"no"))
    assert client.events() == [
        ConnectionTerminated(error_code=ErrorCode.REJECTED_SETUP, message="no", by_peer=True)
    ]
    assert client.state is ConnectionState.CLOSED


def test_rsocket_unexpected_9_9_client_ignores_setup() -> None:
    pair = Pair.established()
    feed(pair.client, SetupFrame(100, 1000, "x", "y"))
    quiet(pair.client)


def test_rsocket_unexpected_9_other_frames_ignored() -> None:
    """RESUME_OK without RESUME, LEASE without the L flag, REQUEST_N and
    CANCEL that make no sense: all ignored."""
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.pump()
    pair.take()
    feed(
        pair.client,
        ResumeOkFrame(5),
        LeaseFrame(1000, 5),
        RequestNFrame(sid, 5),  # the client is not sending on this stream
        CancelFrame(sid),  # a request-stream responder cannot cancel
        ResumeFrame(b"t", 0, 0),
    )
    quiet(pair.client)


def test_rsocket_unexpected_client_ignores_frames_before_its_setup() -> None:
    client = Connection(Role.CLIENT)
    feed(client, PayloadFrame(1, b"x", next=True), LeaseFrame(100, 1))
    assert client.events() == []
    assert client.state is ConnectionState.AWAITING_SETUP


def test_rsocket_ignore_flag_unknown_frame_with_i_ignored() -> None:
    pair = Pair.established()
    feed(pair.server, UnknownFrame(0, 0x20, 0x200, b"whatever", ignore=True))
    quiet(pair.server)


def test_rsocket_ignore_flag_unknown_frame_without_i_is_connection_error() -> None:
    pair = Pair.established()
    with pytest.raises(RemoteProtocolError) as info:
        feed(pair.server, UnknownFrame(0, 0x20, 0, b"whatever"))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    frames = sent_frames(pair.server)
    assert frames == [ErrorFrame(0, ErrorCode.CONNECTION_ERROR, frames[0].data)]  # type: ignore[union-attr]
    assert pair.server.state is ConnectionState.CLOSED


def test_rsocket_ext_frames_reach_the_extension_hook() -> None:
    pair = Pair.established()
    pair.client.send_extension(0x42, b"data", b"md", stream_id=0)
    pair.pump()
    assert pair.server_events == [
        ExtensionReceived(
            stream_id=0, extended_type=0x42, data=b"data", metadata=b"md", ignore=True
        )
    ]


def test_rsocket_resume_first_frame_rejected_with_rejected_resume() -> None:
    """Spec: Resume Operation: a server without resumption (no
    ``SessionStore``) MUST answer RESUME with ERROR[REJECTED_RESUME]."""
    server = Connection(Role.SERVER)
    feed(server, ResumeFrame(b"token", 0, 0))
    frames = sent_frames(server)
    assert isinstance(frames[0], ErrorFrame)
    assert frames[0].error_code == ErrorCode.REJECTED_RESUME
    assert server.state is ConnectionState.CLOSED


def test_rsocket_resume_after_setup_is_connection_error() -> None:
    pair = Pair.established()
    with pytest.raises(RemoteProtocolError) as info:
        feed(pair.server, ResumeFrame(b"token", 0, 0))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_malformed_frame_processes_earlier_frames_then_fails() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    good = encode_frame_prefixed(PayloadFrame(sid, b"ok", next=True))
    bad = b"\x00\x00\x06" + (sid).to_bytes(4, "big") + b"\x20\x00"  # REQUEST_N without N
    with pytest.raises(RemoteProtocolError):
        pair.client.receive_data(good + bad)
    events = pair.client.events()
    assert events[0] == PayloadReceived(
        stream_id=sid, data=b"ok", metadata=None, complete=False, next=True
    )
    assert isinstance(events[-1], ConnectionTerminated)
    assert isinstance(sent_frames(pair.client)[-1], ErrorFrame)


def test_rsocket_unexpected_2_request_timeouts_are_the_applications() -> None:
    pair = Pair.established(keepalive_interval=100, max_lifetime=100_000)
    sid = pair.client.request_response(b"q")
    pair.pump()
    for t in (0.0, 10.0, 50.0):
        pair.client.handle_timeout(t)
        pair.server.handle_timeout(t)
        pair.pump()
    # No response for 50 s: the request is still open; no error from the core.
    assert pair.client.stream_state(sid) is not None
    assert not any(isinstance(e, ConnectionTerminated) for e in pair.client_events)


def test_rsocket_unexpected_4_lack_of_lease_stops_requests_without_error() -> None:
    pair = Pair.established(lease=(1000, 1), keepalive_interval=100, max_lifetime=100_000)
    pair.client.handle_timeout(0.0)
    pair.client.handle_timeout(5.0)  # the lease expired; no new LEASE came
    assert pair.client.lease_available() == 0
    assert pair.client.state is ConnectionState.ESTABLISHED
    assert pair.client.events() == []


def test_rsocket_unexpected_6_reassembly_assumes_an_infinite_stream() -> None:
    """Fragments that never end are cut off at max_reassembly_size with a
    clean connection error, not buffered without bound."""
    from sansrs.rsocket import ConnectionConfig

    pair = Pair.established(client_config=ConnectionConfig(max_reassembly_size=10_000))
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    fragment = encode_frame_prefixed(PayloadFrame(sid, b"x" * 1000, follows=True, next=True))
    with pytest.raises(RemoteProtocolError) as info:
        for _ in range(1000):
            pair.client.receive_data(fragment)
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    assert pair.client.state is ConnectionState.CLOSED


def test_rsocket_unexpected_6_unbounded_item_stream_keeps_no_state() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=2**31 - 1)
    pair.pump()
    for _ in range(20):
        for _ in range(500):
            pair.server.send_payload(sid, b"item")
        pair.pump()
        pair.take()
    assert pair.client.queued_output == 0
    assert pair.client.open_streams == [sid]


def test_fuzz_regression_connection_setup_error_while_closing() -> None:
    """fuzz_connection (2026-11-27, a 200 s run): a client that sent SETUP
    and three requests gets ERROR[CONNECTION_CLOSE] and then
    ERROR[UNSUPPORTED_SETUP] in one read. ``receive_data`` raised
    ``LocalProtocolError`` (no CLOSING x REJECT in the state table); the
    rule: test_conformance_streams.py::
    test_rsocket_establishment_client_assumes_setup_rejected_on_setup_error_while_closing."""
    from fuzz.fuzz_connection import test_one_input as fuzz_connection_input

    fuzz_connection_input(
        bytes.fromhex(
            "000000001b000000002c01000001027d0001000000380000000004004001002b"
            "00001b000000002c01000000022c00010000003800cccccccccccccccccccc6c"
        )
    )
