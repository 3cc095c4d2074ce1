"""The synchronous Ditto API: ``connect(url)`` to a Ditto WebSocket (``ws://host/ws/2``)
and ``serve(url, history)`` to serve the protocol from a history source.

Every call may come from any application thread; it is handed to the
connection's owning thread (``threads.ConnectionThread``), which alone drives
the sans-IO core through :mod:`.ditto_engine`. See docs/protocols/ditto.md.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hmac
import importlib
import ssl
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from sansrs.ditto import DittoClientConfig, DittoServerConfig, Kind

from ..drive.choice import LoopChoice, new_acceptor, new_driver, pick_loop
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer, ListeningServer
from ..drive.queues import CreditQueue
from ..drive.selector import LoopConnection, LoopServer
from ..drive.streams import RemoteStreamPublisher, StreamIterator, SubscriberSink
from ..drive.threads import ConnectionThread
from ..transport import Transport, listen, open_transport
from ..transport.urls import Endpoint, parse_url
from .engine import DittoClientEngine, DittoServerEngine, SubscribeRequest, SubscriptionHandle
from .history import HistorySource

__all__ = [
    "DittoConnection",
    "DittoHistoryServer",
    "DittoSession",
    "basic_auth",
    "bearer_auth",
    "connect",
    "require_basic",
    "require_bearer",
    "serve",
]

DEFAULT_PREFETCH = 64
DEFAULT_SEARCH_PREFETCH = 2
MAX_PREFETCH = 2**31 - 1


def basic_auth(user: str, password: str) -> str:
    """The ``Authorization`` header value for HTTP Basic authentication."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def bearer_auth(token: str) -> str:
    """The ``Authorization`` header value for a Bearer token (e.g. a JWT)."""
    return f"Bearer {token}"


def _websocket_options(**options: Any) -> Any:
    # Imported late: the WebSocket transport needs the ``ws`` extra (wsproto).
    websocket = importlib.import_module("sansrs.adapters.transport.websocket")
    return websocket.WebSocketOptions(**options)


def _ws_endpoint(url: str | Endpoint) -> Endpoint:
    """Ditto speaks over WebSocket only: ``ws://`` or ``wss://``."""
    endpoint = url if isinstance(url, Endpoint) else parse_url(url)
    if endpoint.scheme not in ("ws", "wss"):
        raise ValueError(f"Ditto runs over WebSocket: expected ws:// or wss://, not {endpoint.url}")
    return endpoint


def _split_entity(entity: str) -> tuple[str, str]:
    namespace, sep, name = entity.partition(":")
    if not sep or not namespace or not name:
        raise ValueError(f"an entity ID is '<namespace>:<name>', not {entity!r}")
    return namespace, name


def _check_prefetch(prefetch: int) -> int:
    if not isinstance(prefetch, int) or not 0 < prefetch <= MAX_PREFETCH:
        raise ValueError(f"prefetch must be in 1..{MAX_PREFETCH}, not {prefetch!r}")
    return prefetch


class DittoConnection(DrivenPeer):
    """A client session with a Ditto WebSocket endpoint. Thread-safe; a context manager."""

    def __init__(self, thread: Driver, engine: DittoClientEngine) -> None:
        super().__init__(thread)
        self._engine = engine

    def _iterator(
        self, request: SubscribeRequest, prefetch: int, timeout: float | None
    ) -> StreamIterator[Any]:
        prefetch = _check_prefetch(prefetch)
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
    endpoint = _ws_endpoint(url)
    options = _websocket_options(extra_headers=tuple(extra), **websocket)
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


# -- server -----------------------------------------------------------------------------


Authorize = Callable[[Mapping[str, str]], bool]


def require_basic(user: str, password: str) -> Authorize:
    """An ``authenticate`` check accepting only these Basic credentials."""
    expected = basic_auth(user, password)
    return lambda headers: hmac.compare_digest(headers.get("authorization", ""), expected)


def require_bearer(token: str) -> Authorize:
    """An ``authenticate`` check accepting only this Bearer token."""
    expected = bearer_auth(token)
    return lambda headers: hmac.compare_digest(headers.get("authorization", ""), expected)


