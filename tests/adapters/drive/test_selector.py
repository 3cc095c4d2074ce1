"""The selector loop: one thread, many connections. A toy line protocol
(``LineEcho`` from the threaded driver's tests) checks the loop itself; the
RSocket API checks close, abort, keepalive, load and fairness on it."""

from __future__ import annotations

import json
import resource
import select
import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConfig, LoopConnection, LoopServer
from sansrs.adapters.rsocket.client import connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.server import serve
from sansrs.adapters.rsocket.types import Payload
from sansrs.adapters.transport import Transport, listen, open_transport

from tests.adapters.drive.test_threads import LineEcho, check_calls_run_on_the_owner
from tests.adapters.kernel_queues import kernel_queued

WAIT = 10.0


class LoopServed:
    """A LineEcho server on one selector loop."""

    def __init__(
        self, config: LoopConfig | None = None, engine: Callable[[], LineEcho] = LineEcho
    ) -> None:
        self.loop = Loop(config, name="srv-loop").start()
        self.engine = engine
        self.engines: list[LineEcho] = []
        self.conns: list[LoopConnection] = []
        self.server = LoopServer(self.loop, listen("tcp://127.0.0.1:0"), self.make).start()
        self.url = self.server.listener.endpoint.url
        self.accepted = threading.Semaphore(0)

    def make(self, transport: Transport) -> LoopConnection:
        engine = self.engine()
        conn = self.loop.add_connection(transport, engine)
        self.engines.append(engine)
        self.conns.append(conn)
        self.accepted.release()
        return conn

    def on_loop(self, fn: object) -> object:
        """Run ``fn()`` on the loop thread and return its result."""
        box: list[object] = []
        done = threading.Event()

        def run() -> None:
            box.append(fn())  # type: ignore[operator]
            done.set()

        self.loop.call_soon(run)
        assert done.wait(WAIT)
        return box[0]


@pytest.fixture
def served() -> Iterator[LoopServed]:
    s = LoopServed()
    yield s
    s.server.close(timeout=WAIT)
    assert s.loop.stop(WAIT)


def _raw_client(url: str) -> socket.socket:
    port = int(url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT)


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_one_thread_drives_many_client_and_server_connections(served: LoopServed) -> None:
    client_loop = Loop(name="cli-loop").start()
    try:
        engines = [LineEcho() for _ in range(50)]
        conns = [client_loop.add_connection(open_transport(served.url), e) for e in engines]
        for i, (conn, engine) in enumerate(zip(conns, engines, strict=True)):
            conn.start()
            conn.call_soon(lambda e=engine, i=i: e.out.append(b"line %d\n" % i))
        for i, engine in enumerate(engines):
            assert engine.lines.get(timeout=WAIT) == b"line %d" % i
            assert engine.owner_threads == {"cli-loop"}
        assert {n for e in served.engines for n in e.owner_threads} == {"srv-loop"}
        assert len(served.loop.connections) == 50
    finally:
        assert client_loop.stop(WAIT)
    assert all(isinstance(e.lost, ConnectionClosed) for e in engines)


class RecordingEcho(LineEcho):
    """LineEcho that keeps every chunk it handed to the loop, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[bytes] = []

    def data_to_send(self) -> bytes:
        data = super().data_to_send()
        self.handed.append(data)
        return data


def test_partial_writes_keep_their_order() -> None:
    """A slow reader gets exactly the bytes the engine produced, in order,
    though the socket takes them in many partial writes; lines echoed while
    the big answer is still queued interleave only where they were queued."""
    loop = Loop(name="order-loop").start()
    engines: list[RecordingEcho] = []

    def make(transport: Transport) -> LoopConnection:
        engines.append(RecordingEcho())
        return loop.add_connection(transport, engines[-1])

    server = LoopServer(loop, listen("tcp://127.0.0.1:0"), make).start()
    try:
        sock = _raw_client(server.listener.endpoint.url)
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
            sock.sendall(b"big 3000000\n")
            data = sock.recv(65536)
            for i in range(100):  # echoes queued behind unsent bytes
                sock.sendall(b"after %d\n" % i)
            sock.sendall(b"bye\n")
            data += _read_until(sock, b"never")
        assert data == b"".join(engines[0].handed)
        assert data.count(b"x") == 3_000_000 and b"after 99\nbye\n" in data
    finally:
        server.close(timeout=WAIT)
        loop.stop(WAIT)


def test_slow_reader_never_delays_other_connections(served: LoopServed) -> None:
    """Connection A's peer reads nothing while we produce 200 MB for it; B
    does 200 round trips meanwhile. A's output stays bounded (back-pressure)."""
    slow = _raw_client(served.url)
    fast = _raw_client(served.url)
    with slow, fast:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        slow.sendall(b"big 200000000\n")
        assert served.accepted.acquire(timeout=WAIT)
        assert served.accepted.acquire(timeout=WAIT)
        for i in range(200):
            fast.sendall(b"ping %d\n" % i)
            assert _read_until(fast, b"\n") == b"ping %d\n" % i
        slow_engine = next(e for e in served.engines if e.to_produce)
        produced = 200_000_000 - slow_engine.to_produce
        assert produced < 16 * 1024 * 1024, produced
        buffered = served.on_loop(lambda: max(c.buffered for c in served.conns))
        assert isinstance(buffered, int) and buffered < 2 * 1024 * 1024


