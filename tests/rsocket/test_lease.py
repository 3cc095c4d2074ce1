"""Spec: Lease Semantics, LEASE Frame, Connection Establishment (sequences with LEASE)."""

from __future__ import annotations

import pytest

from sansrs import LocalProtocolError
from sansrs.rsocket import (
    Connection,
    ErrorCode,
    ErrorFrame,
    LeaseFrame,
    RequestFnfFrame,
    RequestResponseFrame,
    Role,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import ErrorReceived, LeaseReceived, RequestResponseReceived
from tests.rsocket.pair import Pair


def test_rsocket_lease_client_with_l_flag_waits_for_lease() -> None:
    pair = Pair()
    pair.client.setup(lease=True)
    with pytest.raises(LocalProtocolError, match="lease"):
        pair.client.request_response(b"x")
    pair.pump()
    pair.server.accept_setup(lease_ttl=1000, lease_number=2)
    pair.pump()
    assert pair.client_events == [LeaseReceived(ttl=1000, number_of_requests=2, metadata=None)]
    assert pair.client.lease_available() == 2
    pair.client.request_response(b"x")
    assert pair.client.lease_available() == 1


def test_rsocket_lease_server_must_send_lease_when_accepting_l_flag() -> None:
    pair = Pair()
    pair.client.setup(lease=True)
    pair.pump()
    with pytest.raises(LocalProtocolError):
        pair.server.accept_setup()


def test_rsocket_lease_requester_never_exceeds_number_of_requests() -> None:
    pair = Pair.established(lease=(10_000, 3))
    for _ in range(3):
        pair.client.request_fnf(b"x")
    with pytest.raises(LocalProtocolError):
        pair.client.request_fnf(b"x")
    assert pair.client.lease_available() == 0


def test_rsocket_lease_expired_lease_allows_zero() -> None:
    pair = Pair.established(lease=(1000, 100))
    pair.client.handle_timeout(5.0)  # clock anchored at 5: lease until 6
    pair.client.request_fnf(b"x")
    assert pair.client.next_deadline() is not None
    pair.client.handle_timeout(6.0)
    assert pair.client.lease_available() == 0
    with pytest.raises(LocalProtocolError):
        pair.client.request_fnf(b"x")


def test_rsocket_lease_last_lease_overrides_previous() -> None:
    pair = Pair.established(lease=(10_000, 100))
    pair.server.send_lease(10_000, 1)
    pair.pump()
    assert pair.client.lease_available() == 1


def test_rsocket_lease_zero_number_stops_requests() -> None:
    pair = Pair.established(lease=(10_000, 100))
    pair.server.send_lease(10_000, 0)
    pair.pump()
    with pytest.raises(LocalProtocolError):
        pair.client.request_response(b"x")


def test_rsocket_lease_responder_rejects_over_lease_request() -> None:
    pair = Pair.established(lease=(10_000, 1))
    pair.server.receive_data(
        encode_frame_prefixed(RequestResponseFrame(1, b"a"))
        + encode_frame_prefixed(RequestResponseFrame(3, b"b"))
    )
    assert pair.server.events() == [RequestResponseReceived(stream_id=1, data=b"a", metadata=None)]
    out = pair.server.data_to_send()
    frame = decode_frame(out[3:])
    assert isinstance(frame, ErrorFrame)
    assert (frame.stream_id, frame.error_code) == (3, ErrorCode.REJECTED)


def test_rsocket_lease_responder_rejects_requests_before_granting() -> None:
    """The server-side requester mirrors the client: it waits for the
    client's LEASE; the client responder rejects what its lease does not allow."""
    pair = Pair.established(lease=(10_000, 5))
    with pytest.raises(LocalProtocolError):
        pair.server.request_response(b"x")  # no LEASE from the client yet
    pair.client.receive_data(encode_frame_prefixed(RequestResponseFrame(2, b"x")))
    frame = decode_frame(pair.client.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame) and frame.error_code == ErrorCode.REJECTED
    pair.client.send_lease(5000, 1)
    pair.pump()
    assert pair.server_events == [LeaseReceived(ttl=5000, number_of_requests=1, metadata=None)]
    sid = pair.server.request_response(b"x")
    pair.pump()
    assert pair.client_events == [RequestResponseReceived(stream_id=sid, data=b"x", metadata=None)]


def test_rsocket_lease_expired_grant_rejects_at_responder() -> None:
    pair = Pair.established(lease=(1000, 10))
    pair.server.handle_timeout(0.0)
    pair.server.handle_timeout(2.0)
    pair.server.receive_data(encode_frame_prefixed(RequestFnfFrame(1, b"late")))
    assert pair.server.events() == []
    frame = decode_frame(pair.server.data_to_send()[3:])
    assert isinstance(frame, ErrorFrame) and frame.error_code == ErrorCode.REJECTED


def test_rsocket_lease_rejection_reaches_requester_as_error() -> None:
    pair = Pair.established(lease=(10_000, 1))
    pair.client.receive_data(encode_frame_prefixed(LeaseFrame(10_000, 5)))  # client thinks 5
    pair.client.request_response(b"a")
    sid = pair.client.request_response(b"b")
    pair.pump()
    assert (
        ErrorReceived(
            stream_id=sid, error_code=ErrorCode.REJECTED, message="request beyond the lease"
        )
        in pair.client_events
    )


def test_rsocket_lease_send_lease_requires_negotiation() -> None:
    pair = Pair.established()
    with pytest.raises(LocalProtocolError):
        pair.server.send_lease(1000, 1)
    assert pair.client.lease_available() is None


def test_rsocket_lease_frame_ignored_without_l_flag() -> None:
    pair = Pair.established()
    pair.client.receive_data(encode_frame_prefixed(LeaseFrame(1000, 1)))
    assert pair.client.events() == []


def test_rsocket_lease_metadata_delivered() -> None:
    pair = Pair.established(lease=(10_000, 1))
    pair.server.send_lease(100, 2, b"why")
    pair.pump()
    assert pair.client_events == [LeaseReceived(ttl=100, number_of_requests=2, metadata=b"why")]


def test_rsocket_lease_granted_before_clock_counts_from_first_tick() -> None:
    client = Connection(Role.CLIENT)
    client.setup(lease=True)
    client.receive_data(encode_frame_prefixed(LeaseFrame(1000, 5)))
    client.handle_timeout(500.0)
    assert client.lease_available() == 5
    client.handle_timeout(501.0)
    assert client.lease_available() == 0
