"""RSocket Connection: establishment and every interaction model, back to back.

Each test runs over several chunkings of the byte stream and, where it
matters, in both directions (client as requester and server as requester).
"""

from __future__ import annotations

import pytest

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.rsocket import (
    MAX_REQUEST_N,
    Connection,
    ConnectionConfig,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
    Framing,
    PayloadFrame,
    RequestNFrame,
    RequestStreamFrame,
    Role,
    SetupFrame,
    StreamState,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import (
    CancelReceived,
    ConnectionClosing,
    ConnectionLost,
    ConnectionTerminated,
    ErrorReceived,
    FireAndForgetReceived,
    MetadataPushReceived,
    PayloadReceived,
    RequestChannelReceived,
    RequestNReceived,
    RequestResponseReceived,
    RequestStreamReceived,
    SetupReceived,
)
from tests.rsocket.pair import Pair, bytewise, sized, whole

CHUNKERS = [whole, bytewise, sized(5), sized(17)]
DIRECTIONS = ["client-requests", "server-requests"]


def sides(pair: Pair, direction: str) -> tuple[Connection, Connection, str, str]:
    """(requester, responder, requester events attr, responder events attr)."""
    if direction == "client-requests":
        return pair.client, pair.server, "client_events", "server_events"
    return pair.server, pair.client, "server_events", "client_events"


def payload(
    sid: int,
    data: bytes,
    *,
    complete: bool = False,
    next: bool = True,
    metadata: bytes | None = None,
) -> PayloadReceived:
    return PayloadReceived(
        stream_id=sid, data=data, metadata=metadata, complete=complete, next=next
    )


# --------------------------------------------------------------------------
# Connection Establishment


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_rsocket_establishment_setup_received_with_parameters(chunker: object) -> None:
    pair = Pair(chunker=chunker)  # type: ignore[arg-type]
    pair.client.setup(
        keepalive_interval=500,
        max_lifetime=2000,
        metadata_mime_type="message/x.rsocket.composite-metadata.v0",
        data_mime_type="application/json",
        data=b"hello",
        metadata=b"meta",
    )
    pair.pump()
    assert pair.server_events == [
        SetupReceived(
            keepalive_interval=500,
            max_lifetime=2000,
            metadata_mime_type="message/x.rsocket.composite-metadata.v0",
            data_mime_type="application/json",
            metadata=b"meta",
            data=b"hello",
            lease=False,
            major_version=1,
            minor_version=0,
        )
    ]
    assert pair.server.state is ConnectionState.SETUP_RECEIVED
    pair.server.accept_setup()
    assert pair.server.state is ConnectionState.ESTABLISHED
    assert pair.client.state is ConnectionState.ESTABLISHED


@pytest.mark.parametrize(
    "code", [ErrorCode.INVALID_SETUP, ErrorCode.UNSUPPORTED_SETUP, ErrorCode.REJECTED_SETUP]
)
def test_rsocket_establishment_server_rejects_setup(code: ErrorCode) -> None:
    pair = Pair()
    pair.client.setup()
    pair.pump()
    pair.server.reject_setup(code, "no thanks")
    pair.pump()
    assert pair.server.state is ConnectionState.CLOSED
    assert pair.client.state is ConnectionState.CLOSED
    assert pair.client_events == [
        ConnectionTerminated(error_code=code, message="no thanks", by_peer=True)
    ]
    assert pair.server_events[-1] == ConnectionTerminated(
        error_code=code, message="no thanks", by_peer=False
    )
    with pytest.raises(LocalProtocolError):
        pair.client.request_response(b"x")


def test_rsocket_establishment_reject_setup_needs_a_setup_code() -> None:
    pair = Pair()
    pair.client.setup()
    pair.pump()
    with pytest.raises(LocalProtocolError):
        pair.server.reject_setup(ErrorCode.APPLICATION_ERROR)


def test_rsocket_establishment_client_request_before_setup_refused_locally() -> None:
    client = Connection(Role.CLIENT)
    for call in (
        lambda: client.request_response(b"x"),
        lambda: client.request_fnf(b"x"),
        lambda: client.request_stream(b"x", initial_n=1),
        lambda: client.request_channel(b"x", initial_n=1),
        lambda: client.metadata_push(b"m"),
    ):
        with pytest.raises(LocalProtocolError):
            call()
    assert client.data_to_send() == b""


def test_rsocket_establishment_server_request_before_accept_refused_locally() -> None:
    pair = Pair()
    pair.client.setup()
    pair.pump()
    with pytest.raises(LocalProtocolError):
        pair.server.request_response(b"x")
    with pytest.raises(LocalProtocolError):
        pair.server.setup()


def test_rsocket_establishment_false_start_requests_wait_for_accept() -> None:
    """The client may send requests right behind SETUP (TLS False Start); the
    server delivers them only once its application accepted the SETUP."""
    pair = Pair()
    pair.client.setup()
    sid = pair.client.request_response(b"early")
    pair.pump()
    assert [type(e) for e in pair.server_events] == [SetupReceived]
    pair.server.accept_setup()
    assert pair.server.events() == [
        RequestResponseReceived(stream_id=sid, data=b"early", metadata=None)
    ]


def test_rsocket_establishment_false_start_requests_dropped_on_reject() -> None:
    pair = Pair()
    pair.client.setup()
    pair.client.request_response(b"early")
    pair.pump()
    pair.server.reject_setup(ErrorCode.REJECTED_SETUP, "no")
    assert [type(e) for e in pair.server.events()] == [ConnectionTerminated]


def test_rsocket_establishment_first_frame_not_setup_gets_invalid_setup() -> None:
    server = Connection(Role.SERVER)
    with pytest.raises(RemoteProtocolError) as info:
        server.receive_data(encode_frame_prefixed(RequestStreamFrame(1, 5, b"x")))
    assert info.value.error_code == ErrorCode.INVALID_SETUP
    out = server.data_to_send()
    frame = decode_frame(out[3:])
    assert isinstance(frame, ErrorFrame)
    assert (frame.stream_id, frame.error_code) == (0, ErrorCode.INVALID_SETUP)
    assert server.state is ConnectionState.CLOSED
    with pytest.raises(RemoteProtocolError):
        server.receive_data(b"more")


def test_rsocket_establishment_unsupported_version_rejected() -> None:
    server = Connection(Role.SERVER)
    server.receive_data(encode_frame_prefixed(SetupFrame(100, 1000, "a", "b", major_version=2)))
    frame = decode_frame(server.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame)
    assert frame.error_code == ErrorCode.INVALID_SETUP
    assert server.state is ConnectionState.CLOSED
    assert [type(e) for e in server.events()] == [ConnectionTerminated]


def test_rsocket_setup_frame_resume_flag_without_session_store_rejected_with_rejected_setup() -> (
    None
):
    """Spec: SETUP Frame, NOTE: a server without resumption (no
    ``SessionStore``) MUST reject R with REJECTED_SETUP (with a store it is
    accepted: tests/rsocket/test_resume.py)."""
    server = Connection(Role.SERVER)
    server.receive_data(encode_frame_prefixed(SetupFrame(100, 1000, "a", "b", resume_token=b"t")))
    frame = decode_frame(server.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame)
    assert frame.error_code == ErrorCode.REJECTED_SETUP
    assert server.state is ConnectionState.CLOSED


def test_rsocket_establishment_setup_twice_refused_locally() -> None:
    client = Connection(Role.CLIENT)
    client.setup()
    with pytest.raises(LocalProtocolError):
        client.setup()
    for bad in ({"keepalive_interval": 0}, {"max_lifetime": 2**31}, {"data_mime_type": "é"}):
        with pytest.raises(LocalProtocolError):
            Connection(Role.CLIENT).setup(**bad)  # type: ignore[arg-type]


def test_rsocket_setup_only_by_client_and_accept_only_by_server() -> None:
    with pytest.raises(LocalProtocolError):
        Connection(Role.SERVER).setup()
    with pytest.raises(LocalProtocolError):
        Connection(Role.CLIENT).accept_setup()
    with pytest.raises(LocalProtocolError):
        Connection(Role.SERVER).reject_setup()


# --------------------------------------------------------------------------
# Stream Identifiers


def test_rsocket_stream_ids_client_odd_server_even() -> None:
    pair = Pair.established()
    assert [pair.client.request_fnf(b"") for _ in range(3)] == [1, 3, 5]
    assert [pair.server.request_fnf(b"") for _ in range(3)] == [2, 4, 6]


def test_rsocket_stream_ids_wrap_and_skip_ids_in_use() -> None:
    pair = Pair.established()
    first = pair.client.request_stream(b"", initial_n=1)  # 1 stays open
    pair.client._streams.ids._next = 0x7FFFFFFF  # jump to the end of the ID space
    assert pair.client.request_response(b"") == 0x7FFFFFFF
    assert pair.client.request_fnf(b"") == 3  # wrapped, 1 skipped (in use)
    assert first == 1


def test_rsocket_stream_ids_without_reuse_run_out() -> None:
    pair = Pair.established(client_config=ConnectionConfig(reuse_stream_ids=False))
    pair.client._streams.ids._next = 0x7FFFFFFF
    pair.client.request_fnf(b"")
    with pytest.raises(LocalProtocolError):
        pair.client.request_fnf(b"")


def test_rsocket_stream_ids_wrong_parity_request_rejected() -> None:
    """A request on an ID of the receiver's own parity is one it considers in
    use: ERROR[REJECTED] (spec: Stream Identifiers, Lifetime)."""
    pair = Pair.established()
    pair.server.receive_data(encode_frame_prefixed(RequestStreamFrame(2, 1, b"x")))
    assert pair.server.events() == []
    frame = decode_frame(pair.server.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame)
    assert (frame.stream_id, frame.error_code) == (2, ErrorCode.REJECTED)


# --------------------------------------------------------------------------
# Interaction models, both directions, any chunking


@pytest.mark.parametrize("chunker", CHUNKERS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_request_response(chunker: object, direction: str) -> None:
    pair = Pair.established(chunker=chunker)  # type: ignore[arg-type]
    rq, rs, rq_ev, rs_ev = sides(pair, direction)
    sid = rq.request_response(b"ping", b"m")
    pair.pump()
    assert getattr(pair, rs_ev) == [
        RequestResponseReceived(stream_id=sid, data=b"ping", metadata=b"m")
    ]
    rs.send_payload(sid, b"pong")  # the response always completes
    pair.pump()
    assert getattr(pair, rq_ev) == [payload(sid, b"pong", complete=True)]
    assert rq.stream_state(sid) is None and rs.stream_state(sid) is None
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, b"again")


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_request_response_error(direction: str) -> None:
    pair = Pair.established()
    rq, rs, rq_ev, _ = sides(pair, direction)
    sid = rq.request_response(b"ping")
    pair.pump()
    rs.send_error(sid, ErrorCode.APPLICATION_ERROR, "boom")
    pair.pump()
    assert getattr(pair, rq_ev) == [
        ErrorReceived(stream_id=sid, error_code=ErrorCode.APPLICATION_ERROR, message="boom")
    ]
    assert rq.stream_state(sid) is None and rs.stream_state(sid) is None


def test_rsocket_request_response_cancel() -> None:
    pair = Pair.established()
    sid = pair.client.request_response(b"ping")
    pair.pump()
    pair.client.cancel(sid)
    assert pair.client.stream_state(sid) is None  # terminated on sending CANCEL
    pair.pump()
    assert pair.server_events[-1] == CancelReceived(stream_id=sid)
    with pytest.raises(LocalProtocolError):
        pair.server.send_payload(sid, b"late")


def test_rsocket_request_response_empty_completion() -> None:
    pair = Pair.established()
    sid = pair.client.request_response(b"ping")
    pair.pump()
    pair.server.send_complete(sid)
    pair.pump()
    assert pair.client_events == [payload(sid, b"", complete=True, next=False)]


@pytest.mark.parametrize("chunker", CHUNKERS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_fire_and_forget(chunker: object, direction: str) -> None:
    pair = Pair.established(chunker=chunker)  # type: ignore[arg-type]
    rq, rs, _, rs_ev = sides(pair, direction)
    sid = rq.request_fnf(b"fire", b"md")
    assert rq.stream_state(sid) is None  # terminated on sending
    pair.pump()
    assert getattr(pair, rs_ev) == [
        FireAndForgetReceived(stream_id=sid, data=b"fire", metadata=b"md")
    ]
    assert rs.stream_state(sid) is None  # terminated on reception


@pytest.mark.parametrize("chunker", CHUNKERS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_request_stream_with_flow_control(chunker: object, direction: str) -> None:
    """Spec: Flow Control, the REQUEST_N=3, then 3 more example."""
    pair = Pair.established(chunker=chunker)  # type: ignore[arg-type]
    rq, rs, rq_ev, rs_ev = sides(pair, direction)
    sid = rq.request_stream(b"q", initial_n=3)
    pair.pump()
    assert getattr(pair, rs_ev) == [
        RequestStreamReceived(stream_id=sid, data=b"q", metadata=None, initial_n=3)
    ]
    for i in range(3):
        rs.send_payload(sid, b"%d" % i)
    with pytest.raises(LocalProtocolError, match=r"1\.1"):
        rs.send_payload(sid, b"too many")
    rq.request_n(sid, 3)
    pair.pump()
    assert RequestNReceived(stream_id=sid, n=3) in getattr(pair, rs_ev)
    rs.send_payload(sid, b"3")
    rs.send_payload(sid, b"4", complete=True)
    pair.pump()
    assert getattr(pair, rq_ev) == [payload(sid, b"%d" % i) for i in range(4)] + [
        payload(sid, b"4", complete=True)
    ]
    assert rq.stream_state(sid) is None and rs.stream_state(sid) is None


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_request_stream_cancel(direction: str) -> None:
    pair = Pair.established()
    rq, rs, _, rs_ev = sides(pair, direction)
    sid = rq.request_stream(b"q", initial_n=10)
    pair.pump()
    rs.send_payload(sid, b"a")
    rq.cancel(sid)
    pair.pump()  # the payload in flight reaches a forgotten stream: ignored
    assert getattr(pair, rs_ev)[-1] == CancelReceived(stream_id=sid)
    assert rq.stream_state(sid) is None and rs.stream_state(sid) is None


@pytest.mark.parametrize(
    "code",
    [ErrorCode.APPLICATION_ERROR, ErrorCode.REJECTED, ErrorCode.CANCELED, ErrorCode.INVALID, 0x301],
)
def test_rsocket_request_stream_error_terminates_both(code: int) -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=10)
    pair.pump()
    pair.server.send_payload(sid, b"a")
    pair.server.send_error(sid, code, "bad")
    pair.pump()
    assert pair.client_events == [
        payload(sid, b"a"),
        ErrorReceived(stream_id=sid, error_code=code, message="bad"),
    ]
    assert pair.client.stream_state(sid) is None and pair.server.stream_state(sid) is None


def test_rsocket_request_stream_requester_cannot_send_payload_or_error() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    with pytest.raises(LocalProtocolError):
        pair.client.send_payload(sid, b"x")
    with pytest.raises(LocalProtocolError):
        pair.client.send_error(sid, ErrorCode.APPLICATION_ERROR, "x")
    with pytest.raises(LocalProtocolError):
        pair.client.send_error(sid, ErrorCode.CONNECTION_ERROR, "x")


def test_rsocket_request_stream_connection_error_code_not_a_stream_error() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.pump()
    with pytest.raises(LocalProtocolError):
        pair.server.send_error(sid, ErrorCode.CONNECTION_ERROR, "x")


@pytest.mark.parametrize("chunker", CHUNKERS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_channel_complete_from_requester_and_responder(
    chunker: object, direction: str
) -> None:
    pair = Pair.established(chunker=chunker)  # type: ignore[arg-type]
    rq, rs, rq_ev, rs_ev = sides(pair, direction)
    sid = rq.request_channel(b"first", initial_n=2)
    # No credit yet: the responder must send REQUEST_N first.
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, b"second")
    pair.pump()
    assert getattr(pair, rs_ev) == [
        RequestChannelReceived(
            stream_id=sid, data=b"first", metadata=None, initial_n=2, complete=False
        )
    ]
    rs.request_n(sid, 2)  # the responder's mandatory REQUEST_N
    rs.send_payload(sid, b"r1")
    pair.pump()
    rq.send_payload(sid, b"second")
    rq.send_payload(sid, b"third", complete=True)
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, b"after complete")
    pair.pump()
    assert rq.stream_state(sid) is StreamState.IN_ONLY
    assert rs.stream_state(sid) is StreamState.OUT_ONLY
    rs.send_payload(sid, b"r2", complete=True)
    pair.pump()
    assert getattr(pair, rq_ev) == [
        RequestNReceived(stream_id=sid, n=2),
        payload(sid, b"r1"),
        payload(sid, b"r2", complete=True),
    ]
    assert getattr(pair, rs_ev)[1:] == [
        payload(sid, b"second"),
        payload(sid, b"third", complete=True),
    ]
    assert rq.stream_state(sid) is None and rs.stream_state(sid) is None


def test_rsocket_channel_c_flag_on_request_channel() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"only", initial_n=1, complete=True)
    assert pair.client.stream_state(sid) is StreamState.IN_ONLY
    pair.pump()
    assert pair.server_events == [
        RequestChannelReceived(
            stream_id=sid, data=b"only", metadata=None, initial_n=1, complete=True
        )
    ]
    assert pair.server.stream_state(sid) is StreamState.OUT_ONLY
    with pytest.raises(LocalProtocolError):
        pair.server.request_n(sid, 1)  # nothing more to receive
    pair.server.send_payload(sid, b"r", complete=True)
    pair.pump()
    assert pair.client.stream_state(sid) is None and pair.server.stream_state(sid) is None