LINE = b"y" * 1023 + b"\n"


def _flood(sock: socket.socket) -> int:
    """Send lines (non-blocking) until the server stops taking bytes: once
    nothing drains for 0.5 s it has stopped reading (a server that reads on
    takes all 64 MiB: the proof that it did not pause). Returns the bytes sent."""
    sock.setblocking(False)
    chunk = LINE * 64
    sent = 0
    while sent < 64 * 1024 * 1024:
        _, writable, _ = select.select([], [sock], [], 0.5)
        if not writable:
            break
        try:
            sent += sock.send(chunk)
        except BlockingIOError:
            continue
    return sent


def _read_all_after_bye(sock: socket.socket, sent: int) -> int:
    """Read everything (reading resumes) while finishing the line a partial
    send cut and saying ``bye``: the bytes received, less the echo of
    those two."""
    sock.setblocking(True)
    sock.settimeout(WAIT)
    received = [0]

    def read_all() -> None:
        while data := sock.recv(1 << 20):
            received[0] += len(data)

    reader = threading.Thread(target=read_all)
    reader.start()
    pad = (-sent) % len(LINE)
    sock.sendall(LINE[len(LINE) - pad :] + b"bye\n")
    reader.join(WAIT)
    assert not reader.is_alive()
    return received[0] - pad - 4


def test_peer_that_does_not_read_is_not_read_from() -> None:
    """Back-pressure on output: a peer that sends requests but never reads
    the answers stops being read once its output passes pause_reading_at;
    memory stays bounded and everything is answered once it reads."""
    config = LoopConfig(high_water=64 * 1024, pause_reading_at=256 * 1024)
    s = LoopServed(config)
    sock = _raw_client(s.url)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sent = _flood(sock)
        assert sent < 16 * 1024 * 1024, sent
        buffered = s.on_loop(lambda: max(c.buffered for c in s.conns))
        assert isinstance(buffered, int) and buffered < 256 * 1024 + 256 * 1024 + 64 * 1024
        assert _read_all_after_bye(sock, sent) == sent  # every line came back
    finally:
        sock.close()
        s.server.close(timeout=WAIT)
        s.loop.stop(WAIT)


class PiecesEcho(LineEcho):
    """A LineEcho whose output a TCP connection takes as pieces (as the
    RSocket engine's): what the socket does not take stays in the engine
    (``queued_output``) until the connection's own buffer has drained."""

    def pieces_to_send(self, at_least: int) -> list[bytes] | None:
        if self.queued_output < at_least:
            return None
        pieces, self.out = self.out, []
        return pieces

    @property
    def queued_output(self) -> int:
        return sum(map(len, self.out))


def test_output_the_engine_holds_counts_against_high_water_and_pause_reading_at() -> None:
    """A peer asks for a large output, reads nothing and goes on sending
    lines (each a turn, each answered): the output left in the engine while
    the socket is full counts with the connection's buffer, so the engine
    stops being pumped at high_water and the peer stops being read at
    pause_reading_at (before, the pump filled the engine a pump's output
    per turn and reading never paused: the peer's flood of lines grew the
    engine without bound). Everything arrives once the peer reads."""
    config = LoopConfig(high_water=64 * 1024, pause_reading_at=256 * 1024)
    s = LoopServed(config, PiecesEcho)
    sock = _raw_client(s.url)
    big = 64 * 1024 * 1024
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.sendall(b"big %d\n" % big)
        sent = _flood(sock)
        assert sent < 16 * 1024 * 1024, sent
        engine = s.engines[0]

        def unwritten() -> tuple[int, int]:
            return s.conns[0].buffered, engine.queued_output

        buffered, held = s.on_loop(unwritten)  # type: ignore[misc]
        produced = big - engine.to_produce
        kernels = kernel_queued(s.conns[0].transport.fileno(), sock.fileno())
        # Made: what the kernels took (measured: the server's send buffer
        # grows by itself), high_water and a pump (64 KiB) past it.
        assert produced <= kernels + 64 * 1024 + 64 * 1024, (produced, kernels)
        # Held: pause_reading_at and a read's answers (recv_size, 256 KiB).
        assert buffered + held <= 256 * 1024 + 256 * 1024, (buffered, held)
        assert _read_all_after_bye(sock, sent) == big + sent  # all of it, every line
    finally:
        sock.close()
        s.server.close(timeout=WAIT)
        s.loop.stop(WAIT)


