"""The latency path's shortcuts (docs/architecture.md "Threads",
docs/performance.md "Latency"): a direct call that reads its answer skips
its pump-and-write only when the engine is quiet; the selector loop reads
epoll itself (hang-ups as selectors reports them) and runs a readable
connection's turn in the same pass, handing over to a direct call that
holds the connection. The peer is a raw socket played by the test, so each
interleaving is the test's to choose (no sleeps)."""

from __future__ import annotations

import queue
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConnection
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.drive.reactor import READ
from sansrs.adapters.rsocket import Payload, RSocketError, connect
from sansrs.adapters.rsocket.engine import RequestHandle, RSocketEngine
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.transport.tcp import SocketTransport

from .direct import driver_of as _driver
from .direct import reads_by_thread
from .direct import settle as _settle

WAIT = 10.0
REQUEST_RESPONSE, KEEPALIVE, PAYLOAD, ERROR, CANCEL = 0x04, 0x03, 0x0A, 0x0B, 0x09
FLAG_RESPOND, FLAG_NEXT_COMPLETE, FLAG_METADATA = 0x80, 0x60, 0x100


def _frame(sid: int, ftype: int, flags: int, body: bytes) -> bytes:
    frame = struct.pack(">IH", sid, ftype << 10 | flags) + body
    return len(frame).to_bytes(3, "big") + frame


class RawServer:
    """One RSocket client's peer, frame by frame, on a thread of its own:
    ``frames`` gets every (stream ID, type, flags, body) the client sends;
    the test answers with :meth:`send` or resets with :meth:`reset`."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"tcp://127.0.0.1:{self._listener.getsockname()[1]}"
        self.frames: queue.Queue[tuple[int, int, int, bytes]] = queue.Queue()
        self._sock: socket.socket | None = None
        self._accepted = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sock, _ = self._listener.accept()
        self._sock = sock
        self._accepted.set()
        buf = b""
        try:
            while chunk := sock.recv(65536):
                buf += chunk
                while len(buf) >= 3 and len(buf) >= 3 + int.from_bytes(buf[:3], "big"):
                    end = 3 + int.from_bytes(buf[:3], "big")
                    sid, type_flags = struct.unpack_from(">IH", buf, 3)
                    self.frames.put((sid, type_flags >> 10, type_flags & 0x3FF, buf[9:end]))
                    buf = buf[end:]
        except OSError:
            pass

    def next_of(self, ftype: int) -> tuple[int, int, int, bytes]:
        """The next frame of type ``ftype`` the client sent (others skipped)."""
        while True:
            frame = self.frames.get(timeout=WAIT)
            if frame[1] == ftype:
                return frame

    def send(self, data: bytes) -> None:
        assert self._accepted.wait(WAIT) and self._sock is not None
        self._sock.sendall(data)

    def reset(self) -> None:
        assert self._accepted.wait(WAIT) and self._sock is not None
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The reader thread first (a close under its blocked recv would wait
        # for it): SHUT_RD ends its recv and sends nothing; the close resets.
        self._sock.shutdown(socket.SHUT_RD)
        self._thread.join(WAIT)
        self._sock.close()

    def close(self) -> None:
        self._listener.close()
        if self._sock is not None:
            self._sock.close()
        self._thread.join(WAIT)


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


def _answering(server: RawServer, before: bytes = b"") -> threading.Thread:
    """Answer the next REQUEST_RESPONSE with ``answer:<data>``, ``before``
    in the same write."""

    def answer() -> None:
        sid, _, _, data = server.next_of(REQUEST_RESPONSE)
        server.send(before + _frame(sid, PAYLOAD, FLAG_NEXT_COMPLETE, b"answer:" + data))

    thread = threading.Thread(target=answer)
    thread.start()
    return thread


def _warm(server: RawServer, client: Any) -> None:
    """One exchange, then the reactor idle: the next call is a direct one."""
    answering = _answering(server)
    assert client.request_response(b"warm", timeout=WAIT) == Payload(b"answer:warm")
    answering.join(WAIT)
    _settle(_driver(client))


def test_rsocket_keepalive_respond_in_the_read_of_a_direct_answer_is_answered(
    raw_server: RawServer, loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KEEPALIVE with the respond flag that arrives in the same read as the
    answer a direct call waits for: the engine is not quiet (its answer is
    queued), so the calling thread writes it before it lets go (spec:
    KEEPALIVE, "Respond with KEEPALIVE"). The keepalive timer is far off:
    only that write can send it within the test's wait."""
    quiet_timers = {"keepalive_interval": 600, "max_lifetime": 900}
    with connect(raw_server.url, loop=loop_kind, **quiet_timers) as client:
        _warm(raw_server, client)
        readers = reads_by_thread(monkeypatch, client)
        keepalive = _frame(0, KEEPALIVE, FLAG_RESPOND, struct.pack(">Q", 0) + b"ping")
        answering = _answering(raw_server, before=keepalive)
        assert client.request_response(b"k", timeout=WAIT) == Payload(b"answer:k")
        answering.join(WAIT)
        _, _, flags, body = raw_server.next_of(KEEPALIVE)
        assert not flags & FLAG_RESPOND and body.endswith(b"ping")
        assert readers == [threading.get_ident()]  # read (and answered) by the caller


