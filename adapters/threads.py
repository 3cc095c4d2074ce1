"""Thread-per-connection driver: one owning thread runs a sans-IO core.

The loop is protocol-agnostic. It owns a :class:`~.transports.Transport`, a
:class:`~.queues.Wakeup` and an :class:`~.queues.Inbox` of callables, and
drives an :class:`Engine` (a protocol core plus its dispatch): read ->
``receive_data`` -> ``pump`` (outbound under credit) -> ``data_to_send`` ->
write, and timers via ``next_deadline`` / ``handle_timeout``. Application
threads never touch the engine: :meth:`ConnectionThread.call_soon` hands a call
to the owning thread.

Writes never block the loop: unsent bytes wait in an output buffer, and while
it is above ``HIGH_WATER`` the engine is not asked to produce more, so a slow
reader throttles producers instead of growing memory.
"""

from __future__ import annotations

import logging
import selectors
import threading
import time
from collections.abc import Callable
from typing import Protocol

from .queues import Inbox, QueueClosed, Wakeup
from .transports import Listener, Transport

__all__ = ["ConnectionClosed", "ConnectionThread", "Engine", "ServerThread"]

log = logging.getLogger("sansrs.adapters")

HIGH_WATER = 512 * 1024
RECV_SIZE = 256 * 1024
MAX_IDLE_WAIT = 1.0


class ConnectionClosed(ConnectionError):
    """The connection is gone; outstanding and new requests fail with this."""


class Engine(Protocol):
    """What a protocol session offers the driver loop. Called on the owning thread only."""

    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the peer (``b""`` at end of stream): parse and dispatch."""

    def pump(self) -> bool:
        """Produce outbound items within the peer's credit. True if more is ready now."""

    def data_to_send(self) -> bytes: ...

    def next_deadline(self) -> float | None: ...

    def handle_timeout(self, now: float) -> None: ...

    def wants_close(self) -> bool:
        """True once the engine is done: flush what is queued, then close."""

    def close_reason(self) -> BaseException | None:
        """Why the engine wants to close (given to callers that arrive late)."""

    def begin_close(self) -> None:
        """A graceful close was asked locally: queue any goodbye for the peer."""

    def connection_lost(self, error: BaseException) -> None:
        """Fail everything outstanding with ``error``; the loop is ending."""


Call = Callable[[], object]