def test_rsocket_channel_error_from_requester_responder_terminates() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=5)
    pair.pump()
    pair.server.request_n(sid, 5)
    pair.server.send_payload(sid, b"r")
    pair.pump()
    pair.client.send_error(sid, ErrorCode.APPLICATION_ERROR, "upstream failed")
    assert pair.client.stream_state(sid) is None
    pair.pump()
    assert pair.server_events[-1] == ErrorReceived(
        stream_id=sid, error_code=ErrorCode.APPLICATION_ERROR, message="upstream failed"
    )
    assert pair.server.stream_state(sid) is None


def test_rsocket_channel_error_from_requester_responder_already_completed() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=5)
    pair.pump()
    pair.server.request_n(sid, 5)
    pair.server.send_complete(sid)
    pair.pump()
    assert pair.client.stream_state(sid) is StreamState.OUT_ONLY
    pair.client.send_error(sid, ErrorCode.APPLICATION_ERROR, "x")
    pair.pump()
    assert pair.server.stream_state(sid) is None and pair.client.stream_state(sid) is None
    assert isinstance(pair.server_events[-1], ErrorReceived)


def test_rsocket_channel_error_from_responder_requester_terminates() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=5)
    pair.pump()
    pair.server.request_n(sid, 5)
    pair.pump()
    pair.client.send_payload(sid, b"b")
    pair.server.send_error(sid, ErrorCode.INVALID, "bad")
    pair.pump()  # the client's PAYLOAD reaches a terminated stream: ignored
    assert pair.client_events[-1] == ErrorReceived(
        stream_id=sid, error_code=ErrorCode.INVALID, message="bad"
    )
    assert pair.server.stream_state(sid) is None and pair.client.stream_state(sid) is None


