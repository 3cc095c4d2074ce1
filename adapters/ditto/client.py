"""``connect(url)``: a client connection to a Ditto WebSocket endpoint
(``ws://host/ws/2``): persisted-events history and search as blocking
iterators or Publishers. Every call may come from any application thread; it
is handed to the connection's owning thread, which alone drives the sans-IO
core through :class:`~.engine.DittoClientEngine`. See docs/protocols/ditto.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ssl
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from typing_extensions import Unpack

from sansrs.ditto import DittoClientConfig

from ..drive.config import LoopConfig
from ..drive.endpoints import LoopChoice, open_connection
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer
from ..drive.queues import CreditQueue
from ..drive.streams import RemoteStreamPublisher, StreamIterator, SubscriberSink, check_prefetch
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .engine import (
    DittoClientEngine,
    HistoryQuery,
    SearchQuery,
    SubscribeRequest,
    SubscriptionHandle,
    history_request,
    search_request,
)
from .types import basic_auth, bearer_auth, ws_endpoint

__all__ = [
    "DittoConnection",
    "client_config",
    "connect",
    "subscription_publisher",
    "websocket_options",
]

DEFAULT_PREFETCH = 64
DEFAULT_SEARCH_PREFETCH = 2
MAX_PREFETCH = 2**31 - 1


class DittoConnection(DrivenPeer):
    """A client connection to a Ditto WebSocket endpoint. Thread-safe; a
    context manager. (The asyncio twin, with the same methods returning async
    iterators, is :class:`~.aio.AsyncDittoConnection`.)"""

    def __init__(self, thread: Driver, engine: DittoClientEngine) -> None:
        super().__init__(thread)
        self._engine = engine

    def _iterator(
        self, request: SubscribeRequest, prefetch: int, timeout: float | None
    ) -> StreamIterator[Any]:
        prefetch = check_prefetch(prefetch, MAX_PREFETCH)
        queue: CreditQueue[Any] = CreditQueue(granted=prefetch)
        handle = SubscriptionHandle(request, queue, prefetch)
        engine = self._engine
        self._submit(lambda: engine.subscribe(handle))

        def more(n: int) -> None:
            with contextlib.suppress(ConnectionClosed):  # the iterator sees why next
                self._submit(lambda: engine.request_more(handle, n))

        def cancel() -> None:
            with contextlib.suppress(ConnectionClosed):
                self._submit(lambda: engine.cancel(handle))

        return StreamIterator(queue, prefetch, more, cancel, timeout)

    def _publisher(self, request: SubscribeRequest) -> RemoteStreamPublisher[Any, Any]:
        return subscription_publisher(self._engine, self._submit, request)

    # -- history ---------------------------------------------------------------
    def subscribe_for_persisted_events(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> StreamIterator[Any]:
        """The history of ``entity`` (``"<namespace>:<name>"``) as a blocking iterator.

        ``query``: the range and filter (:class:`~.engine.HistoryQuery`:
        ``from_revision``, ``to_revision``, ``from_timestamp``,
        ``to_timestamp``, ``filter``, ``group``, ``headers``). Each item is
        one event as Ditto sends it (a Ditto Protocol message as parsed JSON;
        ``sansrs.ditto.envelope_from_json`` makes it an ``Envelope``).
        ``prefetch`` events are requested at once and, each time half of them
        are consumed, that many more. ``timeout`` bounds each wait for an
        event (``TimeoutError``). Closing the iterator (or leaving its
        ``with``) cancels the subscription. A ``failed`` raises
        ``DittoRemoteError`` (``status``, ``code``, ``error.message``,
        ``description``); a lost connection ``ConnectionClosed``.
        """
        return self._iterator(history_request(entity, **query), prefetch, timeout)

    def persisted_events_publisher(
        self, entity: str, **query: Unpack[HistoryQuery]
    ) -> RemoteStreamPublisher[Any, Any]:
        """The same history as a Reactive Streams Publisher (one Subscriber).

        The subscribe is sent at the first ``request(n)``; Ditto's demand is
        the Subscriber's; ``cancel()`` cancels. Signals arrive on the
        connection thread.
        """
        return self._publisher(history_request(entity, **query))

    # -- search ------------------------------------------------------------------
    def search(
        self,
        *,
        prefetch: int = DEFAULT_SEARCH_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[SearchQuery],
    ) -> StreamIterator[list[Any]]:
        """A search (the older search protocol) as a blocking iterator of pages.

        ``query`` (:class:`~.engine.SearchQuery`): ``filter``, ``options``
        (Ditto's string, e.g. ``"size(10),sort(+thingId)"``), ``namespaces``,
        ``fields``, ``headers``. Each item is one page (a list of things);
        demand counts pages, so ``prefetch`` is in pages.
        """
        return self._iterator(search_request(**query), prefetch, timeout)

    def search_publisher(self, **query: Unpack[SearchQuery]) -> RemoteStreamPublisher[Any, Any]:
        """The same search as a Publisher of pages."""
        return self._publisher(search_request(**query))

    def __enter__(self) -> DittoConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def subscription_publisher(
    engine: DittoClientEngine,
    submit: Callable[[Callable[[], object]], None],
    request: SubscribeRequest,
) -> RemoteStreamPublisher[Any, Any]:
    """A subscription as a Publisher, for either API (``submit`` runs a call on
    the connection's thread)."""

    def start(sink: SubscriberSink[Any], n: int) -> SubscriptionHandle:
        handle = SubscriptionHandle(request, sink, n)
        engine.subscribe(handle)
        return handle

    return RemoteStreamPublisher(submit, start, engine.request_more, engine.cancel)


def connect(
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
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    **websocket: Any,
) -> DittoConnection:
    """Connect to Ditto's WebSocket endpoint (``ws://host:port/ws/2``, ``wss://``).

    ``user``/``password`` send HTTP Basic authentication, ``token`` a Bearer
    token, in the upgrade request; ``headers`` adds any other request headers.
    ``wss://``: ``ssl_context`` (default: system CAs, host name checked) and
    ``server_hostname`` (the name to check instead of the URL's host).
    ``websocket``: further ``WebSocketOptions`` (``max_message_size``, ...).
    ``loop``: ``"thread"`` (default: a thread of its own), ``"selector"`` (the
    process-wide selector loop) or a :class:`~.selector.Loop` (one thread for
    many connections); ``loop_config``: the thread driver's limits and
    timeouts. A refused upgrade raises ``WebSocketHandshakeError`` (a
    ``ConnectionError``) with its ``status``. Each subscribe carries a fresh
    ``correlation-id`` (unless ``config`` brings its own factory), so Ditto's
    answers are matched to it even for the same entity or an error response.
    """
    options = websocket_options(user, password, token, headers, websocket)
    config = client_config(config)

    def new_peer(driver: Driver, engine: DittoClientEngine) -> DittoConnection:
        return DittoConnection(driver, engine)

    return open_connection(
        ws_endpoint(url),
        lambda transport: DittoClientEngine(config),
        new_peer,
        name="sansrs-ditto",
        loop=loop,
        config=loop_config,
        connect_timeout=connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=options,
    )


def websocket_options(
    user: str | None,
    password: str | None,
    token: str | None,
    headers: Iterable[tuple[str, str]],
    websocket: Mapping[str, Any],
) -> WebSocketOptions:
    """The upgrade request's options: authentication and extra headers."""
    if token is not None and (user is not None or password is not None):
        raise ValueError("pass user/password or token, not both")
    if (user is None) != (password is None):
        raise ValueError("user and password go together")
    extra = list(headers)
    if user is not None and password is not None:
        extra.append(("Authorization", basic_auth(user, password)))
    elif token is not None:
        extra.append(("Authorization", bearer_auth(token)))
    return WebSocketOptions(extra_headers=tuple(extra), **websocket)


def client_config(config: DittoClientConfig | None) -> DittoClientConfig:
    """Each subscribe carries a fresh correlation-id unless ``config`` has a factory."""
    config = config or DittoClientConfig()
    if config.correlation_ids is None:
        config = dataclasses.replace(config, correlation_ids=lambda: str(uuid.uuid4()))
    return config
