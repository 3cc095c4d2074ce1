"""Resumption over real loopback TCP through the fault-injecting proxy
(``sansrs.adapters.tools.faults``): connections cut at random byte offsets,
blackholed, resumed; every item exactly once, in order."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator

import pytest
from sansrs.adapters.tools.faults import FaultProxy

from sansrs.rsocket import ConnectionConfig, ConnectionState, ErrorCode, SessionStore
from sansrs.rsocket.events import ConnectionTerminated, Disconnected, PayloadReceived
from tests.rsocket.resume_sockets import SocketResumePair
from tests.rsocket.resume_workload import item, run


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.create_server(("127.0.0.1", 0))
    yield sock
    sock.close()


def test_rsocket_resume_through_50_random_cuts_exactly_once_in_order(
    listener: socket.socket,
) -> None:
    """The issue's test: a 100k-item stream and a 10k-item channel in each
    direction through 50 cuts at random byte offsets; request-responses in
    flight at a cut complete exactly once."""
    rng = random.Random(20261123)
    cfg = ConnectionConfig(resume_buffer_size=256 * 1024)
    with FaultProxy(listener.getsockname()[:2], rng=rng) as proxy:
        proxy.cut_at_random(2_000, 40_000, cuts=50)
        pair = SocketResumePair(proxy.address, listener, cfg, cfg)
        try:
            out = run(
                rng,
                pair,  # type: ignore[arg-type]
                stream_items=100_000,
                channel_items=10_000,
                requests=200,
                cuts=0,
                batch=64,
            )
        finally:
            pair.close()
        assert proxy.stats.cuts == 50
    assert out.terminal == []
    assert pair.reconnects >= 50
    assert out.stream == [item(b"s", i) for i in range(100_000)]
    assert out.channel_in == [item(b"d", i) for i in range(10_000)]
    assert out.channel_out == [item(b"u", i) for i in range(10_000)]
    assert out.stream_done and out.channel_in_done and out.channel_out_done
    assert len(out.responses) == out.requests_sent == 200
    assert all(len(answers) == 1 for answers in out.responses.values())


def test_rsocket_resume_cut_beyond_retained_limit_rejected_resume(
    listener: socket.socket,
) -> None:
    """Frames beyond the retained-buffer limit unacknowledged when the link
    dies: the RESUME gets ERROR[REJECTED_RESUME] and the application a clear
    error; nothing is silently lost."""
    server_cfg = ConnectionConfig(resume_buffer_size=2048)
    with FaultProxy(listener.getsockname()[:2]) as proxy:
        pair = SocketResumePair(proxy.address, listener, None, server_cfg)
        try:
            sid = pair.client.request_stream(b"q", initial_n=10_000)
            while pair.server is None or pair.server.send_credit(sid) == 0:
                pair.pump()
            proxy.blackhole()  # nothing reaches the client: nothing is acknowledged
            for i in range(500):
                pair.server.send_payload(sid, item(b"x", i))
            pair.pump()
            assert not pair.server.resumable
            proxy.blackhole(False, cut=True)
            while pair.client.state is not ConnectionState.CLOSED:
                pair.pump()
        finally:
            pair.close()
    closed = pair.rejected
    assert isinstance(closed, ConnectionTerminated)
    assert closed.error_code == ErrorCode.REJECTED_RESUME
    assert "resume_buffer_size" in closed.message


def test_rsocket_resume_after_blackhole_keepalive_timeout(listener: socket.socket) -> None:
    """A silent network (blackhole): the keepalive timeout detaches the
    session, the client reconnects and resumes; items sent meanwhile arrive
    once."""
    store = SessionStore(keep_detached=30.0)
    with FaultProxy(listener.getsockname()[:2]) as proxy:
        pair = SocketResumePair(
            proxy.address, listener, store=store, keepalive_ms=50, lifetime_ms=300
        )
        try:
            sid = pair.client.request_stream(b"q", initial_n=100)
            while pair.server is None or pair.server.send_credit(sid) == 0:
                pair.pump()
            proxy.blackhole()
            for i in range(20):
                pair.server.send_payload(sid, item(b"x", i))
            received: list[bytes] = []
            disconnected = 0
            while len(received) < 20:
                if disconnected:
                    proxy.blackhole(False)
                pair.pump()
                client_events, _ = pair.take()
                disconnected += sum(isinstance(e, Disconnected) for e in client_events)
                received += [e.data for e in client_events if isinstance(e, PayloadReceived)]
        finally:
            pair.close()
    assert disconnected >= 1
    assert received == [item(b"x", i) for i in range(20)]