def test_rsocket_channel_error_from_responder_requester_already_completed() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=5, complete=True)
    pair.pump()
    pair.server.send_error(sid, ErrorCode.APPLICATION_ERROR, "x")
    pair.pump()
    assert pair.client_events[-1] == ErrorReceived(
        stream_id=sid, error_code=ErrorCode.APPLICATION_ERROR, message="x"
    )
    assert pair.client.stream_state(sid) is None


def test_rsocket_channel_cancel_from_requester_responder_terminates() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=5)
    pair.pump()
    pair.server.request_n(sid, 5)
    pair.pump()
    pair.client.send_complete(sid)
    pair.client.cancel(sid)
    assert pair.client.stream_state(sid) is None
    pair.server.send_payload(sid, b"in flight")
    pair.pump()
    assert pair.server_events[-1] == CancelReceived(stream_id=sid)
    assert pair.server.stream_state(sid) is None


def test_rsocket_channel_responder_cancels_the_requester_flow_only() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=5)
    pair.pump()
    pair.server.request_n(sid, 5)
    pair.server.cancel(sid)
    assert pair.server.stream_state(sid) is StreamState.OUT_ONLY
    pair.pump()
    assert pair.client_events[-1] == CancelReceived(stream_id=sid)
    assert pair.client.stream_state(sid) is StreamState.IN_ONLY
    with pytest.raises(LocalProtocolError):
        pair.client.send_payload(sid, b"x")
    pair.server.send_payload(sid, b"still flowing", complete=True)
    pair.pump()
    assert pair.client_events[-1] == payload(sid, b"still flowing", complete=True)
    assert pair.client.stream_state(sid) is None and pair.server.stream_state(sid) is None


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_metadata_push(direction: str) -> None:
    pair = Pair.established()
    rq, _, _, rs_ev = sides(pair, direction)
    rq.metadata_push(b"routing")
    pair.pump()
    assert getattr(pair, rs_ev) == [MetadataPushReceived(metadata=b"routing")]