def test_a_direct_answer_alone_leaves_nothing_behind(
    raw_server: RawServer, loop_kind: str | Loop
) -> None:
    """The quiet case: after the answer the engine has nothing to send, and
    the next calls go direct as well (nothing left for the reactor)."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        driver = _driver(client)
        for i in range(5):
            answering = _answering(raw_server)
            data = b"%d" % i
            assert client.request_response(data, timeout=WAIT) == Payload(b"answer:" + data)
            answering.join(WAIT)
            assert driver.engine.quiet()  # type: ignore[attr-defined]
            assert not driver.buffered


def test_a_peer_reset_during_a_direct_wait_ends_it(
    raw_server: RawServer, loop_kind: str | Loop
) -> None:
    """A reset while a thread waits in a direct call: the waiting thread and
    the reactor (an error is reported on a paused descriptor too) both see
    it; the wait ends with ConnectionClosed and the connection ends."""
    client = connect(raw_server.url, loop=loop_kind)
    _warm(raw_server, client)
    errors: queue.Queue[BaseException] = queue.Queue()

    def wait() -> None:
        try:
            client.request_response(b"never", timeout=WAIT)
        except BaseException as exc:
            errors.put(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    raw_server.next_of(REQUEST_RESPONSE)
    raw_server.reset()
    waiter.join(WAIT)
    assert isinstance(errors.get(timeout=WAIT), ConnectionClosed)
    assert client.wait_closed(WAIT)


def test_a_readable_connection_held_by_a_direct_call_is_handed_over() -> None:
    """The loop's read-and-turn pass finds the drive lock taken (a thread in
    a direct call): it neither reads nor blocks, and marks the connection
    missed so the caller hands it back."""
    loop = Loop(name="latency-readable")
    a, b = socket.socketpair()
    try:
        engine = RSocketEngine.client(EngineOptions(), None)
        conn = LoopConnection(loop, SocketTransport(a), engine)
        b.sendall(b"\x00")
        assert conn._drive.acquire(False)  # as a direct call holds it
        conn.service(0.0, read=True)
        assert conn._missed
        assert a.recv(1) == b"\x00"  # not read by the loop
        conn._drive.release()
    finally:
        a.close()
        b.close()
        loop.stop(WAIT)


def test_the_loop_reports_a_hang_up_on_a_paused_descriptor_as_readable() -> None:
    """``Loop._ready`` reads epoll itself: like ``selectors``, an error or a
    hang-up counts as readable (and writable), so a connection paused for a
    direct call still learns that its peer is gone."""
    loop = Loop(name="latency-ready")
    a, b = socket.socketpair()
    try:

        class Seen:
            scheduled = woken = False
            timer = None

        seen = Seen()
        loop.watch(a.fileno(), READ, seen)  # type: ignore[arg-type]
        b.sendall(b"x")
        assert (seen, READ) in loop._ready(0)
        loop.pause(a.fileno())
        assert all(obj is not seen for obj, _ in loop._ready(0))  # paused: data unseen
        b.close()
        assert (seen, READ) in loop._ready(0)  # the hang-up is
    finally:
        a.close()
        loop.stop(WAIT)


def test_engine_quiet_only_when_nothing_is_to_pump_or_send() -> None:
    engine = RSocketEngine.client(EngineOptions(), None)

    class Driver:
        is_owner = True

        def call_soon(self, fn: Any, timeout: float | None = None) -> None:
            fn()

        def wake(self) -> None:
            pass

    engine.attach(Driver(), None)  # type: ignore[arg-type]
    assert not engine.quiet()  # SETUP queued
    engine.data_to_send()
    assert engine.quiet()
    engine.start_response(RequestHandle("rr", CreditQueue(granted=1)), Payload(b"x"))
    assert not engine.quiet()  # the request queued
    engine.data_to_send()
    assert engine.quiet()
    engine.after_events(lambda: None)
    assert not engine.quiet()
    engine.pump()
    assert engine.quiet()
    engine.begin_close()
    assert not engine.quiet()  # closing: the driver's full path


def test_credit_queue_answered_once_an_item_or_the_end_is_there() -> None:
    item: CreditQueue[int] = CreditQueue(granted=1)
    assert not item.answered()
    item.put(1)
    assert item.answered()
    ended: CreditQueue[int] = CreditQueue(granted=1)
    ended.finish()
    assert ended.answered()
    closed: CreditQueue[int] = CreditQueue(granted=1)
    closed.close()
    assert closed.answered()


class Echo:
    """A protocol-neutral engine that echoes what it reads, counting handled timeouts."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.timeouts = 0

    def receive_data(self, data: bytes, now: float) -> None:
        self.out += data

    def pump(self) -> bool:
        return False

    def data_to_send(self) -> bytes:
        data, self.out = bytes(self.out), bytearray()
        return data

    def next_deadline(self) -> float | None:
        return None

    def handle_timeout(self, now: float) -> None:
        self.timeouts += 1

    def wants_close(self) -> bool:
        return False

    def close_reason(self) -> BaseException | None:
        return None

    def begin_close(self) -> None:
        pass

    def connection_lost(self, error: BaseException) -> None:
        pass


