"""``connect(url)``: a client session with a Ditto WebSocket endpoint
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
from datetime import datetime
from typing import Any

from sansrs.ditto import DittoClientConfig, Kind

from ..drive.choice import LoopChoice, new_driver, pick_loop
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer
from ..drive.queues import CreditQueue
from ..drive.streams import RemoteStreamPublisher, StreamIterator, SubscriberSink, check_prefetch
from ..transport import open_transport
from ..transport.urls import Endpoint
from ..transport.websocket import WebSocketOptions
from .engine import DittoClientEngine, SubscribeRequest, SubscriptionHandle
from .types import basic_auth, bearer_auth, ws_endpoint

__all__ = ["DittoConnection", "connect"]

DEFAULT_PREFETCH = 64
DEFAULT_SEARCH_PREFETCH = 2
MAX_PREFETCH = 2**31 - 1


def _split_entity(entity: str) -> tuple[str, str]:
    namespace, sep, name = entity.partition(":")
    if not sep or not namespace or not name:
        raise ValueError(f"an entity ID is '<namespace>:<name>', not {entity!r}")
    return namespace, name


class DittoConnection(DrivenPeer):
    """A client session with a Ditto WebSocket endpoint. Thread-safe; a context manager."""

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
        engine = self._engine

        def start(sink: SubscriberSink[Any], n: int) -> SubscriptionHandle:
            handle = SubscriptionHandle(request, sink, n)
            engine.subscribe(handle)
            return handle

        def submit(fn: Callable[[], object]) -> None:
            self._submit(fn)

        return RemoteStreamPublisher(submit, start, engine.request_more, engine.cancel)

    # -- history ---------------------------------------------------------------
    @staticmethod
    def _history_request(
        entity: str,
        group: str,
        from_revision: int | None,
        to_revision: int | None,
        from_timestamp: datetime | str | None,
        to_timestamp: datetime | str | None,
        filter: str | None,
        headers: Mapping[str, Any] | None,
    ) -> SubscribeRequest:
        namespace, name = _split_entity(entity)
        return SubscribeRequest(
            kind=Kind.STREAMING,
            arguments={
                "namespace": namespace,
                "entity_name": name,
                "group": group,
                "from_historical_revision": from_revision,
                "to_historical_revision": to_revision,
                "from_historical_timestamp": from_timestamp,
                "to_historical_timestamp": to_timestamp,
                "filter": filter,
                "headers": headers,
            },
        )

    def subscribe_for_persisted_events(
        self,
        entity: str,
        *,
        from_revision: int | None = None,
        to_revision: int | None = None,
        from_timestamp: datetime | str | None = None,
        to_timestamp: datetime | str | None = None,
        filter: str | None = None,
        group: str = "things",
        headers: Mapping[str, Any] | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> StreamIterator[Any]:
        """The history of ``entity`` (``"<namespace>:<name>"``) as a blocking iterator.

        Each item is one event as Ditto sends it (a Ditto Protocol message as
        parsed JSON; ``sansrs.ditto.envelope_from_json`` makes it an
        ``Envelope``). ``prefetch`` events are requested at once and, each
        time half of them are consumed, that many more. ``timeout`` bounds
        each wait for an event (``TimeoutError``). Closing the iterator (or
        leaving its ``with``) cancels the subscription. A ``failed`` raises
        ``DittoRemoteError`` (``status``, ``code``, ``error.message``,
        ``description``); a lost connection ``ConnectionClosed``.
        """
        request = self._history_request(
            entity,
            group,
            from_revision,
            to_revision,
            from_timestamp,
            to_timestamp,
            filter,
            headers,
        )
        return self._iterator(request, prefetch, timeout)

    def persisted_events_publisher(
        self,
        entity: str,
        *,
        from_revision: int | None = None,
        to_revision: int | None = None,
        from_timestamp: datetime | str | None = None,
        to_timestamp: datetime | str | None = None,
        filter: str | None = None,
        group: str = "things",
        headers: Mapping[str, Any] | None = None,
    ) -> RemoteStreamPublisher[Any, Any]:
        """The same history as a Reactive Streams Publisher (one Subscriber).

        The subscribe is sent at the first ``request(n)``; Ditto's demand is
        the Subscriber's; ``cancel()`` cancels. Signals arrive on the
        connection thread.
        """
        request = self._history_request(
            entity,
            group,
            from_revision,
            to_revision,
            from_timestamp,
            to_timestamp,
            filter,
            headers,
        )
        return self._publisher(request)

    # -- search ------------------------------------------------------------------
    @staticmethod
    def _search_request(
        filter: str | None,
        options: str | None,
        namespaces: Iterable[str] | None,
        fields: str | None,
        headers: Mapping[str, Any] | None,
    ) -> SubscribeRequest:
        return SubscribeRequest(
            kind=Kind.SEARCH,
            arguments={
                "filter": filter,
                "options": options,
                "namespaces": None if namespaces is None else tuple(namespaces),
                "fields": fields,
                "headers": headers,
            },
        )

    def search(
        self,
        *,
        filter: str | None = None,
        options: str | None = None,
        namespaces: Iterable[str] | None = None,
        fields: str | None = None,
        headers: Mapping[str, Any] | None = None,
        prefetch: int = DEFAULT_SEARCH_PREFETCH,
        timeout: float | None = None,
    ) -> StreamIterator[list[Any]]:
        """A search (the older search protocol) as a blocking iterator of pages.

        Each item is one page (a list of things); demand counts pages, so
        ``prefetch`` is in pages. ``options`` is Ditto's string, e.g.
        ``"size(10),sort(+thingId)"``.
        """
        request = self._search_request(filter, options, namespaces, fields, headers)
        return self._iterator(request, prefetch, timeout)

    def search_publisher(
        self,
        *,
        filter: str | None = None,
        options: str | None = None,
        namespaces: Iterable[str] | None = None,
        fields: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> RemoteStreamPublisher[Any, Any]:
        """The same search as a Publisher of pages."""
        return self._publisher(self._search_request(filter, options, namespaces, fields, headers))

    def __enter__(self) -> DittoConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    **websocket: Any,
) -> DittoConnection:
    """Open a session with Ditto's WebSocket endpoint (``ws://host:port/ws/2``, ``wss://``).

    ``user``/``password`` send HTTP Basic authentication, ``token`` a Bearer
    token, in the upgrade request; ``headers`` adds any other request headers.
    ``wss://``: ``ssl_context`` (default: system CAs, host name checked) and
    ``server_hostname`` (the name to check instead of the URL's host).
    ``websocket``: further ``WebSocketOptions`` (``max_message_size``, ...).
    ``loop``: ``"thread"`` (default: a thread of its own), ``"selector"`` (the
    process-wide selector loop) or a :class:`~.selector.Loop` (one thread for
    many connections). A refused upgrade raises ``WebSocketHandshakeError`` (a
    ``ConnectionError``) with its ``status``. Each subscribe carries a fresh
    ``correlation-id`` (unless ``config`` brings its own factory), so Ditto's
    answers are matched to it even for the same entity or an error response.
    """
    if token is not None and (user is not None or password is not None):
        raise ValueError("pass user/password or token, not both")
    if (user is None) != (password is None):
        raise ValueError("user and password go together")
    extra = list(headers)
    if user is not None and password is not None:
        extra.append(("Authorization", basic_auth(user, password)))
    elif token is not None:
        extra.append(("Authorization", bearer_auth(token)))
    endpoint = ws_endpoint(url)
    options = WebSocketOptions(extra_headers=tuple(extra), **websocket)
    transport = open_transport(
        endpoint,
        connect_timeout,
        websocket=options,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
    )
    config = config or DittoClientConfig()
    if config.correlation_ids is None:
        config = dataclasses.replace(config, correlation_ids=lambda: str(uuid.uuid4()))
    engine = DittoClientEngine(config)
    driver = new_driver(pick_loop(loop), transport, engine, f"sansrs-ditto {transport.peer}")
    driver.start()
    return DittoConnection(driver, engine)