def test_rsocket_both_sides_requester_and_responder_at_once() -> None:
    pair = Pair.established()
    a = pair.client.request_stream(b"c", initial_n=2)
    b = pair.server.request_stream(b"s", initial_n=2)
    pair.pump()
    pair.server.send_payload(a, b"to client", complete=True)
    pair.client.send_payload(b, b"to server", complete=True)
    pair.pump()
    assert pair.client_events[-1] == payload(a, b"to client", complete=True)
    assert pair.server_events[-1] == payload(b, b"to server", complete=True)


# --------------------------------------------------------------------------
# Flow control


def test_rsocket_flow_control_credit_is_cumulative() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.client.request_n(sid, 3)
    pair.client.request_n(sid, 2)
    pair.pump()
    assert pair.server.send_credit(sid) == 6
    for _ in range(6):
        pair.server.send_payload(sid, b"x")
    assert pair.server.send_credit(sid) == 0
    with pytest.raises(LocalProtocolError):
        pair.server.send_payload(sid, b"x")


def test_rsocket_flow_control_max_request_n_is_unbounded() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=MAX_REQUEST_N)
    pair.pump()
    for _ in range(1000):
        pair.server.send_payload(sid, b"x")
    assert pair.server.send_credit(sid) == MAX_REQUEST_N
    pair.pump()
    assert len(pair.client_events) == 1000