def test_calls_from_many_threads_run_on_the_loop_thread(served: LoopServed) -> None:
    loop = Loop(name="owner-loop").start()
    try:
        conn = loop.add_connection(open_transport(served.url), LineEcho(), inbox_capacity=8)
        conn.start()
        check_calls_run_on_the_owner(conn, "owner-loop")
    finally:
        loop.stop(WAIT)


def test_timers_of_many_connections_fire_in_deadline_order(served: LoopServed) -> None:
    import time

    loop = Loop(name="timer-loop").start()
    fired: list[int] = []
    all_fired = threading.Event()
    try:
        # Every deadline lies beyond the time it takes to open and register
        # the 20 connections: a registration slower than 10 ms used to find
        # earlier deadlines already due and fire them in registration order.
        start = time.monotonic() + 0.5
        engines = []
        for i in range(20):
            engine = LineEcho()
            engine.deadline = start + 0.01 * (20 - i)  # reverse order of creation

            def on_timeout(now: float, i: int = i, engine: LineEcho = engine) -> None:
                engine.timeouts.append(now)
                engine.deadline = None
                fired.append(i)
                if len(fired) == 20:
                    all_fired.set()

            engine.handle_timeout = on_timeout  # type: ignore[method-assign]
            engines.append(engine)
            loop.add_connection(open_transport(served.url), engine).start()
        assert all_fired.wait(WAIT)
        assert fired == list(range(19, -1, -1))
        for i, engine in enumerate(engines):
            assert engine.timeouts[0] >= start + 0.01 * (20 - i)
    finally:
        loop.stop(WAIT)


def test_abort_and_graceful_close_on_the_loop(served: LoopServed) -> None:
    sock = _raw_client(served.url)
    with sock:
        sock.sendall(b"hi\n")
        assert _read_until(sock, b"hi\n") == b"hi\n"
        served.conns[0].abort(timeout=WAIT)
        with pytest.raises(ConnectionResetError):
            while sock.recv(10):
                pass
    assert "aborted" in str(served.engines[0].lost)
    sock = _raw_client(served.url)
    with sock:
        sock.sendall(b"big 1000000\nbye\n")
        data = _read_until(sock, b"never")
        assert data.count(b"x") == 1_000_000 and data.startswith(b"bye\n")
    assert served.engines[1].lost_event.wait(WAIT)
    assert "closed" in str(served.engines[1].lost)


def test_loop_stop_closes_everything_and_refuses_new_work() -> None:
    s = LoopServed()
    socks = [_raw_client(s.url) for _ in range(10)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(b"n%d\n" % i)
            assert _read_until(sock, b"\n") == b"n%d\n" % i
        assert s.loop.stop(WAIT)
        for sock in socks:
            assert _read_until(sock, b"never") == b""
        assert all(e.lost_event.is_set() for e in s.engines)
        with pytest.raises(ConnectionClosed):
            s.loop.call_soon(lambda: None)
    finally:
        for sock in socks:
            sock.close()


# -- the RSocket API on the selector loop ----------------------------------------


def test_rsocket_close_and_abort_under_the_selector_loop() -> None:
    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop="selector") as server:
        c = connect(server.url, loop="selector")
        items = c.request_stream(json.dumps({"n": 10_000_000, "size": 4}), prefetch=8, timeout=WAIT)
        next(items)
        c.abort(timeout=WAIT)
        with pytest.raises(ConnectionClosed, match="abort"):
            for _ in items:
                pass
        c2 = connect(server.url, loop="selector")
        endless = json.dumps({"n": 10_000_000, "size": 4})
        items = c2.request_stream(endless, prefetch=8, timeout=WAIT)
        next(items)
        server.close(timeout=WAIT)
        with pytest.raises(ConnectionClosed):
            for _ in items:
                pass
        assert c2.wait_closed(WAIT)


def test_rsocket_keepalive_timeout_under_the_selector_loop() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    t = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    t.start()
    try:
        c = connect(
            f"tcp://127.0.0.1:{port}", loop="selector", keepalive_interval=0.05, max_lifetime=0.3
        )
        with pytest.raises(ConnectionClosed, match=r"keepalive|lifetime|silent"):
            c.request_response(b"anyone?", timeout=WAIT)
        assert c.wait_closed(WAIT)
    finally:
        t.join(WAIT)
        for s in accepted:
            s.close()
        listener.close()


