"""Conformance: Transport Protocol, Stream Identifiers, Connection
Establishment, Stream Sequences and Lifetimes, Fragmentation, Lease
(spec: the RSocket protocol 1.0).

Each test names the rule it checks; docs/rsocket-conformance.md maps every
normative sentence to its test. These cover what the other tests in
tests/rsocket/ leave out.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sansrs import LocalProtocolError
from sansrs.rsocket import (
    MAX_STREAM_ID,
    CancelFrame,
    Connection,
    ConnectionConfig,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
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
    StreamState,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import (
    ConnectionTerminated,
    FireAndForgetReceived,
    LeaseReceived,
    PayloadReceived,
    RequestChannelReceived,
    RequestResponseReceived,
    RequestStreamReceived,
    SetupReceived,
)
from tests.rsocket.pair import Pair
from tests.rsocket.test_unexpected import feed, quiet, sent_frames

# --------------------------------------------------------------------------
# Transport Protocol: "Frame A sent before Frame B MUST arrive in source order"
# (the transport's duty; the core's part: it queues frames in intent order)


def test_rsocket_transport_frames_leave_in_the_order_of_the_intents() -> None:
    pair = Pair.established()
    a = pair.client.request_stream(b"a", initial_n=1)
    pair.client.metadata_push(b"m")
    b = pair.client.request_fnf(b"b")
    pair.client.request_n(a, 2)
    pair.client.send_keepalive(b"k")
    pair.client.cancel(a)
    assert [type(f) for f in sent_frames(pair.client)] == [
        RequestStreamFrame,
        MetadataPushFrame,
        RequestFnfFrame,
        RequestNFrame,
        KeepaliveFrame,
        CancelFrame,
    ]
    assert (a, b) == (1, 3)


def test_rsocket_transport_closed_connection_sends_and_processes_nothing_more() -> None:
    """Spec: "An implementation MAY close a transport connection ... it is assumed
    that the connection will have no further frames sent and all frames will
    be ignored"."""
    pair = Pair.established()
    pair.client.close("bye")
    pair.client.data_to_send()
    assert pair.client.state is ConnectionState.CLOSED
    pair.client.events()
    pair.client.receive_data(encode_frame_prefixed(RequestFnfFrame(2, b"late")))
    pair.client.handle_timeout(1000.0)
    assert pair.client.events() == []
    assert pair.client.data_to_send() == b""


# --------------------------------------------------------------------------
# Stream Identifiers


def test_rsocket_stream_ids_client_must_start_at_1_and_server_at_2_incrementing_by_2() -> None:
    pair = Pair.established()
    client_ids = [pair.client.request_fnf(b"") for _ in range(4)]
    client_ids.append(pair.client.request_stream(b"", initial_n=1))
    server_ids = [pair.server.request_response(b"") for _ in range(4)]
    assert client_ids == [1, 3, 5, 7, 9]
    assert server_ids == [2, 4, 6, 8]


def test_rsocket_stream_ids_must_be_locally_unique_for_a_requester() -> None:
    pair = Pair.established()
    ids = []
    for _ in range(50):
        ids.append(pair.client.request_stream(b"", initial_n=1))
        ids.append(pair.client.request_response(b""))
        ids.append(pair.client.request_channel(b"", initial_n=1))
    assert len(set(ids)) == len(ids)


def test_rsocket_stream_ids_terminated_id_must_not_be_reused_before_the_wrap() -> None:
    """Spec: "Once a stream has terminated, the Stream ID can be forgotten ... but
    the Stream ID MUST NOT be re-used" (until the ID space wraps)."""
    pair = Pair.established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    pair.server.send_payload(sid, b"r")
    pair.pump()
    assert pair.client.stream_state(sid) is None
    assert pair.client.request_response(b"q2") == sid + 2


def test_rsocket_stream_ids_server_must_wrap_to_2_and_skip_ids_in_use() -> None:
    pair = Pair.established()
    held = pair.server.request_stream(b"", initial_n=1)  # 2 stays open
    pair.server._streams.ids._next = MAX_STREAM_ID + 1  # the last even ID was used
    assert pair.server.request_fnf(b"") == 4  # wrapped to 2, which is in use
    assert held == 2
    pair.pump()
    assert pair.server.stream_state(2) is StreamState.IN_ONLY