def test_rsocket_flow_control_cumulative_credit_reaching_max_is_unbounded() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=MAX_REQUEST_N - 1)
    pair.client.request_n(sid, 1)
    pair.client.request_n(sid, 10**12)  # already unbounded: nothing more sent
    pair.pump()
    assert pair.server.send_credit(sid) == MAX_REQUEST_N
    requests_n = [e for e in pair.server_events if isinstance(e, RequestNReceived)]
    assert requests_n == [RequestNReceived(stream_id=sid, n=1)]


def test_rsocket_flow_control_request_n_large_value_clamped_on_the_wire() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=2**40)
    out = pair.client.data_to_send()
    frame = decode_frame(out[3:])
    assert isinstance(frame, RequestStreamFrame)
    assert frame.initial_request_n == MAX_REQUEST_N
    assert sid == 1


def test_rsocket_flow_control_over_delivery_is_a_connection_error() -> None:
    """Choice (docs/rsocket.md): a PAYLOAD beyond granted credit is
    ERROR[CONNECTION_ERROR], like an HTTP/2 flow-control error."""
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.pump()
    pair.client.receive_data(encode_frame_prefixed(PayloadFrame(sid, b"a", next=True)))
    with pytest.raises(RemoteProtocolError) as info:
        pair.client.receive_data(encode_frame_prefixed(PayloadFrame(sid, b"b", next=True)))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    frame = decode_frame(pair.client.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame) and frame.error_code == ErrorCode.CONNECTION_ERROR
    events = pair.client.events()
    assert events[0] == payload(sid, b"a")
    assert isinstance(events[-1], ConnectionTerminated)


