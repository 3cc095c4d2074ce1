"""RSocket under asyncio: ``await connect(url)``, ``await serve(url, handler)``.

The same engine as the synchronous API (:class:`~.rsocket_engine.RSocketEngine`:
the core, stream bookkeeping and handler dispatch) runs inside an
:class:`asyncio.Protocol` on the event loop's thread, so there is no second
copy of the protocol logic; only the driver differs:

* bytes in: ``data_received`` -> ``engine.receive_data``; bytes out: one
  ``transport.write`` per turn of ``data_to_send``. asyncio's transport
  buffers unsent bytes; above ``high_water`` it calls ``pause_writing`` and
  the engine is not pumped, and above ``pause_reading_at`` the peer is not
  read until the buffer drains (as in :mod:`.selector`).
* timers: one ``loop.call_at`` at the engine's ``next_deadline()``.
* wake-ups from other threads (Publishers signalling from elsewhere, channel
  workers): ``loop.call_soon_threadsafe``.

Requests are coroutines or async iterators: ``await client.request_response(...)``,
``async for p in client.request_stream(...)``. Handlers may be plain (as for
the synchronous API) or async: ``async def request_response`` (awaited on the
loop), a ``request_stream`` returning an async iterable (pulled only as the
requester's credit allows), ``request_channel(request, inbound)`` receiving
``inbound`` as an async iterator. Handlers run on the event loop: never block
in them.

The module is named after the library it adapts to (``sansrs.adapters.rsocket.aio``);
inside the package, ``import asyncio`` still means the standard library
(absolute imports), so the name causes no import trouble.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
import time
from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
)
from typing import Any, cast

from ..drive.config import LoopConfig
from ..drive.errors import ConnectionClosed
from ..transport.urls import Endpoint, parse_url
from .engine import RequestHandle, RSocketEngine
from .fast import as_payload
from .options import EngineOptions
from .peer import DEFAULT_PREFETCH
from .peer import check_prefetch as _check_prefetch
from .types import Payload

__all__ = ["AsyncClient", "AsyncPeer", "AsyncServer", "AsyncStream", "connect", "serve"]

log = logging.getLogger("sansrs.adapters.rsocket.aio")

_END: Any = object()


class _Connection(asyncio.Protocol):
    """Drives one engine from asyncio callbacks (the driver of the engine)."""

    def __init__(self, engine: RSocketEngine, config: LoopConfig) -> None:
        self.engine = engine
        self.config = config
        self.loop = asyncio.get_running_loop()
        self._ident = threading.get_ident()
        self.transport: asyncio.Transport | None = None
        self.error: BaseException | None = None
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._write_paused = False
        self._read_paused = False
        self._eof = False
        self._stopping = False
        self._close_started = False
        self._closing_transport = False
        self._reason: BaseException | None = None
        self._done = False
        self._closed: asyncio.Future[None] = self.loop.create_future()
        self._exited = threading.Event()
        #: Called once the transport is up (after the TLS handshake, if any).
        self.on_made: Callable[[], None] | None = None

    # -- Driver (what the engine and sessions use) ------------------------------
    @property
    def is_owner(self) -> bool:
        return threading.get_ident() == self._ident

    @property
    def alive(self) -> bool:
        return not self._done

    def call_soon(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        if self._done:
            raise ConnectionClosed(str(self.error or "connection closed"))
        try:
            self.loop.call_soon_threadsafe(self._run_call, fn)
        except RuntimeError as exc:  # the event loop is closed
            raise ConnectionClosed(f"event loop closed: {exc}") from None

    def wake(self) -> None:
        if self.is_owner:
            self._schedule()
        else:
            with contextlib.suppress(RuntimeError):  # loop closed: nothing to wake
                self.loop.call_soon_threadsafe(self._schedule)

    def _run_call(self, fn: Callable[[], object]) -> None:
        if self._done:
            return
        try:
            fn()
        except Exception:
            log.exception("call on the event loop failed")
        self._schedule()

    # -- asyncio.Protocol ----------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=self.config.high_water)
        if self.on_made is not None:
            self.on_made()
        self._schedule()  # a client's SETUP is already queued

    def data_received(self, data: bytes) -> None:
        try:
            self.engine.receive_data(data, time.monotonic())
        except Exception as exc:
            self._fail(exc)
            return
        self._schedule()

    def eof_received(self) -> bool:
        self._eof = True
        try:
            self.engine.receive_data(b"", time.monotonic())
        except Exception as exc:
            self._fail(exc)
        self._schedule()
        return True  # keep the transport: we close once our output is flushed

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._schedule()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            error: BaseException = ConnectionClosed(f"connection lost: {exc}")
        elif self._reason is not None:
            error = self._reason
        elif self._eof:
            error = ConnectionClosed("connection closed by peer")
        else:
            error = ConnectionClosed("connection closed locally")
        self._finish(error)

    # -- the turn -------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._scheduled and not self._done:
            self._scheduled = True
            self.loop.call_soon(self._service)

    def _service(self) -> None:
        self._scheduled = False
        if self._done or self._closing_transport or self.transport is None:
            return
        try:
            self._service_inner()
        except Exception as exc:
            self._fail(exc)

    def _service_inner(self) -> None:
        engine, transport = self.engine, self.transport
        assert transport is not None
        if self._stopping and not self._close_started:
            self._close_started = True
            engine.begin_close()
        now = time.monotonic()
        deadline = engine.next_deadline()
        if deadline is not None and now >= deadline:
            engine.handle_timeout(now)
        more = engine.pump() if not self._write_paused else True
        data = engine.data_to_send()
        if data:
            transport.write(data)
        if engine.wants_close() or self._eof or self._close_started:
            if engine.wants_close():
                self._reason = engine.close_reason()
            self._closing_transport = True
            transport.close()  # flushes what is buffered, then connection_lost
            return
        pause = self.config.pause_reading_at
        # ">" as asyncio's own pause_writing: paused reading implies paused
        # writing, so resume_writing (below the low mark) always comes to resume it.
        should_pause = pause is not None and transport.get_write_buffer_size() > pause
        if should_pause != self._read_paused:
            self._read_paused = should_pause
            if should_pause:
                transport.pause_reading()
            else:
                transport.resume_reading()
        deadline = engine.next_deadline()
        if deadline is not None and (self._timer_at is None or deadline < self._timer_at):
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = deadline
            # The default event loops' clock is time.monotonic, like the core's.
            self._timer = self.loop.call_at(deadline, self._on_timer)
        if more and not self._write_paused:
            self._schedule()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self._service()

    def _fail(self, exc: Exception) -> None:
        log.exception("connection failed", exc_info=exc)
        error = ConnectionClosed(f"connection failed: {exc!r}")
        error.__cause__ = exc
        self._reason = error
        self.abort()

    def _finish(self, error: BaseException) -> None:
        if self._done:
            return
        self._done = True
        self.error = error
        if self._timer is not None:
            self._timer.cancel()
        try:
            self.engine.connection_lost(error)
        except Exception:
            log.exception("engine.connection_lost failed")
        if not self._closed.done():
            self._closed.set_result(None)
        self._exited.set()

    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        self._stopping = True
        self._schedule()

    def abort(self) -> None:
        if self.transport is not None and not self._done:
            if self._reason is None:
                self._reason = ConnectionClosed("connection aborted locally")
            self.transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)


# -- sinks: the engine delivers inbound items to these (on the loop thread) -------


class _ResponseSink:
    """At most one payload for ``request_response``, into a future."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[Payload | None]) -> None:
        self.future = future

    def put(self, item: Payload) -> None:
        if not self.future.done():
            self.future.set_result(item)

    def put_many(self, items: list[Payload]) -> None:
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