def test_rsocket_stream_ids_responder_must_assume_ids_will_be_reused() -> None:
    """A responder accepts a request on an ID whose earlier stream terminated."""
    pair = Pair.established()
    feed(pair.server, RequestResponseFrame(1, b"first"))
    assert pair.server.events() == [
        RequestResponseReceived(stream_id=1, data=b"first", metadata=None)
    ]
    pair.server.send_payload(1, b"r")
    pair.server.data_to_send()
    feed(pair.server, RequestStreamFrame(1, 2, b"again"))
    assert pair.server.events() == [
        RequestStreamReceived(stream_id=1, data=b"again", metadata=None, initial_n=2)
    ]
    assert pair.server.send_credit(1) == 2


# --------------------------------------------------------------------------
# Connection Establishment


def test_rsocket_establishment_client_must_send_setup_first_with_stream_0() -> None:
    client = Connection(Role.CLIENT)
    client.setup()
    client.request_fnf(b"false start")
    client.metadata_push(b"m")
    frames = sent_frames(client)
    assert isinstance(frames[0], SetupFrame) and frames[0].stream_id == 0
    assert [type(f) for f in frames[1:]] == [RequestFnfFrame, MetadataPushFrame]


@pytest.mark.parametrize(
    "frame",
    [
        LeaseFrame(100, 1),
        KeepaliveFrame(True, 0, b"x"),
        RequestResponseFrame(1),
        RequestFnfFrame(1),
        RequestStreamFrame(1, 1),
        RequestChannelFrame(1, 1),
        RequestNFrame(1, 1),
        CancelFrame(1),
        PayloadFrame(1, b"x", next=True),
        ErrorFrame(0, ErrorCode.CONNECTION_ERROR),
        ErrorFrame(0, ErrorCode.REJECTED_SETUP),
        MetadataPushFrame(b"m"),
    ],
    ids=lambda f: type(f).__name__,
)
def test_rsocket_establishment_any_first_frame_not_setup_must_get_invalid_setup(
    frame: object,
) -> None:
    from sansrs import RemoteProtocolError

    server = Connection(Role.SERVER)
    with pytest.raises(RemoteProtocolError) as info:
        feed(server, frame)  # type: ignore[arg-type]
    assert info.value.error_code == ErrorCode.INVALID_SETUP
    out = sent_frames(server)
    assert len(out) == 1 and isinstance(out[0], ErrorFrame)
    assert (out[0].stream_id, out[0].error_code) == (0, ErrorCode.INVALID_SETUP)
    assert server.state is ConnectionState.CLOSED
    assert [type(e) for e in server.events()] == [ConnectionTerminated]


def test_rsocket_establishment_responder_must_not_emit_payload_before_established() -> None:
    """A false-start request waits at the server until ``accept_setup``: before
    that there is no stream to answer on, so no PAYLOAD can go out."""
    pair = Pair()
    pair.client.setup()
    sid = pair.client.request_response(b"q")
    pair.pump()
    assert [type(e) for e in pair.server_events] == [SetupReceived]
    assert pair.server.state is ConnectionState.SETUP_RECEIVED
    with pytest.raises(LocalProtocolError):
        pair.server.send_payload(sid, b"r")
    with pytest.raises(LocalProtocolError):
        pair.server.send_complete(sid)
    assert pair.server.data_to_send() == b""
    pair.server.accept_setup()
    assert pair.server.events() == [
        RequestResponseReceived(stream_id=sid, data=b"q", metadata=None)
    ]
    pair.server.send_payload(sid, b"r")
    pair.pump()
    assert pair.client_events[-1] == PayloadReceived(
        stream_id=sid, data=b"r", metadata=None, complete=True, next=True
    )