def test_rsocket_flow_control_request_n_validated() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    for bad in (0, -1):
        with pytest.raises(LocalProtocolError):
            pair.client.request_n(sid, bad)
        with pytest.raises(LocalProtocolError):
            pair.client.request_stream(b"q", initial_n=bad)
    with pytest.raises(LocalProtocolError):
        pair.client.request_n(999, 1)
    rr = pair.client.request_response(b"")
    with pytest.raises(LocalProtocolError):
        pair.client.request_n(rr, 1)


def test_rsocket_flow_control_request_n_after_complete_ignored() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.pump()
    pair.server.send_payload(sid, b"a", complete=True)
    pair.client.request_n(sid, 5)  # still open on the client: allowed
    pair.pump()
    assert pair.client.stream_state(sid) is None


# --------------------------------------------------------------------------
# Errors and closing


def test_rsocket_connection_close_drains_then_closes() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    pair.server.close("bye")
    assert pair.server.state is ConnectionState.CLOSING
    with pytest.raises(LocalProtocolError):
        pair.server.request_fnf(b"no new")
    pair.pump()
    assert pair.client_events == [ConnectionClosing(message="bye")]
    with pytest.raises(LocalProtocolError):
        pair.client.request_response(b"no new")
    # A request already in flight is refused by the closing peer.
    pair.client._ctx.state = ConnectionState.ESTABLISHED  # simulate a request racing the close
    late = pair.client.request_response(b"racing")
    pair.client._ctx.state = ConnectionState.CLOSING
    pair.pump()
    assert (
        ErrorReceived(
            stream_id=late, error_code=ErrorCode.REJECTED, message="the connection is closing"
        )
        in pair.client_events
    )
    pair.server.send_payload(sid, b"last", complete=True)
    pair.pump()
    assert pair.server.state is ConnectionState.CLOSED
    assert pair.client.state is ConnectionState.CLOSED
    assert pair.server_events[-1] == ConnectionTerminated(
        error_code=ErrorCode.CONNECTION_CLOSE, message="bye", by_peer=False
    )
    assert pair.client_events[-1] == ConnectionTerminated(
        error_code=ErrorCode.CONNECTION_CLOSE, message="bye", by_peer=True
    )