class AsyncStream:
    """An inbound stream as an async iterator (``async for``) that keeps a
    prefetch window: each time half of it has been consumed, that many more
    are requested. ``aclose()`` (or leaving ``async with``) cancels it."""

    def __init__(
        self,
        peer: AsyncPeer,
        kind: str,
        prefetch: int,
        timeout: float | None,
        start: Callable[[AsyncStream], Awaitable[None] | None],
    ) -> None:
        self._peer = peer
        self._timeout = timeout
        self._batch = max(1, prefetch // 2)
        self._prefetch = prefetch
        self._consumed = 0
        self._items: deque[Payload] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._error: BaseException | None = None
        self._cancelled = False
        self.handle = RequestHandle(kind, cast(Any, self))
        started = start(self)
        self._starting: Awaitable[None] | None = started

    # sink side (engine, loop thread)
    def put(self, item: Payload) -> None:
        self._items.append(item)
        self._notify()

    def put_many(self, items: list[Payload]) -> None:
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

    # consumer side
    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Payload:
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
                    await asyncio.wait_for(self._waiter, self._timeout)
            finally:
                self._waiter = None
        item = items.popleft()
        self._consumed += 1
        if self._consumed >= self._batch and not self._done:
            n, self._consumed = self._consumed, 0
            self._peer._engine.request_more(self.handle, n)
            self._peer._poke()
        return item

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
            self._peer._engine.cancel(self.handle)
            self._peer._poke()

    async def __aenter__(self) -> AsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# -- async sources as Reactive Streams Publishers (the engine pulls Publishers) ---


class _AwaitablePublisher:
    """One awaitable (an ``async def`` handler's coroutine) as a Publisher of
    at most one item: ``None`` completes empty."""

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._awaitable = awaitable

    def subscribe(self, subscriber: Any) -> None:
        loop = asyncio.get_running_loop()
        task: list[asyncio.Future[Any]] = []
        awaitable = self._awaitable

        def done(fut: asyncio.Future[Any]) -> None:
            if fut.cancelled():
                return
            exc = fut.exception()
            if exc is not None:
                subscriber.on_error(exc)
                return
            result = fut.result()
            if result is not None:
                subscriber.on_next(result)
            subscriber.on_complete()

        class Subscription:
            def request(self, n: int) -> None:
                if not task:
                    task.append(asyncio.ensure_future(awaitable, loop=loop))
                    task[0].add_done_callback(done)

            def cancel(self) -> None:
                if task:
                    task[0].cancel()
                elif isinstance(awaitable, Coroutine):
                    awaitable.close()

        subscriber.on_subscribe(Subscription())


class _AsyncIterablePublisher:
    """An async iterable as a Publisher: the next item is awaited only while
    demand is outstanding, on the event loop."""

    def __init__(self, iterable: AsyncIterable[Any]) -> None:
        self._iterable = iterable

    def subscribe(self, subscriber: Any) -> None:
        subscriber.on_subscribe(_AsyncIterSubscription(aiter(self._iterable), subscriber))


class _AsyncIterSubscription:
    """Pulls ``iterator`` on a task while demand is outstanding (loop thread)."""

    def __init__(self, iterator: AsyncIterator[Any], subscriber: Any) -> None:
        self._iterator = iterator
        self._subscriber = subscriber
        self._loop = asyncio.get_running_loop()
        self._demand = 0
        self._task: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._cancelled = False

    async def _run(self) -> None:
        subscriber = self._subscriber
        try:
            while self._demand and not self._cancelled:
                try:
                    item = await anext(self._iterator)
                except StopAsyncIteration:
                    subscriber.on_complete()
                    return
                self._demand -= 1
                subscriber.on_next(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            subscriber.on_error(exc)
        finally:
            self._task = None

    def request(self, n: int) -> None:
        self._demand += n
        if self._task is None and not self._cancelled:
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


class _AsyncInbound:
    """A channel handler's inbound stream, both ways: ``async for`` reads the
    engine's blocking iterator on a worker thread, so the loop never waits;
    plain ``for`` (a synchronous handler, whose result the engine pulls on a
    worker thread anyway) reads it directly."""

    def __init__(self, inbound: Any) -> None:
        self._inbound = inbound

    def __iter__(self) -> Any:
        return iter(self._inbound)

    def __next__(self) -> Payload:
        return cast(Payload, next(self._inbound))

    def close(self) -> None:
        self._inbound.close()

    def __aiter__(self) -> _AsyncInbound:
        return self

    async def __anext__(self) -> Payload:
        item = await asyncio.to_thread(next, self._inbound, _END)
        if item is _END:
            raise StopAsyncIteration
        return cast(Payload, item)

    async def aclose(self) -> None:
        self._inbound.close()


def _asyncify(result: object) -> object:
    # Not asyncio.iscoroutine: it also says yes to plain generators.
    if isinstance(result, Coroutine | asyncio.Future):
        return _AwaitablePublisher(result)
    if isinstance(result, AsyncIterable):
        return _AsyncIterablePublisher(result)
    return result


def _wrap_handler(handler: object) -> object:
    """The user's handler, with async results turned into Publishers. Only the
    methods it has are defined, so a missing one still answers REJECTED."""
    if handler is None:
        return None

    class Wrapped:
        pass

    wrapped = Wrapped()
    rr = getattr(handler, "request_response", None)
    if callable(rr):
        wrapped.request_response = lambda request: _asyncify(rr(request))  # type: ignore[attr-defined]
    stream = getattr(handler, "request_stream", None)
    if callable(stream):
        wrapped.request_stream = lambda request: _asyncify(stream(request))  # type: ignore[attr-defined]
    channel = getattr(handler, "request_channel", None)
    if callable(channel):
        wrapped.request_channel = (  # type: ignore[attr-defined]
            lambda request, inbound: _asyncify(channel(request, _AsyncInbound(inbound)))
        )
    for name in ("fire_and_forget", "metadata_push"):
        method = getattr(handler, name, None)
        if callable(method):
            setattr(wrapped, name, _fire(method))
    for name in ("channel_prefetch", "channel_batch"):
        if hasattr(handler, name):
            setattr(wrapped, name, getattr(handler, name))
    return wrapped


def _fire(method: Callable[[Any], Any]) -> Callable[[Any], None]:
    def call(arg: Any) -> None:
        result = method(arg)
        if isinstance(result, Coroutine):
            task = asyncio.get_running_loop().create_task(result)
            task.add_done_callback(_log_failure)

    return call


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("async handler failed", exc_info=task.exception())


# -- the public API ----------------------------------------------------------------


class AsyncPeer:
    """The requester side of one connection under asyncio. Use it from the
    event loop's thread (its methods are coroutines or return async iterators)."""

    def __init__(self, conn: _Connection, engine: RSocketEngine) -> None:
        self._conn = conn
        self._engine = engine

    @property
    def closed(self) -> bool:
        return not self._conn.alive

    def _check_open(self) -> None:
        if not self._conn.alive:
            raise ConnectionClosed(str(self._conn.error or "connection closed"))

    def _poke(self) -> None:
        self._conn._schedule()

    async def request_response(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> Payload | None:
        """REQUEST_RESPONSE; the reply (``None`` if completed empty). Raises
        ``RSocketError``, ``ConnectionClosed``, or ``TimeoutError`` (after
        cancelling). Cancelling the awaiting task cancels the request."""
        self._check_open()
        payload = as_payload(data, metadata)
        future: asyncio.Future[Payload | None] = asyncio.get_running_loop().create_future()
        handle = RequestHandle("rr", cast(Any, _ResponseSink(future)))
        self._engine.start_request(handle, payload, 1)
        self._poke()
        try:
            if timeout is None:
                return await asyncio.shield(future)
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except (TimeoutError, asyncio.CancelledError):
            if not future.done():
                self._engine.cancel(handle)
                self._poke()
            raise

    async def fire_and_forget(self, data: bytes | str, metadata: bytes | str | None = None) -> None:
        self._check_open()
        self._engine.fire_and_forget(as_payload(data, metadata))
        self._poke()

    async def metadata_push(self, metadata: bytes | str) -> None:
        self._check_open()
        self._engine.metadata_push(as_payload(b"", metadata).metadata or b"")
        self._poke()

    def request_stream(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> AsyncStream:
        """REQUEST_STREAM as an async iterator with a prefetch window;
        ``timeout`` bounds each wait for an item."""
        self._check_open()
        payload = as_payload(data, metadata)
        prefetch = _check_prefetch(prefetch)

        def start(stream: AsyncStream) -> None:
            self._engine.start_request(stream.handle, payload, prefetch)
            self._poke()

        return AsyncStream(self, "stream", prefetch, timeout, start)

    def request_channel(
        self,
        items: Iterable[object] | AsyncIterable[object],
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> AsyncStream:
        """REQUEST_CHANNEL: ``items`` (an async iterable, pulled on the loop,
        or a plain iterable, pulled on a worker thread) is taken only as the
        responder grants credit; the first item travels in the request."""
        self._check_open()
        prefetch = _check_prefetch(prefetch)
        engine = self._engine

        async def start_async(stream: AsyncStream) -> None:
            iterator = aiter(cast(AsyncIterable[object], items))
            try:
                first = await anext(iterator)
            except StopAsyncIteration:
                raise ValueError("a channel needs at least one payload") from None
            rest = _AsyncIterablePublisher(_rest(iterator))
            engine.start_request(
                stream.handle, as_payload(first, metadata), prefetch, cast(Any, rest)
            )
            self._poke()

        if isinstance(items, AsyncIterable):
            return AsyncStream(self, "channel", prefetch, timeout, start_async)
        sync_items = iter(items)
        try:
            first = as_payload(next(sync_items), metadata)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None

        def start(stream: AsyncStream) -> None:
            engine.start_request(stream.handle, first, prefetch, sync_items)
            self._poke()

        return AsyncStream(self, "channel", prefetch, timeout, start)

    async def close(self) -> None:
        """Graceful: stop, flush what is queued, close; waits until closed."""
        self._conn.close()
        await self._conn.wait_closed()

    def abort(self) -> None:
        """Reset the connection at once."""
        self._conn.abort()

    async def wait_closed(self) -> None:
        await self._conn.wait_closed()


async def _rest(iterator: AsyncIterator[object]) -> AsyncIterator[object]:
    async for item in iterator:
        yield item


class AsyncClient(AsyncPeer):
    """A client connection; ``async with`` closes it."""

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _endpoint(url: str | Endpoint) -> Endpoint:
    endpoint = url if isinstance(url, Endpoint) else parse_url(url)
    if endpoint.scheme not in ("tcp", "tls", "unix"):
        raise ValueError(f"the asyncio adapter serves tcp://, tls:// and unix://, not {url}")
    return endpoint


async def connect(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    config: LoopConfig | None = None,
    **setup: Any,
) -> AsyncClient:
    """Connect to ``url`` (``tcp://``, ``tls://``, ``unix://``) and send SETUP;
    options as for the synchronous ``connect``."""
    endpoint = _endpoint(url)
    options = EngineOptions(**setup)
    engine = RSocketEngine.client(options, _wrap_handler(handler))
    loop = asyncio.get_running_loop()
    conn = _Connection(engine, config or LoopConfig())
    if endpoint.scheme == "unix":
        opening = loop.create_unix_connection(lambda: conn, endpoint.path)
    elif endpoint.scheme == "tls":
        from ..transport.tls import client_context

        opening = loop.create_connection(
            lambda: conn,
            endpoint.host,
            endpoint.port,
            ssl=ssl_context or client_context(),
            server_hostname=server_hostname or endpoint.host,
        )
    else:
        if ssl_context is not None or server_hostname is not None:
            raise ValueError("ssl_context/server_hostname apply to tls:// URLs")
        opening = loop.create_connection(lambda: conn, endpoint.host, endpoint.port)
    await asyncio.wait_for(opening, connect_timeout)
    client = AsyncClient(conn, engine)
    engine.attach(cast(Any, conn), cast(Any, client))
    return client


class AsyncServer:
    """A listening RSocket server on the event loop; ``async with`` closes it."""

    def __init__(self, server: asyncio.Server, endpoint: Endpoint, peers: list[AsyncPeer]) -> None:
        self._server = server
        self.endpoint = endpoint
        self._peers = peers

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def peers(self) -> list[AsyncPeer]:
        return [p for p in self._peers if not p.closed]

    async def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        """Stop accepting, close every connection (``abort``: reset them)."""
        self._server.close()
        peers = self.peers
        for peer in peers:
            if abort:
                peer.abort()
            else:
                peer._conn.close()
        if peers:
            waiting = asyncio.gather(*(p.wait_closed() for p in peers))
            try:
                await asyncio.wait_for(waiting, timeout)
            except TimeoutError:
                for peer in self.peers:
                    peer.abort()
        await self._server.wait_closed()
        if self.endpoint.scheme == "unix":
            import os

            with contextlib.suppress(OSError):
                os.unlink(self.endpoint.path)

    async def __aenter__(self) -> AsyncServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def serve(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[AsyncPeer], object] | None = None,
    ssl_context: ssl.SSLContext | None = None,
    config: LoopConfig | None = None,
    **options: Any,
) -> AsyncServer:
    """Listen on ``url`` and answer with ``handler`` (or ``handler_factory(peer)``
    per connection); options as for the synchronous ``serve``. Handler methods
    may be ``async def`` or return async iterables (see the module notes)."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    endpoint = _endpoint(url)
    engine_options = EngineOptions(**options)
    loop_config = config or LoopConfig()
    peers: list[AsyncPeer] = []
    loop = asyncio.get_running_loop()

    def make() -> _Connection:
        engine = RSocketEngine.server(engine_options)
        conn = _Connection(engine, loop_config)
        peer = AsyncPeer(conn, engine)
        chosen = handler_factory(peer) if handler_factory is not None else handler
        engine.attach(cast(Any, conn), cast(Any, peer), _wrap_handler(chosen))

        def made() -> None:
            # Only connections that came up: a failed TLS handshake never does.
            peers[:] = [p for p in peers if not p.closed]
            peers.append(peer)

        conn.on_made = made
        return conn

    server: asyncio.Server
    if endpoint.scheme == "unix":
        if ssl_context is not None:
            raise ValueError("ssl_context applies to tls:// URLs")
        from ..transport.unix import _remove_stale

        _remove_stale(endpoint.path)
        server = await loop.create_unix_server(make, endpoint.path)
    else:
        if endpoint.scheme == "tls" and ssl_context is None:
            raise ValueError("a tls:// server needs ssl_context (see transport.tls.server_context)")
        if endpoint.scheme == "tcp" and ssl_context is not None:
            raise ValueError("ssl_context applies to tls:// URLs")
        server = await loop.create_server(
            make, endpoint.host, endpoint.port, ssl=ssl_context, backlog=1024
        )
        endpoint = endpoint.with_port(server.sockets[0].getsockname()[1])
    return AsyncServer(server, endpoint, peers)