def test_rsocket_establishment_server_requester_must_not_send_before_accept() -> None:
    pair = Pair()
    pair.client.setup()
    pair.pump()
    calls: list[Callable[[], int]] = [
        lambda: pair.server.request_response(b""),
        lambda: pair.server.request_fnf(b""),
        lambda: pair.server.request_stream(b"", initial_n=1),
        lambda: pair.server.request_channel(b"", initial_n=1),
    ]
    for call in calls:
        with pytest.raises(LocalProtocolError):
            call()
    assert pair.server.data_to_send() == b""


@pytest.mark.parametrize("sign", ["request-from-server", "lease"])
def test_rsocket_establishment_client_assumes_setup_accepted_on_lease_or_request(
    sign: str,
) -> None:
    """Spec: "A client assumes a SETUP is accepted if it receives a response to a
    request, a LEASE frame, or if it sees a REQUEST type"; after that a setup
    ERROR is ignored (Handling the Unexpected 9.8). The response case:
    test_unexpected.py::test_rsocket_unexpected_9_8_client_ignores_setup_errors_after_establishment."""
    pair = Pair()
    pair.client.setup(lease=sign == "lease")
    pair.pump()
    if sign == "lease":
        pair.server.accept_setup(lease_ttl=10_000, lease_number=1)
    else:
        pair.server.accept_setup()
        pair.server.request_fnf(b"x")
    pair.pump()
    pair.take()
    feed(pair.client, ErrorFrame(0, ErrorCode.REJECTED_SETUP, b"late"))
    quiet(pair.client)


@pytest.mark.parametrize("closed_by", ["server", "client"])
def test_rsocket_establishment_client_assumes_setup_rejected_on_setup_error_while_closing(
    closed_by: str,
) -> None:
    """Spec: "A client assumes a SETUP is rejected if it receives an ERROR"
    (a setup code) until it has seen the SETUP accepted, and ERROR[CONNECTION_CLOSE]
    is not among the signs of acceptance. So a setup ERROR after a close began,
    the server's or our own, with no sign of acceptance yet, ends the connection
    as rejected: ``ConnectionTerminated``, every stream ended, nothing raised.
    (Found by fuzz_connection: the state table had no CLOSING x REJECT, and the
    client raised LocalProtocolError out of receive_data.)"""
    pair = Pair()
    pair.client.setup()
    sid = pair.client.request_stream(b"s", initial_n=1)
    pair.pump()
    pair.server.accept_setup()  # (no lease: the server sends nothing for it)
    pair.take()
    if closed_by == "server":
        feed(pair.client, ErrorFrame(0, ErrorCode.CONNECTION_CLOSE, b"bye"))
    else:
        pair.client.close("bye")
    assert pair.client.state is ConnectionState.CLOSING
    pair.client.events()
    pair.client.data_to_send()
    feed(pair.client, ErrorFrame(0, ErrorCode.UNSUPPORTED_SETUP, b"no"))
    assert pair.client.state is ConnectionState.CLOSED
    assert pair.client.open_streams == [] and pair.client.stream_state(sid) is None
    assert ConnectionTerminated(
        error_code=ErrorCode.UNSUPPORTED_SETUP, message="no", by_peer=True
    ) in pair.client.events()
    assert pair.client.next_deadline() is None


def test_rsocket_establishment_server_must_send_error_and_close_when_not_accepting() -> None:
    for code in (ErrorCode.INVALID_SETUP, ErrorCode.UNSUPPORTED_SETUP, ErrorCode.REJECTED_SETUP):
        pair = Pair()
        pair.client.setup()
        pair.client.request_fnf(b"dropped with the rejected setup")
        pair.pump()
        pair.server.reject_setup(code, "no")
        out = sent_frames(pair.server)
        assert out == [ErrorFrame(0, code, b"no")]
        assert pair.server.state is ConnectionState.CLOSED
        assert [type(e) for e in pair.server.events()] == [ConnectionTerminated]
    for bad in (ErrorCode.CONNECTION_ERROR, ErrorCode.APPLICATION_ERROR):
        pair = Pair()
        pair.client.setup()
        pair.pump()
        with pytest.raises(LocalProtocolError):
            pair.server.reject_setup(bad, "no")


# --------------------------------------------------------------------------
# Lease in Connection Establishment