def test_rsocket_connection_close_without_streams_closes_at_once() -> None:
    pair = Pair.established()
    pair.client.close("done")
    assert pair.client.state is ConnectionState.CLOSED
    pair.pump()
    assert pair.server.state is ConnectionState.CLOSED
    assert pair.server_events == [
        ConnectionClosing(message="done"),
        ConnectionTerminated(error_code=ErrorCode.CONNECTION_CLOSE, message="done", by_peer=True),
    ]


def test_rsocket_connection_error_closes_at_once() -> None:
    pair = Pair.established()
    pair.client.request_stream(b"q", initial_n=5)
    pair.pump()
    pair.server.close("fatal", error_code=ErrorCode.CONNECTION_ERROR)
    assert pair.server.state is ConnectionState.CLOSED
    pair.pump()
    assert pair.client.state is ConnectionState.CLOSED
    assert pair.client_events == [
        ConnectionTerminated(error_code=ErrorCode.CONNECTION_ERROR, message="fatal", by_peer=True)
    ]
    for call in (
        lambda: pair.client.request_fnf(b""),
        lambda: pair.client.send_payload(1, b""),
        lambda: pair.client.close(),
    ):
        with pytest.raises(LocalProtocolError):
            call()


def test_rsocket_transport_closed_is_connection_lost() -> None:
    pair = Pair.established()
    pair.client.receive_data(b"")
    assert pair.client.events() == [ConnectionLost(reason="the transport closed", timed_out=False)]
    assert pair.client.state is ConnectionState.CLOSED
    pair.client.receive_data(b"ignored")  # after a clean end, input is ignored
    assert pair.client.next_deadline() is None


def test_rsocket_output_blocked_over_max_queued_output() -> None:
    pair = Pair.established(server_config=ConnectionConfig(max_queued_output=100))
    sid = pair.client.request_stream(b"q", initial_n=1000)
    pair.pump()
    with pytest.raises(LocalProtocolError, match="blocked"):
        for _ in range(100):
            pair.server.send_payload(sid, b"0123456789")
    assert pair.server.output_blocked
    assert pair.server.queued_output >= 100
    pair.pump()
    assert not pair.server.output_blocked
    pair.server.send_payload(sid, b"again")


# --------------------------------------------------------------------------
# Message framing (WebSocket)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_rsocket_message_framing_back_to_back(direction: str) -> None:
    config = ConnectionConfig(framing=Framing.MESSAGES)
    pair = Pair.established(client_config=config, server_config=config)
    rq, rs, rq_ev, _ = sides(pair, direction)
    sid = rq.request_stream(b"q", initial_n=2)
    pair.pump()
    rs.send_payload(sid, b"a", metadata=b"m")
    rs.send_payload(sid, b"b", complete=True)
    pair.pump()
    assert getattr(pair, rq_ev) == [
        payload(sid, b"a", metadata=b"m"),
        payload(sid, b"b", complete=True),
    ]
    with pytest.raises(LocalProtocolError):
        rq.data_to_send()
    with pytest.raises(LocalProtocolError):
        rq.receive_data(b"x")


