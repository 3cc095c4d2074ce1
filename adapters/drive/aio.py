"""The asyncio driver: connections on a running asyncio event loop.

:class:`AsyncioReactor` is a :class:`~.reactor.Reactor` built on the event
loop's own primitives (``add_reader`` / ``add_writer``, ``call_at``,
``call_soon_threadsafe``), so every engine and every transport (TCP, TLS,
Unix, WebSocket) runs under asyncio through the same
:class:`~.connection.LoopConnection` turn as under the other drivers: the
same back-pressure and the same handshake, idle and close timeouts. Engines
run on the event loop's thread; application coroutines on that thread call
them directly and wake the connection.

The rest of the module is what every protocol's asyncio API shares:

- :class:`AsyncStream`: an inbound stream as an async iterator with a
  prefetch window (the engine's sink on one side, ``async for`` on the other);
  :class:`FutureSink`: a single answer into a future.
- :func:`asyncify`: what an ``async def`` handler or source returns
  (a coroutine, an async iterable) as a Reactive Streams Publisher the
  engines pull within credit.
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
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Generic, Self, TypeVar

from sansrs.streams import RULE_3_9, IllegalArgumentError, add_demand

from ..transport import Transport
from .config import LoopConfig
from .connection import LoopConnection, close_all
from .engine import Call, Engine
from .errors import ConnectionClosed, LoopClosed, seconds
from .listener import LoopServer
from .queues import refill_batch
from .reactor import READ, WRITE, Driven, Listening

__all__ = [
    "AsyncPeer",
    "AsyncServer",
    "AsyncStream",
    "AsyncioReactor",
    "FutureSink",
    "asyncify",
]

T = TypeVar("T")
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


# -- sinks: the engine delivers inbound items to these (on the loop thread) ----


class FutureSink(Generic[T]):
    """At most one item (a request-response answer) into ``future``:
    completion without an item gives ``None``, an error raises it."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[T | None]) -> None:
        self.future = future

    @property
    def done(self) -> bool:
        return self.future.done()

    def put(self, item: T) -> None:
        if not self.future.done():
            self.future.set_result(item)

    def put_many(self, items: list[T]) -> None:
        self.put(items[0])

    def finish(self, error: BaseException | None = None) -> None:
        if not self.future.done():
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)

    def close(self, error: BaseException | None = None) -> None:
        if not self.future.done():
            self.future.cancel()


class AsyncStream(Generic[T]):
    """An inbound stream as an async iterator (``async for``) that keeps a
    prefetch window: each time ``batch`` units (default half the window)
    have been consumed, that many more are requested with ``request_more(n)``.
    ``units(item)`` counts what one item is worth (1 by default; a packed
    batch of fixed-size elements counts its elements). ``aclose()`` (or
    leaving ``async with``) cancels with ``cancel()`` if the stream is still
    running. ``timeout`` bounds each wait for an item (``TimeoutError``).

    The engine feeds it as a sink (``put``, ``put_many``, ``finish``,
    ``close``) on the event loop's thread; ``starting`` is awaited before the
    first item (e.g. a channel's first outbound item)."""

    # The keywords of its synchronous twin, drive.streams.StreamIterator, by choice.
    def __init__(
        self,
        prefetch: int,
        request_more: Callable[[int], None],
        cancel: Callable[[], None],
        *,
        timeout: float | None = None,
        batch: int | None = None,
        units: Callable[[T], int] | None = None,
        starting: Awaitable[None] | None = None,
        explain: Callable[[], str] | None = None,
    ) -> None:
        self._request_more = request_more
        self._cancel = cancel
        self._timeout = timeout
        self._explain = explain
        self._batch = refill_batch(prefetch, batch)
        self._units = units
        self._consumed = 0
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._error: BaseException | None = None
        self._cancelled = False
        self._starting = starting

    # -- sink side (engine, loop thread) --------------------------------------
    @property
    def done(self) -> bool:
        return self._done

    def put(self, item: T) -> None:
        self._items.append(item)
        self._notify()

    def put_many(self, items: list[T]) -> None:
        self._items.extend(items)
        self._notify()

    def finish(self, error: BaseException | None = None) -> None:
        if not self._done:
            self._done = True
            self._error = error
        self._notify()

    def close(self, error: BaseException | None = None) -> None:
        self._done = True
        self._items.clear()
        self._notify()

    def _notify(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- consumer side ----------------------------------------------------------
    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        if self._starting is not None:
            starting, self._starting = self._starting, None
            await starting
        items = self._items
        while not items:
            if self._done:
                error, self._error = self._error, None
                if error is not None and not self._cancelled:
                    self._cancelled = True  # raise once, then end
                    raise error
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                if self._timeout is None:
                    await self._waiter
                else:
                    try:
                        await asyncio.wait_for(self._waiter, self._timeout)
                    except TimeoutError:
                        raise TimeoutError(self._no_item(self._timeout)) from None
            finally:
                self._waiter = None
        item = items.popleft()
        self._consumed += 1 if self._units is None else self._units(item)
        if self._consumed >= self._batch and not self._done:
            n, self._consumed = self._consumed, 0
            self._request_more(n)
        return item

    def _no_item(self, timeout: float) -> str:
        """A timeout's message, as ``CreditQueue`` says it, with ``explain``'s reason."""
        why = self._explain() if self._explain is not None else ""
        return f"no item within {seconds(timeout)}" + (f": {why}" if why else "")

    async def next_batch(self) -> list[T]:
        """Every item that has arrived and not been taken (at least one;
        waits as ``__anext__`` does), in order; they count as consumed, so
        the window is replenished as if they were taken one by one. Raises
        what ``__anext__`` raises (``StopAsyncIteration`` at the end)."""
        first = await self.__anext__()  # waits, ends and fails as one item does
        items = self._items
        if not items:
            return [first]
        batch = [first, *items]
        items.clear()
        units = self._units
        self._consumed += len(batch) - 1 if units is None else sum(map(units, batch[1:]))
        if self._consumed >= self._batch and not self._done:
            n, self._consumed = self._consumed, 0
            self._request_more(n)
        return batch

    def batches(self) -> AsyncStreamBatches[T]:
        """This stream as an async iterator of lists (:meth:`next_batch`)."""
        return AsyncStreamBatches(self)

    async def aclose(self) -> None:
        """Cancel the stream if it is still running; idempotent."""
        if self._starting is not None:
            starting, self._starting = self._starting, None
            with contextlib.suppress(Exception):
                await starting
        if not self._done:
            self._done = True
            self._cancelled = True
            self._items.clear()
            self._cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncStreamBatches(Generic[T]):
    """An :class:`AsyncStream` as an async iterator of lists: each list is
    what arrived since the previous one (never empty), within the same
    window; the items, their order and the errors are the item iterator's.
    ``aclose()`` (or leaving ``async with``) cancels a stream still running."""

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncStream[T]) -> None:
        self._stream = stream

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> list[T]:
        return await self._stream.next_batch()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# -- async sources as Reactive Streams Publishers (engines pull Publishers) ----


