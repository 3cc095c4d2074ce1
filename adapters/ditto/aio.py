"""Eclipse Ditto's streaming subscriptions under asyncio: ``async with
connect(url) as ditto``, ``async with serve(url, history) as server`` (or
``await`` either: :class:`~..drive.connecting.Connecting`).

The same engines as the synchronous API (:mod:`.engine`) on the asyncio
driver (:class:`~..drive.aio.AsyncioReactor`): the same timeouts and
back-pressure. Subscriptions are async iterators (``async for event in
ditto.subscribe_for_persisted_events("ns:thing")``); a served
:class:`~.history.HistorySource` may return iterables, Publishers, or async
iterables / async generators (pulled on the event loop only while the
subscriber's demand lasts).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

from typing_extensions import Unpack

from sansrs.ditto import DittoClientConfig, DittoRemoteError, DittoServerConfig

from ..drive.aio import AsyncPeer, AsyncServer, AsyncStream
from ..drive.config import LoopConfig
from ..drive.connecting import awaitable_context
from ..drive.connection import LoopConnection
from ..drive.endpoints import attaching, open_connection_async, open_server_async
from ..drive.errors import ConnectionClosed
from ..drive.publishers import RemoteStreamPublisher
from ..drive.streams import check_prefetch
from ..transport import Transport
from ..transport.urls import Endpoint
from .client import client_config, client_factories, websocket_options
from .engine import (
    DittoClientEngine,
    DittoServerEngine,
    HistoryQuery,
    SearchQuery,
    SubscribeRequest,
    SubscriptionHandle,
    history_request,
    search_request,
)
from .follow import (
    ResumableRead,
    ack_wait,
    check_follow,
    check_started,
    not_acknowledged,
    waits_on,
)
from .history import HistorySource
from .live import LiveOverflow, LiveTap
from .peer import DEFAULT_PREFETCH, DEFAULT_SEARCH_PREFETCH, MAX_PREFETCH, subscription_publisher
from .resume import Backoff, ReconnectPolicy, SearchPosition
from .server import server_config, server_websocket_options
from .tokens import Deliver, Fetch, TokenPolicy, TokenProvider
from .types import Authorize, ws_endpoint

__all__ = [
    "AsyncDittoConnection",
    "AsyncDittoServerPeer",
    "AsyncDittoSession",
    "AsyncFollowEvents",
    "AsyncResumingHistory",
    "AsyncResumingSearch",
    "AsyncServer",
    "ask_token",
    "connect",
    "serve",
    "task_fetch",
]


class AsyncDittoConnection(AsyncPeer):
    """A client connection to a Ditto WebSocket endpoint under asyncio: the
    methods of the synchronous :class:`~.client.DittoConnection`, returning
    async iterators. Use it from the event loop's thread."""

    def __init__(self, driver: LoopConnection, engine: DittoClientEngine) -> None:
        super().__init__(driver)
        self._engine = engine

    # DittoConnection's methods and keywords by choice (the asyncio twin).

    def _stream(
        self, request: SubscribeRequest, prefetch: int, timeout: float | None
    ) -> AsyncStream[Any]:
        self._check_open()
        prefetch = check_prefetch(prefetch, MAX_PREFETCH)
        engine = self._engine
        box: list[SubscriptionHandle] = []
        stream: AsyncStream[Any] = AsyncStream(
            prefetch,
            lambda n: self._submit(lambda: engine.request_more(box[0], n)),
            lambda: self._submit(lambda: engine.cancel(box[0])),
            timeout=timeout,
            explain=lambda: box[0].unanswered(),
        )
        handle = SubscriptionHandle(request, stream, prefetch)
        box.append(handle)
        self._submit(lambda: engine.subscribe(handle))
        return stream

    def subscribe_for_persisted_events(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> AsyncStream[Any]:
        """The history of ``entity`` as an async iterator (see the synchronous
        ``DittoConnection.subscribe_for_persisted_events``); ``aclose()``
        cancels."""
        return self._stream(history_request(entity, **query), prefetch, timeout)

    def persisted_events_publisher(
        self, entity: str, **query: Unpack[HistoryQuery]
    ) -> RemoteStreamPublisher[Any, Any]:
        """The same history as a Reactive Streams Publisher (one Subscriber)."""
        return subscription_publisher(self._engine, self._submit, history_request(entity, **query))

    def search(
        self,
        *,
        prefetch: int = DEFAULT_SEARCH_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[SearchQuery],
    ) -> AsyncStream[list[Any]]:
        """A search as an async iterator of pages (``prefetch`` in pages)."""
        return self._stream(search_request(**query), prefetch, timeout)

    def search_publisher(self, **query: Unpack[SearchQuery]) -> RemoteStreamPublisher[Any, Any]:
        """The same search as a Publisher of pages."""
        return subscription_publisher(self._engine, self._submit, search_request(**query))

    def refresh_token(self) -> None:
        """Ask the token provider for a token now and send it (see the
        synchronous ``DittoConnection.refresh_token``)."""
        self._submit(self._engine.refresh_token)

    # The keywords of DittoConnection.live_events, by choice.
    def live_events(
        self,
        entity: str,
        *,
        filter: str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> AsyncStream[Any]:
        """The live events of thing ``entity`` as an async iterator (see the
        synchronous ``DittoConnection.live_events``: ``STARTED`` first, at
        most ``prefetch`` waiting, ``LiveOverflow`` beyond)."""
        self._check_open()
        prefetch = check_prefetch(prefetch, MAX_PREFETCH)
        live = self._engine.live
        box: list[LiveTap] = []
        stream: AsyncStream[Any] = AsyncStream(
            prefetch,
            lambda n: self._submit(lambda: live.credit(box[0], n)),
            lambda: self._submit(lambda: live.remove(box[0])),
            timeout=timeout,
        )
        box.append(LiveTap(entity, stream, prefetch, filter))
        self._submit(lambda: live.add(box[0]))
        return stream

    async def follow(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> AsyncFollowEvents:
        """The history of ``entity``, then its live events (the synchronous
        ``DittoConnection.follow``); a lost connection ends it."""

        async def reconnect(generation: int, cause: BaseException) -> None:
            raise cause

        async def current() -> tuple[AsyncDittoConnection, int]:
            return self, 0

        follow = AsyncFollowEvents(current, reconnect, entity, dict(query), prefetch, timeout)
        await follow.start()
        return follow


class AsyncDittoServerPeer(AsyncPeer):
    """One connected client as an asyncio server sees it."""

    def __init__(self, driver: LoopConnection, engine: DittoServerEngine) -> None:
        super().__init__(driver)
        self.engine = engine

    def inspect(self, fn: Callable[[DittoServerEngine], Any]) -> Any:
        """``fn(engine)`` on the event loop's thread (where the engine lives)."""
        return fn(self.engine)


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def connect(
    url: str | Endpoint,
    *,
    user: str | None = None,
    password: str | None = None,
    token: TokenProvider | None = None,
    token_policy: TokenPolicy | None = None,
    keepalive: float | None = None,
    headers: Iterable[tuple[str, str]] = (),
    config: DittoClientConfig | None = None,
    connect_timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    loop_config: LoopConfig | None = None,
    **websocket: Any,
) -> AsyncDittoConnection:
    """Connect to Ditto's WebSocket endpoint; options as for the synchronous
    ``connect``. The TCP connect and the TLS and WebSocket handshakes run on
    a worker thread. ``token`` may be a provider, a coroutine function or a
    plain callable (run on a worker thread): awaited for the upgrade and
    before each expiry, its tokens sent as ``JWT-TOKEN``."""
    provider = None if isinstance(token, str) or token is None else token
    first = await ask_token(provider) if provider is not None else token
    assert first is None or isinstance(first, str)
    options = websocket_options(user, password, first, headers, websocket)
    new_engine, new_peer = client_factories(
        AsyncDittoConnection, client_config(config), first,
        provider and partial(task_fetch, provider), token_policy, keepalive,
    )
    return await open_connection_async(
        ws_endpoint(url),
        new_engine,
        new_peer,
        config=loop_config,
        connect_timeout=connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=options,
    )


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def serve(
    url: str | Endpoint,
    history: HistorySource,
    *,
    authenticate: Authorize | None = None,
    config: DittoServerConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    loop_config: LoopConfig | None = None,
    **websocket: Any,
) -> AsyncServer[AsyncDittoServerPeer]:
    """Serve the Ditto protocol on ``url`` from ``history`` on the event loop;
    options as for the synchronous ``serve``. ``history.open`` runs on the
    event loop and may return an async iterable."""
    core_config = server_config(config)

    def new_engine(transport: Transport) -> DittoServerEngine:
        return DittoServerEngine(history, core_config)

    accept, peers = await open_server_async(
        ws_endpoint(url),
        new_engine,
        attaching(AsyncDittoServerPeer),
        config=loop_config,
        ssl_context=ssl_context,
        websocket=server_websocket_options(authenticate, websocket),
    )
    return AsyncServer(accept, peers)


async def ask_token(provider: Callable[[], Any]) -> str:
    """A token from ``provider``: awaited if it is a coroutine function, else
    called on a worker thread (it may block on the network)."""
    if inspect.iscoroutinefunction(provider):
        token = await provider()
    else:
        token = await asyncio.to_thread(provider)
        if inspect.isawaitable(token):
            token = await token
    if not isinstance(token, str):
        raise TypeError(f"a token provider returns str, not {type(token).__name__}")
    return token


def task_fetch(provider: Callable[[], Any], submit: Callable[[Callable[[], object]], None]
               ) -> Fetch:
    """A fetch that asks ``provider`` in a task of the running loop and hands
    the result to the connection (on the loop's thread) through ``submit``."""
    tasks: set[asyncio.Task[None]] = set()  # referenced until done

    def fetch(deliver: Deliver) -> None:
        async def run() -> None:
            result: str | BaseException
            try:
                result = await ask_token(provider)
            except Exception as exc:
                result = exc
            try:
                submit(lambda: deliver(result))
            except Exception:  # the connection is gone: the token is not needed
                return

        task = asyncio.get_running_loop().create_task(run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return fetch


# -- reconnect and resume under asyncio (the synchronous session.py and follow.py) --

Current = Callable[[], Awaitable[tuple[AsyncDittoConnection, int]]]
Reconnect = Callable[[int, BaseException], Awaitable[None]]


# The methods and keywords of its synchronous twin, session.DittoSession, by choice.
class AsyncDittoSession:
    """The asyncio twin of ``session.DittoSession``: a client whose
    connection is restored when lost (``reconnect``: a ``ReconnectPolicy``)
    and whose iterators resume after their last delivered revision. Open it
    with ``async with AsyncDittoSession(url, ...) as ditto`` (or ``await
    ditto.start()``); ``connect_options`` as for :func:`connect` (a token
    provider is asked again on every reconnect)."""

    def __init__(
        self,
        url: str,
        *,
        reconnect: ReconnectPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        **connect_options: Any,
    ) -> None:
        self.policy = reconnect or ReconnectPolicy()
        self._url = url
        self._options = connect_options
        self._clock = clock
        self._lock = asyncio.Lock()
        self._connection: AsyncDittoConnection | None = None
        self._generation = 0
        self._closed = False
        #: connections restored so far (inspection)
        self.reconnects = 0

    async def start(self) -> AsyncDittoSession:
        if self._connection is None:
            self._connection = await connect(self._url, **self._options)
        return self

    async def __aenter__(self) -> AsyncDittoSession:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connection(self) -> AsyncDittoConnection:
        if self._connection is None:
            raise RuntimeError("the session is not started")
        return self._connection

    async def current(self) -> tuple[AsyncDittoConnection, int]:
        async with self._lock:
            return self.connection, self._generation

    async def reconnect(self, generation: int, cause: BaseException) -> None:
        """Restore the connection of ``generation`` (see the synchronous twin)."""
        async with self._lock:
            if generation != self._generation:
                return
            if self._closed:
                raise cause
            await self.connection.close()
            backoff = Backoff(self.policy, self._clock())
            error = cause
            while True:
                await asyncio.sleep(backoff.next_delay(self._clock(), error))
                if self._closed:
                    raise cause
                try:
                    self._connection = await connect(self._url, **self._options)
                except (OSError, ConnectionError) as exc:
                    error = exc
                    continue
                self._generation += 1
                self.reconnects += 1
                return

    async def subscribe_for_persisted_events(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> AsyncResumingHistory:
        """The history of ``entity``, resumed after the last delivered revision."""
        history = AsyncResumingHistory(self.current, self.reconnect, entity, dict(query),
                                       prefetch, timeout)
        with contextlib.suppress(ConnectionClosed):  # the first __anext__ reconnects
            await history.start()
        return history

    async def follow(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> AsyncFollowEvents:
        """The history of ``entity``, then its live events (no end)."""
        follow = AsyncFollowEvents(self.current, self.reconnect, entity, dict(query),
                                   prefetch, timeout)
        with contextlib.suppress(ConnectionClosed):  # the first __anext__ reconnects
            await follow.start()
        return follow

    def search(
        self,
        *,
        prefetch: int = DEFAULT_SEARCH_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[SearchQuery],
    ) -> AsyncResumingSearch:
        """A search that goes on after the last thing handed out (the
        synchronous ``DittoSession.search``)."""
        return AsyncResumingSearch(self.current, self.reconnect, dict(query), prefetch, timeout)

    async def close(self) -> None:
        self._closed = True
        if self._connection is not None:
            await self._connection.close()


class _AsyncResuming(ResumableRead[Current, Reconnect]):
    """What both async iterators share (the synchronous ``follow._Resuming``)."""

    def __init__(self, current: Current, reconnect: Reconnect, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, entity, query, prefetch, timeout)
        self._streams: list[AsyncStream[Any]] = []

    def _history(self, connection: AsyncDittoConnection, query: dict[str, Any]
                 ) -> AsyncStream[Any]:
        stream = connection.subscribe_for_persisted_events(
            self.entity, prefetch=self._prefetch, timeout=self._timeout, **query)
        self._streams.append(stream)
        return stream

    async def _lost(self, error: BaseException) -> None:
        await self._drop()
        if self._closed:
            raise error
        if self.position.must_reconnect(error):
            await self._reconnect(self._generation, error)

    async def _drop(self) -> None:
        streams, self._streams = self._streams, []
        for stream in streams:
            await stream.aclose()

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# The loop of its synchronous twin, follow.ResumingHistory, by choice (await for next).
class AsyncResumingHistory(_AsyncResuming):
    """The asyncio twin of ``follow.ResumingHistory``."""

    _it: AsyncStream[Any] | None = None

    async def start(self) -> None:
        connection, self._generation = await self._current()
        self._it = self._history(connection, self.position.history())

    def __aiter__(self) -> AsyncResumingHistory:
        return self

    async def __anext__(self) -> Any:
        while True:
            if self._it is None and (self._closed or self.position.ended()):
                raise StopAsyncIteration
            try:
                if self._it is None:
                    await self.start()
                assert self._it is not None
                item = await self._it.__anext__()
            except StopAsyncIteration:
                self._it, self._closed = None, True
                raise
            except (ConnectionClosed, DittoRemoteError) as exc:
                self._it = None
                await self._lost(exc)
                continue
            if self.position.fresh(item):
                return item


# The loop of its synchronous twin, follow.FollowEvents, by choice (await for next).
class AsyncFollowEvents(_AsyncResuming):
    """The asyncio twin of ``follow.FollowEvents``: history, then live."""

    def __init__(self, current: Current, reconnect: Reconnect, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        check_follow(query)
        super().__init__(current, reconnect, entity, query, prefetch, timeout)
        self._live: AsyncStream[Any] | None = None
        self._past: AsyncStream[Any] | None = None
        self._held: Any = None

    async def start(self) -> None:
        connection, self._generation = await self._current()
        wait = ack_wait(self._timeout)
        self._live = connection.live_events(
            self.entity, filter=self.position.query.get("filter"), prefetch=self._prefetch,
            timeout=wait)
        self._streams.append(self._live)
        try:
            first = await self._live.__anext__()
        except TimeoutError:
            await self._drop()
            raise not_acknowledged(wait) from None
        except BaseException:
            await self._drop()  # a tap that raised is over: the next start makes a new one
            raise
        check_started(first)
        self._past = self._history(connection, self.position.history())

    def __aiter__(self) -> AsyncFollowEvents:
        return self

    async def __anext__(self) -> Any:
        while True:
            if self._closed:
                raise StopAsyncIteration
            try:
                if self._live is None:
                    await self.start()
                    continue
                if self._past is not None:
                    try:
                        item = await self._past.__anext__()
                    except StopAsyncIteration:
                        self._past = None
                        item, self._held = self._held, None
                        if item is None:
                            continue
                else:
                    item = await self._live.__anext__()
                    gap = self.position.gap(item)
                    if gap is not None:
                        self._held = item
                        self._past = self._history((await self._current())[0], gap)
                        continue
            except LiveOverflow:
                await self._drop()
                continue
            except (ConnectionClosed, DittoRemoteError) as exc:
                await self._lost(exc)
                continue
            except TimeoutError as exc:
                if waits_on(exc, self._timeout):
                    continue
                raise
            if self.position.fresh(item):
                return item

    async def _drop(self) -> None:
        await super()._drop()
        self._past = self._live = self._held = None


# The loop of its synchronous twin, follow.ResumingSearch, by choice (await for next).
class AsyncResumingSearch:
    """The asyncio twin of ``follow.ResumingSearch``."""

    def __init__(self, current: Current, reconnect: Reconnect, query: dict[str, Any],
                 prefetch: int, timeout: float | None) -> None:
        self._current = current
        self._reconnect = reconnect
        self.position = SearchPosition(query)
        self._prefetch = prefetch
        self._timeout = timeout
        self._generation = 0
        self._it: AsyncStream[list[Any]] | None = None
        self._closed = False

    def __aiter__(self) -> AsyncResumingSearch:
        return self

    async def __anext__(self) -> list[Any]:
        while True:
            if self._closed:
                raise StopAsyncIteration
            try:
                if self._it is None:
                    connection, self._generation = await self._current()
                    self._it = connection.search(prefetch=self._prefetch, timeout=self._timeout,
                                                 **self.position.search())
                page = await self._it.__anext__()
            except StopAsyncIteration:
                self._closed = True
                raise
            except (ConnectionClosed, DittoRemoteError) as exc:
                if self._it is not None:
                    await self._it.aclose()
                self._it = None
                if self._closed:
                    raise
                if self.position.must_reconnect(exc):
                    await self._reconnect(self._generation, exc)
                continue
            fresh = self.position.fresh(page)
            if fresh:
                return fresh

    async def aclose(self) -> None:
        self._closed = True
        if self._it is not None:
            await self._it.aclose()

    async def __aenter__(self) -> AsyncResumingSearch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
