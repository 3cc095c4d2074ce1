"""A close racing the peer's end, each schedule forced by a hook (never a
stress loop), under every driver; and what ``close(timeout)`` promises when
the close cannot end.

The race (found as a flaky cell of tests/adapters/peers/
test_misbehaving_ditto_peers.py, ``close-reset-inside-a-message-selector-ws``):
the application closes while the peer resets the connection, and the close
turn writes the goodbye before any read has seen the reset. Over WebSocket
the write fails inside the transport's framing, which held a view of the
connection's output buffer; the error (kept by the connection with its
traceback) kept the view alive, ending the connection failed on resizing the
buffer (``BufferError``), after the connection was marked done and before
anyone waiting was told: ``close()`` waited its whole timeout and returned
with the connection alive, and it never ended."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sansrs.adapters.drive import ConnectionClosed, ConnectionThread, Driver, Loop, LoopConfig
from sansrs.adapters.drive.aio import AsyncioReactor, AsyncPeer
from sansrs.adapters.drive.connection import RESET_WAIT
from sansrs.adapters.drive.engine import Engine
from sansrs.adapters.transport import Transport, open_transport
from sansrs.adapters.transport.tcp import TcpTransport
from sansrs.adapters.transport.websocket import messages as ws
from sansrs.adapters.transport.websocket.transport import WebSocketTransport

from tests.adapters.drive.test_threads import LineEcho
from tests.adapters.peers.scripted import Wire, scripted_peer

LONG = 5.0
PROMPT = 1.0
DRIVERS = ["thread", "selector", "asyncio"]


class GoodbyeAfterReset:
    """A message engine (records, as over WebSocket) that needs no answer to
    its goodbye, as Ditto's: ``begin_close`` queues a Close and the engine is
    done. Its hook: ``begin_close`` runs ``before_goodbye`` first (on the
    driving thread, inside the close turn, before the turn writes)."""

    def __init__(self, before_goodbye: Callable[[], None]) -> None:
        self._before_goodbye = before_goodbye
        self._out: list[bytes] = []
        self._closing: BaseException | None = None
        self.lost: BaseException | None = None

    def receive_data(self, data: bytes, now: float) -> None:
        if not data and self._closing is None:
            self._closing = ConnectionClosed("connection closed by peer")

    def pump(self) -> bool:
        return False

    def data_to_send(self) -> bytes:
        data = b"".join(self._out)
        self._out.clear()
        return data

    def next_deadline(self) -> float | None:
        return None

    def handle_timeout(self, now: float) -> None:
        pass

    def begin_close(self) -> None:
        self._before_goodbye()
        self._out.append(ws.encode_close(1000, "closed by the application"))
        if self._closing is None:
            self._closing = ConnectionClosed("connection closed locally")

    def wants_close(self) -> bool:
        return self._closing is not None

    def close_reason(self) -> BaseException | None:
        return self._closing

    def connection_lost(self, error: BaseException) -> None:
        self.lost = error


class ResettingPeer:
    """A WebSocket peer (scripted, not sansrs) that takes the upgrade, then
    resets the connection when told to; :meth:`reset_now` returns once the
    reset has reached our socket (it is readable: the RST is there, unread)."""

    def __init__(self) -> None:
        self._told = threading.Event()
        self._done = threading.Event()
        self.transport: Transport | None = None

    def script(self, wire: Wire) -> None:
        if self._told.wait(LONG):
            wire.reset()
        self._done.set()

    def reset_now(self) -> None:
        self._told.set()
        assert self._done.wait(LONG), "the peer did not reset"
        assert self.transport is not None
        readable, _, _ = select.select([self.transport.fileno()], [], [], LONG)
        assert readable, "the reset did not arrive"


def _start(driver: str, transport: Transport, engine: Engine) -> tuple[Driver, Loop | None]:
    """``engine`` on ``transport``, on its own thread or a selector loop of its own."""
    if driver == "thread":
        thread = ConnectionThread(transport, engine, name=f"{driver}-test")
        thread.start()
        return thread, None
    loop = Loop(name=f"{driver}-test").start()
    conn = loop.add_connection(transport, engine)
    conn.start()
    return conn, loop


def _timed_close(
    driver: str, transport: Transport, engine: Engine, timeout: float = LONG
) -> tuple[float, Driver]:
    """``engine`` on ``transport`` on ``driver``, closed with ``timeout``
    (asyncio: ``await close(timeout)``): (seconds the close took, the driver)."""
    if driver == "asyncio":

        async def run() -> tuple[float, Driver]:
            conn = AsyncioReactor.current().add_connection(transport, engine)
            conn.start()
            started = time.monotonic()
            await asyncio.wait_for(AsyncPeer(conn).close(timeout), LONG)
            return time.monotonic() - started, conn

        return asyncio.run(run())
    conn, loop = _start(driver, transport, engine)
    try:
        started = time.monotonic()
        conn.close(timeout)
        return time.monotonic() - started, conn
    finally:
        if loop is not None:
            assert loop.stop(LONG)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("driver", DRIVERS)
def test_close_while_the_peer_resets_before_the_goodbye_is_written_ends_at_once(
    driver: str,
) -> None:
    """The flake's interleaving, forced: close requested; in the close turn
    (before its write) the peer resets and the RST is in our socket, unread;
    the goodbye's write fails. The connection ends at once, lost, and
    ``close()`` returns then (before the fix: it waited its whole timeout
    and the connection never ended)."""
    peer = ResettingPeer()
    with scripted_peer(peer.script, websocket=True) as server:
        transport = peer.transport = open_transport(server.url, LONG)
        engine = GoodbyeAfterReset(peer.reset_now)
        took, conn = _timed_close(driver, transport, engine)
    assert took < PROMPT, f"close() took {took:.2f} s"
    assert not conn.alive
    assert isinstance(conn.error, ConnectionClosed)
    assert engine.lost is conn.error
    assert isinstance(transport, WebSocketTransport) and transport.closed


def test_websocket_send_that_fails_keeps_no_view_of_the_callers_buffer() -> None:
    """A write that fails inside the WebSocket framing (the peer reset): the
    error, traceback and all, holds no view of the buffer it was handed, so
    the caller can still resize it (before the fix: BufferError)."""
    peer = ResettingPeer()
    with scripted_peer(peer.script, websocket=True) as server:
        transport = peer.transport = open_transport(server.url, LONG)
        try:
            peer.reset_now()
            out = bytearray(ws.encode_close(1000, "bye"))
            with pytest.raises(OSError) as failed:
                transport.send(out)
            assert failed.value.__traceback__ is not None  # what used to hold the view
            out.clear()
            out += b"still usable"
        finally:
            transport.abort()


class HeldViewTransport:
    """A TCP transport with a bug: ``send`` raises ``error`` while it holds a
    view of the caller's buffer (the view stays alive with the traceback).
    It reports ``buffered`` as the WebSocket transport does, so the
    connection hands it its own output buffer."""

    def __init__(self, inner: TcpTransport, error: Exception) -> None:
        self._inner = inner
        self._error = error
        self.peer = inner.peer
        self.closed_calls = 0

    @property
    def buffered(self) -> int:
        return 0

    def fileno(self) -> int:
        return self._inner.fileno()

    def recv(self, max_bytes: int = 65536) -> bytes:
        return self._inner.recv(max_bytes)

    def send(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        if view:
            raise self._error
        return 0

    def shutdown_write(self) -> None:
        self._inner.shutdown_write()

    def close(self) -> None:
        self.closed_calls += 1
        self._inner.close()

    def abort(self) -> None:
        self.closed_calls += 1
        self._inner.abort()

    @property
    def closed(self) -> bool:
        return self._inner.closed


@pytest.fixture
def greeting_url() -> Iterator[str]:
    """A plain TCP server (its own thread; not sansrs): says ``hi`` to each
    connection, then reads and drops what it is sent until the end."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def greet(sock: socket.socket) -> None:
        with sock, contextlib.suppress(OSError):  # (a reset: the end too)
            sock.sendall(b"hi\n")
            while sock.recv(65536):
                pass

    def serve() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            sock.settimeout(LONG)
            threading.Thread(target=greet, args=(sock,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(LONG)
    listener.close()


@pytest.mark.timeout(20)
@pytest.mark.parametrize("error", [BrokenPipeError(32, "Broken pipe"), ValueError("bad record")])
def test_a_connection_whose_transport_fails_holding_a_view_ends_alone(
    error: Exception, greeting_url: str
) -> None:
    """A transport's send fails while it holds a view of the connection's
    buffer (an OSError: the write path keeps it as the send error; anything
    else: the turn fails): that connection ends, promptly, its socket
    released, and the selector loop goes on with the others (before the
    fix: the first was never told it ended; with a non-OSError the
    BufferError escaped the turn's error handling and stopped the loop,
    ending every connection on it)."""
    loop = Loop(name="held-view").start()
    try:
        inner = open_transport(greeting_url, LONG)
        assert isinstance(inner, TcpTransport)
        bad_transport = HeldViewTransport(inner, error)
        bad_engine = LineEcho()  # answers the greeting: its write fails
        bad = loop.add_connection(bad_transport, bad_engine)
        # The greeting is there before the connection's first turn: the loop
        # reads it, and writes the answer, on the readiness path (on_io).
        assert select.select([inner.fileno()], [], [], LONG)[0]
        bad.start()
        assert bad.join(PROMPT), "the failed connection did not end"
        assert isinstance(bad.error, ConnectionClosed)
        assert bad_engine.lost is bad.error
        assert bad_transport.closed_calls and bad_transport.closed
        assert loop.running
        good_engine = LineEcho()
        good = loop.add_connection(open_transport(greeting_url, LONG), good_engine)
        good.start()
        assert good_engine.lines.get(LONG) == b"hi"
        good.close(LONG)
        assert not good.alive
    finally:
        assert loop.stop(LONG)


class NeverDone(LineEcho):
    """An engine whose goodbye never finishes (it always has more to send)."""

    def wants_close(self) -> bool:
        return False


@pytest.mark.timeout(20)
@pytest.mark.parametrize("driver", DRIVERS)
def test_close_that_does_not_end_within_its_timeout_resets_the_connection(
    driver: str,
) -> None:
    """A graceful close that cannot end (the peer reads nothing: the output
    never drains, and the engine always has more) is not left open behind
    a returned ``close(timeout)`` (asyncio: ``await close(timeout)``): it
    is reset after ``timeout`` (before: ``close`` returned and the
    connection went on; under asyncio ``close`` never returned)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        transport = open_transport(f"tcp://127.0.0.1:{listener.getsockname()[1]}", LONG)
        held, _ = listener.accept()  # never read: our output cannot drain
        with held:
            engine = NeverDone()
            engine.to_produce = 1 << 30
            took, conn = _timed_close(driver, transport, engine, 0.3)
    assert not conn.alive
    assert 0.3 <= took < 0.3 + PROMPT, f"close() took {took:.2f} s"
    assert engine.lost is conn.error
    if driver != "asyncio":  # (asyncio's reset is a plain abort)
        assert "graceful close did not end within 0.3 s" in str(conn.error)


@pytest.mark.timeout(20)
def test_close_of_a_connection_whose_thread_runs_no_turn_raises_timeout_error() -> None:
    """Its selector loop blocked (a call that does not return): neither the
    close nor the reset can happen, and ``close(timeout)`` says so rather
    than return as if closed. Once the loop runs again the reset ends it."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        loop = Loop(name="blocked").start()
        release = threading.Event()
        try:
            conn = loop.add_connection(open_transport(url, LONG), LineEcho())
            conn.start()
            blocked = threading.Event()

            def block() -> None:
                blocked.set()
                release.wait(LONG)

            loop.call_soon(block)
            assert blocked.wait(LONG)
            started = time.monotonic()
            with pytest.raises(TimeoutError, match="runs no turn"):
                conn.close(0.2)
            assert 0.2 + RESET_WAIT <= time.monotonic() - started < 0.2 + RESET_WAIT + PROMPT
            assert conn.alive
            release.set()
            assert conn.join(LONG)
            assert "graceful close did not end within 0.2 s" in str(conn.error)
        finally:
            release.set()
            assert loop.stop(LONG)


def test_close_and_abort_with_no_timeout_do_not_wait() -> None:
    """``timeout=0`` (what ``Loop.stop`` and the asyncio API pass): they
    start the end and return at once, never raising."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        loop = Loop(LoopConfig(), name="no-wait").start()
        try:
            conn = loop.add_connection(open_transport(url, LONG), LineEcho())
            conn.start()
            conn.close(timeout=0)
            conn.abort(timeout=0)
            assert conn.join(LONG)
        finally:
            assert loop.stop(LONG)
