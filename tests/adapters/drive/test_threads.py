"""The protocol-agnostic driver loop, exercised with a toy line protocol over
real TCP sockets on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from sansrs.adapters.drive import ConnectionClosed, ConnectionThread, Driver, ServerThread
from sansrs.adapters.drive.queues import CreditQueue, EndOfStream
from sansrs.adapters.transport import Transport, listen, open_transport
from sansrs.adapters.transport.tcp import TcpTransport

WAIT = 5.0


class LineEcho:
    """Echoes each line; ``big N`` answers N bytes produced through ``pump``;
    ``bye`` closes after the reply."""

    def __init__(self) -> None:
        self.buf = b""
        self.out: list[bytes] = []
        self.lines: CreditQueue[bytes] = CreditQueue(granted=10**9)
        self.owner_threads: set[str] = set()
        self.lost: BaseException | None = None
        self.lost_event = threading.Event()
        self.closing = False
        self.to_produce = 0
        self.deadline: float | None = None
        self.timeouts: list[float] = []
        self.pump_calls = 0

    def receive_data(self, data: bytes, now: float) -> None:
        self.owner_threads.add(threading.current_thread().name)
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            self.lines.put(line)
            if line.startswith(b"big "):
                self.to_produce += int(line[4:])
            elif line == b"bye":
                self.out.append(b"bye\n")
                self.closing = True
            else:
                self.out.append(line + b"\n")

    def pump(self) -> bool:
        self.pump_calls += 1
        if self.to_produce:
            n = min(self.to_produce, 64 * 1024)
            self.out.append(b"x" * n)
            self.to_produce -= n
        return self.to_produce > 0

    def data_to_send(self) -> bytes:
        data = b"".join(self.out)
        self.out.clear()
        return data

    def next_deadline(self) -> float | None:
        return self.deadline

    def handle_timeout(self, now: float) -> None:
        self.timeouts.append(now)
        self.deadline = None

    def begin_close(self) -> None:
        self.closing = True

    def close_reason(self) -> BaseException | None:
        return None

    def wants_close(self) -> bool:
        return self.closing and not self.to_produce

    def connection_lost(self, error: BaseException) -> None:
        self.lost = error
        self.lines.finish(error)
        self.lost_event.set()


class Served:
    def __init__(self) -> None:
        self.engines: list[LineEcho] = []
        self.ready = threading.Event()
        self.server = ServerThread(listen("tcp://127.0.0.1:0"), self.make)
        self.server.start()
        self.url = self.server.listener.endpoint.url

    def make(self, transport: Transport) -> ConnectionThread:
        engine = LineEcho()
        self.engines.append(engine)
        self.ready.set()
        return ConnectionThread(transport, engine, name="srv-conn")


@pytest.fixture
def served() -> object:
    s = Served()
    yield s
    s.server.close(timeout=WAIT)


def _raw_client(url: str) -> socket.socket:
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    return sock


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_echo_through_server_and_client_connection_threads(served: Served) -> None:
    engine = LineEcho()
    conn = ConnectionThread(open_transport(served.url), engine, name="cli-conn")
    conn.start()
    try:
        conn.call_soon(lambda: engine.out.append(b"hello\n"))
        assert engine.lines.get(timeout=WAIT) == b"hello"
        assert engine.owner_threads == {"cli-conn"}
        assert served.engines[0].owner_threads == {"srv-conn"}
    finally:
        conn.close(timeout=WAIT)
    assert not conn.alive
    assert isinstance(engine.lost, ConnectionClosed)
    with pytest.raises(ConnectionClosed):
        conn.call_soon(lambda: None)


def test_transport_has_nodelay(served: Served) -> None:
    t = open_transport(served.url)
    try:
        assert isinstance(t, TcpTransport)
        assert t.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert t.peer.endswith(served.url.rsplit(":", 1)[1])
    finally:
        t.close()


def check_calls_run_on_the_owner(conn: Driver, owner: str) -> None:
    """3000 calls handed over from 6 threads through an inbox of 8 all run,
    on the owning thread; a call that raises fails alone; after close, calls
    are refused with ConnectionClosed. Shared by every driver's tests."""
    ran_on: set[str] = set()
    count = [0]

    def call() -> None:
        ran_on.add(threading.current_thread().name)
        count[0] += 1

    def produce() -> None:
        for _ in range(500):
            conn.call_soon(call, timeout=WAIT)

    threads = [threading.Thread(target=produce) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    done = threading.Event()
    conn.call_soon(done.set)
    assert done.wait(WAIT)
    assert count[0] == 3000 and ran_on == {owner}
    conn.call_soon(lambda: 1 / 0)  # fails alone
    conn.call_soon(done.clear)
    conn.close(timeout=WAIT)
    assert not done.is_set() and not conn.alive
    with pytest.raises(ConnectionClosed):
        conn.call_soon(lambda: None)


def test_calls_from_many_threads_all_run_on_the_owner(served: Served) -> None:
    engine = LineEcho()
    conn = ConnectionThread(open_transport(served.url), engine, name="owner", inbox_capacity=8)
    conn.start()
    check_calls_run_on_the_owner(conn, "owner")


def test_a_failing_call_does_not_kill_the_connection(served: Served) -> None:
    engine = LineEcho()
    conn = ConnectionThread(open_transport(served.url), engine)
    conn.start()
    try:
        conn.call_soon(lambda: 1 / 0)
        conn.call_soon(lambda: engine.out.append(b"still here\n"))
        assert engine.lines.get(timeout=WAIT) == b"still here"
    finally:
        conn.close(timeout=WAIT)


def test_graceful_close_by_engine_flushes_before_closing(served: Served) -> None:
    sock = _raw_client(served.url)
    with sock:
        sock.sendall(b"big 3000000\nbye\n")
        data = _read_until(sock, b"never")  # until end of stream
        assert data.count(b"x") == 3_000_000 and data.startswith(b"bye\n")
    assert served.engines[0].lost_event.wait(WAIT)


def test_slow_reader_pauses_production_at_high_water(served: Served) -> None:
    sock = _raw_client(served.url)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"big 200000000\n")
        assert served.ready.wait(WAIT)
        engine = served.engines[0]
        # Wait until production stalls: nothing is read, so the bytes made must stay bounded.
        deadline = time.monotonic() + WAIT
        left = engine.to_produce
        while time.monotonic() < deadline:
            before = engine.to_produce
            threading.Event().wait(0.05)
            if engine.to_produce == before and before < 200_000_000:
                left = before
                break
        produced = 200_000_000 - left
        assert produced < 32 * 1024 * 1024, produced


