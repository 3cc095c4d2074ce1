"""Resumable RSocket through the synchronous API (``sansrs.adapters.
rsocket.resume``) over loopback TCP cut by the fault-injecting proxy: the
application sees at most a pause (docs/rsocket.md, Resumption)."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.resume import (
    ResumableServer,
    ResumeOptions,
    connect_resumable,
    serve_resumable,
)
from sansrs.adapters.rsocket.types import Payload, Request
from sansrs.adapters.tools.faults import FaultProxy
from sansrs.adapters.transport.urls import parse_url

from sansrs.rsocket import Connection, Role
from sansrs.rsocket.events import PayloadReceived

WAIT = 30.0


class Handler:
    def __init__(self, channel_items: int = 0) -> None:
        self.channel_items = channel_items
        self.inbound: list[bytes] = []
        self.answered = 0
        self.lock = threading.Lock()
        #: When set: request_stream waits for this gate before its first item.
        self.gate: threading.Event | None = None
        self.started = threading.Event()

    def request_stream(self, request: Request) -> Iterator[bytes]:
        if self.gate is None:
            return (b"%d" % i for i in range(int(request.data)))
        return self._gated(int(request.data), self.gate)

    def _gated(self, n: int, gate: threading.Event) -> Iterator[bytes]:
        """Announce the request, then produce nothing until ``gate`` opens
        (blocking the connection thread briefly is fine in a test)."""
        self.started.set()
        assert gate.wait(WAIT)
        yield from (b"%d" % i for i in range(n))

    def request_response(self, request: Request) -> bytes:
        with self.lock:
            self.answered += 1
        return b"re:" + request.data

    def request_channel(self, request: Request, inbound: Iterator[Payload]) -> Iterator[bytes]:
        def items() -> Iterator[bytes]:
            self.inbound.append(request.data)
            for i in range(self.channel_items):
                yield b"d%d" % i
            self.inbound.extend(p.data for p in inbound)

        return items()


def port_of(server: ResumableServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_resumable_stream_channel_and_requests_through_50_cuts(loop: str) -> None:
    """The issue's end-to-end test on the adapters: a 100k-item stream and a
    10k-item channel each way keep going through 50 random cuts; every item
    arrives once, in order; request-responses in flight at a cut complete
    exactly once."""
    rng = random.Random(2026)
    handler = Handler(channel_items=10_000)
    with (
        serve_resumable("tcp://127.0.0.1:0", handler, loop=loop) as server,
        FaultProxy(("127.0.0.1", port_of(server)), rng=rng) as proxy,
    ):
        proxy.cut_at_random(5_000, 40_000, cuts=35)
        options = ResumeOptions(reconnect_initial=0.01, rng=rng)
        client = connect_resumable(f"tcp://127.0.0.1:{proxy.port}", loop=loop, resume=options)
        try:
            stream = client.request_stream(b"100000", timeout=WAIT)
            assert [p.data for p in stream] == [b"%d" % i for i in range(100_000)]
            assert proxy.wait_cuts(35, WAIT)

            proxy.cut_at_random(2_000, 20_000, cuts=10)
            up = (b"u%d" % i for i in range(10_000))
            channel = client.request_channel(up, timeout=WAIT)
            assert [p.data for p in channel] == [b"d%d" % i for i in range(10_000)]
            assert handler.inbound == [b"u%d" % i for i in range(10_000)]
            assert proxy.wait_cuts(45, WAIT)

            proxy.cut_at_random(300, 3_000, cuts=5)
            answers: dict[int, bytes] = {}
            errors: list[BaseException] = []

            def ask(first: int) -> None:
                try:
                    for i in range(first, 400, 4):
                        answers[i] = client.request_response(b"q%d" % i, timeout=WAIT).data
                except BaseException as exc:  # reported by the assertion below
                    errors.append(exc)

            askers = [threading.Thread(target=ask, args=(k,)) for k in range(4)]
            for t in askers:
                t.start()
            for t in askers:
                t.join(WAIT)
            assert errors == []
            assert answers == {i: b"re:q%d" % i for i in range(400)}
            assert handler.answered == 400  # each request reached the server once
            assert proxy.wait_cuts(50, WAIT)
            assert client.reconnects == 50
            assert not client.closed
        finally:
            client.close()


def test_resumable_cut_beyond_retained_limit_fails_with_rejected_resume() -> None:
    """Frames beyond the server's retained-buffer limit unacknowledged at the
    cut: REJECTED_RESUME, and the application gets a clear error instead of
    silently missing items."""
    resume = ResumeOptions(resume_buffer_size=4096, reconnect_initial=0.01)
    handler = Handler()
    handler.gate = threading.Event()
    with (
        serve_resumable("tcp://127.0.0.1:0", handler, resume=resume) as server,
        FaultProxy(("127.0.0.1", port_of(server))) as proxy,
    ):
        client = connect_resumable(f"tcp://127.0.0.1:{proxy.port}", resume=resume)
        try:
            stream = client.request_stream(b"1000000", prefetch=100_000, timeout=WAIT)
            # The server has the request but has sent no item yet: from here
            # on nothing reaches the client and nothing is acknowledged, so
            # the server's unacknowledged output is sure to pass the limit.
            assert handler.started.wait(WAIT)
            proxy.blackhole()
            handler.gate.set()
            assert proxy.wait_until(lambda stats: stats.dropped >= 20_000, WAIT)
            proxy.blackhole(False, cut=True)
            with pytest.raises(ConnectionClosed) as info:
                for _ in stream:
                    pass
            message = str(info.value)
            assert "REJECTED_RESUME" in message and "resume_buffer_size" in message
            assert server.registry.wait_empty(WAIT)  # the server freed the session too
            assert client.closed
        finally:
            client.close()


def test_resumable_client_gives_up_after_reconnect_timeout() -> None:
    resume = ResumeOptions(reconnect_initial=0.01, reconnect_max=0.05, reconnect_timeout=0.5)
    with serve_resumable("tcp://127.0.0.1:0", Handler()) as server:
        proxy = FaultProxy(("127.0.0.1", port_of(server)))
        client = connect_resumable(f"tcp://127.0.0.1:{proxy.port}", resume=resume)
        try:
            assert client.request_response(b"x", timeout=WAIT).data == b"re:x"
            stream = client.request_stream(b"100000000", prefetch=8, timeout=WAIT)
            assert next(stream).data == b"0"
            proxy.close()  # the proxy (the network) is gone for good
            with pytest.raises(ConnectionClosed) as info:
                for _ in stream:
                    pass
            assert "not resumed" in str(info.value)
            assert client.closed
        finally:
            client.close()


def test_resumable_server_frees_sessions_not_resumed_in_time() -> None:
    resume = ResumeOptions(keep_detached=0.3, reconnect_timeout=0.2, reconnect_initial=0.01)
    handler = Handler()
    with serve_resumable("tcp://127.0.0.1:0", handler, resume=resume) as server:
        proxy = FaultProxy(("127.0.0.1", port_of(server)))
        client = connect_resumable(f"tcp://127.0.0.1:{proxy.port}", resume=resume)
        try:
            assert client.request_response(b"x", timeout=WAIT).data == b"re:x"
            assert len(server.registry.store) == 1
            proxy.close()  # the client cannot come back: the session must be freed
            assert server.registry.wait_empty(WAIT)
        finally:
            client.close()


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_resumable_resume_supersedes_half_open_server_side(loop: str) -> None:
    """Only the client sees the drop (the server's old transport stays open
    and silent): the RESUME on the new transport takes the session over from
    the old one, which is closed; calls go on."""
    handler = Handler()
    with (
        serve_resumable("tcp://127.0.0.1:0", handler, loop=loop) as server,
        FaultProxy(("127.0.0.1", port_of(server))) as proxy,
    ):
        options = ResumeOptions(reconnect_initial=0.01)
        client = connect_resumable(f"tcp://127.0.0.1:{proxy.port}", loop=loop, resume=options)
        try:
            stream = client.request_stream(b"1000", prefetch=16, timeout=WAIT)
            first = [next(stream).data for _ in range(10)]
            proxy.cut_now(half_open=True)
            rest = [p.data for p in stream]
            assert first + rest == [b"%d" % i for i in range(1000)]
            assert client.request_response(b"x", timeout=WAIT).data == b"re:x"
            assert client.reconnects == 1
            assert len(server.registry.store) == 1
        finally:
            client.close()


def test_resumable_server_takes_a_setup_trickled_in_pieces() -> None:
    """The first frame of a resumable server's connection (SETUP or RESUME)
    is collected whole, however it is cut, then handled as one."""
    client = Connection(Role.CLIENT)
    client.setup(resume=True, data=b"d" * 5000)
    client.request_response(b"after")
    wire = client.data_to_send()
    with serve_resumable("tcp://127.0.0.1:0", DemoHandler()) as server:
        port = parse_url(server.url).port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for off in range(0, len(wire), 7):
                sock.sendall(wire[off : off + 7])
            answers: list[object] = []
            while not answers:
                data = sock.recv(65536)
                assert data
                client.receive_data(data, 0.0)
                answers = [e for e in client.events() if isinstance(e, PayloadReceived)]
    assert answers[0].data == b"after"  # type: ignore[attr-defined]
