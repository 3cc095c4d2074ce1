"""Thread-per-connection driver: one owning thread runs a sans-IO core.

:class:`ConnectionThread` is a :class:`~.selector.Loop` that holds exactly
one connection and runs on that connection's own thread; the loop ends when
the connection does. The read -> ``receive_data`` -> ``pump`` ->
``data_to_send`` -> write turn, timers, back-pressure and close handling are
those of :mod:`.selector` (one copy for both drivers). Application threads
never touch the engine: :meth:`ConnectionThread.call_soon` hands a call to
the owning thread.

:class:`ServerThread` accepts on its own thread and gives every connection a
:class:`ConnectionThread`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..transport import Listener, Transport
from .config import LoopConfig
from .connection import LoopConnection
from .engine import Call, Engine, Startable
from .listener import LoopServer
from .selector import Loop

__all__ = ["ConnectionThread", "ServerThread"]

_get_ident = threading.get_ident  # (a global less per is_owner)


class ConnectionThread:
    """The owning thread of one connection (a :class:`~.engine.Driver`)."""

    def __init__(
        self,
        transport: Transport,
        engine: Engine,
        *,
        name: str = "sansrs-conn",
        inbox_capacity: int = 4096,
        on_exit: Callable[[ConnectionThread], None] | None = None,
        config: LoopConfig | None = None,
    ) -> None:
        self.transport = transport
        self.engine = engine
        self._on_exit = on_exit
        self._loop = Loop(config, name=name)
        self._conn: LoopConnection = self._loop.add_connection(
            transport, engine, on_exit=self._exited, inbox_capacity=inbox_capacity
        )
        # The connection's own bound method: one call less per direct call.
        self.call_direct = self._conn.call_direct  # type: ignore[method-assign]
        self.write_now = self._conn.write_now  # type: ignore[method-assign]
        self.write_bytes = self._conn.write_bytes
        #: The connection a direct call's express path takes (see LoopConnection.direct).
        self.direct = self._conn.direct

    def _exited(self, conn: LoopConnection) -> None:
        self._loop.stop_soon()  # one connection, one loop: the thread ends with it
        if self._on_exit is not None:
            self._on_exit(self)

    def start(self) -> None:
        self._conn.start()
        self._loop.start()

    @property
    def error(self) -> BaseException | None:
        return self._conn.error

    @property
    def config(self) -> LoopConfig:
        return self._loop.config

    @property
    def is_owner(self) -> bool:
        # Loop.in_loop_thread inlined: asked on every call an application makes.
        # (One tuple test: 4 bytecodes less than two comparisons, per fire_and_forget.)
        return _get_ident() in (self._loop._ident, self._conn._direct_ident)

    @property
    def alive(self) -> bool:
        return self._conn.alive

    @property
    def handshaken(self) -> bool:
        return self._conn.handshaken

    def add_exit_callback(self, fn: Callable[[ConnectionThread], None]) -> None:
        """Before :meth:`start` or on the owning thread: also call ``fn(self)``
        when the connection ends (at once if it has)."""
        self._conn.add_exit_callback(lambda _: fn(self))

    @property
    def buffered(self) -> int:
        """Bytes waiting to be written (:attr:`.LoopConnection.buffered`)."""
        return self._conn.buffered

    def wait_until(self, ready: Callable[[], bool], timeout: float | None = None) -> None:
        """Any thread but the owner: once ``ready()`` holds after a turn
        (:meth:`.LoopConnection.wait_until`)."""
        self._conn.wait_until(ready, timeout)

    def call_soon(self, fn: Call, timeout: float | None = None) -> None:
        """Run ``fn()`` on the owning thread. Raises :class:`ConnectionClosed` once gone."""
        self._conn.call_soon(fn, timeout)

    def wake(self) -> None:
        """Any thread: make the loop run a turn (e.g. a source has items ready)."""
        self._conn.wake()

    def call_direct(self, call: Call, until: Callable[[], bool], timeout: float | None) -> bool:
        """Run ``call`` and wait for its answer on this thread while the
        connection's thread is idle (:meth:`.LoopConnection.call_direct`)."""
        return self._conn.call_direct(call, until, timeout)

    def write_now(self) -> None:
        """Owning thread: write queued output now (:meth:`.LoopConnection.write_now`)."""
        self._conn.write_now()

    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: let the engine finish, flush queued bytes, then close;
        reset after ``timeout`` (:meth:`.LoopConnection.close`)."""
        self._conn.close(timeout)

    def abort(self, timeout: float | None = 5.0) -> None:
        """Abrupt: drop unsent bytes and reset the connection (:meth:`.LoopConnection.abort`)."""
        self._conn.abort(timeout)

    def join(self, timeout: float | None = None) -> bool:
        return self._conn.join(timeout)


class ServerThread(LoopServer):
    """Accepts connections on a listener (on its own thread); each gets its
    own :class:`ConnectionThread` from ``make_connection``. ``config``:
    ``max_connections`` (a thread each), ``accept_pause``, ``log_interval``."""

    def __init__(
        self,
        listener: Listener,
        make_connection: Callable[[Transport], Startable],
        *,
        name: str = "sansrs-accept",
        config: LoopConfig | None = None,
    ) -> None:
        loop = Loop(config, name=name)
        super().__init__(loop, listener, make_connection, own_loop=True, start_loop=loop.start)