@pytest.fixture
def hand_loop() -> Iterator[tuple[Loop, LoopConnection, socket.socket, Echo]]:
    """A loop run by hand on the test's thread, one echoing connection on it."""
    loop = Loop(name="latency-hand")
    loop._ident = threading.get_ident()
    a, b = socket.socketpair()
    engine = Echo()
    conn = LoopConnection(loop, SocketTransport(a), engine)
    conn.start()
    loop._run_once()  # its first turn
    try:
        yield loop, conn, b, engine
    finally:
        b.close()
        loop._ident = None
        conn.abort(timeout=0)
        loop._run_once()
        loop.stop(0)


def test_a_lone_readable_connection_is_read_and_answered_in_one_pass(
    hand_loop: tuple[Loop, LoopConnection, socket.socket, Echo],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, _, peer, _ = hand_loop
    turns: list[bool] = []
    original = LoopConnection.service

    def service(self: LoopConnection, now: float, read: bool = False) -> None:
        turns.append(read)
        original(self, now, read)

    monkeypatch.setattr(LoopConnection, "service", service)
    peer.sendall(b"ping")
    loop._run_once()
    assert peer.recv(16) == b"ping"  # answered by the read's own turn
    assert turns == [True]  # one pass: no second turn queued for it


def test_a_due_timer_still_gets_its_turn_when_a_connection_is_readable(
    hand_loop: tuple[Loop, LoopConnection, socket.socket, Echo],
) -> None:
    """The short pass is only for "nothing else due": a timer due in the
    same wait (here another driven object's) takes the general pass, which
    runs both."""
    loop, _, peer, _ = hand_loop

    class Ticker:
        scheduled = woken = False
        timer: float | None = 0.0
        turns = 0

        def on_io(self, mask: int, now: float) -> None:
            pass

        def service(self, now: float) -> None:
            self.turns += 1

        def kill(self, error: BaseException) -> None:
            pass

    ticker = Ticker()
    loop.add(ticker)
    loop.set_timer(ticker, 0.0)
    peer.sendall(b"ping")
    loop._run_once()
    assert peer.recv(16) == b"ping"
    assert ticker.turns == 1
    loop.discard(ticker)


# -- a lone request-response's answer, taken without an event -----------------------


def _dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Stream IDs of the answers that went through the engine's event
    dispatch (the ordinary way) rather than taken whole."""
    seen: list[int] = []
    original = RSocketEngine.on_payload

    def on_payload(self: RSocketEngine, sid: int, *rest: Any) -> None:
        seen.append(sid)
        original(self, sid, *rest)

    monkeypatch.setattr(RSocketEngine, "on_payload", on_payload)
    return seen


def test_a_whole_answer_read_alone_is_taken_without_an_event(
    raw_server: RawServer, loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One read that is exactly the answer: the calling thread reads it,
    the core takes it without an event, and the connection is left as
    the ordinary path leaves it (stream gone, nothing to send)."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        readers = reads_by_thread(monkeypatch, client)
        dispatched = _dispatched(monkeypatch)
        driver = _driver(client)
        for i in range(3):
            answering = _answering(raw_server)
            data = b"%d" % i
            assert client.request_response(data, timeout=WAIT) == Payload(b"answer:" + data)
            answering.join(WAIT)
        assert dispatched == []
        assert readers == [threading.get_ident()] * 3
        assert driver.engine.conn.open_streams == []  # type: ignore[attr-defined]
        assert driver.engine.quiet()  # type: ignore[attr-defined]


def test_an_answer_split_across_reads_comes_the_ordinary_way(
    raw_server: RawServer, loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read holds a part of the answer: it goes to the engine as
    any read, and the rest completes the answer (read on the same thread)."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        transport = _driver(client).transport
        original = transport.recv
        first_read = threading.Event()

        def recv(max_bytes: int) -> bytes:
            data = original(max_bytes)
            first_read.set()
            return data

        monkeypatch.setattr(transport, "recv", recv)

        def answer() -> None:
            sid, _, _, data = raw_server.next_of(REQUEST_RESPONSE)
            whole = _frame(sid, PAYLOAD, FLAG_NEXT_COMPLETE, b"answer:" + data)
            raw_server.send(whole[:5])
            assert first_read.wait(WAIT)  # the client has read the part
            raw_server.send(whole[5:])

        answering = threading.Thread(target=answer)
        answering.start()
        assert client.request_response(b"split", timeout=WAIT) == Payload(b"answer:split")
        answering.join(WAIT)


def test_an_answer_with_metadata_comes_the_ordinary_way(
    raw_server: RawServer, loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        dispatched = _dispatched(monkeypatch)

        def answer() -> None:
            sid, _, _, data = raw_server.next_of(REQUEST_RESPONSE)
            body = b"\x00\x00\x02md" + b"answer:" + data
            raw_server.send(_frame(sid, PAYLOAD, FLAG_NEXT_COMPLETE | FLAG_METADATA, body))

        answering = threading.Thread(target=answer)
        answering.start()
        assert client.request_response(b"m", timeout=WAIT) == Payload(b"answer:m", b"md")
        answering.join(WAIT)
        assert len(dispatched) == 1


def test_rsocket_error_answer_to_a_direct_request_is_raised(
    raw_server: RawServer, loop_kind: str | Loop
) -> None:
    """ERROR on the request's stream (spec: ERROR frame, APPLICATION_ERROR):
    not an answer to take; the ordinary path raises it to the caller."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)

        def answer() -> None:
            sid, _, _, _ = raw_server.next_of(REQUEST_RESPONSE)
            raw_server.send(_frame(sid, ERROR, 0, struct.pack(">I", 0x201) + b"refused"))

        answering = threading.Thread(target=answer)
        answering.start()
        with pytest.raises(RSocketError) as caught:
            client.request_response(b"e", timeout=WAIT)
        answering.join(WAIT)
        assert caught.value.error_code == 0x201 and caught.value.message == "refused"


def test_a_direct_request_that_times_out_is_cancelled(
    raw_server: RawServer, loop_kind: str | Loop
) -> None:
    """No answer within the timeout: TimeoutError, and the request is
    cancelled on the wire (spec: CANCEL); the next call goes direct again."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        with pytest.raises(TimeoutError):
            client.request_response(b"never", timeout=0.2)
        sid, _, _, _ = raw_server.next_of(REQUEST_RESPONSE)
        assert raw_server.next_of(CANCEL)[0] == sid
        answering = _answering(raw_server)
        assert client.request_response(b"again", timeout=WAIT) == Payload(b"answer:again")
        answering.join(WAIT)


def test_a_reactor_that_misses_before_the_waker_is_set_gets_the_connection_back(
    raw_server: RawServer, loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reactor finds the connection taken just before the calling thread
    has set its waker (nothing to wake yet): the calling thread sees it
    missed before it waits, does not wait a slice out, and hands the
    connection back; the answer arrives the ordinary way."""
    from sansrs.adapters.drive import direct as direct_module

    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        driver = _driver(client)
        original = direct_module._thread_poller
        polls: list[float] = []

        class Poller:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def poll(self, timeout: float) -> Any:
                polls.append(timeout)
                return self.inner.poll(timeout)

        def thread_poller(fd: int) -> Any:
            waker, poller = original(fd)
            if not polls:
                driver._miss()  # as the reactor does, the waker not set yet
            return waker, Poller(poller)

        monkeypatch.setattr(direct_module, "_thread_poller", thread_poller)
        answering = _answering(raw_server)
        assert client.request_response(b"m", timeout=WAIT) == Payload(b"answer:m")
        answering.join(WAIT)
        assert polls == []  # handed back at once, never waited here


def test_a_turn_is_owed_only_when_it_has_something_to_do(
    raw_server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``needs_turn`` (asyncio skips the turn after a read or a write when it
    is False): nothing owed after a quiet exchange; owed for output left,
    a call queued, or a deadline earlier than the one
    armed (one that moved later is met by the timer already armed)."""
    with connect(raw_server.url, loop="thread") as client:
        _warm(raw_server, client)
        driver = _driver(client)
        answering = _answering(raw_server)
        assert client.request_response(b"q", timeout=WAIT) == Payload(b"answer:q")
        answering.join(WAIT)
        _settle(driver)
        assert not driver.needs_turn()
        armed = driver._deadline
        assert armed is not None
        engine: Any = driver.engine
        monkeypatch.setattr(engine, "next_deadline", lambda: armed + 5.0)
        assert not driver.needs_turn()  # later: the armed timer comes first
        monkeypatch.setattr(engine, "next_deadline", lambda: armed - 5.0)
        assert driver.needs_turn()  # earlier: a turn must arm it
        monkeypatch.undo()
        # (The reactor is idle, its timer seconds away: nothing runs a turn
        # while the test holds these.)
        driver._out += b"x"
        assert driver.needs_turn()
        del driver._out[:]
        driver._inbox.items.append(lambda: None)
        assert driver.needs_turn()
        driver._inbox.items.clear()


def test_a_request_the_socket_takes_in_part_is_finished_by_the_reactor(
    raw_server: RawServer, loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The express path writes the request itself: when the socket takes
    only a part, the rest waits in the driver's buffer and the calling
    thread does not wait for an answer the peer cannot send yet; the
    reactor writes the rest and the answer arrives the ordinary way."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        transport = _driver(client).transport
        original = transport.send
        short = [True]

        def send(data: Any) -> int:
            if short and len(data) > 4:
                short.clear()
                return original(bytes(data[:4]))  # the kernel took 4 bytes
            return original(data)

        monkeypatch.setattr(transport, "send", send)
        answering = _answering(raw_server)
        assert client.request_response(b"partial", timeout=WAIT) == Payload(b"answer:partial")
        answering.join(WAIT)
        assert not short  # the short write happened


def test_another_threads_call_during_an_express_wait_runs_before_the_answer(
    raw_server: RawServer, loop_kind: str | Loop
) -> None:
    """A thread waits in the express path; another thread's fire-and-forget
    wakes it (its waker): the waiting thread runs the call (the peer
    receives it while the request is unanswered) and goes on waiting; the
    answer still comes to it. The peer answers only once it has the
    fire-and-forget, so the order is forced."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        results: queue.Queue[object] = queue.Queue()

        def call() -> None:
            results.put(client.request_response(b"slow", timeout=WAIT))

        caller = threading.Thread(target=call)
        caller.start()
        sid, _, _, _ = raw_server.next_of(REQUEST_RESPONSE)
        client.fire_and_forget(b"meanwhile")
        _, _, _, fnf = raw_server.next_of(0x05)  # REQUEST_FNF
        assert fnf == b"meanwhile"
        raw_server.send(_frame(sid, PAYLOAD, FLAG_NEXT_COMPLETE, b"answer:slow"))
        caller.join(WAIT)
        assert results.get(timeout=WAIT) == Payload(b"answer:slow")
        assert _driver(client).engine.conn.open_streams == []  # type: ignore[attr-defined]


def test_a_busy_connection_takes_the_general_path(
    raw_server: RawServer, loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The express path only runs while nothing else is going on: with a
    stream to pump (here: the engine not quiet), the request goes the
    general way (its handle, its queue) and is answered."""
    with connect(raw_server.url, loop=loop_kind) as client:
        _warm(raw_server, client)
        driver = _driver(client)
        begun: list[float | None] = []
        original = driver.direct_begin

        def direct_begin() -> float | None:
            quiet = driver._quiet
            driver._quiet = lambda: False
            try:
                now = original()
            finally:
                driver._quiet = quiet
            begun.append(now)
            return now

        monkeypatch.setattr(driver, "direct_begin", direct_begin)
        answering = _answering(raw_server)
        assert client.request_response(b"busy", timeout=WAIT) == Payload(b"answer:busy")
        answering.join(WAIT)
        assert begun == [None]
