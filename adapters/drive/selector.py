"""The ``selectors`` driver: one thread drives many connections.

A :class:`Loop` owns one selector, one :class:`~.queues.Wakeup` and a heap of
timers. Each connection on it (:class:`LoopConnection`) pairs a
:class:`~.transports.Transport` with an :class:`Engine` (a protocol core plus
its dispatch, e.g. :class:`~.rsocket_engine.RSocketEngine`) and keeps its own
output buffer; listeners (:class:`LoopServer`) accept on the same loop. Every
turn: ``select`` (timeout = the earliest timer) -> read what is readable ->
run calls handed over by application threads -> fire due timers -> for each
connection touched: ``pump`` (outbound within credit) -> ``data_to_send`` ->
write.

* Non-blocking sockets; unsent bytes wait in the connection's buffer, in
  order, and go out as the socket drains (partial writes keep their place).
* Output back-pressure: above ``high_water`` queued bytes the engine is not
  asked to produce more; above ``pause_reading_at`` the loop stops reading
  from that peer (it would only make more output we cannot flush) until the
  buffer drains. Other connections go on: nothing ever blocks the loop.
* Timers: each connection's ``next_deadline()`` is kept in one heap (lazy
  deletion, compacted when stale entries pile up).
* Wake-ups: application threads call :meth:`LoopConnection.call_soon` (or
  :meth:`LoopConnection.wake`); the call is queued in that connection's
  :class:`~.queues.Inbox` and the loop is woken through one shared socketpair.

The same connection object serves the thread-per-connection driver:
:class:`~.threads.ConnectionThread` is a :class:`Loop` holding exactly one
connection on its own thread, so both drivers share this one copy of the
read/pump/write/close logic, and the protocol logic lives in the engine.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable

from ..transport import Listener, Transport
from .config import LoopConfig
from .engine import Call, Engine, Startable
from .errors import ConnectionClosed, LoopClosed
from .queues import Inbox, QueueClosed, Wakeup

__all__ = ["Loop", "LoopConnection", "LoopServer", "default_loop"]

log = logging.getLogger("sansrs.adapters")

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


class Loop:
    """One thread, many connections. ``start()`` runs it on a daemon thread;
    ``run()`` runs it on the calling thread until :meth:`stop`."""

    def __init__(self, config: LoopConfig | None = None, *, name: str = "sansrs-loop") -> None:
        self.config = config or LoopConfig()
        self.name = name
        self._sel = selectors.DefaultSelector()
        self._wakeup = Wakeup()
        self._sel.register(self._wakeup.fileno(), _READ, None)
        self._calls: deque[Call] = deque()
        self._woken: deque[LoopConnection] = deque()
        self._next: list[LoopConnection] = []  # to service on the next turn, no wait
        self._timers: list[tuple[float, int, LoopConnection]] = []
        self._seq = itertools.count()
        self._connections: set[LoopConnection] = set()
        self._servers: set[LoopServer] = set()
        self._thread: threading.Thread | None = None
        self._ident: int | None = None
        self._stopping = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    # -- any thread ----------------------------------------------------------
    def start(self) -> Loop:
        """Run the loop on a new daemon thread (named after the loop)."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("loop already started")
            self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()
        return self

    @property
    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._ident

    @property
    def running(self) -> bool:
        return self._ident is not None and not self._stopped.is_set()

    @property
    def connections(self) -> list[LoopConnection]:
        return list(self._connections)

    def call_soon(self, fn: Call) -> None:
        """Run ``fn()`` on the loop thread soon. Raises :class:`LoopClosed` once stopped."""
        if self._stopped.is_set() or self._stopping:
            raise LoopClosed(f"loop {self.name} is stopped")
        self._calls.append(fn)
        self._wakeup.wake()

    def add_connection(
        self,
        transport: Transport,
        engine: Engine,
        *,
        on_exit: Callable[[LoopConnection], None] | None = None,
        inbox_capacity: int | None = None,
    ) -> LoopConnection:
        """A connection driven by this loop; it starts on :meth:`LoopConnection.start`."""
        return LoopConnection(
            self,
            transport,
            engine,
            inbox_capacity=inbox_capacity or self.config.inbox_capacity,
            on_exit=on_exit,
        )

    def stop(self, timeout: float | None = 5.0, *, abort: bool = False) -> bool:
        """Close every server and connection (gracefully unless ``abort``; those
        still open after ``timeout`` are aborted), then end the loop.
        Returns True once the loop has ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for server in list(self._servers):
            server.close(timeout=0, abort=abort)
        for conn in list(self._connections):
            if abort:
                conn.abort(timeout=0)
            else:
                conn.close(timeout=0)
        if not self.in_loop_thread:
            for conn in list(self._connections):
                conn.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            for conn in list(self._connections):
                conn.abort(timeout=0)
        self._stopping = True
        self._wakeup.wake()
        if self.in_loop_thread or (self._ident is None and self._thread is None):
            if self._ident is None:
                self._close_resources()
            return self._stopped.is_set()
        left = None if deadline is None else max(0.1, deadline - time.monotonic())
        return self._stopped.wait(left)

    def stop_soon(self) -> None:
        """Loop thread: end the loop after this turn (connections still open are aborted)."""
        self._stopping = True

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    # -- the loop ------------------------------------------------------------
    def run(self) -> None:
        """Drive the loop on this thread until :meth:`stop`."""
        if self._ident is not None:
            raise RuntimeError("loop already running")
        self._ident = threading.get_ident()
        try:
            while not self._stopping:
                self._run_once()
        except Exception:
            log.exception("loop %s failed", self.name)
        finally:
            for conn in list(self._connections):
                conn._abort = True
                conn._finish(conn._lost or ConnectionClosed("connection aborted: loop stopped"))
            for server in list(self._servers):
                server._finish()
            self._close_resources()

    def _close_resources(self) -> None:
        for fn in self._drain_calls():
            with contextlib.suppress(Exception):
                fn()
        self._sel.close()
        self._wakeup.close()
        self._stopped.set()

    def _drain_calls(self) -> list[Call]:
        calls = self._calls
        return [calls.popleft() for _ in range(len(calls))]

    def _run_once(self) -> None:
        config = self.config
        if self._next or self._woken or self._calls:
            wait: float | None = 0.0
        elif self._timers:
            wait = min(config.max_idle_wait, max(0.0, self._timers[0][0] - time.monotonic()))
        else:
            wait = config.max_idle_wait
        events = self._sel.select(wait)
        now = time.monotonic()
        todo, self._next = self._next, []
        for conn in todo:
            conn._scheduled = False
        for key, mask in events:
            obj = key.data
            if obj is None:
                self._wakeup.clear()
            elif type(obj) is LoopConnection:
                obj._on_io(mask, now)
                if not obj._scheduled:
                    obj._scheduled = True
                    todo.append(obj)
            else:
                obj._accept()
        if self._calls:
            for fn in self._drain_calls():
                try:
                    fn()
                except Exception:
                    log.exception("call on loop %s failed", self.name)
        woken = self._woken
        while woken:
            conn = woken.popleft()
            conn._woken = False  # before its inbox is drained: a later wake re-queues it
            if not conn._scheduled:
                conn._scheduled = True
                todo.append(conn)
        timers = self._timers
        while timers and timers[0][0] <= now:
            when, _, conn = heapq.heappop(timers)
            if conn._timer == when:
                conn._timer = None
                if not conn._scheduled:
                    conn._scheduled = True
                    todo.append(conn)
        for conn in todo:
            conn._scheduled = False
            conn._service(now)
        if len(timers) > 64 + 4 * len(self._connections):
            self._compact_timers()

    def _compact_timers(self) -> None:
        live = [
            (timer, next(self._seq), conn)
            for conn in self._connections
            if (timer := conn._timer) is not None
        ]
        heapq.heapify(live)
        self._timers = live

    def _schedule_timer(self, conn: LoopConnection, when: float) -> None:
        heapq.heappush(self._timers, (when, next(self._seq), conn))


class LoopConnection:
    """One connection on a :class:`Loop` (implements :class:`Driver`)."""

    def __init__(
        self,
        loop: Loop,
        transport: Transport,
        engine: Engine,
        *,
        inbox_capacity: int = 4096,
        on_exit: Callable[[LoopConnection], None] | None = None,
    ) -> None:
        self.transport = transport
        self.engine = engine
        self.error: BaseException | None = None
        self._loop = loop
        self._inbox: Inbox[Call] = Inbox(self, inbox_capacity)
        self._on_exit = on_exit
        self._fd = transport.fileno()
        self._out = bytearray()
        self._interest = 0
        self._eof = False
        self._stopping = False
        self._close_started = False
        self._abort = False
        self._lost: ConnectionClosed | None = None
        self._send_error: OSError | None = None
        self._woken = False
        self._scheduled = False
        self._timer: float | None = None
        self._handshake_deadline: float | None = None
        self._close_deadline: float | None = None
        self._started = False
        self._done = False
        self._exited = threading.Event()

    # -- any thread (Driver) -------------------------------------------------
    def start(self) -> None:
        """Register with the loop (from any thread)."""
        if self._started:
            return
        self._started = True
        loop = self._loop
        if loop.in_loop_thread or (loop._thread is None and loop._ident is None):
            self._register()  # on the loop, or before it runs: no other thread yet
        else:
            try:
                self._loop.call_soon(self._register)
            except LoopClosed as exc:
                self._lost = exc
                self._finish(exc)

    @property
    def loop(self) -> Loop:
        return self._loop

    @property
    def is_owner(self) -> bool:
        return self._loop.in_loop_thread

    @property
    def alive(self) -> bool:
        return not self._exited.is_set()

    @property
    def buffered(self) -> int:
        """Bytes waiting to be written (owner thread's view)."""
        return len(self._out)

    def call_soon(self, fn: Call, timeout: float | None = None) -> None:
        try:
            self._inbox.put(fn, timeout)
        except QueueClosed as exc:
            raise ConnectionClosed(str(exc)) from None

    def wake(self) -> None:
        if self._woken or self._done:
            return
        self._woken = True
        loop = self._loop
        loop._woken.append(self)
        if threading.get_ident() != loop._ident:
            loop._wakeup.wake()

    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: let the engine finish, flush queued bytes, then close."""
        self._stopping = True
        self.wake()
        if not self.is_owner:
            self.join(timeout)

    def abort(self, timeout: float | None = 5.0) -> None:
        """Abrupt: drop unsent bytes and reset the connection."""
        self._abort = True
        self.wake()
        if not self.is_owner:
            self.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        return self._exited.wait(timeout)

    # -- loop thread -----------------------------------------------------------
    def write_now(self) -> None:
        """Owning thread: take the engine's output and write what the socket
        accepts. The turn ends with it; an engine calls it mid-turn to write
        the output queued so far, so the peer can start on it while the rest
        of the input is handled (see ``RSocketEngine``). A failed write is
        kept for the turn's service to finish the connection."""
        if self._done or self._abort or self._send_error is not None:
            return
        out = self._out
        data = self.engine.data_to_send()
        if data:
            out += data
        if out:
            try:
                sent = self.transport.send(out)
            except OSError as exc:
                self._send_error = exc
                return
            if sent:
                del out[:sent]

    def _send_failed(self, exc: OSError, now: float) -> None:
        """A write failed: the peer is gone, maybe after saying why (a
        WebSocket Close 1009, an RSocket ERROR) and resetting a connection we
        were still writing to. Read what arrived, so the reason reaches the
        engine and the application, then finish."""
        with contextlib.suppress(Exception):  # best effort: the connection is gone
            for _ in range(64):
                data = self.transport.recv(self._loop.config.recv_size)
                if not data:
                    break
                self.engine.receive_data(data, now)
        reason = self.engine.close_reason() if self.engine.wants_close() else None
        self._lost = ConnectionClosed(f"connection lost: {exc}")
        self._abort = True
        self._finish(reason or self._lost)

    def _register(self) -> None:
        if self._done:
            return
        self._loop._connections.add(self)
        timeout = self._loop.config.handshake_timeout
        if timeout is not None and not self._handshaken():
            self._handshake_deadline = time.monotonic() + timeout
        self._set_interest(_READ)
        self._scheduled = True
        self._loop._next.append(self)  # first turn: send what is queued (a client's SETUP)

    def _handshaken(self) -> bool:
        """Transport handshake (TLS, WebSocket upgrade) and protocol setup
        (RSocket SETUP, rsio hello) both done; each says so with an optional
        ``handshaken`` attribute."""
        return bool(getattr(self.transport, "handshaken", True)) and bool(
            getattr(self.engine, "handshaken", True)
        )

    def _set_interest(self, events: int) -> None:
        current = self._interest
        if events == current:
            return
        sel = self._loop._sel
        if not events:
            sel.unregister(self._fd)
        elif not current:
            sel.register(self._fd, events, self)
        else:
            sel.modify(self._fd, events, self)
        self._interest = events

    def _on_io(self, mask: int, now: float) -> None:
        if not mask & _READ or self._done:
            return  # writable: the service that follows flushes
        try:
            data = self.transport.recv(self._loop.config.recv_size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost = ConnectionClosed(f"connection lost: {exc}")
            self._abort = True
            return
        try:
            self.engine.receive_data(data, now)
        except Exception as exc:
            self._fail(exc)
            return
        if not data:
            self._eof = True

    def _run_calls(self) -> None:
        for fn in self._inbox.drain():
            try:
                fn()
            except Exception:
                # An application call that misuses the core fails alone.
                log.exception("call on the connection's loop failed")

    def _service(self, now: float) -> None:
        if self._done:
            return
        try:
            self._service_inner(now)
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        log.exception("connection failed", exc_info=exc)
        error = ConnectionClosed(f"connection failed: {exc!r}")
        error.__cause__ = exc
        self._lost = error
        self._abort = True
        self._finish(error)

    def _service_inner(self, now: float) -> None:
        engine = self.engine
        config = self._loop.config
        if len(self._inbox):
            self._run_calls()
        if self._send_error is not None:  # an early write (write_now) failed
            self._send_failed(self._send_error, now)
            return
        if self._abort:
            self._finish(self._lost or ConnectionClosed("connection aborted locally"))
            return
        if self._handshake_deadline is not None:
            if self._handshaken():
                self._handshake_deadline = None
            elif now >= self._handshake_deadline:
                timeout = config.handshake_timeout
                self._lost = ConnectionClosed(f"handshake not completed within {timeout} s")
                self._abort = True
                self._finish(self._lost)
                return
        out = self._out
        if self._stopping and not self._close_started:
            self._close_started = True
            engine.begin_close()
        deadline = engine.next_deadline()
        if deadline is not None and now >= deadline:
            engine.handle_timeout(now)
        high = config.high_water
        more = engine.pump() if len(out) < high else True
        self.write_now()
        if self._send_error is not None:
            self._send_failed(self._send_error, now)
            return
        if self._abort:  # a call or handler aborted us meanwhile
            self._finish(self._lost or ConnectionClosed("connection aborted locally"))
            return
        if not out:
            if engine.wants_close():
                self._finish(engine.close_reason() or ConnectionClosed("connection closed"))
                return
            if self._eof:
                self._finish(ConnectionClosed("connection closed by peer"))
                return
            if self._close_started:
                # An engine whose goodbye wants an answer (rsio's goodbyeAck)
                # does not want to close yet: keep reading for it, bounded.
                if self._close_deadline is None:
                    self._close_deadline = now + config.close_timeout
                if now >= self._close_deadline:
                    self._finish(ConnectionClosed("connection closed locally"))
                    return
        pause = config.pause_reading_at
        reading = not self._eof and (pause is None or len(out) < pause)
        self._set_interest((_READ if reading else 0) | (_WRITE if out else 0))
        deadline = engine.next_deadline()
        for extra in (self._handshake_deadline, self._close_deadline):
            if extra is not None and (deadline is None or extra < deadline):
                deadline = extra
        if deadline is not None and (self._timer is None or deadline < self._timer):
            self._timer = deadline
            self._loop._schedule_timer(self, deadline)
        if more and len(out) < high and not self._scheduled:
            self._scheduled = True
            self._loop._next.append(self)

    def _finish(self, error: BaseException) -> None:
        if self._done:
            return
        self._done = True
        self.error = error
        loop = self._loop
        if self._interest:
            with contextlib.suppress(Exception):
                loop._sel.unregister(self._fd)
            self._interest = 0
        for fn in self._inbox.close(ConnectionClosed(str(error))):
            try:
                fn()
            except Exception:
                log.debug("call dropped at close", exc_info=True)
        try:
            self.engine.connection_lost(error)
        except Exception:
            log.exception("engine.connection_lost failed")
        if self._abort:
            self.transport.abort()
        else:
            self.transport.shutdown_write()
            self.transport.close()
        self._out.clear()
        loop._connections.discard(self)
        self._exited.set()
        if self._on_exit is not None:
            try:
                self._on_exit(self)
            except Exception:
                log.exception("on_exit callback failed")


class LoopServer:
    """Accepts on a :class:`~.transports.Listener` from a :class:`Loop`.

    ``make_connection(transport)`` builds the driver of each accepted
    connection (a :class:`LoopConnection` on any loop, or a
    :class:`~.threads.ConnectionThread`); the server starts it and tracks it
    until it ends. ``own_loop``: the server started the loop and stops it on close.
    """

    def __init__(
        self,
        loop: Loop,
        listener: Listener,
        make_connection: Callable[[Transport], Startable],
        *,
        own_loop: bool = False,
    ) -> None:
        self.loop = loop
        self.listener = listener
        self._make_connection = make_connection
        self._own_loop = own_loop
        self._connections: set[Startable] = set()
        self._prune_at = 64
        self._lock = threading.Lock()
        self._closing = False
        self._registered = False
        self._exited = threading.Event()

    @property
    def endpoint(self) -> object:
        return self.listener.endpoint

    @property
    def connections(self) -> list[Startable]:
        with self._lock:
            return [c for c in self._connections if c.alive]

    def start(self) -> LoopServer:
        if self._own_loop:
            self.loop.start()
        self.loop.call_soon(self._register)
        return self

    def _register(self) -> None:
        if self._closing:
            self._finish()
            return
        self.loop._servers.add(self)
        self.loop._sel.register(self.listener.fileno(), _READ, self)
        self._registered = True

    def _accept(self) -> None:
        for _ in range(self.loop.config.accept_batch):
            if self._closing:
                return
            try:
                transport = self.listener.accept()
            except OSError:
                # e.g. EMFILE, or a TLS handshake refused in accept: this
                # connection fails, the listener goes on.
                log.warning("accept failed", exc_info=True)
                return
            if transport is None:
                return
            try:
                conn = self._make_connection(transport)
            except Exception:
                log.exception("could not set up an accepted connection")
                transport.abort()
                continue
            with self._lock:
                self._connections.add(conn)
                if len(self._connections) >= self._prune_at:
                    # Forget ended connections; amortized O(1) per accept.
                    self._connections = {c for c in self._connections if c.alive}
                    self._prune_at = max(64, 2 * len(self._connections))
            conn.start()

    def _finish(self) -> None:
        if self._exited.is_set():
            return
        if self._registered:
            with contextlib.suppress(Exception):
                self.loop._sel.unregister(self.listener.fileno())
            self._registered = False
        self.loop._servers.discard(self)
        self.listener.close()
        self._exited.set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the listener is closed (after :meth:`close`)."""
        return self._exited.wait(timeout)

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        """Stop accepting, then close every connection (gracefully unless ``abort``)."""
        self._closing = True
        deadline = time.monotonic() + timeout
        if self.loop.in_loop_thread:
            self._finish()
        else:
            try:
                self.loop.call_soon(self._finish)
            except LoopClosed:
                self._finish()
            self._exited.wait(timeout)
        conns = self.connections
        for conn in conns:
            if abort:
                conn.abort(timeout=0)
            else:
                conn.close(timeout=0)
        if not self.loop.in_loop_thread:
            for conn in conns:
                conn.join(max(0.0, deadline - time.monotonic()))
        if self._own_loop:
            self.loop.stop(max(0.0, deadline - time.monotonic()), abort=True)


_default: Loop | None = None
_default_lock = threading.Lock()


def default_loop() -> Loop:
    """The process-wide selector loop (started on first use, a daemon thread):
    what ``connect(url, loop="selector")`` and ``serve(..., loop="selector")`` use."""
    global _default
    with _default_lock:
        if _default is None or _default._stopped.is_set() or _default._stopping:
            _default = Loop(name="sansrs-selector").start()
        return _default
