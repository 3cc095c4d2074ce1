"""One driven connection: the turn every driver runs.

:class:`LoopConnection` pairs a :class:`~..transport.Transport` with an
:class:`~.engine.Engine` (a protocol core plus its dispatch) and keeps its own
output buffer (the listener that makes them is :mod:`.listener`). It runs on
a :class:`~.reactor.Reactor` (the
``selectors`` loop, a thread per connection, or asyncio), which tells it
when a descriptor is ready, a timer is due or another thread woke them. The
turn, in order: calls handed over by application threads -> timeouts
(handshake, idle, the engine's) -> ``pump`` (outbound within credit) ->
``data_to_send`` -> write -> close when the engine or the peer is done.

* Non-blocking sockets; unsent bytes wait in the connection's buffer, in
  order, and go out as the socket drains (partial writes keep their place).
* Output back-pressure: above ``high_water`` queued bytes the engine is not
  asked to produce more, and a turn pumps about that much of a stream;
  a socket that does not take a turn's output whole wakes the connection
  when it has room (no turn runs in between); above ``pause_reading_at``
  the connection stops reading from that peer (it would only make more
  output we cannot flush) until the buffer drains. Other connections go on.
* Timeouts, the same under every reactor (:class:`~.config.LoopConfig`):
  ``handshake_timeout`` (transport handshake and protocol setup),
  ``idle_timeout`` (no byte in either direction), ``close_timeout`` (a
  goodbye that waits for an answer), and the engine's own deadlines.
* Wake-ups: application threads call :meth:`LoopConnection.call_soon` (or
  :meth:`LoopConnection.wake`); the call is queued in the connection's
  :class:`~.queues.Inbox` and the reactor is woken, once per burst.
* Direct calls (the latency path: a thread runs its request and reads the
  answer itself while the connection is idle) are methods kept in
  :mod:`.direct`; the writes (the engine's output joined or as pieces, what
  a short send leaves) in :mod:`.writes`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable

from ..transport import Transport
from . import direct, writes
from .config import LoopConfig
from .engine import Call, Engine, Startable
from .errors import ConnectionClosed, LoopClosed, seconds
from .queues import Inbox, QueueClosed, Wakeup
from .reactor import READ, WRITE, Reactor
from .writes import GATHER_AT

__all__ = ["GATHER_AT", "LoopConnection", "close_all"]

log = logging.getLogger("sansrs.adapters")

_NO_EXTRAS = (None, None, None)  # no handshake, close or idle deadline
#: How long ``close(timeout)`` waits for the reset it falls back on once
#: ``timeout`` has passed: one turn of the driving thread.
RESET_WAIT = 1.0
_get_ident = threading.get_ident  # (a global less per is_owner: asked per fire_and_forget)


class LoopConnection:
    """One connection on a :class:`~.reactor.Reactor` (implements
    :class:`~.engine.Driver`)."""

    def __init__(
        self,
        loop: Reactor,
        transport: Transport,
        engine: Engine,
        *,
        inbox_capacity: int = 4096,
        on_exit: Callable[[LoopConnection], None] | None = None,
    ) -> None:
        self.transport = transport
        self.engine = engine
        self.error: BaseException | None = None
        #: Reactor bookkeeping (:class:`~.reactor.Driven`).
        self.scheduled = False
        self.woken = False
        self.timer: float | None = None
        self._loop = loop
        self._inbox: Inbox[Call] = Inbox(self, inbox_capacity)
        self._on_exit = on_exit
        self._fd = transport.fileno()
        #: A transport that queues bytes of its own (WebSocket control
        #: replies): counted with ours for back-pressure, flushed like ours.
        self._held: Callable[[], int] | None = (
            (lambda: transport.buffered)  # type: ignore[attr-defined]
            if hasattr(type(transport), "buffered")
            else None
        )
        self._out = bytearray()
        #: Pieces of the engine's output that a ``sendmsg`` did not reach,
        #: kept as they are, to go after ``_out`` (which then holds the tail
        #: of the piece it cut: never empty while these wait, so every
        #: "anything unsent?" test reads ``_out`` alone), and their bytes.
        #: Copying them into ``_out`` cost a copy of most of a stream's
        #: output whenever the reader was behind (bench_tcp.py stream1k,
        #: stream1kb: the server's end).
        self._rest: list[bytes] = []
        self._rest_size = 0
        #: The engine's output as pieces (``Engine.pieces_to_send``), when
        #: the transport writes them at once (``send_pieces``).
        self._gather: Callable[[int], list[bytes] | None] | None = (
            getattr(engine, "pieces_to_send", None)
            if hasattr(type(transport), "send_pieces")
            else None
        )
        #: What the engine holds unsent: the pieces path leaves its output
        #: there while the socket is full, and it counts against
        #: ``high_water`` like ours (else the pump would go on filling the
        #: engine up to its own, larger limit).
        self._engine_queued: Callable[[], int] | None = (
            (lambda: engine.queued_output)
            if self._gather is not None and hasattr(engine, "queued_output")
            else None
        )
        self._interest = 0
        self._eof = False
        self._stopping = False
        self._close_started = False
        self._abort = False
        self._lost: ConnectionClosed | None = None
        self._send_error: OSError | None = None
        self._handshake_deadline: float | None = None
        self._close_deadline: float | None = None
        #: The engine's next deadline, read at the end of each turn.
        self._deadline: float | None = None
        self._last_io = 0.0
        self._wrote = False
        self._started = False
        self._done = False
        self._exited = threading.Event()
        #: Held by the thread that runs this connection's engine: the
        #: reactor for a turn, or a thread in a direct call (call_direct).
        self._drive = threading.Lock()
        self._direct_ident: int | None = None  # the thread in a direct call
        self._direct_waker: Wakeup | None = None  # wakes it while it waits
        self._missed = False  # the reactor wanted a turn during a direct call
        #: The reactor stopped watching the socket when it found the
        #: connection taken (reactor thread only; see _miss).
        self._miss_paused = False
        self._pause_on_miss: bool = getattr(loop, "idempotent_pause", False)
        self._direct_ok: bool = getattr(loop, "direct_calls", False)
        #: Itself when its reactor allows direct calls: what a peer's express
        #: latency path takes (``direct_begin`` ... ``direct_end``).
        self.direct: LoopConnection | None = self if self._direct_ok else None
        #: The engine's optional ``quiet()`` (see ``Engine``): nothing to pump or send.
        self._quiet: Callable[[], bool] | None = getattr(engine, "quiet", None)
        #: The engine has the optional ``settled`` flag (see ``Engine``).
        self._settles = hasattr(engine, "settled")
        #: The engine is done (an ERROR on stream 0, a protocol error): a
        #: direct call stops waiting and hands over, so the turn finishes.
        self._wants_close = engine.wants_close
        #: Threads in :meth:`wait_until`, told after each turn and at the end.
        self._turned = threading.Condition(threading.Lock())
        self._turn_waiters = 0

    # -- any thread (Driver) -------------------------------------------------
    def start(self) -> None:
        """Register with the reactor (from any thread)."""
        if self._started:
            return
        self._started = True
        loop = self._loop
        if loop.in_loop_thread or not loop.started:
            self._register()  # on the reactor, or before it runs: no other thread yet
        else:
            try:
                loop.call_soon(self._register)
            except LoopClosed as exc:
                self._lost = exc
                self._finish(exc)

    @property
    def loop(self) -> Reactor:
        return self._loop

    @property
    def is_owner(self) -> bool:
        """True on the reactor's thread, and on a thread in a direct call."""
        # (One tuple test, no in_loop_thread frame: asked per fire_and_forget.)
        return _get_ident() in (self._loop._ident, self._direct_ident)

    @property
    def alive(self) -> bool:
        return not self._exited.is_set()

    @property
    def handshaken(self) -> bool:
        """The transport handshake and the protocol's opening are done."""
        return self._handshaken()

    @property
    def config(self) -> LoopConfig:
        """The limits and timeouts this connection runs with (its reactor's)."""
        return self._loop.config

    @property
    def buffered(self) -> int:
        """Bytes waiting to be written (owner thread's view): the loop's
        buffer and what the transport holds (WebSocket frames, pongs)."""
        held = self._held
        return len(self._out) + self._rest_size + (held() if held is not None else 0)

    def _below_high_water(self) -> bool:
        """Owner: the unwritten output (ours and the engine's) is below
        ``high_water``: the engine may be pumped."""
        unwritten = len(self._out) + self._rest_size
        queued = self._engine_queued
        if queued is not None:
            unwritten += queued()
        return unwritten < self._loop.config.high_water

    def wait_until(self, ready: Callable[[], bool], timeout: float | None = None) -> None:
        """Any thread but the owner: return once ``ready()`` holds, checked
        now and after each turn (e.g. a producer waiting for the unwritten
        output to drain below ``high_water``: the turns that write it are
        the ones that can make it true; the asyncio reactor's
        ``wait_until`` under the thread drivers). Raises
        :class:`ConnectionClosed` once the connection has ended,
        :class:`TimeoutError` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        turned = self._turned
        with turned:
            self._turn_waiters += 1
            try:
                while not ready():
                    if self._done:
                        raise ConnectionClosed(f"connection closed: {self.error}")
                    left = None if deadline is None else deadline - time.monotonic()
                    if (left is not None and left <= 0) or not turned.wait(left):
                        if ready():
                            return
                        raise TimeoutError(f"not ready within {seconds(timeout or 0.0)}")
            finally:
                self._turn_waiters -= 1

    def _tell_waiters(self) -> None:
        """Owner, after a turn or at the end: :meth:`wait_until` re-checks."""
        with self._turned:
            self._turned.notify_all()

    def call_soon(self, fn: Call, timeout: float | None = None) -> None:
        try:
            self._inbox.put(fn, timeout)
        except QueueClosed as exc:
            raise ConnectionClosed(str(exc)) from None

    def wake(self) -> None:
        waker = self._direct_waker
        if waker is not None:  # a thread in a direct call runs what is due
            waker.wake()
            return
        if self.woken or self._done:
            return
        self.woken = True
        self._loop.wake(self)

    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: let the engine finish, flush queued bytes, then close.

        From another thread it returns once the connection has ended, within
        ``timeout`` seconds (``None``: however long it takes; ``0``: it does
        not wait). One still open then (a peer that reads nothing of the
        goodbye, an engine that does not finish) is reset, its error saying
        so; :class:`TimeoutError` if even the reset did not end it within
        ``RESET_WAIT`` (the thread that drives it runs no turn: blocked by a
        handler, or gone). On the driving thread itself it cannot wait: the
        close happens after the current turn."""
        self._stopping = True
        self.wake()
        waited = self._wait_end(timeout)
        if not waited:
            return
        self._lost = ConnectionClosed(
            f"connection reset: the graceful close did not end within {seconds(waited)}"
        )
        self._abort = True
        self.wake()
        if not self._exited.wait(RESET_WAIT):
            raise TimeoutError(
                f"connection not closed within {seconds(waited)}, nor reset within"
                f" {seconds(RESET_WAIT)} after: its driving thread runs no turn"
            )

    def abort(self, timeout: float | None = 5.0) -> None:
        """Abrupt: drop unsent bytes and reset the connection. From another
        thread it waits for the end, ``timeout`` seconds at most (``None``:
        however long; ``0``: not at all): :class:`TimeoutError` if it has not
        ended by then (the thread that drives it runs no turn)."""
        self._abort = True
        self.wake()
        waited = self._wait_end(timeout)
        if waited:
            raise TimeoutError(
                f"connection not reset within {seconds(waited)}: its driving thread runs no turn"
            )

    def join(self, timeout: float | None = None) -> bool:
        return self._exited.wait(timeout)

    def _wait_end(self, timeout: float | None) -> float:
        """``close`` / ``abort`` from another thread: wait for the end; the
        seconds waited in vain (0.0: ended, or nothing to wait for)."""
        if self.is_owner or not self._started or (timeout is not None and timeout <= 0):
            return 0.0
        if timeout is None:
            self._exited.wait()
            return 0.0
        return 0.0 if self._exited.wait(timeout) else timeout

    def add_exit_callback(self, fn: Callable[[LoopConnection], None]) -> None:
        """Owner: also call ``fn(self)`` when the connection ends (at once if it has)."""
        if self._done:
            fn(self)
            return
        previous = self._on_exit

        def both(conn: LoopConnection) -> None:
            if previous is not None:
                previous(conn)
            fn(conn)

        self._on_exit = both

    # -- owner thread ----------------------------------------------------------
    # -- writes (.writes) -------------------------------------------------------
    write_now = writes.write_now
    _write_pieces = writes.write_pieces
    _after_send = writes.after_send
    write_bytes = writes.write_bytes
    _write = writes.write
    _write_rest = writes.write_rest

    def needs_turn(self) -> bool:
        """Owner, after a read or :meth:`write_now`: whether a turn has
        anything to do. False when all is written, the engine is quiet
        (nothing to pump, send or close), no other thread's call waits and
        the engine's deadline is not earlier than the one a turn last armed
        (one that moved later costs a turn at the old one, with nothing due,
        as in :meth:`_turn`): the caller need not run or wake a turn (asyncio:
        a loop iteration less per request and per answer,
        docs/performance.md). A write not stamped yet counts at the next turn
        (the idle timeout sees it then)."""
        engine = self.engine
        settled = self._settles and engine.settled  # type: ignore[attr-defined]
        if settled:
            engine.settled = False  # type: ignore[attr-defined]  # (read once, see Engine)
        quiet = self._quiet
        if (
            quiet is None
            or self._out
            or self._inbox.items
            or self._send_error is not None
            or self._abort
            or self._stopping
            or self._eof
            or self._done
            or (self._held is not None and self._held())
            or not quiet()
        ):
            return True
        if settled:
            return False
        deadline = engine.next_deadline()
        armed = self._deadline
        return deadline is not None and (armed is None or deadline < armed)

    def on_io(self, mask: int, now: float) -> None:
        if not mask & READ or self._done:
            return  # writable: the turn that follows flushes
        if not self._drive.acquire(False):
            self._miss()
            return
        try:
            if self._miss_paused:
                self._watch_again()
            self._read(now)
            # Answers the input caused leave now, before the rest of the turn
            # (which follows at once): the latency path of a request-response.
            self.write_now()
        except Exception as exc:
            # As in service(): this connection fails, not its reactor.
            self._fail(exc)
        finally:
            self._drive.release()

    def _read(self, now: float) -> None:
        """Driving thread: one read, its bytes to the engine."""
        data = self._recv(now)
        if data is not None:
            self._feed(data, now)

    def _recv(self, now: float) -> bytes | None:
        """Driving thread: one read of the socket (``b""``: its end), stamped
        ``now``; None: nothing to read, or it failed (kept for the turn to
        finish the connection)."""
        try:
            data = self.transport.recv(self._loop.config.recv_size)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            self._lost = ConnectionClosed(f"connection lost: {exc}")
            self._abort = True
            return None
        self._last_io = now
        return data

    def _feed(self, data: bytes, now: float) -> None:
        """Driving thread: bytes read (``b""``: the end) to the engine."""
        try:
            self.engine.receive_data(data, now)
        except Exception as exc:
            self._fail(exc)
            return
        if not data:
            self._eof = True

    def service(self, now: float, read: bool = False) -> None:
        """A turn; ``read``: the reactor's fast path for a readable
        connection with no turn queued: read first, then the turn, in one
        pass under the drive lock (the turn's write sends the answers the
        input caused), unless the read left nothing for a turn to do
        (:meth:`needs_turn`: a request answered and written at once)."""
        if self._done:
            return
        if not self._drive.acquire(False):
            self._miss()
            return
        try:
            if self._miss_paused:
                self._watch_again()
            if read:
                self._read(now)
                if self._done or not self.needs_turn():
                    return  # (the answers the read caused are written already)
            self._turn(now)
        except Exception as exc:
            self._fail(exc)
        finally:
            self._drive.release()

    def _miss(self) -> None:
        """The reactor found a thread in a direct call: it hands over (the
        turn runs once the connection is back, see _end_direct). Until then
        the reactor stops watching the socket: readable all along (a
        stream's items), it would otherwise find the connection taken on
        every pass, spinning for the GIL the other thread needs to let go."""
        self._missed = True  # (before the pause: _end_direct wakes the reactor for it)
        # (Each time: a direct call that ends resumes the socket itself.)
        if self._pause_on_miss and self._interest & READ:
            self._miss_paused = True
            self._loop.pause(self._fd)  # type: ignore[attr-defined]
        waker = self._direct_waker
        if waker is not None:
            waker.wake()

    def _watch_again(self) -> None:
        """Reactor, the connection back: watch the socket again after _miss."""
        self._miss_paused = False
        if not self._done:
            self._loop.resume(self._fd, self._interest, self)  # type: ignore[attr-defined]

    def kill(self, error: BaseException) -> None:
        """The reactor is going away: reset at once."""
        self._abort = True
        if not self._drive.acquire(False):
            self._miss()  # a direct call gives the connection back at once
            self._drive.acquire()
        try:
            self._finish(self._lost or error)
        finally:
            self._drive.release()

    # -- direct calls, the latency path (any thread; .direct) -------------------
    call_direct = direct.call_direct
    direct_begin = direct.direct_begin
    direct_exchange = direct.direct_exchange
    direct_wait = direct.direct_wait
    direct_end = direct.direct_end
    _idle_for_direct = direct.idle_for_direct
    _flush = direct.flush
    _wait_direct = direct.wait_direct
    _rearm_if_earlier = direct.rearm_if_earlier
    _end_direct = direct.end_direct

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
        loop = self._loop
        loop.add(self)
        now = time.monotonic()
        self._last_io = now
        timeout = loop.config.handshake_timeout
        if timeout is not None and not self._handshaken():
            self._handshake_deadline = now + timeout
        self._set_interest(READ)
        loop.service_soon(self)  # first turn: send what is queued (a client's SETUP)

    def _handshaken(self) -> bool:
        """Transport handshake (TLS, WebSocket upgrade) and protocol setup
        (RSocket SETUP, rsio hello) both done; each says so with an optional
        ``handshaken`` attribute."""
        return bool(getattr(self.transport, "handshaken", True)) and bool(
            getattr(self.engine, "handshaken", True)
        )

    def _set_interest(self, events: int) -> None:
        if events != self._interest:
            self._loop.watch(self._fd, events, self)
            self._interest = events

    def _run_calls(self) -> None:
        for fn in self._inbox.drain():
            try:
                fn()
            except Exception:
                # An application call that misuses the core fails alone.
                log.exception("call on the connection's loop failed")

    def _fail(self, exc: Exception) -> None:
        log.exception("connection failed", exc_info=exc)
        error = ConnectionClosed(f"connection failed: {exc!r}")
        error.__cause__ = exc
        self._lost = error
        self._abort = True
        self._finish(error)

    def _timed_out(self, now: float) -> bool:
        """Handshake and idle timeouts; True once the connection is finished.
        (The turn has stamped its last write in ``_last_io`` already.)"""
        config = self._loop.config
        if self._handshake_deadline is not None:
            if self._handshaken():
                self._handshake_deadline = None
            elif now >= self._handshake_deadline:
                timeout = config.handshake_timeout
                self._lost = ConnectionClosed(f"handshake not completed within {timeout} s")
                self._abort = True
                self._finish(self._lost)
                return True
        idle = config.idle_timeout
        if idle is not None and now - self._last_io >= idle and not self._stopping:
            # Graceful: the engine says goodbye (the peer may just be quiet).
            self._lost = ConnectionClosed(f"no traffic for {idle} s (idle_timeout)")
            self._stopping = True
        return False

    def _turn(self, now: float) -> None:
        engine = self.engine
        config = self._loop.config
        if self._inbox.items:  # the deque itself: Inbox.__len__ is a call per turn
            self._run_calls()
        if self._send_error is not None:  # an early write (write_now) failed
            self._send_failed(self._send_error, now)
            return
        if self._abort:
            self._finish(self._lost or ConnectionClosed("connection aborted locally"))
            return
        if self._wrote:
            self._wrote = False
            self._last_io = now
        if (
            self._handshake_deadline is not None or config.idle_timeout is not None
        ) and self._timed_out(now):
            return
        out = self._out
        if self._stopping and not self._close_started:
            self._close_started = True
            engine.begin_close()
        # The engine's deadline as of the end of the last turn (see
        # _arm_timer): one that moved earlier since then has its reactor timer
        # armed, whose turn sees it due; one that moved later costs one call
        # to handle_timeout with nothing due. One next_deadline() per turn,
        # not two (docs/performance.md, "Selector loop": keepalive turns).
        deadline = self._deadline
        if deadline is not None and now >= deadline:
            engine.handle_timeout(now)
        more = engine.pump() if self._below_high_water() else True
        self.write_now(pieces=True)
        if self._wrote:
            self._wrote = False
            self._last_io = now
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
                    self._finish(self._lost or ConnectionClosed("connection closed locally"))
                    return
        pending = len(out) + self._rest_size
        if self._held is not None:
            pending += self._held()
        pause = config.pause_reading_at
        if pause is not None and self._engine_queued is not None:
            # Output the engine holds while the socket is full (answers
            # included) counts too: reading more would only add to it.
            pause -= self._engine_queued()
        reading = not self._eof and (pause is None or pending < pause)
        interest = (READ if reading else 0) | (WRITE if pending else 0)
        if interest != self._interest:
            self._set_interest(interest)
        self._deadline = deadline = engine.next_deadline()
        self._arm_timer(deadline, config.idle_timeout)
        # Another turn at once only if the socket took everything: one
        # still full wakes us when it has room (WRITE), and a turn before
        # that would write nothing (one after another: a busy loop while
        # a peer reads slowly, the engine's output held in the engine).
        if more and not pending and not self.scheduled:
            self._loop.service_soon(self)
        if self._turn_waiters:
            self._tell_waiters()

    def _arm_timer(self, deadline: float | None, idle: float | None) -> None:
        """Ask the reactor for a turn at the earliest deadline of any kind."""
        idle_at = None if idle is None or self._stopping else self._last_io + idle
        extras = self._handshake_deadline, self._close_deadline, idle_at
        if extras != _NO_EXTRAS:
            for extra in extras:
                if extra is not None and (deadline is None or extra < deadline):
                    deadline = extra
        if deadline is not None and (self.timer is None or deadline < self.timer):
            self.timer = deadline
            self._loop.set_timer(self, deadline)

    def _finish(self, error: BaseException) -> None:
        """End the connection with ``error``. Runs to the end whatever fails
        on the way, and raises nothing: once ``_done`` is set no turn runs
        again, so a step left out here would leave the connection ended for
        its reactor and alive for everyone waiting on it (``close()``,
        ``join()``)."""
        if self._done:
            return
        self._done = True
        if self._lost is not None and self._close_started and not self._abort:
            error = self._lost  # e.g. closed for idleness: say so
        self.error = error
        loop = self._loop
        try:
            if self._interest:
                with contextlib.suppress(Exception):
                    loop.watch(self._fd, 0, self)
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
            self._close_transport()
            # A new buffer rather than clear(): a view of the old one may
            # still be held (a transport's failed send, kept alive by the
            # error's traceback), and resizing it would raise BufferError.
            self._out = bytearray()
            self._rest, self._rest_size = [], 0
        except Exception:
            # Never out of here: a caller in its own ``except`` (``_fail``)
            # would carry it to the reactor, and end every connection on it.
            log.exception("ending the connection failed")
        loop.discard(self)
        self._exited.set()
        self._tell_waiters()
        if self._on_exit is not None:
            try:
                self._on_exit(self)
            except Exception:
                log.exception("on_exit callback failed")

    def _close_transport(self) -> None:
        """Close the transport (reset it if aborting); a failure to close it
        gracefully still releases the socket."""
        transport = self.transport
        try:
            if self._abort:
                transport.abort()
            else:
                transport.shutdown_write()
                transport.close()
        except Exception:
            log.exception("closing the transport failed")
            with contextlib.suppress(Exception):
                transport.abort()


def close_all(conns: Iterable[Startable], *, abort: bool) -> None:
    """Start closing every connection (``abort``: reset them); waits for none."""
    for conn in conns:
        if abort:
            conn.abort(timeout=0)
        else:
            conn.close(timeout=0)
