"""The synchronous RSocket API: ``connect(url)`` and ``serve(url, handler)``.

Every call may come from any application thread; it is handed to the
connection's owning thread, which alone drives the sans-IO core through
:class:`~.rsocket_engine.RSocketEngine`. ``loop=`` picks the driver: a thread
per connection (``"thread"``, :mod:`.threads`), the process-wide selector
loop (``"selector"``), or any :class:`~.selector.Loop`: one thread for many
connections. The API is the same on all of them.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from ..drive.choice import LoopChoice, message_framed, new_acceptor, new_driver, pick_loop
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer, PeersServer
from ..drive.queues import Batcher, CreditQueue, EndOfStream
from ..drive.selector import LoopConnection
from ..drive.streams import RemoteStreamPublisher, StreamIterator, SubscriberSink
from ..drive.threads import ConnectionThread
from ..transport import Transport, listen, open_transport
from ..transport.urls import Endpoint
from ..transport.websocket import WebSocketOptions
from .engine import EngineOptions, RequestHandle, RSocketEngine
from .pipeline import Answer, ResponsePipeline
from .types import Payload, as_payload

__all__ = ["Client", "RSocketPeer", "RemotePublisher", "Server", "connect", "serve"]

#: One remote request as a Reactive Streams Publisher (subscribe once): the
#: protocol-neutral :class:`~.session.RemoteStreamPublisher` bound to RSocket.
RemotePublisher = RemoteStreamPublisher[Payload, RequestHandle]

DEFAULT_PREFETCH = 256
MAX_REQUEST_N = 0x7FFFFFFF


def _check_prefetch(prefetch: int) -> int:
    if not isinstance(prefetch, int) or not 0 < prefetch <= MAX_REQUEST_N:
        raise ValueError(f"prefetch must be in 1..{MAX_REQUEST_N}, not {prefetch!r}")
    return prefetch


_new_tuple = tuple.__new__


def _raises(answer: BaseException, return_exceptions: bool) -> bool:
    """A pipelined answer that ends the iteration: any error unless
    ``return_exceptions``; a lost connection always."""
    return not return_exceptions or isinstance(answer, ConnectionClosed)


class RSocketPeer(DrivenPeer):
    """The requester side of one connection (a client, or the server's view of
    a connected client for server-initiated requests). Thread-safe."""

    def __init__(self, thread: Driver, engine: RSocketEngine) -> None:
        super().__init__(thread)
        self._engine = engine
        # Fire-and-forgets cross to the connection thread many per hand-off.
        self._fnf: Batcher[Payload] = Batcher(
            self._submit, engine.fire_and_forget_many, lambda: self._thread.is_owner
        )

    @property
    def peer_address(self) -> str:
        return self._thread.transport.peer

    @property
    def transport(self) -> Transport:
        """The connection's transport (e.g. ``TlsTransport.peer_certificate``)."""
        return self._thread.transport

    # -- blocking requests -----------------------------------------------
    def request_response(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> Payload | None:
        """Send REQUEST_RESPONSE and wait up to ``timeout`` s for the reply.

        Returns the payload (``None`` if the responder completed empty). Raises
        :class:`~.rsocket_types.RSocketError` for an ERROR reply,
        :class:`~.threads.ConnectionClosed` if the connection goes away,
        :class:`TimeoutError` (after cancelling the request) on timeout.
        """
        if self._thread.is_owner:
            raise RuntimeError(
                "blocking request_response on the connection thread would deadlock;"
                " use response_publisher()"
            )
        payload = as_payload(data, metadata)
        queue: CreditQueue[Payload] = CreditQueue(granted=1)
        handle = RequestHandle("rr", queue)
        self._thread.call_soon(lambda: self._engine.start_request(handle, payload, 1), timeout)
        try:
            return queue.get(timeout)
        except EndOfStream:
            return None
        except TimeoutError:
            self._cancel(handle)
            raise

    def request_response_many(
        self,
        requests: Iterable[object],
        *,
        in_flight: int = 64,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> Iterator[Payload | None]:
        """Pipelined REQUEST_RESPONSEs: an iterator of the answers, in the order
        of ``requests`` (payloads, bytes, str or (data, metadata) pairs).

        Keeps up to ``in_flight`` requests outstanding; ``requests`` is pulled
        lazily, at most ``2 * in_flight`` ahead of what was consumed, so an
        endless iterable is fine and memory stays bounded. Each answer is a
        payload (``None``: completed empty). An ERROR answer raises its
        :class:`~.rsocket_types.RSocketError` at its position (after the
        answers before it), or is yielded as the exception object with
        ``return_exceptions=True``. A lost connection always raises
        :class:`~.threads.ConnectionClosed` (no later request can be answered).
        ``timeout`` bounds each wait for the next answer (:class:`TimeoutError`).
        Closing the iterator early (``break``, ``close()``, an exception)
        cancels what is still outstanding.
        """
        if self._thread.is_owner:
            raise RuntimeError(
                "request_response_many blocks; on the connection thread use response_publisher()"
            )
        if not isinstance(in_flight, int) or not 0 < in_flight <= MAX_REQUEST_N:
            raise ValueError(f"in_flight must be in 1..{MAX_REQUEST_N}, not {in_flight!r}")
        answers: CreditQueue[Answer] = CreditQueue()
        pipeline = ResponsePipeline(self._engine, in_flight, answers)
        return self._pipelined(iter(requests), pipeline, answers, timeout, return_exceptions)

    def _pipelined(
        self,
        requests: Iterator[object],
        pipeline: ResponsePipeline,
        answers: CreditQueue[Answer],
        timeout: float | None,
        return_exceptions: bool,
    ) -> Iterator[Payload | None]:
        window = pipeline.window
        ahead = 2 * window  # handed over but not yet consumed, at most
        refill_at = max(1, window // 2)  # hand over in batches, not one by one
        submitted = consumed = 0
        exhausted = False
        early: dict[int, Payload | BaseException | None] = {}  # answered out of order
        try:
            while True:
                room = ahead - (submitted - consumed)
                if not exhausted and room >= refill_at:
                    batch = [
                        _new_tuple(Payload, (x, None)) if type(x) is bytes else as_payload(x)
                        for x in islice(requests, room)
                    ]
                    exhausted = len(batch) < room
                    if batch:
                        answers.grant(len(batch))
                        self._submit(lambda batch=batch: pipeline.feed(batch), timeout)  # type: ignore[misc]
                        submitted += len(batch)
                if consumed == submitted:
                    return
                for index, answer in answers.get_batch(timeout):
                    if index != consumed:
                        early[index] = answer
                        continue
                    consumed += 1
                    if isinstance(answer, BaseException) and _raises(answer, return_exceptions):
                        raise answer
                    yield answer  # type: ignore[misc]
                    while consumed in early:
                        answer = early.pop(consumed)
                        consumed += 1
                        if isinstance(answer, BaseException) and _raises(answer, return_exceptions):
                            raise answer
                        yield answer  # type: ignore[misc]
        finally:
            if consumed < submitted:
                with contextlib.suppress(ConnectionClosed):
                    self._submit(pipeline.cancel)

    def fire_and_forget(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> None:
        """Queue REQUEST_FNF. ``timeout`` bounds the wait only if the connection
        has a full batch of fire-and-forgets pending (the loop is behind)."""
        if type(data) is bytes and metadata is None:
            payload = _new_tuple(Payload, (data, None))  # Payload(data) minus its __new__
        else:
            payload = as_payload(data, metadata)
        self._fnf.put(payload, timeout)

    def metadata_push(self, metadata: bytes | str, timeout: float | None = None) -> None:
        md = as_payload(b"", metadata).metadata or b""
        self._submit(lambda: self._engine.metadata_push(md), timeout)

    def request_stream(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> StreamIterator[Payload]:
        """REQUEST_STREAM as an iterator of payloads that keeps ``prefetch``
        requested ahead and replenishes as items are consumed. ``timeout``
        bounds each wait for the next item. Closing it cancels the stream."""
        payload = as_payload(data, metadata)
        return self._inbound_iterator("stream", payload, _check_prefetch(prefetch), timeout, None)

    def request_channel(
        self,
        data: Iterable[object],
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> StreamIterator[Payload]:
        """REQUEST_CHANNEL: ``data`` (payloads, bytes, str or (data, metadata)
        pairs; the first one travels in the request frame, ``metadata`` joins
        it if given) is pulled on a worker thread only as the peer grants
        credit. Returns the inbound iterator, as :meth:`request_stream`."""
        items = iter(data)
        try:
            first = as_payload(next(items), metadata)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None
        return self._inbound_iterator("channel", first, _check_prefetch(prefetch), timeout, items)

    def _inbound_iterator(
        self,
        kind: str,
        payload: Payload,
        prefetch: int,
        timeout: float | None,
        outbound: Iterable[object] | None,
    ) -> StreamIterator[Payload]:
        queue: CreditQueue[Payload] = CreditQueue(granted=prefetch)
        handle = RequestHandle(kind, queue)
        self._submit(lambda: self._engine.start_request(handle, payload, prefetch, outbound))
        return StreamIterator(
            queue,
            prefetch,
            lambda n: self._more(handle, n),
            lambda: self._cancel(handle),
            timeout,
        )

    def _more(self, handle: RequestHandle, n: int) -> None:
        # Once closed, the iterator sees the connection error next.
        with contextlib.suppress(ConnectionClosed):
            self._submit(lambda: self._engine.request_more(handle, n))

    def _cancel(self, handle: RequestHandle) -> None:
        with contextlib.suppress(ConnectionClosed):
            self._submit(lambda: self._engine.cancel(handle))

    # -- the same requests as Publishers -------------------------------------
    def response_publisher(
        self, data: bytes | str, metadata: bytes | str | None = None
    ) -> RemotePublisher:
        """REQUEST_RESPONSE as a Publisher of at most one payload; the request is
        sent on the first ``request(n)``. Signals arrive on the connection thread."""
        return self._publisher("rr", as_payload(data, metadata), None)

    def stream_publisher(
        self, data: bytes | str, metadata: bytes | str | None = None
    ) -> RemotePublisher:
        """REQUEST_STREAM as a Publisher: the first ``request(n)`` sends the request
        with initial n, later ones REQUEST_N; ``cancel()`` sends CANCEL."""
        return self._publisher("stream", as_payload(data, metadata), None)

    def channel_publisher(
        self, data: Iterable[object], metadata: bytes | str | None = None
    ) -> RemotePublisher:
        items = iter(data)
        try:
            first = as_payload(next(items), metadata)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None
        return self._publisher("channel", first, items)

    def _publisher(
        self, kind: str, payload: Payload, outbound: Iterable[object] | None
    ) -> RemotePublisher:
        engine = self._engine

        # Run on the connection thread: every Subscriber signal, on_subscribe
        # included, comes from there (rule 1.3).
        def start(sink: SubscriberSink[Payload], n: int) -> RequestHandle:
            handle = RequestHandle(kind, sink)
            engine.start_request(handle, payload, n, outbound)
            return handle

        return RemoteStreamPublisher(self._submit, start, engine.request_more, engine.cancel)

    # -- lifecycle (close, abort, wait_closed: DrivenPeer) ----------------
    def grant_lease(self, ttl: float, requests: int) -> None:
        """Send LEASE: the peer may start ``requests`` requests within ``ttl`` s
        (only on a connection set up with lease)."""
        self._submit(lambda: self._engine.send_lease(ttl, requests))


class Client(RSocketPeer):
    """A client connection; a context manager that closes on exit."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
    **setup: Any,
) -> Client:
    """Connect to ``url`` (``tcp://host:port``, ``tls://host:port``,
    ``unix:///path``) and send SETUP.

    ``handler`` answers server-initiated requests. ``loop``: ``"thread"``
    (default: a thread for this connection), ``"selector"`` (the process-wide
    selector loop) or a :class:`~.selector.Loop`. ``tls://``: ``ssl_context``
    (default: system CAs, host name checked) and ``server_hostname``.
    ``ws://host:port/path`` / ``wss://``: one frame per binary message;
    ``websocket`` takes :class:`~.websocket.WebSocketOptions` (headers,
    subprotocols, max message size).
    ``setup`` options (see :class:`~.rsocket_engine.EngineOptions`):
    ``keepalive_interval``, ``max_lifetime`` (seconds), ``lease``,
    ``data_mime_type``, ``metadata_mime_type``, ``setup_data``,
    ``setup_metadata``, ``fragment_size``.
    """
    options = EngineOptions(**setup)
    driver_loop = pick_loop(loop)
    transport = open_transport(
        url,
        connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )
    engine = RSocketEngine.client(options, handler, message_framed=message_framed(transport))
    thread = new_driver(driver_loop, transport, engine, f"sansrs-client {transport.peer}")
    client = Client(thread, engine)
    engine.attach(thread, client)
    thread.start()
    return client


class Server(PeersServer[RSocketPeer]):
    """A listening RSocket server (one thread per connection, or a selector
    loop); ``peers``: live connections, for server-initiated requests."""


def serve(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[RSocketPeer], object] | None = None,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
    **options: Any,
) -> Server:
    """Listen on ``url`` and answer requests with ``handler`` (shared by every
    connection) or ``handler_factory(peer)`` (one per connection). Returns once
    listening; ``server.url`` has the real port when ``url`` asked for port 0.
    ``options``: ``lease`` (refuse clients that do not ask for leases; leases
    are granted to every client that asks), ``lease_ttl``, ``lease_requests``,
    ``fragment_size``, ``max_frame_size``, ``max_concurrent_streams``.
    ``loop``: ``"thread"`` (default: an accept thread and a thread per
    connection), ``"selector"`` (the process-wide selector loop accepts and
    drives every connection) or a :class:`~.selector.Loop`. ``tls://`` needs
    ``ssl_context`` (see :func:`~.tls.server_context`). ``ws://host:port/path``
    / ``wss://``: ``websocket`` takes :class:`~.websocket.WebSocketOptions`."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    engine_options = EngineOptions(**options)
    peers: list[RSocketPeer] = []

    driver_loop = pick_loop(loop)

    def make_connection(transport: Transport) -> ConnectionThread | LoopConnection:
        engine = RSocketEngine.server(engine_options, message_framed=message_framed(transport))
        thread = new_driver(
            driver_loop,
            transport,
            engine,
            f"sansrs-server {transport.peer}",
            on_exit=lambda t: peers.remove(peer) if peer in peers else None,
        )
        peer = RSocketPeer(thread, engine)
        engine.attach(thread, peer, handler_factory(peer) if handler_factory else handler)
        peers.append(peer)
        return thread

    listener = listen(url, ssl_context=ssl_context, websocket=websocket)
    accept = new_acceptor(driver_loop, listener, make_connection)
    accept.start()
    return Server(accept, peers)