def test_peer_eof_fails_outstanding_work(served: Served) -> None:
    sock = _raw_client(served.url)
    sock.sendall(b"hi\n")
    assert _read_until(sock, b"hi\n") == b"hi\n"
    sock.close()
    engine = served.engines[0]
    assert engine.lost_event.wait(WAIT)
    assert "closed by peer" in str(engine.lost)
    assert engine.lines.get(timeout=0) == b"hi"
    with pytest.raises(ConnectionClosed):
        engine.lines.get(timeout=0)


def test_abort_resets_the_connection(served: Served) -> None:
    sock = _raw_client(served.url)
    with sock:
        sock.sendall(b"hi\n")
        _read_until(sock, b"hi\n")
        served.server.connections[0].abort(timeout=WAIT)
        with pytest.raises(ConnectionResetError):
            while sock.recv(10):
                pass
    assert "aborted" in str(served.engines[0].lost)


def test_timer_fires_at_next_deadline(served: Served) -> None:
    engine = LineEcho()
    conn = ConnectionThread(open_transport(served.url), engine)
    fired = threading.Event()
    original = engine.handle_timeout

    def on_timeout(now: float) -> None:
        original(now)
        fired.set()

    engine.handle_timeout = on_timeout  # type: ignore[method-assign]
    start = time.monotonic()
    engine.deadline = start + 0.05
    conn.start()
    try:
        assert fired.wait(WAIT)
        assert engine.timeouts[0] >= start + 0.05
    finally:
        conn.close(timeout=WAIT)


def test_server_serves_many_connections_and_closes_them_all(served: Served) -> None:
    socks = [_raw_client(served.url) for _ in range(20)]
    try:
        for i, s in enumerate(socks):
            s.sendall(b"n%d\n" % i)
        for i, s in enumerate(socks):
            assert _read_until(s, b"\n") == b"n%d\n" % i
        served.server.close(timeout=WAIT)
        for s in socks:
            assert _read_until(s, b"never") == b""
        assert all(e.lost_event.is_set() for e in served.engines)
    finally:
        for s in socks:
            s.close()


def test_consumer_sees_end_after_close(served: Served) -> None:
    engine = LineEcho()
    conn = ConnectionThread(open_transport(served.url), engine)
    conn.start()
    conn.close(timeout=WAIT)
    with pytest.raises(ConnectionClosed):
        engine.lines.get(timeout=WAIT)
    with pytest.raises((ConnectionClosed, EndOfStream)):
        engine.lines.get(timeout=0)