class ConnectionThread:
    """The owning thread of one connection."""

    def __init__(
        self,
        transport: Transport,
        engine: Engine,
        *,
        name: str = "sansrs-conn",
        inbox_capacity: int = 4096,
        on_exit: Callable[[ConnectionThread], None] | None = None,
    ) -> None:
        self.transport = transport
        self.engine = engine
        self._wakeup = Wakeup()
        self._inbox: Inbox[Call] = Inbox(self._wakeup, inbox_capacity)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._stopping = False
        self._abort = False
        self._exited = threading.Event()
        self._on_exit = on_exit
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    @property
    def is_owner(self) -> bool:
        return threading.get_ident() == self._thread.ident

    @property
    def alive(self) -> bool:
        return not self._exited.is_set()

    def call_soon(self, fn: Call, timeout: float | None = None) -> None:
        """Run ``fn()`` on the owning thread. Raises :class:`ConnectionClosed` once gone."""
        try:
            self._inbox.put(fn, timeout)
        except QueueClosed as exc:
            raise ConnectionClosed(str(exc)) from None

    def wake(self) -> None:
        """Any thread: make the loop run a turn (e.g. a source has items ready)."""
        self._wakeup.wake()

    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: let the engine finish, flush queued bytes, then close."""
        self._stopping = True
        self._wakeup.wake()
        if not self.is_owner:
            self.join(timeout)

    def abort(self, timeout: float | None = 5.0) -> None:
        """Abrupt: drop unsent bytes and reset the connection."""
        self._abort = True
        self._wakeup.wake()
        if not self.is_owner:
            self.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        return self._exited.wait(timeout)

    # -- the loop ----------------------------------------------------------
    def _run_calls(self) -> None:
        self._wakeup.clear()
        for fn in self._inbox.drain():
            try:
                fn()
            except Exception:
                # An application call that misuses the core fails alone.
                log.exception("call on the connection thread failed")

    def _run(self) -> None:
        transport, engine = self.transport, self.engine
        sel = selectors.DefaultSelector()
        out = bytearray()
        error: BaseException = ConnectionClosed("connection closed")
        monotonic = time.monotonic
        fd = transport.fileno()
        interest = 0
        lost: ConnectionClosed | None = None

        def want(events: int) -> None:
            nonlocal interest
            if events == interest:
                return
            if not events:
                sel.unregister(fd)
            elif not interest:
                sel.register(fd, events, "t")
            else:
                sel.modify(fd, events, "t")
            interest = events

        try:
            sel.register(self._wakeup.fileno(), selectors.EVENT_READ, "w")
            want(selectors.EVENT_READ)
            eof = False
            more = False
            close_started = False
            while True:
                if self._abort:
                    error = lost or ConnectionClosed("connection aborted locally")
                    break
                if self._stopping and not close_started:
                    close_started = True
                    engine.begin_close()
                    out += engine.data_to_send()
                if (close_started or eof) and not out:
                    if eof:
                        error = ConnectionClosed("connection closed by peer")
                    else:
                        error = ConnectionClosed("connection closed locally")
                    break
                want((0 if eof else selectors.EVENT_READ) | (selectors.EVENT_WRITE if out else 0))
                deadline = engine.next_deadline()
                if more and len(out) < HIGH_WATER:
                    wait: float | None = 0.0
                elif deadline is None:
                    wait = MAX_IDLE_WAIT
                else:
                    wait = min(MAX_IDLE_WAIT, max(0.0, deadline - monotonic()))
                for key, mask in sel.select(wait):
                    if key.data == "w":
                        self._run_calls()
                    elif mask & selectors.EVENT_READ:
                        try:
                            data = transport.recv(RECV_SIZE)
                        except (BlockingIOError, InterruptedError):
                            continue
                        except OSError as exc:
                            lost = ConnectionClosed(f"connection lost: {exc}")
                            self._abort = True
                            break
                        engine.receive_data(data, monotonic())
                        if not data:
                            eof = True
                if self._abort:
                    continue
                if len(self._inbox):
                    self._run_calls()
                if deadline is not None and monotonic() >= deadline:
                    engine.handle_timeout(monotonic())
                more = engine.pump() if len(out) < HIGH_WATER else True
                data_out = engine.data_to_send()
                if data_out:
                    out += data_out
                if out:
                    try:
                        sent = transport.send(out)
                    except OSError as exc:
                        lost = ConnectionClosed(f"connection lost: {exc}")
                        self._abort = True
                        continue
                    del out[:sent]
                if engine.wants_close() and not out:
                    error = engine.close_reason() or error
                    break
        except Exception as exc:
            log.exception("connection thread failed")
            error = ConnectionClosed(f"connection failed: {exc!r}")
            error.__cause__ = exc
            self._abort = True
        finally:
            self.error = error
            self._finish(sel, error)

    def _finish(self, sel: selectors.BaseSelector, error: BaseException) -> None:
        sel.close()
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
        self._wakeup.close()
        self._exited.set()
        if self._on_exit is not None:
            self._on_exit(self)


class ServerThread:
    """Accepts connections on a listener; each gets its own :class:`ConnectionThread`."""

    def __init__(
        self,
        listener: Listener,
        make_connection: Callable[[Transport], ConnectionThread],
        *,
        name: str = "sansrs-accept",
    ) -> None:
        self.listener = listener
        self._make_connection = make_connection
        self._wakeup = Wakeup()
        self._closing = False
        self._connections: set[ConnectionThread] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._exited = threading.Event()

    @property
    def endpoint(self) -> object:
        return self.listener.endpoint

    def start(self) -> None:
        self._thread.start()

    @property
    def connections(self) -> list[ConnectionThread]:
        with self._lock:
            return list(self._connections)

    def _forget(self, conn: ConnectionThread) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            sel.register(self.listener.fileno(), selectors.EVENT_READ, "l")
            sel.register(self._wakeup.fileno(), selectors.EVENT_READ, "w")
            while not self._closing:
                for key, _ in sel.select(MAX_IDLE_WAIT):
                    if key.data == "w":
                        self._wakeup.clear()
                        continue
                    while not self._closing:
                        transport = self.listener.accept()
                        if transport is None:
                            break
                        try:
                            conn = self._make_connection(transport)
                        except Exception:
                            log.exception("could not set up an accepted connection")
                            transport.abort()
                            continue
                        with self._lock:
                            self._connections.add(conn)
                        conn.start()
        except OSError:
            if not self._closing:
                log.exception("accept loop failed")
        finally:
            sel.close()
            self._exited.set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the accept loop has ended (after :meth:`close`)."""
        return self._exited.wait(timeout)

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        """Stop accepting, then close every connection (gracefully unless ``abort``)."""
        self._closing = True
        self._wakeup.wake()
        self._exited.wait(timeout)
        self.listener.close()
        deadline = time.monotonic() + timeout
        for conn in self.connections:
            if abort:
                conn.abort(timeout=0)
            else:
                conn.close(timeout=0)
        for conn in self.connections:
            conn.join(max(0.0, deadline - time.monotonic()))
        self._wakeup.close()
