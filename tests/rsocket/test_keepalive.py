"""Spec: KEEPALIVE Frame; connection liveness through ``now``/``next_deadline``."""

from __future__ import annotations

from sansrs.rsocket import (
    Connection,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
    KeepaliveFrame,
    Role,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import ConnectionLost, KeepaliveReceived
from tests.rsocket.pair import Pair


def frames_of(data: bytes) -> list[object]:
    out = []
    off = 0
    while off < len(data):
        n = int.from_bytes(data[off : off + 3], "big")
        out.append(decode_frame(data[off + 3 : off + 3 + n]))
        off += 3 + n
    return out


def test_rsocket_keepalive_deadline_anchors_at_first_tick() -> None:
    client = Connection(Role.CLIENT)
    assert client.next_deadline() is None  # nothing to time before SETUP
    client.setup(keepalive_interval=500, max_lifetime=3000)
    assert client.next_deadline() == 0.0  # unanchored: call handle_timeout at once
    client.handle_timeout(100.0)
    assert client.next_deadline() == 100.5


def test_rsocket_keepalive_client_sends_with_respond_every_interval() -> None:
    client = Connection(Role.CLIENT)
    client.setup(keepalive_interval=500, max_lifetime=3000)
    client.data_to_send()
    client.handle_timeout(10.0)
    assert client.data_to_send() == b""
    client.handle_timeout(10.4)
    assert client.data_to_send() == b""
    client.handle_timeout(10.5)
    assert frames_of(client.data_to_send()) == [KeepaliveFrame(True, 0, b"")]
    assert client.next_deadline() == 11.0
    client.receive_data(encode_frame_prefixed(KeepaliveFrame(False, 0)), now=10.6)
    client.handle_timeout(11.0)
    assert frames_of(client.data_to_send()) == [KeepaliveFrame(True, 0, b"")]


def test_rsocket_keepalive_respond_flag_echoes_data_both_sides() -> None:
    pair = Pair.established()
    pair.client.send_keepalive(b"ping-data")
    pair.server.send_keepalive(b"server-ping")
    pair.pump()
    assert KeepaliveReceived(respond=True, data=b"ping-data", last_received_position=0) in (
        pair.server_events
    )
    assert KeepaliveReceived(respond=False, data=b"ping-data", last_received_position=0) in (
        pair.client_events
    )
    assert KeepaliveReceived(respond=False, data=b"server-ping", last_received_position=0) in (
        pair.server_events
    )


def test_rsocket_keepalive_echo_without_respond_is_not_answered() -> None:
    pair = Pair.established()
    pair.server.receive_data(encode_frame_prefixed(KeepaliveFrame(False, 0, b"x")))
    assert pair.server.data_to_send() == b""


def test_rsocket_keepalive_position_field_filled() -> None:
    pair = Pair.established()
    sid = pair.client.request_stream(b"abc", initial_n=5)
    pair.pump()
    pair.client.send_keepalive()
    out = frames_of(pair.client.data_to_send())
    assert out == [KeepaliveFrame(True, 0, b"")]  # the client received no stream frame yet
    pair.server.receive_data(encode_frame_prefixed(KeepaliveFrame(True, 0, b"")))
    echo = frames_of(pair.server.data_to_send())
    assert echo == [KeepaliveFrame(False, 13, b"")]  # REQUEST_STREAM of 13 bytes received
    assert sid == 1


def test_rsocket_keepalive_silent_peer_is_connection_lost() -> None:
    client = Connection(Role.CLIENT)
    client.setup(keepalive_interval=500, max_lifetime=2000)
    client.data_to_send()
    client.handle_timeout(0.0)
    for t in (0.5, 1.0, 1.5, 2.0):
        client.handle_timeout(t)
    assert client.state is ConnectionState.ESTABLISHED
    assert client.next_deadline() == 2.0  # the lifetime runs out at 0 + 2
    client.handle_timeout(2.01)
    assert client.state is ConnectionState.CLOSED
    events = client.events()
    assert len(events) == 1 and isinstance(events[0], ConnectionLost) and events[0].timed_out
    frames = frames_of(client.data_to_send())
    assert isinstance(frames[-1], ErrorFrame)
    assert frames[-1].error_code == ErrorCode.CONNECTION_ERROR
    assert client.next_deadline() is None


def test_rsocket_keepalive_any_frame_keeps_the_peer_alive() -> None:
    pair = Pair.established(keepalive_interval=500, max_lifetime=2000)
    pair.server.handle_timeout(0.0)
    pair.server.receive_data(encode_frame_prefixed(KeepaliveFrame(True, 0)), now=1.9)
    pair.server.handle_timeout(3.0)
    assert pair.server.state is ConnectionState.ESTABLISHED
    pair.server.handle_timeout(3.95)
    assert pair.server.state is ConnectionState.CLOSED


def test_rsocket_keepalive_receive_without_now_counts_at_next_tick() -> None:
    pair = Pair.established(keepalive_interval=500, max_lifetime=2000)
    pair.server.handle_timeout(0.0)
    pair.server.receive_data(encode_frame_prefixed(KeepaliveFrame(True, 0)))  # no clock
    pair.server.handle_timeout(1.9)  # counted as heard at 1.9
    pair.server.handle_timeout(3.8)
    assert pair.server.state is ConnectionState.ESTABLISHED


def test_rsocket_keepalive_server_does_not_send_on_its_own() -> None:
    pair = Pair.established(keepalive_interval=100, max_lifetime=10_000)
    pair.server.handle_timeout(0.0)
    pair.server.handle_timeout(0.5)
    assert pair.server.data_to_send() == b""


def test_rsocket_keepalive_back_to_back_keeps_connection_alive() -> None:
    pair = Pair.established(keepalive_interval=100, max_lifetime=500)
    t = 0.0
    for _ in range(50):
        for conn in (pair.client, pair.server):
            conn.handle_timeout(t)
        pair.pump()
        t += 0.1
    assert pair.client.state is ConnectionState.ESTABLISHED
    assert pair.server.state is ConnectionState.ESTABLISHED
