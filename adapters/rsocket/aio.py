"""RSocket under asyncio: ``async with connect(url) as client``, ``async with
serve(url, handler) as server`` (or ``await`` either: :class:`~..drive.connecting.Connecting`).

The same engine as the synchronous API (:class:`~.engine.RSocketEngine`)
runs on the asyncio driver (:class:`~..drive.aio.AsyncioReactor`): the same
connection turn, timeouts and back-pressure as the other drivers, every
transport (``tcp://``, ``tls://``, ``unix://``, ``ws://``, ``wss://``). Only
the application-facing side differs: requests are coroutines or async
iterators (``await client.request_response(...)``, ``async for p in
client.request_stream(...)``).

Handlers may be plain (as for the synchronous API) or async: ``async def
request_response`` (awaited on the loop), a ``request_stream`` returning an
async iterable (pulled only as the requester's credit allows),
``request_channel(request, inbound)`` receiving ``inbound`` as an async
iterator. Handlers run on the event loop: never block in them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import ssl
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
)
from itertools import islice
from typing import Any, cast

from typing_extensions import Unpack

from sansrs.rsocket import Role

from ..drive.aio import (
    AsyncIterablePublisher,
    AsyncPeer,
    AsyncServer,
    AsyncStream,
    AsyncStreamBatches,
    FutureSink,
    asyncify,
)
from ..drive.config import LoopConfig
from ..drive.connecting import awaitable_context
from ..drive.connection import LoopConnection
from ..drive.endpoints import message_framed, open_connection_async, open_server_async
from ..drive.engine import Call
from ..transport import Transport
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .batch import PayloadBatch
from .engine import RequestHandle, RSocketEngine, client_websocket
from .fast import all_bytes, as_payload
from .options import options_for
from .payload_streams import AsyncPayloadStream
from .peer import DEFAULT_PREFETCH, check_prefetch
from .routed import (
    AsyncRoutedRequester,
    RouteOptions,
    check_composite,
    checked_payload,
    composite_check,
    route_metadata,
    send_checked,
)
from .types import Payload

__all__ = [
    "AsyncClient",
    "AsyncRSocketPeer",
    "AsyncServer",
    "AsyncStream",
    "AsyncStreamBatches",
    "connect",
    "serve",
]

_END: Any = object()
#: Fire-and-forgets :meth:`AsyncRSocketPeer.fire_and_forget_many` hands the
#: engine per turn of the loop (the thread drivers' pending budget, halved).
FNF_PART = 2048
log = logging.getLogger("sansrs.adapters.rsocket")


class AsyncRSocketPeer(AsyncPeer):
    """The requester side of one connection under asyncio (a client, or a
    server's view of a connected client). Use it from the event loop's thread."""

    def __init__(self, driver: LoopConnection, engine: RSocketEngine) -> None:
        super().__init__(driver)
        self._engine = engine
        #: Raw metadata on a client that declared composite metadata fails at the call.
        self._composite = composite_check(engine)
        self._loop = asyncio.get_running_loop()
        #: Plain ``bytes`` fire-and-forgets not yet handed to the engine
        #: (:meth:`fire_and_forget`): one piece per loop callback, before
        #: any later request of this peer (:meth:`_submit`).
        self._fnf: list[bytes] = []

    # The requests below keep RSocketPeer's signatures by choice (the asyncio twin).

    async def request_response(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> Payload | None:
        """REQUEST_RESPONSE; the reply (``None`` if completed empty). Raises
        ``RSocketError``, ``ConnectionClosed``, or ``TimeoutError`` (after
        cancelling). Cancelling the awaiting task cancels the request."""
        self._check_open()
        if metadata is not None and self._composite is not None:
            checked_payload(self._composite, b"", metadata)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Payload | None] = loop.create_future()
        handle = RequestHandle("rr", cast(Any, FutureSink(future)))
        # The request is written before this task yields (no loop iteration
        # in between), and the timeout is one timer handle rather than
        # shield() and wait_for()'s tasks: the latency path of a sequential
        # request-response (docs/performance.md).
        if not self._express(handle, data, metadata):
            payload = as_payload(data, metadata)
            self._submit_and_write(lambda: self._engine.start_request(handle, payload, 1))
        expired: list[bool] = []

        def expire() -> None:
            if not future.done():
                expired.append(True)
                future.cancel()

        timer = None if timeout is None else loop.call_later(timeout, expire)
        try:
            return await future
        except asyncio.CancelledError:
            # The task was cancelled (the future with it) or the time ran
            # out: no answer is awaited any more.
            self._submit(lambda: self._engine.cancel(handle))
            if expired:
                raise TimeoutError(self._engine.no_answer(timeout or 0.0)) from None
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _express(
        self, handle: RequestHandle, data: bytes | str, metadata: bytes | str | None
    ) -> bool:
        """The express latency path under asyncio: on the loop's thread, over
        a byte stream, the core hands back the request's whole frame
        (``Connection.request_response_frame``) and it is written at once:
        no closure, no output queue, no turn. The answer comes as any
        answer (taken whole when it is alone in its read). False: not taken,
        nothing done (the general path: a str, a lease, output waiting...)."""
        if self._fnf:  # earlier fire-and-forgets go first
            self._flush_fnf()
        driver = self._driver
        engine = self._engine
        write_bytes = getattr(driver, "write_bytes", None)  # a session's driver has none
        if (
            write_bytes is None
            or not engine.takes_whole_reads
            or engine.wants_close()
            or not driver.is_owner
        ):
            return False
        frame = engine.conn.request_response_frame(data, metadata)  # type: ignore[arg-type]
        if frame is None:
            return False
        sid, wire = frame
        engine.adopt_response(handle, sid)
        write_bytes(wire)
        engine.settled = True  # a request moves no deadline earlier (no lease here)
        if driver.needs_turn():
            driver.wake()
        return True

    async def fire_and_forget(self, data: bytes | str, metadata: bytes | str | None = None) -> None:
        """REQUEST_FNF. Plain ``bytes`` data (no metadata) waits in a list
        handed to the engine in one piece: by a loop callback scheduled with
        the first, before any later request of this peer, or once
        :data:`FNF_PART` wait, when the call also lets the loop run and
        waits for room (:meth:`_room_for_more`, as
        :meth:`fire_and_forget_many`). Raises ``ConnectionClosed`` once
        the connection has ended."""
        if type(data) is bytes and metadata is None:
            # One append per call, one engine call per part (bench_tcp.py
            # fnf16 --impl sansrs-asyncio: 2.35 -> 0.42-0.65 µs CPU per item).
            if not self._driver.alive:
                self._check_open()
            pending = self._fnf
            pending.append(data)
            if len(pending) == 1:
                self._loop.call_soon(self._flush_fnf)
            elif len(pending) >= FNF_PART:
                self._flush_fnf()
                await self._room_for_more()
            return
        self._check_open()
        payload = checked_payload(self._composite, data, metadata)
        self._submit(lambda: self._engine.fire_and_forget(payload))

    def _flush_fnf(self) -> None:
        """Hand the waiting fire-and-forgets to the engine (the connection
        ended: they go the way of any output it did not write)."""
        pending = self._fnf
        if not pending:
            return
        self._fnf = []
        if self._driver.alive:
            engine = self._engine
            super()._submit(lambda: engine.fire_and_forget_data(pending))

    def _submit(self, fn: Call) -> None:
        if self._fnf:  # earlier fire-and-forgets go first
            self._flush_fnf()
        super()._submit(fn)

    def _submit_and_write(self, fn: Call) -> None:
        if self._fnf:
            self._flush_fnf()
        super()._submit_and_write(fn)

    async def close(self, timeout: float | None = 5.0) -> None:
        self._flush_fnf()
        await super().close(timeout)

    async def fire_and_forget_many(self, items: Iterable[object]) -> int:
        """REQUEST_FNF for each of ``items`` (payloads, bytes, str or (data,
        metadata) pairs), in order, handed to the engine many at a time
        (:data:`FNF_PART`, then the loop runs a turn that writes them, and
        the next part is pulled once the connection holds less than
        ``high_water`` bytes it has not written, in its buffer and its
        engine: :meth:`_room_for_more`);
        returns how many were queued. An item that is not a payload raises after the ones
        before it were queued."""
        self._check_open()
        engine = self._engine
        source = iter(items)
        sent = 0
        while True:
            chunk = list(islice(source, FNF_PART))
            if all_bytes(chunk):
                # Plain data framed from the bytes, as on the thread drivers
                # (engine.fire_and_forget_data): no Payload, a tracked tuple,
                # per item (bench_cpu_per_op.py --impl sansrs-asyncio, fnf16m).
                self._check_open()
                self._submit(lambda chunk=chunk: engine.fire_and_forget_data(chunk))  # type: ignore[misc]
                sent += len(chunk)
            else:
                sent += send_checked(self._composite, chunk, self._fire_and_forget_many)
            if len(chunk) < FNF_PART:
                return sent
            await self._room_for_more()

    async def _room_for_more(self) -> None:
        """After a part of fire-and-forgets: the loop runs (a turn writes
        the part), and while the connection holds ``high_water`` bytes or
        more it has not written (its buffer and its engine's output, as the
        blocking peer's ``_room_for_fire_and_forgets``; a peer reading
        slowly, or not at all),
        the caller waits for its turns to drain them below that: the
        caller is held, not memory. Ends when the connection does."""
        await asyncio.sleep(0)
        driver = self._driver
        session = getattr(driver, "session", None)
        if session is not None:  # a resumable session's: its transport's of the moment
            driver = session.driver
        if not isinstance(driver, LoopConnection):  # (between transports: no buffer)
            return
        wait_until = getattr(driver.loop, "wait_until", None)
        high = driver.config.high_water
        conn = self._engine.conn
        # Both: while older bytes wait in the buffer a turn leaves the
        # engine's new output in the engine (drive/writes.py, write_now).
        while (
            wait_until is not None and driver.alive and driver.buffered + conn.queued_output >= high
        ):
            await wait_until(driver, lambda: driver.buffered + conn.queued_output < high)

    def _fire_and_forget_many(self, batch: list[Payload]) -> None:
        self._check_open()
        self._submit(lambda: self._engine.fire_and_forget_many(batch))

    async def metadata_push(self, metadata: bytes | str) -> None:
        """METADATA_PUSH; then the loop runs, and the caller waits while the
        connection holds ``high_water`` bytes or more it has not written
        (as :meth:`fire_and_forget_many`'s parts: a loop of pushes to a peer
        reading nothing holds the caller, not memory)."""
        self._check_open()
        md = checked_payload(self._composite, b"", metadata).metadata or b""
        self._submit(lambda: self._engine.metadata_push(md))
        await self._room_for_more()

    def request_stream(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> AsyncPayloadStream:
        """REQUEST_STREAM as an async iterator with a prefetch window;
        ``timeout`` bounds each wait for an item."""
        self._check_open()
        payload = checked_payload(self._composite, data, metadata)
        prefetch = check_prefetch(prefetch)
        stream, handle = self._stream("stream", prefetch, timeout)
        self._submit(lambda: self._engine.start_request(handle, payload, prefetch))
        return stream

    def request_stream_batches(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> AsyncStreamBatches[PayloadBatch]:
        """REQUEST_STREAM as an async iterator of
        :class:`~.batch.PayloadBatch` es (each what arrived since the
        previous one, of any size): the window, items, order and errors of
        :meth:`request_stream`, one wake-up per batch."""
        return self.request_stream(data, metadata, prefetch, timeout).batches()

    def request_channel(
        self,
        items: Iterable[object] | AsyncIterable[object],
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> AsyncPayloadStream:
        """REQUEST_CHANNEL: ``items`` (an async iterable, pulled on the loop,
        or a plain iterable, pulled on a worker thread) is taken only as the
        responder grants credit; the first item travels in the request."""
        self._check_open()
        prefetch = check_prefetch(prefetch)
        engine = self._engine
        if isinstance(items, AsyncIterable):

            async def start() -> None:
                iterator = aiter(items)
                try:
                    first = await anext(iterator)
                except StopAsyncIteration:
                    raise ValueError("a channel needs at least one payload") from None
                rest = AsyncIterablePublisher(_rest(iterator))
                payload = checked_payload(self._composite, first, metadata)
                self._submit(lambda: engine.start_request(handle, payload, prefetch, rest))  # type: ignore[arg-type]

            stream, handle = self._stream("channel", prefetch, timeout, start())
            return stream
        sync_items = iter(items)
        try:
            first = checked_payload(self._composite, next(sync_items), metadata)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None
        stream, handle = self._stream("channel", prefetch, timeout)
        self._submit(lambda: engine.start_request(handle, first, prefetch, sync_items))
        return stream

    def _stream(
        self,
        kind: str,
        prefetch: int,
        timeout: float | None,
        starting: Coroutine[Any, Any, None] | None = None,
    ) -> tuple[AsyncPayloadStream, RequestHandle]:
        engine = self._engine
        box: list[RequestHandle] = []
        stream = AsyncPayloadStream(
            prefetch,
            # Written at once: a consumer that finds items queued does not
            # yield, and the turn that would write the REQUEST_N waited for
            # it to run dry, the producer for the REQUEST_N (stream16b).
            lambda n: self._submit_and_write(lambda: engine.request_more(box[0], n)),
            lambda: self._submit(lambda: engine.cancel(box[0])),
            timeout=timeout,
            starting=starting,
            explain=engine.unexpected_input,
        )
        box.append(RequestHandle(kind, stream.sink))
        return stream, box[0]

    def grant_lease(self, ttl: float, requests: int) -> None:
        """Send LEASE: the peer may start ``requests`` requests within ``ttl`` s
        (only on a connection set up with lease)."""
        self._submit(lambda: self._engine.send_lease(ttl, requests))

    def route(
        self, route: str, *variables: object, **options: Unpack[RouteOptions]
    ) -> AsyncRoutedRequester:
        """This connection's requests on ``route``, as the synchronous
        ``RSocketPeer.route`` (docs/extensions.md)."""
        if self._engine.conn.role is Role.CLIENT:
            check_composite(self._engine.options.metadata_mime_type)
        return AsyncRoutedRequester(self, route_metadata(route, variables, **options))


async def _rest(iterator: AsyncIterator[object]) -> AsyncIterator[object]:
    async for item in iterator:
        yield item


class AsyncClient(AsyncRSocketPeer):
    """A client connection; ``async with`` closes it."""


# -- handlers: async results become Publishers the engine pulls ----------------


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
        wrapped.request_response = lambda request: asyncify(rr(request))  # type: ignore[attr-defined]
    stream = getattr(handler, "request_stream", None)
    if callable(stream):
        wrapped.request_stream = lambda request: asyncify(stream(request))  # type: ignore[attr-defined]
    channel = getattr(handler, "request_channel", None)
    if callable(channel):
        wrapped.request_channel = (  # type: ignore[attr-defined]
            lambda request, inbound: asyncify(channel(request, _AsyncInbound(inbound)))
        )
    for name in ("fire_and_forget", "fire_and_forget_many", "metadata_push"):
        method = getattr(handler, name, None)
        if callable(method):
            setattr(wrapped, name, _fire(method))
    for name in ("channel_prefetch", "channel_batch", "channel_window"):
        if hasattr(handler, name):
            setattr(wrapped, name, getattr(handler, name))
    accept_setup = getattr(handler, "accept_setup", None)
    if callable(accept_setup):  # e.g. a Router: the connection's handler, wrapped too
        wrapped.accept_setup = (  # type: ignore[attr-defined]
            lambda setup, peer: _setup_verdict(accept_setup(setup, peer))
        )
    return wrapped


def _setup_verdict(result: object) -> object:
    """What the engine gets from ``accept_setup``: the connection's handler,
    wrapped; or, from an ``async def`` hook (a Router's async
    ``authenticate``), a task awaiting it on the loop: the engine holds the
    SETUP until the task ends (its result accepts, its exception rejects)."""
    if inspect.isawaitable(result):
        return asyncio.get_running_loop().create_task(_awaited_handler(result))
    return _wrap_handler(result)


async def _awaited_handler(result: Awaitable[object]) -> object:
    return _wrap_handler(await result)


def _fire(method: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``method`` whose coroutine, if it returns one, runs as a task (its
    failure logged); any other result is passed on (a Router's
    ``fire_and_forget_many`` may decline a run with ``NotImplemented``)."""

    def call(arg: Any) -> Any:
        result = method(arg)
        if isinstance(result, Coroutine):
            task = asyncio.get_running_loop().create_task(result)
            task.add_done_callback(_log_failure)
            return None
        return result

    return call


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("async handler failed", exc_info=task.exception())


# -- connect / serve ------------------------------------------------------------


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def connect(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
    **setup: Any,
) -> AsyncClient:
    """Connect to ``url`` and send SETUP; options as for the synchronous
    ``connect`` (``handler`` may be async), ``interceptors`` included
    (:class:`~.interceptors.Interceptors`, run on the event loop;
    docs/interceptors.md). The TCP connect and any TLS or WebSocket
    handshake run on a worker thread."""
    options = options_for(connect, setup)
    wrapped = _wrap_handler(handler)

    def new_engine(transport: Transport) -> RSocketEngine:
        return RSocketEngine.client(options, wrapped, message_framed=message_framed(transport))

    def new_peer(driver: LoopConnection, engine: RSocketEngine) -> AsyncClient:
        client = AsyncClient(driver, engine)
        engine.attach(driver, client)
        return client

    return await open_connection_async(
        url,
        new_engine,
        new_peer,
        config=loop_config,
        connect_timeout=connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=client_websocket(url, websocket),
    )


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def serve(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[AsyncRSocketPeer], object] | None = None,
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
    **options: Any,
) -> AsyncServer[AsyncRSocketPeer]:
    """Listen on ``url`` and answer with ``handler`` (or ``handler_factory(peer)``
    per connection); options as for the synchronous ``serve``, ``interceptors``
    included (:class:`~.interceptors.Interceptors`; docs/interceptors.md). Handler methods
    may be ``async def`` or return async iterables (see the module notes);
    an ``async def accept_setup`` (a Router's async ``authenticate``) is
    awaited before the SETUP is accepted, its exception rejecting it
    (docs/adapters.md, "The SETUP hook and the ``Handler`` protocol")."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    engine_options = options_for(serve, options)

    def new_engine(transport: Transport) -> RSocketEngine:
        return RSocketEngine.server(engine_options, message_framed=message_framed(transport))

    def new_peer(driver: LoopConnection, engine: RSocketEngine) -> AsyncRSocketPeer:
        peer = AsyncRSocketPeer(driver, engine)
        chosen = handler_factory(peer) if handler_factory is not None else handler
        engine.attach(driver, peer, _wrap_handler(chosen))
        return peer

    accept, peers = await open_server_async(
        url,
        new_engine,
        new_peer,
        config=loop_config,
        ssl_context=ssl_context,
        websocket=websocket,
    )
    return AsyncServer(accept, peers)
