"""The listener every driver runs: :class:`LoopServer` accepts on a
:class:`~..transport.Listener` from a :class:`~.reactor.Reactor` and starts
a driven connection (:class:`~.connection.LoopConnection` or a
:class:`~.threads.ConnectionThread`) per accepted transport.

* A connection is forgotten as soon as it ends (its exit callback): nothing
  it held (its engine, the application's handler) outlives it here.
* ``max_connections``: beyond it the oldest connection still in its
  handshake is shed to make room (``shed_batch`` > 0); if every connection
  has finished its handshake, an accepted connection is reset at once
  (counted in :attr:`LoopServer.refused`), the others go on.
* Out of descriptors or memory (``EMFILE``, ``ENFILE``, ``ENOBUFS``,
  ``ENOMEM``) while a connection waits (the listener polled readable): up
  to ``shed_batch`` of the oldest connections still in their handshake are
  aborted (counted in :attr:`LoopServer.shed`, logged),
  and the listener is not polled until they are gone or for
  ``accept_pause`` seconds, instead of spinning on a listener that stays
  readable. Why: connections that never finish their opening would
  otherwise hold every descriptor until ``handshake_timeout``, and a good
  client could not get in meanwhile (as front-line servers do, e.g.
  nginx reusing connections when out of ``worker_connections``).
* Failures are logged through :class:`Throttled`: a flood of refused or
  failed connections is not a flood of log.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import threading
import time
from collections.abc import Callable

from ..transport import Listener, Transport
from .connection import close_all
from .engine import Startable
from .errors import LoopClosed
from .reactor import Reactor

__all__ = ["LoopServer", "Throttled"]

log = logging.getLogger("sansrs.adapters")

#: accept() failures that mean "no resources now", not "this connection is bad":
#: the listener stays readable, so accepting again at once would spin.
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Throttled:
    """A warning logged at most once per ``interval`` seconds; the next one
    says how many were not logged meanwhile (a flood of failures must not
    become a flood of log)."""

    __slots__ = ("_interval", "_logger", "_next", "_suppressed")

    def __init__(self, logger: logging.Logger, interval: float) -> None:
        self._logger = logger
        self._interval = interval
        self._next = 0.0
        self._suppressed = 0

    def warning(self, now: float, message: str, *args: object, exc_info: bool = False) -> bool:
        """Log ``message % args`` unless one was logged less than ``interval``
        ago; True if logged."""
        if now < self._next:
            self._suppressed += 1
            return False
        self._next = now + self._interval
        if self._suppressed:
            message += " (%d more like it not logged)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._logger.warning(message, *args, exc_info=exc_info)
        return True


class _AcceptPause:
    """The reactor timer that resumes accepting after ``accept_pause``
    (a :class:`~.reactor.Driven` with only a timer)."""

    __slots__ = ("__weakref__", "_server", "scheduled", "timer", "woken")

    def __init__(self, server: LoopServer) -> None:
        self._server = server
        self.scheduled = False
        self.woken = False
        self.timer: float | None = None

    def on_io(self, mask: int, now: float) -> None:
        pass

    def needs_turn(self) -> bool:
        return True

    def service(self, now: float) -> None:
        # Fired (a stale turn leaves it set), and still the server's pause
        # (shedding may have ended it and a later one begun).
        if self.timer is None and self._server._paused is self:
            self._server._resume_accepting()

    def kill(self, error: BaseException) -> None:
        pass


class LoopServer:
    """Accepts on a :class:`~..transport.Listener` from a :class:`~.reactor.Reactor`.

    ``make_connection(transport)`` builds the driver of each accepted
    connection (a :class:`LoopConnection` on any reactor, or a
    :class:`~.threads.ConnectionThread`); the server starts it and tracks it
    until it ends. ``own_loop``: the server started the reactor and stops it
    on close.
    """

    def __init__(
        self,
        loop: Reactor,
        listener: Listener,
        make_connection: Callable[[Transport], Startable],
        *,
        own_loop: bool = False,
        start_loop: Callable[[], object] | None = None,
    ) -> None:
        self.loop = loop
        self.listener = listener
        self._make_connection = make_connection
        self._own_loop = own_loop
        self._start_loop = start_loop
        #: Live connections, oldest first (a dict keeps the accept order).
        self._connections: dict[Startable, None] = {}
        #: Connections aborted to make room, not yet gone.
        self._shedding: set[Startable] = set()
        self._lock = threading.Lock()
        self._closing = False
        self._registered = False
        self._paused: _AcceptPause | None = None
        interval = loop.config.log_interval
        self._accept_warning = Throttled(log, interval)
        self._refused_warning = Throttled(log, interval)
        self._setup_warning = Throttled(log, interval)
        self._shed_warning = Throttled(log, interval)
        #: Connections refused at max_connections (inspection, for tests and stats).
        self.refused = 0
        #: Connections in their handshake aborted to make room (inspection).
        self.shed = 0
        self._exited = threading.Event()

    @property
    def endpoint(self) -> object:
        return self.listener.endpoint

    @property
    def connections(self) -> list[Startable]:
        with self._lock:
            return [c for c in self._connections if c.alive]

    def start(self) -> LoopServer:
        if self._start_loop is not None:
            self._start_loop()
        if self.loop.in_loop_thread:
            self._register()
        else:
            self.loop.call_soon(self._register)
        return self

    def _register(self) -> None:
        if self._closing:
            self._finish()
            return
        self.loop.add_server(self)
        self.loop.watch_listener(self.listener.fileno(), self)
        self._registered = True

    def on_acceptable(self) -> None:
        """The listener polled readable: a connection waits."""
        self._accept(waiting=True)

    def _accept(self, *, waiting: bool) -> None:
        """Accept up to ``accept_batch`` connections. ``waiting``: one is
        known to wait (the listener polled readable), until one is taken."""
        config = self.loop.config
        for _ in range(config.accept_batch):
            if self._closing or self._paused is not None:
                return
            try:
                transport = self.listener.accept()
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRNOS:
                    # The kernel reports EMFILE before it looks for a
                    # connection: with none known to wait (the accept that
                    # used the last descriptor), shedding would abort
                    # handshakes for nobody. The level-triggered poll calls
                    # back when one arrives, and then this sheds for it.
                    if waiting:
                        self._pause(exc)
                    return
                # One connection failed (reset before accept, a refused TLS
                # set-up): the listener goes on.
                self._accept_warning.warning(time.monotonic(), "accept failed: %s", exc)
                waiting = False  # that one is gone
                continue
            if transport is None:
                return
            waiting = False
            full = self._full(config.max_connections)
            made_room = full and self._make_room(1, "max_connections") > 0
            if full and not made_room:
                self.refused += 1
                self._refused_warning.warning(
                    time.monotonic(),
                    "%s: refusing a connection from %s: max_connections (%d) reached",
                    self.listener.endpoint,
                    transport.peer,
                    config.max_connections,
                )
                transport.abort()
                continue
            try:
                conn = self._make_connection(transport)
            except OSError as exc:
                transport.abort()
                if exc.errno in _RESOURCE_ERRNOS:  # e.g. no descriptor for its thread's loop
                    self._pause(exc)
                    return
                self._setup_warning.warning(
                    time.monotonic(), "could not set up an accepted connection", exc_info=True
                )
                continue
            except Exception:
                transport.abort()
                self._setup_warning.warning(
                    time.monotonic(), "could not set up an accepted connection", exc_info=True
                )
                continue
            with self._lock:
                self._connections[conn] = None
            conn.add_exit_callback(self._forget)  # before it starts: no race
            conn.start()
            if made_room:
                # In for one being shed: accept nothing more until it is
                # gone, so the connections never exceed the limit by more
                # than the one.
                self._hold(config.accept_pause)
                with self._lock:
                    gone = not self._shedding
                if gone:  # already (on its own thread): no exit will resume
                    with contextlib.suppress(LoopClosed):
                        self.loop.call_soon(self._resume_after_shedding)
                return

    def _forget(self, conn: Startable) -> None:
        """A connection ended (on its owning thread): drop it now, so that
        nothing it held outlives it; once every shed connection is gone,
        accept again."""
        with self._lock:
            self._connections.pop(conn, None)
            shedding = self._shedding
            if conn not in shedding:
                return
            shedding.discard(conn)
            resume = not shedding and self._paused is not None
        if resume:
            with contextlib.suppress(LoopClosed):
                self.loop.call_soon(self._resume_after_shedding)

    def _full(self, limit: int | None) -> bool:
        if limit is None:
            return False
        with self._lock:
            return len(self._connections) - len(self._shedding) >= limit

    def _make_room(self, count: int, why: str) -> int:
        """Abort up to ``count`` (capped by ``shed_batch``) of the oldest
        connections still in their transport or protocol handshake; how
        many. Logged at most once per ``log_interval``."""
        count = min(count, self.loop.config.shed_batch)
        if count <= 0:
            return 0
        with self._lock:
            victims: list[Startable] = []
            for conn in self._connections:  # oldest first
                if conn not in self._shedding and not conn.handshaken and conn.alive:
                    victims.append(conn)
                    if len(victims) == count:
                        break
            self._shedding.update(victims)
        for conn in victims:
            conn.abort(timeout=0)
        if victims:
            self.shed += len(victims)
            self._shed_warning.warning(
                time.monotonic(),
                "%s: %s: shedding %d connection(s) still in their handshake, oldest first",
                self.listener.endpoint,
                why,
                len(victims),
            )
        return len(victims)

    def _pause(self, exc: OSError) -> None:
        """Out of descriptors or memory: stop polling the listener for
        ``accept_pause`` seconds (the connections go on), then try again."""
        config = self.loop.config
        now = time.monotonic()
        self._accept_warning.warning(
            now,
            "%s: accept failed (%s); not accepting for %s s",
            self.listener.endpoint,
            exc,
            config.accept_pause,
        )
        self._hold(config.accept_pause)
        # Make room: what is shed frees its descriptors as it closes, and the
        # last of them to go resumes accepting (_forget), before the timer.
        self._make_room(config.shed_batch, f"out of resources ({exc.strerror or exc})")

    def _hold(self, seconds: float) -> None:
        """Stop polling the listener for ``seconds`` (or until the
        connections being shed are gone)."""
        if self._registered:
            with contextlib.suppress(Exception):
                self.loop.watch_listener(self.listener.fileno(), None)
        pause = self._paused = _AcceptPause(self)
        self.loop.add(pause)
        pause.timer = time.monotonic() + seconds
        self.loop.set_timer(pause, pause.timer)

    def _resume_after_shedding(self) -> None:
        with self._lock:
            if self._shedding:
                return  # shed again meanwhile: the last of those resumes
        if self._paused is not None:
            self._resume_accepting()

    def _resume_accepting(self) -> None:
        pause, self._paused = self._paused, None
        if pause is not None:
            pause.timer = None  # its timer, if still armed, no longer fires
            self.loop.discard(pause)
        if self._registered and not self._closing:
            self.loop.watch_listener(self.listener.fileno(), self)
            self._accept(waiting=False)  # what queued up meanwhile; a level-triggered poll follows

    def kill(self) -> None:
        self._finish()

    def _finish(self) -> None:
        if self._exited.is_set():
            return
        pause, self._paused = self._paused, None
        if pause is not None:
            self.loop.discard(pause)
        elif self._registered:
            with contextlib.suppress(Exception):
                self.loop.watch_listener(self.listener.fileno(), None)
        self._registered = False
        self.loop.discard_server(self)
        self.listener.close()
        self._exited.set()

    @property
    def closed(self) -> bool:
        return self._exited.is_set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the listener is closed (after :meth:`close`)."""
        return self._exited.wait(timeout)

    def stop_accepting(self) -> None:
        """Stop accepting (the connections go on); from any thread."""
        self._closing = True
        if self.loop.in_loop_thread:
            self._finish()
        else:
            try:
                self.loop.call_soon(self._finish)
            except LoopClosed:
                self._finish()

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        """Stop accepting, then close every connection (gracefully unless ``abort``)."""
        deadline = time.monotonic() + timeout
        self.stop_accepting()
        if not self.loop.in_loop_thread:
            self._exited.wait(timeout)
        conns = self.connections
        close_all(conns, abort=abort)
        if not self.loop.in_loop_thread:
            for conn in conns:
                conn.join(max(0.0, deadline - time.monotonic()))
        if self._own_loop:
            self.loop.stop(max(0.0, deadline - time.monotonic()), abort=True)