def test_blocking_call_on_the_loop_thread_is_refused() -> None:
    errors: list[BaseException] = []

    class Handler:
        def __init__(self, peer: object) -> None:
            self.peer = peer

        def request_response(self, request: object) -> bytes:
            try:
                self.peer.request_response(b"x", timeout=1)  # type: ignore[attr-defined]
            except RuntimeError as exc:
                errors.append(exc)
            return b"ok"

    with (
        serve("tcp://127.0.0.1:0", handler_factory=Handler, loop="selector") as server,
        connect(server.url, loop="selector") as c,
    ):
        assert c.request_response(b"go", timeout=WAIT) == Payload(b"ok")
    assert errors and "deadlock" in str(errors[0])


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_500_connections_each_running_a_stream_with_bounded_memory() -> None:
    """The selector server holds 500 client connections (the clients on one
    selector loop too), each running a request-stream of 200 items through
    the Publisher API; every stream completes, peak memory stays bounded."""
    n_conn, n_items = 500, 200
    server_loop = Loop(name="srv-500").start()
    client_loop = Loop(name="cli-500").start()
    before = _rss_kib()
    try:
        with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop=server_loop) as server:
            clients = [connect(server.url, loop=client_loop) for _ in range(n_conn)]
            done = threading.Semaphore(0)
            counts = [0] * n_conn
            failures: list[BaseException] = []

            class Counter:
                def __init__(self, i: int) -> None:
                    self.i = i
                    self.s: object = None

                def on_subscribe(self, s: object) -> None:
                    self.s = s
                    s.request(64)  # type: ignore[attr-defined]

                def on_next(self, item: Payload) -> None:
                    counts[self.i] += 1
                    if counts[self.i] % 64 == 0:
                        self.s.request(64)  # type: ignore[attr-defined]

                def on_error(self, e: BaseException) -> None:
                    failures.append(e)
                    done.release()

                def on_complete(self) -> None:
                    done.release()

            request = json.dumps({"n": n_items, "size": 16})
            for i, c in enumerate(clients):
                c.stream_publisher(request).subscribe(Counter(i))
            for _ in range(n_conn):
                assert done.acquire(timeout=30)
            assert not failures and counts == [n_items] * n_conn
            assert len(server.peers) == n_conn
            assert len(server_loop.connections) == n_conn
            for c in clients:
                c.close(timeout=0)
            for c in clients:
                assert c.wait_closed(WAIT)
    finally:
        client_loop.stop(WAIT)
        server_loop.stop(WAIT)
    grown_mib = (_rss_kib() - before) / 1024
    assert grown_mib < 100, grown_mib


def test_loop_config_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="pause_reading_at"):
        LoopConfig(high_water=1024, pause_reading_at=512)
    with pytest.raises(ValueError, match="positive"):
        LoopConfig(recv_size=0)
    with pytest.raises(ValueError, match="positive"):
        LoopConfig(max_idle_wait=0)
    assert LoopConfig(pause_reading_at=None).pause_reading_at is None


def test_a_loop_can_run_on_the_callers_thread() -> None:
    """``Loop.run()`` instead of ``start()``: the application owns the thread
    (the pattern for embedding the loop); ``stop`` from a handler's thread ends it."""
    loop = Loop(name="mine")
    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop=loop) as server:
        results: list[object] = []

        def client_side() -> None:
            try:
                with connect(server.url) as c:
                    results.append(c.request_response(b"on my thread", timeout=WAIT))
            finally:
                threading.Thread(target=lambda: loop.stop(WAIT)).start()

        threading.Thread(target=client_side).start()
        loop.run()  # returns once stopped
        assert results == [Payload(b"on my thread")]
        assert loop.wait_stopped(0)


def test_stale_timers_are_compacted_in_place_where_they_are_pushed() -> None:
    """A connection that re-arms its timer leaves the old entry in the heap
    (stale: its ``timer`` moved). The heap is kept within 64 + 4 entries
    per connection when a timer is pushed, and in place: a pass of the
    loop that holds the list (popping due timers after serving a
    readable connection, which may arm timers) sees the compacted heap."""

    class Armed:
        timer: float | None = None

    loop = Loop(name="timer-compaction")
    conns = [Armed() for _ in range(3)]
    for conn in conns:
        loop._connections.add(conn)  # type: ignore[arg-type]
    heap = loop._timers
    for i in range(1000):
        conn = conns[i % 3]
        conn.timer = 1000.0 - i  # each re-arm earlier than the last
        loop.set_timer(conn, conn.timer)  # type: ignore[arg-type]
        assert len(heap) <= 64 + 4 * 3 + 1
    assert loop._timers is heap
    assert sorted(when for when, _, _ in heap)[:3] == sorted(c.timer for c in conns)
