"""The asyncio driver: connections on a running asyncio event loop.

:class:`AsyncioReactor` is a :class:`~.reactor.Reactor` built on the event
loop's own primitives (``add_reader`` / ``add_writer``, ``call_at``,
``call_soon_threadsafe``), so every engine and every transport (TCP, TLS,
Unix, WebSocket) runs under asyncio through the same
:class:`~.connection.LoopConnection` turn as under the other drivers: the
same back-pressure and the same handshake, idle and close timeouts. Engines
run on the event loop's thread; application coroutines on that thread call
them directly and wake the connection.

The rest is what every protocol's asyncio API shares, importable from here:

- :class:`AsyncStream`: an inbound stream as an async iterator with a
  prefetch window (the engine's sink on one side, ``async for`` on the other);
  :class:`FutureSink`: a single answer into a future (both in :mod:`.aio_streams`).
- :func:`asyncify`: what an ``async def`` handler or source returns
  (a coroutine, an async iterable) as a Reactive Streams Publisher the
  engines pull within credit (:mod:`.aio_publishers`).
- :class:`AsyncPeer` / :class:`AsyncServer`: a connection and a listening
  server as async code sees them.

Requires an event loop that supports ``add_reader`` (the default selector
event loops, uvloop); Windows' proactor loop does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Generic, Self, TypeVar

from ..transport import Transport
from .aio_publishers import AsyncIterablePublisher, AwaitablePublisher, asyncify
from .aio_streams import AsyncStream, AsyncStreamBatches, FutureSink
from .config import LoopConfig
from .connection import LoopConnection, close_all
from .engine import Call, Engine
from .errors import ConnectionClosed, LoopClosed
from .listener import LoopServer
from .reactor import READ, WRITE, Driven, Listening

__all__ = [
    "AsyncIterablePublisher",
    "AsyncPeer",
    "AsyncServer",
    "AsyncStream",
    "AsyncStreamBatches",
    "AsyncioReactor",
    "AwaitablePublisher",
    "FutureSink",
    "asyncify",
]

log = logging.getLogger("sansrs.adapters")


class AsyncioReactor:
    """A :class:`~.reactor.Reactor` on one asyncio event loop (see the module
    notes). :meth:`current` gives the one of the running loop for a config."""

    _reactors: weakref.WeakKeyDictionary[
        asyncio.AbstractEventLoop, dict[LoopConfig, AsyncioReactor]
    ] = weakref.WeakKeyDictionary()

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        config: LoopConfig | None = None,
        *,
        name: str = "sansrs-asyncio",
    ) -> None:
        self.config = config or LoopConfig()
        self.name = name
        self._loop = loop
        self._ident: int | None = None
        self._pending: list[Driven] = []
        self._flush_scheduled = False
        self._woken: deque[Driven] = deque()
        self._wake_scheduled = False
        self._readers: dict[int, Driven] = {}
        self._writers: dict[int, Driven] = {}
        self._listeners: set[int] = set()
        self._timers: dict[Driven, asyncio.TimerHandle] = {}
        self._connections: set[Driven] = set()
        self._servers: set[Listening] = set()
        self._stopped = False
        #: Futures waiting for a connection's state (:meth:`wait_until`),
        #: checked after each of its turns.
        self._waits: dict[Driven, list[tuple[Callable[[], bool], asyncio.Future[None]]]] = {}

    @classmethod
    def current(cls, config: LoopConfig | None = None) -> AsyncioReactor:
        """The reactor of the running event loop for ``config`` (made on first use)."""
        loop = asyncio.get_running_loop()
        config = config or LoopConfig()
        per_loop = cls._reactors.setdefault(loop, {})
        reactor = per_loop.get(config)
        if reactor is None or reactor._stopped:
            reactor = per_loop[config] = cls(loop, config)
            reactor._ident = threading.get_ident()
        return reactor

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self._ident

    @property
    def started(self) -> bool:
        return True  # the event loop is running on its own thread

    @property
    def connections(self) -> list[LoopConnection]:
        return [c for c in self._connections if isinstance(c, LoopConnection)]

    def add_connection(
        self,
        transport: Transport,
        engine: Engine,
        *,
        on_exit: Callable[[LoopConnection], None] | None = None,
    ) -> LoopConnection:
        """A connection driven by this reactor; it starts on ``start()``."""
        return LoopConnection(
            self, transport, engine, inbox_capacity=self.config.inbox_capacity, on_exit=on_exit
        )

    # -- any thread -----------------------------------------------------------
    def call_soon(self, fn: Call) -> None:
        if self._stopped or self._loop.is_closed():
            raise LoopClosed(f"{self.name}: the event loop is closed")
        if self.in_loop_thread:
            self._loop.call_soon(fn)
            return
        try:
            self._loop.call_soon_threadsafe(fn)
        except RuntimeError as exc:  # closed meanwhile
            raise LoopClosed(f"{self.name}: {exc}") from None

    def wake(self, conn: Driven) -> None:
        self._woken.append(conn)
        if self._wake_scheduled:
            return
        self._wake_scheduled = True
        if self.in_loop_thread:
            self._loop.call_soon(self._drain_woken)
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to wake
                self._loop.call_soon_threadsafe(self._drain_woken)

    def _drain_woken(self) -> None:
        # Cleared before draining: a wake that lands later schedules anew.
        self._wake_scheduled = False
        woken = self._woken
        while woken:
            conn = woken.popleft()
            conn.woken = False
            if not conn.scheduled:
                self.service_soon(conn)

    # -- owner (Reactor) ------------------------------------------------------
    def watch(self, fd: int, events: int, conn: Driven) -> None:
        loop = self._loop
        if events & READ:
            if fd not in self._readers:
                loop.add_reader(fd, self._readable, conn)
                self._readers[fd] = conn
        elif self._readers.pop(fd, None) is not None:
            loop.remove_reader(fd)
        if events & WRITE:
            if fd not in self._writers:
                loop.add_writer(fd, self._writable, conn)
                self._writers[fd] = conn
        elif self._writers.pop(fd, None) is not None:
            loop.remove_writer(fd)

    def watch_listener(self, fd: int, server: Listening | None) -> None:
        if server is None:
            if fd in self._listeners:
                self._listeners.discard(fd)
                self._loop.remove_reader(fd)
        else:
            self._listeners.add(fd)
            self._loop.add_reader(fd, server.on_acceptable)

    def _readable(self, conn: Driven) -> None:
        conn.on_io(READ, time.monotonic())
        if not conn.scheduled and conn.needs_turn():
            self.service_soon(conn)

    def _writable(self, conn: Driven) -> None:
        if not conn.scheduled:
            self.service_soon(conn)

    def service_soon(self, conn: Driven) -> None:
        conn.scheduled = True
        self._pending.append(conn)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        now = time.monotonic()
        todo, self._pending = self._pending, []
        for conn in todo:
            conn.scheduled = False
            conn.service(now)
        if self._waits:
            for conn in todo:
                if conn in self._waits:
                    self._settle(conn, ended=False)

    def wait_until(self, conn: Driven, ready: Callable[[], bool]) -> asyncio.Future[None]:
        """A future done after a turn of ``conn`` once ``ready()`` holds, or
        when ``conn`` ends (e.g. a writer waiting for its output to drain
        below a mark: the turns that write it are the ones that can make
        it true)."""
        future: asyncio.Future[None] = self._loop.create_future()
        self._waits.setdefault(conn, []).append((ready, future))
        return future

    def _settle(self, conn: Driven, ended: bool) -> None:
        left = [(ready, future) for ready, future in self._waits.pop(conn, ())
                if not future.done()]
        for ready, future in left:
            if ended or ready():
                future.set_result(None)
        left = [(ready, future) for ready, future in left if not future.done()]
        if left:
            self._waits[conn] = left

    def set_timer(self, conn: Driven, when: float) -> None:
        old = self._timers.pop(conn, None)
        if old is not None:
            old.cancel()
        # call_later, not call_at: the event loop's clock need not be ours.
        delay = max(0.0, when - time.monotonic())
        self._timers[conn] = self._loop.call_later(delay, self._on_timer, conn, when)

    def _on_timer(self, conn: Driven, when: float) -> None:
        if self._timers.get(conn) is not None and conn.timer == when:
            del self._timers[conn]
            conn.timer = None
            if not conn.scheduled:
                self.service_soon(conn)

    def add(self, conn: Driven) -> None:
        self._connections.add(conn)

    def discard(self, conn: Driven) -> None:
        self._connections.discard(conn)
        if conn in self._waits:
            self._settle(conn, ended=True)
        timer = self._timers.pop(conn, None)
        if timer is not None:
            timer.cancel()

    def add_server(self, server: Listening) -> None:
        self._servers.add(server)

    def discard_server(self, server: Listening) -> None:
        self._servers.discard(server)

    def stop(self, timeout: float | None = 5.0, *, abort: bool = False) -> bool:
        """Stop every server and close (or ``abort``) every connection; on the
        event loop's thread this only starts it (await the connections'
        ``wait_closed()``). Later connections get a fresh reactor."""
        self._stopped = True
        for server in list(self._servers):
            server.kill()
        close_all(self.connections, abort=abort)
        return not self._connections


# -- peers and servers as async code sees them --------------------------------


class AsyncPeer:
    """One connection under asyncio, whatever the protocol: use it from the
    event loop's thread. ``async with`` closes it."""

    def __init__(self, driver: LoopConnection) -> None:
        self._driver = driver
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        driver.add_exit_callback(self._exited)

    def _exited(self, _: LoopConnection) -> None:
        if not self._closed.done():
            self._closed.set_result(None)

    @property
    def driver(self) -> LoopConnection:
        return self._driver

    @property
    def closed(self) -> bool:
        return not self._driver.alive

    @property
    def peer_address(self) -> str:
        return self._driver.transport.peer

    @property
    def transport(self) -> Transport:
        return self._driver.transport

    def _check_open(self) -> None:
        if not self._driver.alive:
            raise ConnectionClosed(str(self._driver.error or "connection closed"))

    def _submit(self, fn: Call) -> None:
        """Run ``fn`` on the connection's thread: inline here, then a turn."""
        if self._driver.is_owner:
            fn()
            self._driver.wake()
        else:
            self._driver.call_soon(fn)

    def _submit_and_write(self, fn: Call) -> None:
        """:meth:`_submit`, and on the loop's thread the engine's output is
        written at once (before the turn, which follows as usual)."""
        driver = self._driver
        if driver.is_owner:
            fn()
            write_now = getattr(driver, "write_now", None)  # a session's driver has none
            if write_now is not None:
                write_now()
                if not driver.needs_turn():
                    return
            driver.wake()
        else:
            driver.call_soon(fn)

    def _poke(self) -> None:
        """Something was handed to the engine: run a turn for it soon."""
        self._driver.wake()

    async def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: the protocol's goodbye, flush, close; waits until closed,
        ``timeout`` seconds at most (``None``: however long it takes): one the
        graceful close could not end by then (a peer that reads nothing of
        the goodbye) is reset, as the synchronous ``close`` does. Outstanding
        requests fail with ``ConnectionClosed``."""
        self._driver.close(timeout=0)
        if timeout is None:
            await self.wait_closed()
            return
        try:
            await asyncio.wait_for(self.wait_closed(), timeout)
        except TimeoutError:
            self._driver.abort(timeout=0)  # ends on this event loop's next turn of it
            await self.wait_closed()

    def abort(self) -> None:
        """Reset the connection at once."""
        self._driver.abort(timeout=0)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


P = TypeVar("P", bound=AsyncPeer)


class AsyncServer(Generic[P]):
    """A listening server on the event loop, whatever the protocol: ``url``,
    ``peers`` (live connections), ``close()``; ``async with`` closes it."""

    def __init__(self, accept: LoopServer, peers: list[P]) -> None:
        self._accept = accept
        self._peers = peers
        self.endpoint = accept.listener.endpoint

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def peers(self) -> list[P]:
        return [p for p in self._peers if not p.closed]

    async def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        """Stop accepting, close every connection (``abort``: reset them);
        those still open after ``timeout`` are reset."""
        self._accept.stop_accepting()
        peers = self.peers
        for peer in peers:
            if abort:
                peer.abort()
            else:
                peer.driver.close(timeout=0)
        if peers:
            waiting = asyncio.gather(*(p.wait_closed() for p in peers))
            try:
                await asyncio.wait_for(waiting, timeout)
            except TimeoutError:
                for peer in self.peers:
                    peer.abort()
                await asyncio.gather(*(p.wait_closed() for p in peers))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
