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

import ssl
from collections.abc import Callable, Iterable
from typing import Any

from typing_extensions import Unpack

from sansrs.ditto import DittoClientConfig, DittoServerConfig

from ..drive.aio import AsyncPeer, AsyncServer, AsyncStream
from ..drive.config import LoopConfig
from ..drive.connecting import awaitable_context
from ..drive.connection import LoopConnection
from ..drive.endpoints import attaching, open_connection_async, open_server_async
from ..drive.publishers import RemoteStreamPublisher
from ..drive.streams import check_prefetch
from ..transport import Transport
from ..transport.urls import Endpoint
from .client import client_config, websocket_options
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
from .history import HistorySource
from .peer import DEFAULT_PREFETCH, DEFAULT_SEARCH_PREFETCH, MAX_PREFETCH, subscription_publisher
from .server import server_config, server_websocket_options
from .types import Authorize, ws_endpoint

__all__ = [
    "AsyncDittoConnection",
    "AsyncDittoServerPeer",
    "AsyncServer",
    "connect",
    "serve",
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
    token: str | None = None,
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
    a worker thread."""
    options = websocket_options(user, password, token, headers, websocket)
    core_config = client_config(config)

    return await open_connection_async(
        ws_endpoint(url),
        lambda transport: DittoClientEngine(core_config),
        AsyncDittoConnection,
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
