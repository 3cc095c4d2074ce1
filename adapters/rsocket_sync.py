"""The synchronous RSocket API: ``connect(url)`` and ``serve(url, handler)``.

Every call may come from any application thread; it is handed to the
connection's owning thread (``threads.ConnectionThread``), which alone drives
the sans-IO core through :class:`~.rsocket_engine.RSocketEngine`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from sansrs.streams import RULE_3_9, IllegalArgumentError

from .queues import CreditQueue, EndOfStream
from .rsocket_engine import EngineOptions, RequestHandle, RSocketEngine, SubscriberSink
from .rsocket_types import Payload, as_payload
from .session import MAX_DEMAND, StreamIterator
from .threads import ConnectionClosed, ConnectionThread, ServerThread
from .transports import Transport, listen, open_transport
from .urls import Endpoint

__all__ = ["Client", "RSocketPeer", "RemotePublisher", "Server", "connect", "serve"]

log = logging.getLogger("sansrs.adapters.rsocket")

DEFAULT_PREFETCH = 256
MAX_REQUEST_N = 0x7FFFFFFF


def _check_prefetch(prefetch: int) -> int:
    if not isinstance(prefetch, int) or not 0 < prefetch <= MAX_REQUEST_N:
        raise ValueError(f"prefetch must be in 1..{MAX_REQUEST_N}, not {prefetch!r}")
    return prefetch


class RSocketPeer:
    """The requester side of one connection (a client, or the server's view of
    a connected client for server-initiated requests). Thread-safe."""

    def __init__(self, thread: ConnectionThread, engine: RSocketEngine) -> None:
        self._thread = thread
        self._engine = engine

    # -- plumbing --------------------------------------------------------
    def _submit(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        if self._thread.is_owner:
            fn()  # a handler requesting from the connection thread itself
        else:
            self._thread.call_soon(fn, timeout)

    @property
    def closed(self) -> bool:
        return not self._thread.alive

    @property
    def peer_address(self) -> str:
        return self._thread.transport.peer

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
            raise RuntimeError("blocking request_response on the connection thread would deadlock;"
                               " use response_publisher()")
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

    def fire_and_forget(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> None:
        """Queue REQUEST_FNF. ``timeout`` bounds the wait only if the connection's
        inbox is full (the loop is behind)."""
        if type(data) is bytes and metadata is None:
            payload = Payload(data)
        else:
            payload = as_payload(data, metadata)
        fnf = self._engine.fire_and_forget
        self._submit(lambda: fnf(payload), timeout)

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
        return RemotePublisher(self, "rr", as_payload(data, metadata), None)

    def stream_publisher(
        self, data: bytes | str, metadata: bytes | str | None = None
    ) -> RemotePublisher:
        """REQUEST_STREAM as a Publisher: the first ``request(n)`` sends the request
        with initial n, later ones REQUEST_N; ``cancel()`` sends CANCEL."""
        return RemotePublisher(self, "stream", as_payload(data, metadata), None)

    def channel_publisher(
        self, data: Iterable[object], metadata: bytes | str | None = None
    ) -> RemotePublisher:
        items = iter(data)
        try:
            first = as_payload(next(items), metadata)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None
        return RemotePublisher(self, "channel", first, items)

    # -- lifecycle ---------------------------------------------------------
    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: stop, flush what is queued, close. Outstanding requests fail."""
        self._thread.close(timeout)

    def abort(self, timeout: float | None = 5.0) -> None:
        """Abrupt: reset the TCP connection at once."""
        self._thread.abort(timeout)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._thread.join(timeout)

    def grant_lease(self, ttl: float, requests: int) -> None:
        """Send LEASE: the peer may start ``requests`` requests within ``ttl`` s
        (only on a connection set up with lease)."""
        self._submit(lambda: self._engine.send_lease(ttl, requests))


class RemotePublisher:
    """One remote request as a Reactive Streams Publisher (subscribe once)."""

    def __init__(
        self, peer: RSocketPeer, kind: str, payload: Payload, outbound: Iterable[object] | None
    ) -> None:
        self._peer = peer
        self._kind = kind
        self._payload = payload
        self._outbound = outbound
        self._subscribed = False
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Any) -> None:
        if subscriber is None:
            raise TypeError("subscribe(None)")  # rule 1.9
        with self._lock:
            again, self._subscribed = self._subscribed, True
        if again:
            subscriber.on_subscribe(_NoSubscription())
            subscriber.on_error(RuntimeError("this request was already subscribed"))  # rule 1.9
            return
        sink = SubscriberSink(subscriber)
        handle = RequestHandle(self._kind, sink)
        sink.on_broken = lambda: self._peer._cancel(handle)
        subscription = _RemoteSubscription(self, handle)
        # on_subscribe too runs on the connection thread, so that an on_next
        # caused by a request(n) inside it cannot overlap it (rule 1.3).
        def signal_subscribe() -> None:
            try:
                subscriber.on_subscribe(subscription)
            except Exception:
                log.exception("Subscriber.on_subscribe raised (rule 2.13); cancelling")
                self._peer._cancel(handle)

        try:
            self._peer._submit(signal_subscribe)
        except ConnectionClosed as exc:
            subscriber.on_subscribe(_NoSubscription())
            subscriber.on_error(exc)