def test_rsocket_lease_client_responder_must_send_lease_after_setup_with_l() -> None:
    """The client-side responder sends its LEASE (through ``send_lease``)
    right behind a SETUP with L; the server-side requester waits for it."""
    pair = Pair()
    pair.client.setup(lease=True)
    pair.client.send_lease(10_000, 2)
    frames = sent_frames(pair.client)
    assert [type(f) for f in frames] == [SetupFrame, LeaseFrame]
    for frame in frames:
        pair.server.receive_data(encode_frame_prefixed(frame))
    assert [type(e) for e in pair.server.events()] == [SetupReceived]
    with pytest.raises(LocalProtocolError):
        pair.server.request_fnf(b"")  # not established yet
    pair.server.accept_setup(lease_ttl=10_000, lease_number=1)
    assert pair.server.events() == [LeaseReceived(ttl=10_000, number_of_requests=2, metadata=None)]
    assert pair.server.lease_available() == 2
    sid = pair.server.request_response(b"x")
    pair.pump()
    assert RequestResponseReceived(stream_id=sid, data=b"x", metadata=None) in pair.client_events


# --------------------------------------------------------------------------
# Fragmentation: "a request counts against a single lease count, regardless
# of how many fragments the frame is split into"


def test_rsocket_fragmentation_fragmented_request_counts_one_lease() -> None:
    pair = Pair.established(client_config=ConnectionConfig(fragment_size=64), lease=(10_000, 2))
    sid = pair.client.request_response(b"d" * 500, b"m" * 100)
    assert pair.client.lease_available() == 1
    pair.pump()
    assert pair.server_events == [
        RequestResponseReceived(stream_id=sid, data=b"d" * 500, metadata=b"m" * 100)
    ]
    # The responder counted one request too: the second fragmented request,
    # the last of the 2 granted, is processed, not ERROR[REJECTED].
    sid2 = pair.client.request_fnf(b"e" * 500)
    pair.pump()
    assert pair.client.lease_available() == 0
    assert pair.server_events[-1] == FireAndForgetReceived(
        stream_id=sid2, data=b"e" * 500, metadata=None
    )
    assert pair.client_events == []  # no ERROR[REJECTED]
    with pytest.raises(LocalProtocolError):
        pair.client.request_fnf(b"")


def test_rsocket_fragmentation_request_metadata_must_be_sent_before_data() -> None:
    pair = Pair.established(client_config=ConnectionConfig(fragment_size=64))
    pair.client.request_stream(b"D" * 200, b"M" * 200, initial_n=1)
    frames = sent_frames(pair.client)
    assert type(frames[0]) is RequestStreamFrame and frames[0].follows
    seen_data = False
    metadata = b""
    for frame in frames:
        md = frame.metadata  # type: ignore[union-attr]
        data = frame.data  # type: ignore[union-attr]
        if md:
            assert not seen_data, "metadata after data"
            metadata += md
        if data:
            seen_data = True
    assert metadata == b"M" * 200


# --------------------------------------------------------------------------
# Stream Sequences and Lifetimes: Request Channel


def test_rsocket_channel_requester_must_send_only_one_request_channel() -> None:
    """Spec: "Subsequent messages from requester to responder MUST be sent as
    PAYLOAD frames"."""
    pair = Pair.established()
    sid = pair.client.request_channel(b"first", initial_n=1)
    assert [type(f) for f in sent_frames(pair.client)] == [RequestChannelFrame]
    pair.client.receive_data(encode_frame_prefixed(RequestNFrame(sid, 5)))
    pair.client.send_payload(sid, b"second")
    pair.client.send_payload(sid, b"third")
    pair.client.send_complete(sid)
    frames = sent_frames(pair.client)
    assert [type(f) for f in frames] == [PayloadFrame] * 3
    assert all(f.stream_id == sid for f in frames)


@pytest.mark.parametrize("via", ["request-channel-C", "payload-C"])
def test_rsocket_channel_requester_must_not_send_payload_after_complete(via: str) -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=1, complete=via == "request-channel-C")
    pair.client.receive_data(encode_frame_prefixed(RequestNFrame(sid, 5)))
    if via == "payload-C":
        pair.client.send_payload(sid, b"b", complete=True)
    pair.client.data_to_send()
    with pytest.raises(LocalProtocolError):
        pair.client.send_payload(sid, b"more")
    with pytest.raises(LocalProtocolError):
        pair.client.send_complete(sid)
    assert pair.client.data_to_send() == b""


