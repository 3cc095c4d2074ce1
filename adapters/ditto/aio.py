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
from typing import Any, Generic, Self, TypeVar

from typing_extensions import Unpack

from sansrs.ditto import DittoClientConfig, DittoServerConfig

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
from .follow import Core, FollowRead, HistoryRead, SearchRead
from .history import HistorySource
from .live import LiveTap
from .peer import DEFAULT_PREFETCH, DEFAULT_SEARCH_PREFETCH, MAX_PREFETCH, subscription_publisher
from .resume import Reconnecting, ReconnectPolicy
from .server import server_config, server_websocket_options
from .steps import END, Close, CurrentConnection, Op, Open, Pause, Pull, Restore, Retire, arun
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


# -- reconnect and resume under asyncio: the steps of session.py and follow.py, awaited --

Current = Callable[[], Awaitable[tuple[AsyncDittoConnection, int]]]
Reconnect = Callable[[int, BaseException], Awaitable[None]]


# The methods and keywords of session.DittoSession, by choice (its logic is resume's and follow's).
class AsyncDittoSession:
    """The asyncio form of ``session.DittoSession`` (the same methods and
    keywords, the same reconnect: :class:`~.resume.Reconnecting`): a client
    whose connection is restored when lost (``reconnect``: a
    ``ReconnectPolicy``) and whose iterators resume after their last
    delivered revision. Open it with ``async with AsyncDittoSession(url,
    ...) as ditto`` (or ``await ditto.start()``); ``connect_options`` as for
    :func:`connect` (a token provider is asked again on every reconnect)."""

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
        self._state = Reconnecting(clock)
        self._lock = asyncio.Lock()
        self._connection: AsyncDittoConnection | None = None

    @property
    def reconnects(self) -> int:
        """Connections restored so far (inspection)."""
        return self._state.reconnects

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
            return self.connection, self._state.generation

    async def reconnect(self, generation: int, cause: BaseException) -> None:
        """Restore the connection of ``generation`` (see the synchronous
        ``DittoSession.reconnect``)."""
        async with self._lock:
            await arun(self._state.reconnect(generation, cause, self.policy), self._perform)

    async def _perform(self, op: Op) -> Any:
        """A reconnect's op, awaited (the lock held)."""
        if isinstance(op, Pause):
            await asyncio.sleep(op.seconds)
            return self._state.closed
        if isinstance(op, Open):
            self._connection = await connect(self._url, **self._options)
        elif isinstance(op, Retire):
            await self.connection.close()
        else:
            raise AssertionError(f"not a reconnect's op: {op!r}")
        return None

    async def subscribe_for_persisted_events(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> AsyncResumingHistory:
        """The history of ``entity``, resumed after the last delivered revision."""
        return await _started(AsyncResumingHistory(self.current, self.reconnect, entity,
                                                   dict(query), prefetch, timeout))

    async def follow(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> AsyncFollowEvents:
        """The history of ``entity``, then its live events (no end)."""
        return await _started(AsyncFollowEvents(self.current, self.reconnect, entity,
                                                dict(query), prefetch, timeout))

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
        self._state.closed = True
        if self._connection is not None:
            await self._connection.close()


R = TypeVar("R", bound="AsyncResuming[Any]")


async def _started(read: R) -> R:
    """``read`` subscribed now, so its window fills while the caller gets
    ready (as the synchronous iterators do when made)."""
    with contextlib.suppress(ConnectionClosed):  # the first __anext__ reconnects
        await read.start()
    return read


def awaiting(current: Current, reconnect: Reconnect) -> Callable[[Op], Awaitable[Any]]:
    """How the asyncio iterators wait: each op awaited on the event loop
    (``perform`` for :func:`~.steps.arun`; ``follow.blocking`` blocks)."""

    async def perform(op: Op) -> Any:
        if isinstance(op, Pull):
            return await anext(op.stream, END)
        if isinstance(op, Close):
            return await op.stream.aclose()
        if isinstance(op, CurrentConnection):
            return await current()
        if isinstance(op, Restore):
            return await reconnect(op.generation, op.cause)
        raise AssertionError(f"not an iterator's op: {op!r}")

    return perform


class AsyncResuming(Generic[Core]):
    """A resumable read as an async iterator: ``core``'s steps (those of
    ``follow.Resuming``) awaited on the event loop."""

    def __init__(self, current: Current, reconnect: Reconnect, core: Core) -> None:
        self._core = core
        self._perform = awaiting(current, reconnect)

    @property
    def position(self) -> Any:
        """Where the read is (:class:`~.resume.Position`, :class:`~.resume.SearchPosition`)."""
        return self._core.position

    @property
    def last(self) -> Any:
        """The last revision (a search: ``thingId``) handed out (None: none yet)."""
        return self._core.position.last

    @property
    def resumes(self) -> int:
        """Connections lost and resumed, subscriptions renewed after a 408."""
        return self._core.position.resumes  # type: ignore[no-any-return]

    async def start(self) -> None:
        """Subscribe now (a follow: once Ditto acknowledged the live events),
        so the window fills while the caller gets ready (else the first step does)."""
        await arun(self._core.start(), self._perform)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        item = await arun(self._core.next(), self._perform)
        if item is END:
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        await arun(self._core.close(), self._perform)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncResumingHistory(AsyncResuming[HistoryRead]):
    """The asyncio form of ``follow.ResumingHistory`` (its steps, awaited)."""

    def __init__(self, current: Current, reconnect: Reconnect, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, HistoryRead(entity, query, prefetch, timeout))
        self.entity = entity


class AsyncFollowEvents(AsyncResuming[FollowRead]):
    """The asyncio form of ``follow.FollowEvents``: history, then live (its
    steps, awaited)."""

    def __init__(self, current: Current, reconnect: Reconnect, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, FollowRead(entity, query, prefetch, timeout))
        self.entity = entity


class AsyncResumingSearch(AsyncResuming[SearchRead]):
    """The asyncio form of ``follow.ResumingSearch`` (its steps, awaited)."""

    def __init__(self, current: Current, reconnect: Reconnect, query: dict[str, Any],
                 prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, SearchRead(query, prefetch, timeout))