def test_rsocket_message_framing_bad_frame_is_connection_error() -> None:
    server = Connection(Role.SERVER, ConnectionConfig(framing=Framing.MESSAGES))
    with pytest.raises(RemoteProtocolError):
        server.receive_frame(b"\x00\x00")
    frames = server.frames_to_send()
    assert len(frames) == 1 and isinstance(decode_frame(frames[0]), ErrorFrame)


def test_rsocket_length_prefixed_connection_refuses_message_calls() -> None:
    client = Connection(Role.CLIENT)
    with pytest.raises(LocalProtocolError):
        client.frames_to_send()
    with pytest.raises(LocalProtocolError):
        client.receive_frame(b"")


def test_rsocket_positions_count_stream_frames() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=2)
    pair.pump()
    pair.server.send_payload(sid, b"abc")
    pair.pump()
    assert pair.client.sent_position == pair.server.received_position == 10 + 1
    assert pair.server.sent_position == pair.client.received_position == 6 + 3


def test_rsocket_request_n_frame_encoding_roundtrip_through_core() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=1)
    pair.client.data_to_send()
    pair.client.request_n(sid, 7)
    assert decode_frame(pair.client.data_to_send()[3:]) == RequestNFrame(sid, 7)


def test_next_event_and_events_share_one_queue() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=3)
    pair.server.receive_data(pair.client.data_to_send())
    first = pair.server.next_event()
    assert first == RequestStreamReceived(stream_id=sid, data=b"q", metadata=None, initial_n=3)
    assert pair.server.next_event() is None
    pair.server.send_payload(sid, b"a")
    pair.server.send_payload(sid, b"b")
    pair.client.receive_data(pair.server.data_to_send())
    assert pair.client.next_event() == payload(sid, b"a")
    assert pair.client.events() == [payload(sid, b"b")]
    assert pair.client.events() == []


def test_rsocket_close_before_setup_sends_nothing() -> None:
    client = Connection(Role.CLIENT)
    client.close("never mind")
    assert client.state is ConnectionState.CLOSED
    assert client.data_to_send() == b""
    assert client.events() == [
        ConnectionTerminated(
            error_code=ErrorCode.CONNECTION_ERROR, message="never mind", by_peer=False
        )
    ]


def test_rsocket_close_rejects_stream_codes() -> None:
    pair = Pair.established()
    with pytest.raises(LocalProtocolError):
        pair.client.close("x", error_code=ErrorCode.APPLICATION_ERROR)


def test_rsocket_max_concurrent_streams_rejects_beyond() -> None:
    pair = Pair.established(server_config=ConnectionConfig(max_concurrent_streams=2))
    a = pair.client.request_stream(b"", initial_n=1)
    b = pair.client.request_stream(b"", initial_n=1)
    c = pair.client.request_stream(b"", initial_n=1)
    pair.pump()
    assert [type(e) for e in pair.server_events] == [RequestStreamReceived] * 2
    assert pair.client_events == [
        ErrorReceived(
            stream_id=c, error_code=ErrorCode.REJECTED, message="too many concurrent streams"
        )
    ]
    pair.server.send_complete(a)
    pair.pump()
    d = pair.client.request_fnf(b"fnf does not count")
    e = pair.client.request_stream(b"", initial_n=1)
    pair.pump()
    assert [type(ev) for ev in pair.server_events[2:]] == [
        FireAndForgetReceived,
        RequestStreamReceived,
    ]
    assert (b, d, e) == (3, 7, 9)


def test_rsocket_max_frame_size_rejects_larger_frame_at_its_prefix() -> None:
    pair = Pair.established(server_config=ConnectionConfig(max_frame_size=100))
    with pytest.raises(RemoteProtocolError) as info:
        pair.server.receive_data(b"\x00\x01\x00")  # a 256-byte frame announced
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    frame = decode_frame(pair.server.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame) and frame.stream_id == 0


def test_rsocket_establishment_malformed_first_frame_gets_invalid_setup() -> None:
    server = Connection(Role.SERVER)
    with pytest.raises(RemoteProtocolError) as info:
        server.receive_data(b"\x00\x00\x06\x00\x00\x00\x01\x20\x00")  # REQUEST_N, no N field
    assert info.value.error_code == ErrorCode.INVALID_SETUP
    frame = decode_frame(server.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame) and frame.error_code == ErrorCode.INVALID_SETUP