class _NoSubscription:
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


class _RemoteSubscription:
    def __init__(self, publisher: RemotePublisher, handle: RequestHandle) -> None:
        self._publisher = publisher
        self._handle = handle
        self._started = False
        self._lock = threading.Lock()

    def request(self, n: int) -> None:
        peer, handle = self._publisher._peer, self._handle
        if n <= 0:
            # Rule 3.9, signalled from the connection thread like every other
            # signal (rule 1.3).
            error = IllegalArgumentError(f"{RULE_3_9} (got {n})")
            engine = peer._engine

            def fail() -> None:
                if not handle.cancelled:
                    handle.sink.finish(error)
                    engine.cancel(handle)

            try:
                peer._submit(fail)
            except ConnectionClosed as exc:
                handle.sink.finish(exc)
            return
        n = min(n, MAX_DEMAND)
        with self._lock:
            first, self._started = not self._started, True
        engine = peer._engine
        try:
            if first:
                p = self._publisher
                peer._submit(lambda: engine.start_request(handle, p._payload, n, p._outbound))
            else:
                peer._submit(lambda: engine.request_more(handle, n))
        except ConnectionClosed as exc:
            handle.sink.finish(exc)

    def cancel(self) -> None:
        self._publisher._peer._cancel(self._handle)


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
    **setup: Any,
) -> Client:
    """Connect to ``url`` (``tcp://host:port``) and send SETUP.

    ``handler`` answers server-initiated requests. ``setup`` options (see
    :class:`~.rsocket_engine.EngineOptions`): ``keepalive_interval``,
    ``max_lifetime`` (seconds), ``lease``, ``data_mime_type``,
    ``metadata_mime_type``, ``setup_data``, ``setup_metadata``, ``fragment_size``.
    """
    options = EngineOptions(**setup)
    transport = open_transport(url, connect_timeout)
    engine = RSocketEngine.client(options, handler)
    thread = ConnectionThread(transport, engine, name=f"sansrs-client {transport.peer}")
    client = Client(thread, engine)
    engine.attach(thread, client)
    thread.start()
    return client


class Server:
    """A listening RSocket server; one thread per accepted connection."""

    def __init__(self, accept: ServerThread, peers: list[RSocketPeer]) -> None:
        self._accept = accept
        self._peers = peers
        self.endpoint: Endpoint = accept.listener.endpoint

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def peers(self) -> list[RSocketPeer]:
        """Live connections, for server-initiated requests."""
        return [p for p in self._peers if not p.closed]

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        """Stop accepting and close every connection (``abort``: reset them)."""
        self._accept.close(timeout, abort=abort)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._accept.wait_closed(timeout)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[RSocketPeer], object] | None = None,
    **options: Any,
) -> Server:
    """Listen on ``url`` and answer requests with ``handler`` (shared by every
    connection) or ``handler_factory(peer)`` (one per connection). Returns once
    listening; ``server.url`` has the real port when ``url`` asked for port 0.
    ``options``: ``lease`` (refuse clients that do not ask for leases; leases
    are granted to every client that asks), ``lease_ttl``, ``lease_requests``,
    ``fragment_size``, ``max_frame_size``, ``max_concurrent_streams``."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    engine_options = EngineOptions(**options)
    peers: list[RSocketPeer] = []

    def make_connection(transport: Transport) -> ConnectionThread:
        engine = RSocketEngine.server(engine_options)
        thread = ConnectionThread(
            transport, engine, name=f"sansrs-server {transport.peer}",
            on_exit=lambda t: peers.remove(peer) if peer in peers else None,
        )
        peer = RSocketPeer(thread, engine)
        engine.attach(thread, peer, handler_factory(peer) if handler_factory else handler)
        peers.append(peer)
        return thread

    accept = ServerThread(listen(url), make_connection)
    accept.start()
    return Server(accept, peers)