class AwaitablePublisher:
    """One awaitable (an ``async def`` handler's coroutine) as a Publisher of
    at most one item: ``None`` completes empty. Awaited on the event loop at
    the first ``request(n)``; ``cancel()`` cancels it."""

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._awaitable = awaitable

    def subscribe(self, subscriber: Any) -> None:
        subscriber.on_subscribe(_AwaitableSubscription(self._awaitable, subscriber))


class _AwaitableSubscription:
    def __init__(self, awaitable: Awaitable[Any], subscriber: Any) -> None:
        self._awaitable = awaitable
        self._subscriber = subscriber
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Future[Any] | None = None
        self._done = False

    def request(self, n: int) -> None:
        if n <= 0:
            self._end(IllegalArgumentError(f"{RULE_3_9} (got {n})"))
            return
        if self._task is None and not self._done:
            self._task = asyncio.ensure_future(self._awaitable, loop=self._loop)
            self._task.add_done_callback(self._finished)

    def _finished(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or self._done:
            return
        exc = fut.exception()
        if exc is not None:
            self._end(exc)
            return
        self._done = True
        result = fut.result()
        if result is not None:
            self._subscriber.on_next(result)
        self._subscriber.on_complete()

    def _end(self, error: BaseException) -> None:
        if not self._done:
            self._done = True
            self._subscriber.on_error(error)

    def cancel(self) -> None:
        self._done = True
        if self._task is not None:
            self._task.cancel()
        elif isinstance(self._awaitable, Coroutine):
            self._awaitable.close()


class AsyncIterablePublisher:
    """An async iterable as a Publisher: the next item is awaited only while
    demand is outstanding, on the event loop; ``cancel()`` closes it."""

    def __init__(self, iterable: AsyncIterable[Any]) -> None:
        self._iterable = iterable

    def subscribe(self, subscriber: Any) -> None:
        subscriber.on_subscribe(_AsyncIterSubscription(aiter(self._iterable), subscriber))


_NOTHING: Any = object()  # no item awaited ahead


class _AsyncIterSubscription:
    """Pulls ``iterator`` on a task while demand is outstanding (loop thread),
    and one item ahead once it is used up: an iterator that has ended then
    completes at once, not at the next request (a consumer that asks for
    exactly the N items it expects gets its completion)."""

    def __init__(self, iterator: AsyncIterator[Any], subscriber: Any) -> None:
        self._iterator = iterator
        self._subscriber = subscriber
        self._loop = asyncio.get_running_loop()
        self._demand = 0
        self._ahead: Any = _NOTHING
        self._task: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._cancelled = False

    async def _run(self) -> None:
        subscriber = self._subscriber
        try:
            while not self._cancelled:
                if self._ahead is _NOTHING:
                    try:
                        self._ahead = await anext(self._iterator)
                    except StopAsyncIteration:
                        self._cancelled = True
                        subscriber.on_complete()
                        return
                if not self._demand or self._cancelled:
                    return  # the item waits for the next request
                item, self._ahead = self._ahead, _NOTHING
                self._demand -= 1
                subscriber.on_next(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._cancelled = True
            subscriber.on_error(exc)
        finally:
            self._task = None

    def request(self, n: int) -> None:
        if self._cancelled:
            return
        if n <= 0:
            self._cancelled = True
            self._subscriber.on_error(IllegalArgumentError(f"{RULE_3_9} (got {n})"))
            return
        self._demand = add_demand(self._demand, n)
        if self._task is None:
            self._task = self._loop.create_task(self._run())

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()
        closer = getattr(self._iterator, "aclose", None)
        if closer is not None:
            # Runs the generator's finally blocks; kept so it is not collected.
            self._closer = self._loop.create_task(closer())


def asyncify(result: object) -> object:
    """A handler's or source's result, with async forms made Publishers: a
    coroutine or future (at most one item), an async iterable (a stream).
    Anything else is returned as it is."""
    # Not asyncio.iscoroutine: it also says yes to plain generators.
    if isinstance(result, Coroutine | asyncio.Future):
        return AwaitablePublisher(result)
    if isinstance(result, AsyncIterable):
        return AsyncIterablePublisher(result)
    return result


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
