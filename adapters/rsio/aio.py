"""reactive-streams-io under asyncio: ``async with connect(url) as client``,
``async with serve(url, publishers) as server`` (or ``await`` either:
:class:`~..drive.connecting.Connecting`).

The same engine as the synchronous API (:class:`~.engine.RsioEngine`) on the
asyncio driver (:class:`~..drive.aio.AsyncioReactor`): every transport, the
same timeouts and back-pressure. Subscriptions are async iterators
(``async for element in client.subscribe("name")``); published sources may
be Publishers, iterables, or async iterables / async generators (pulled on
the event loop only while the subscriber's demand lasts).
"""

from __future__ import annotations

import ssl

from sansrs.rsio import ConnectionConfig, Role

from ..drive.aio import AsyncPeer, AsyncServer, AsyncStream
from ..drive.config import LoopConfig
from ..drive.connecting import awaitable_context
from ..drive.connection import LoopConnection
from ..drive.endpoints import attaching, open_connection_async, open_server_async
from ..drive.publishers import RemoteStreamPublisher
from ..drive.streams import check_prefetch
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .engine import RsioEngine, Subscription, engine_factory
from .peer import DEFAULT_PACKED_PREFETCH, DEFAULT_PREFETCH, subscription_publisher
from .types import Publishers

__all__ = ["AsyncClient", "AsyncRsioPeer", "AsyncServer", "connect", "serve"]


class AsyncRsioPeer(AsyncPeer):
    """This side's view of one connection under asyncio: subscribe to the
    peer's publishers (its own are served by the engine). Use it from the
    event loop's thread."""

    def __init__(self, driver: LoopConnection, engine: RsioEngine) -> None:
        super().__init__(driver)
        self._engine = engine

    def subscribe(
        self, name: str, prefetch: int = DEFAULT_PREFETCH, timeout: float | None = None
    ) -> AsyncStream[bytes]:
        """The peer's publisher ``name`` as an async iterator of elements
        (``bytes``), ``prefetch`` requested ahead; ``timeout`` bounds each
        wait. Raises :class:`~.errors.RsioError` for the publisher's onError;
        ``aclose()`` cancels."""
        return self._subscribe(name, check_prefetch(prefetch), timeout, packed=False)

    def subscribe_packed(
        self, name: str, prefetch: int = DEFAULT_PACKED_PREFETCH, timeout: float | None = None
    ) -> AsyncStream[bytes]:
        """A fixed-size stream as batches of elements (``bytes``, elements
        back to back); ``prefetch`` counts elements. Fails with
        ``ValueError`` if the publisher is not in fixed-size mode."""
        return self._subscribe(name, check_prefetch(prefetch), timeout, packed=True)

    def _subscribe(
        self, name: str, prefetch: int, timeout: float | None, *, packed: bool
    ) -> AsyncStream[bytes]:
        self._check_open()
        engine = self._engine
        box: list[Subscription] = []
        stream: AsyncStream[bytes] = AsyncStream(
            prefetch,
            lambda n: self._submit(lambda: engine.request_more(box[0], n)),
            lambda: self._submit(lambda: engine.cancel(box[0])),
            timeout=timeout,
            units=(lambda batch: len(batch) // box[0].element_size) if packed else None,
            explain=engine.unexpected_input,
        )
        sub = Subscription(name, stream, packed=packed)
        box.append(sub)
        self._submit(lambda: engine.start_subscription(sub, prefetch))
        return stream

    def publisher(self, name: str) -> RemoteStreamPublisher[bytes, Subscription]:
        """The peer's publisher ``name`` as a Reactive Streams Publisher (one
        Subscriber; subscribe is sent at the first ``request(n)``)."""
        return subscription_publisher(self._engine, self._submit, name)


class AsyncClient(AsyncRsioPeer):
    """A client connection; ``async with`` closes it."""


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def connect(
    url: str | Endpoint,
    *,
    publishers: Publishers | None = None,
    config: ConnectionConfig | None = None,
    connect_timeout: float = 10.0,
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
) -> AsyncClient:
    """Connect to ``url`` (any transport URL); options as for the synchronous
    ``connect``. The TCP connect and any TLS or WebSocket handshake run on a
    worker thread."""

    return await open_connection_async(
        url,
        engine_factory(Role.CLIENT, publishers, config),
        attaching(AsyncClient),
        config=loop_config,
        connect_timeout=connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def serve(
    url: str | Endpoint,
    publishers: Publishers | None = None,
    *,
    config: ConnectionConfig | None = None,
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
) -> AsyncServer[AsyncRsioPeer]:
    """Listen on ``url`` and serve ``publishers`` (names to Publishers,
    iterables or async iterables, or a function of the name); options as for
    the synchronous ``serve``."""

    accept, peers = await open_server_async(
        url,
        engine_factory(Role.SERVER, publishers, config),
        attaching(AsyncRsioPeer),
        config=loop_config,
        ssl_context=ssl_context,
        websocket=websocket,
    )
    return AsyncServer(accept, peers)
