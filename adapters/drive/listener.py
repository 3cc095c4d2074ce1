"""The listener every driver runs: :class:`LoopServer` accepts on a
:class:`~..transport.Listener` from a :class:`~.reactor.Reactor` and starts
a driven connection (:class:`~.connection.LoopConnection` or a
:class:`~.threads.ConnectionThread`) per accepted transport.

* ``max_connections``: beyond it an accepted connection is reset at once
  (counted in :attr:`LoopServer.refused`), the others go on.
* Out of descriptors or memory (``EMFILE``, ``ENFILE``, ``ENOBUFS``,
  ``ENOMEM``): the listener is not polled for ``accept_pause`` seconds,
  instead of spinning on a listener that stays readable.
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

    __slots__ = ("_server", "scheduled", "timer", "woken")

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
        if self.timer is None:  # fired (a stale turn leaves it set)
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
        self._connections: set[Startable] = set()
        self._prune_at = 64
        self._lock = threading.Lock()
        self._closing = False
        self._registered = False
        self._paused: _AcceptPause | None = None
        interval = loop.config.log_interval
        self._accept_warning = Throttled(log, interval)
        self._refused_warning = Throttled(log, interval)
        self._setup_warning = Throttled(log, interval)
        #: Connections refused at max_connections (inspection, for tests and stats).
        self.refused = 0
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
        config = self.loop.config
        for _ in range(config.accept_batch):
            if self._closing or self._paused is not None:
                return
            try:
                transport = self.listener.accept()
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRNOS:
                    self._pause(exc)
                    return
                # One connection failed (reset before accept, a refused TLS
                # set-up): the listener goes on.
                self._accept_warning.warning(time.monotonic(), "accept failed: %s", exc)
                continue
            if transport is None:
                return
            if self._full(config.max_connections):
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
                self._connections.add(conn)
                if len(self._connections) >= self._prune_at:
                    self._prune()
            conn.start()

    def _prune(self) -> None:
        """Forget ended connections (under the lock); amortized O(1) per accept."""
        self._connections = {c for c in self._connections if c.alive}
        self._prune_at = max(64, 2 * len(self._connections))

    def _full(self, limit: int | None) -> bool:
        if limit is None:
            return False
        with self._lock:
            if len(self._connections) < limit:
                return False
            self._prune()  # only at the limit: count the live ones
            return len(self._connections) >= limit

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
        if self._registered:
            with contextlib.suppress(Exception):
                self.loop.watch_listener(self.listener.fileno(), None)
        pause = self._paused = _AcceptPause(self)
        self.loop.add(pause)
        pause.timer = now + config.accept_pause
        self.loop.set_timer(pause, pause.timer)

    def _resume_accepting(self) -> None:
        pause, self._paused = self._paused, None
        if pause is not None:
            self.loop.discard(pause)
        if self._registered and not self._closing:
            self.loop.watch_listener(self.listener.fileno(), self)
            self.on_acceptable()  # what queued up meanwhile; a level-triggered poll follows

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