class DittoSession:
    """One live WebSocket session of a server (inspection and control)."""

    def __init__(self, thread: Driver, engine: DittoServerEngine) -> None:
        self.thread = thread
        self.engine = engine

    def inspect(self, fn: Callable[[DittoServerEngine], Any], timeout: float = 5.0) -> Any:
        """Run ``fn(engine)`` on the session's thread (the only safe place to
        read its state) and return the result; ``TimeoutError`` if it is stuck."""
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            try:
                box.append(fn(self.engine))
            finally:
                done.set()

        self.thread.call_soon(run, timeout)
        if not done.wait(timeout) or not box:
            raise TimeoutError("the session thread did not run the inspection")
        return box[0]

    def close(self, timeout: float | None = 5.0) -> None:
        self.thread.close(timeout)


class DittoHistoryServer(ListeningServer):
    """A listening Ditto endpoint; one thread per WebSocket session (or a selector loop)."""

    def __init__(self, accept: LoopServer, sessions: list[DittoSession]) -> None:
        super().__init__(accept)
        self._sessions = sessions

    @property
    def sessions(self) -> list[DittoSession]:
        """The live sessions."""
        return [s for s in list(self._sessions) if s.thread.alive]


def _headers_of(request: Any) -> dict[str, str]:
    """The upgrade request's headers, names lower-case."""
    out: dict[str, str] = {}
    for name, value in getattr(request, "headers", ()):
        key = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        out[key.lower()] = text
    return out


def serve(
    url: str | Endpoint,
    history: HistorySource,
    *,
    authenticate: Authorize | None = None,
    config: DittoServerConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    threaded_sources: bool = False,
    loop: LoopChoice = "thread",
    **websocket: Any,
) -> DittoHistoryServer:
    """Serve the Ditto protocol on ``url`` (``ws://host:port/ws/2``) from ``history``.

    ``authenticate(headers)`` (names lower-case) decides on each WebSocket
    upgrade; a refusal answers HTTP 401 (see :func:`require_basic`,
    :func:`require_bearer`). ``config``: the core's limits and timeouts
    (``idle_timeout``, ...). ``ssl_context``: the certificate for ``wss://``
    (see ``sansrs.adapters.transport.tls.server_context``). ``threaded_sources``: pull
    each subscription's iterable on a worker thread of its own (for sources
    whose items block, e.g. a database cursor); by default iterables are
    pulled on the session's thread, which must then not block. ``loop``:
    ``"thread"`` (default: an accept thread and a thread per session),
    ``"selector"`` (the process-wide selector loop) or a :class:`~.selector.Loop`
    that accepts and drives every session (one thread for many connections).
    ``websocket``: further
    ``WebSocketOptions`` (``max_message_size``, ...). Returns once
    listening; ``server.url`` has the real port when ``url`` asked for 0.
    """
    endpoint = _ws_endpoint(url)
    core_config = config or DittoServerConfig()
    sessions: list[DittoSession] = []

    def authorize(request: Any) -> int | None:
        if authenticate is None:
            return None
        try:
            allowed = authenticate(_headers_of(request))
        except Exception:
            allowed = False
        return None if allowed else 401

    options = _websocket_options(authorize=authorize, **websocket)
    driver_loop = pick_loop(loop)

    def make_connection(transport: Transport) -> ConnectionThread | LoopConnection:
        engine = DittoServerEngine(history, core_config, threaded_sources=threaded_sources)

        def forget(_: object) -> None:
            if session in sessions:
                sessions.remove(session)

        name = f"sansrs-ditto-server {transport.peer}"
        thread = new_driver(driver_loop, transport, engine, name, on_exit=forget)
        session = DittoSession(thread, engine)
        engine.notify = thread.wake
        engine.connection_headers = _LazyHeaders(transport)
        sessions.append(session)
        return thread

    listener = listen(endpoint, websocket=options, ssl_context=ssl_context)
    accept = new_acceptor(driver_loop, listener, make_connection)
    accept.start()
    return DittoHistoryServer(accept, sessions)


class _LazyHeaders(Mapping[str, str]):
    """The upgrade request's headers, read from the transport when first asked
    (the handshake completes after the connection thread has started)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._headers: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._headers is None:
            request = getattr(self._transport, "request", None)
            self._headers = _headers_of(request) if request is not None else {}
        return self._headers

    def __getitem__(self, name: str) -> str:
        return self._get()[name.lower()]

    def __iter__(self) -> Any:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())