def test_rsocket_channel_payload_after_the_peers_complete_is_ignored() -> None:
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=1, complete=True)
    pair.pump()
    assert pair.server_events == [
        RequestChannelReceived(stream_id=sid, data=b"a", metadata=None, initial_n=1, complete=True)
    ]
    feed(pair.server, PayloadFrame(sid, b"late", next=True))
    assert pair.server.events() == []
    assert pair.server.data_to_send() == b""
    assert pair.server.stream_state(sid) is StreamState.OUT_ONLY


def test_rsocket_channel_stream_terminated_after_both_complete() -> None:
    """Spec: "In absence of ERROR or CANCEL, the stream is terminated after both
    Requester and Responder have sent and received COMPLETE"."""
    pair = Pair.established()
    sid = pair.client.request_channel(b"a", initial_n=5)
    pair.pump()
    pair.server.request_n(sid, 1)
    pair.server.send_complete(sid)
    pair.pump()
    assert pair.client.stream_state(sid) is StreamState.OUT_ONLY
    assert pair.server.stream_state(sid) is StreamState.IN_ONLY
    pair.client.send_complete(sid)
    pair.pump()
    assert pair.client.stream_state(sid) is None and pair.server.stream_state(sid) is None


def test_rsocket_request_stream_stream_terminated_on_responder_upon_sending_complete() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"q", initial_n=2)
    pair.pump()
    pair.server.send_complete(sid)
    assert pair.server.stream_state(sid) is None  # at sending, before delivery
    assert pair.client.stream_state(sid) is StreamState.IN_ONLY
    pair.pump()
    assert pair.client.stream_state(sid) is None


def test_rsocket_request_response_stream_terminated_on_responder_upon_sending_response() -> None:
    pair = Pair.established()
    sid = pair.client.request_response(b"q")
    pair.pump()
    pair.server.send_payload(sid, b"r")
    assert pair.server.stream_state(sid) is None
    with pytest.raises(LocalProtocolError):
        pair.server.send_error(sid, ErrorCode.APPLICATION_ERROR, "second answer")


# --------------------------------------------------------------------------
# Fragmentation of a REQUEST_CHANNEL that also completes the requester's flow


def test_rsocket_fragmentation_fragmented_request_channel_keeps_its_complete_flag() -> None:
    pair = Pair.established(client_config=ConnectionConfig(fragment_size=64))
    sid = pair.client.request_channel(b"c" * 200, b"m" * 10, initial_n=1, complete=True)
    out = pair.client.data_to_send()
    pair.server.receive_data(out)
    assert pair.server.events() == [
        RequestChannelReceived(
            stream_id=sid, data=b"c" * 200, metadata=b"m" * 10, initial_n=1, complete=True
        )
    ]
    assert pair.server.stream_state(sid) is StreamState.OUT_ONLY
    assert pair.client.stream_state(sid) is StreamState.IN_ONLY


@pytest.mark.parametrize("where", ["first", "last"])
def test_rsocket_fragmentation_request_channel_complete_on_first_or_last_fragment(
    where: str,
) -> None:
    """Peers differ in where a fragmented REQUEST_CHANNEL carries C
    (rsocket-py reads it from the REQUEST_CHANNEL frame, rsocket-java-style
    senders put it on the last fragment): either completes the flow."""
    pair = Pair.established()
    feed(
        pair.server,
        RequestChannelFrame(1, 2, b"a", follows=True, complete=where == "first"),
        PayloadFrame(1, b"b", follows=True, next=True),
        PayloadFrame(1, b"c", next=True, complete=where == "last"),
    )
    assert pair.server.events() == [
        RequestChannelReceived(stream_id=1, data=b"abc", metadata=None, initial_n=2, complete=True)
    ]
    assert pair.server.stream_state(1) is StreamState.OUT_ONLY
