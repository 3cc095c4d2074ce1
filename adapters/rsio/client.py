"""The synchronous reactive-streams-io API: ``connect(url)`` and
``serve(url, publishers)``.

Both ends publish and subscribe (the protocol is bidirectional): a server
maps names to Publishers; a client may too (``connect(url, publishers=...)``)
and the server reaches it through ``server.peers``. A remote publisher is
consumed as a blocking iterator (:meth:`RsioPeer.subscribe`), as an iterator
of packed batches for fixed-size streams (:meth:`RsioPeer.subscribe_packed`,
the fast path: no Python call per element) or as a Reactive Streams
Publisher (:meth:`RsioPeer.publisher`). Calls from any thread are handed to
the connection's owning thread, which alone drives the sans-IO core through
:class:`~.rsio_engine.RsioEngine`. docs/protocols/rsio.md, "Adapters".
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Callable

from sansrs.rsio import ConnectionConfig, Role

from ..drive.choice import LoopChoice, message_framed, new_acceptor, new_driver, pick_loop
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer, PeersServer
from ..drive.queues import CreditQueue, EndOfStream
from ..drive.selector import LoopConnection
from ..drive.streams import MAX_DEMAND, RemoteStreamPublisher, StreamIterator, SubscriberSink
from ..drive.threads import ConnectionThread
from ..transport import Transport, listen, open_transport
from ..transport.urls import Endpoint
from ..transport.websocket import WebSocketOptions
from .engine import Publishers, RsioEngine, RsioError, Subscription

__all__ = [
    "Client",
    "PackedIterator",
    "RsioError",
    "RsioPeer",
    "Server",
    "connect",
    "serve",
]

DEFAULT_PREFETCH = 256
DEFAULT_PACKED_PREFETCH = 65_536


def _check_prefetch(prefetch: int) -> int:
    if type(prefetch) is not int or not 0 < prefetch <= MAX_DEMAND:
        raise ValueError(f"prefetch must be an int in 1..2**63-1, not {prefetch!r}")
    return prefetch


class PackedIterator:
    """Blocking iterator over a fixed-size stream, one ``bytes`` per batch
    (``len(batch) // element_size`` elements back to back, as they came off
    the wire). Keeps ``prefetch`` *elements* requested and asks for more as
    half of them are consumed. ``close()`` cancels."""

    def __init__(
        self,
        queue: CreditQueue[bytes],
        sub: Subscription,
        prefetch: int,
        request_more: Callable[[int], None],
        cancel: Callable[[], None],
        timeout: float | None,
    ) -> None:
        self._queue = queue
        self._sub = sub
        self._half = max(1, prefetch // 2)
        self._consumed = 0
        self._more = request_more
        self._cancel = cancel
        self._timeout = timeout
        self._finished = False

    @property
    def element_size(self) -> int:
        """The stream's element size (known once the first batch arrived)."""
        return self._sub.element_size

    def __iter__(self) -> PackedIterator:
        return self

    def __next__(self) -> bytes:
        if self._finished:
            raise StopIteration
        try:
            batch = self._queue.get(self._timeout)
        except EndOfStream:
            self._finished = True
            raise StopIteration from None
        except TimeoutError:
            raise
        except BaseException:
            self._finished = True
            raise
        self._consumed += len(batch) // self._sub.element_size
        if self._consumed >= self._half:
            n, self._consumed = self._consumed, 0
            if not self._queue.done:
                # Each batch holds >= 1 element: granting elements keeps the
                # queue's item capacity above what the peer may send.
                self._queue.grant(n)
                self._more(n)
        return batch

    def close(self) -> None:
        if self._finished:
            return
        self._finished = True
        if not self._queue.done:
            self._queue.close()
            self._cancel()

    def __enter__(self) -> PackedIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RsioPeer(DrivenPeer):
    """This side's view of one connection: subscribe to the peer's publishers
    (its own are served by the engine). Thread-safe."""

    def __init__(self, driver: Driver, engine: RsioEngine) -> None:
        super().__init__(driver)
        self._engine = engine

    @property
    def peer_address(self) -> str:
        return self._thread.transport.peer

    def _start(self, sub: Subscription, prefetch: int) -> None:
        engine = self._engine
        self._submit(lambda: engine.start_subscription(sub, prefetch))

    def _more(self, sub: Subscription, n: int) -> None:
        with contextlib.suppress(ConnectionClosed):  # the iterator sees why next
            self._submit(lambda: self._engine.request_more(sub, n))

    def _cancel(self, sub: Subscription) -> None:
        with contextlib.suppress(ConnectionClosed):
            self._submit(lambda: self._engine.cancel(sub))

    def subscribe(
        self, name: str, prefetch: int = DEFAULT_PREFETCH, timeout: float | None = None
    ) -> StreamIterator[bytes]:
        """The peer's publisher ``name`` as an iterator of elements (``bytes``),
        ``prefetch`` requested ahead; ``timeout`` bounds each wait. Raises
        :class:`~.rsio_engine.RsioError` for the publisher's onError;
        closing the iterator cancels."""
        prefetch = _check_prefetch(prefetch)
        queue: CreditQueue[bytes] = CreditQueue(granted=prefetch)
        sub = Subscription(name, queue)
        self._start(sub, prefetch)
        return StreamIterator(
            queue, prefetch, lambda n: self._more(sub, n), lambda: self._cancel(sub), timeout
        )

    def subscribe_packed(
        self, name: str, prefetch: int = DEFAULT_PACKED_PREFETCH, timeout: float | None = None
    ) -> PackedIterator:
        """A fixed-size stream as batches of elements (``bytes``); fails with
        ``ValueError`` if the publisher is not in fixed-size mode."""
        prefetch = _check_prefetch(prefetch)
        queue: CreditQueue[bytes] = CreditQueue(granted=prefetch)
        sub = Subscription(name, queue, packed=True)
        self._start(sub, prefetch)
        return PackedIterator(
            queue, sub, prefetch, lambda n: self._more(sub, n), lambda: self._cancel(sub), timeout
        )

    def publisher(self, name: str) -> RemoteStreamPublisher[bytes, Subscription]:
        """The peer's publisher ``name`` as a Reactive Streams Publisher (one
        Subscriber; subscribe is sent at the first ``request(n)``; signals
        arrive on the connection thread)."""
        engine = self._engine

        def start(sink: SubscriberSink[bytes], n: int) -> Subscription:
            sub = Subscription(name, sink)
            engine.start_subscription(sub, n)
            return sub

        return RemoteStreamPublisher(self._submit, start, engine.request_more, engine.cancel)


class Client(RsioPeer):
    """A client connection; a context manager that closes on exit."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    url: str | Endpoint,
    *,
    publishers: Publishers | None = None,
    config: ConnectionConfig | None = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
) -> Client:
    """Connect to ``url`` (any transport URL: ``tcp://``, ``tls://``,
    ``unix://``, ``ws://``); the clientHello is sent at once. ``publishers``:
    what this client serves to the server. ``loop``: ``"thread"`` (default),
    ``"selector"`` or a :class:`~.selector.Loop`."""
    driver_loop = pick_loop(loop)
    transport = open_transport(
        url,
        connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )
    engine = RsioEngine(Role.CLIENT, publishers, config, message_framed=message_framed(transport))
    driver = new_driver(driver_loop, transport, engine, f"sansrs-rsio-client {transport.peer}")
    client = Client(driver, engine)
    engine.attach(driver)
    driver.start()
    return client


class Server(PeersServer[RsioPeer]):
    """A listening rsio server; ``peers``: live connections (subscribe to what
    a client publishes)."""


def serve(
    url: str | Endpoint,
    publishers: Publishers | None = None,
    *,
    config: ConnectionConfig | None = None,
    loop: LoopChoice = "thread",
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
) -> Server:
    """Listen on ``url`` and serve ``publishers`` (names to Publishers, or a
    function of the name returning a Publisher or None) to every client.
    ``server.url`` has the real port when ``url`` asked for port 0."""
    peers: list[RsioPeer] = []
    driver_loop = pick_loop(loop)

    def make_connection(transport: Transport) -> ConnectionThread | LoopConnection:
        engine = RsioEngine(
            Role.SERVER, publishers, config, message_framed=message_framed(transport)
        )
        driver = new_driver(
            driver_loop,
            transport,
            engine,
            f"sansrs-rsio-server {transport.peer}",
            on_exit=lambda d: peers.remove(peer) if peer in peers else None,
        )
        peer = RsioPeer(driver, engine)
        engine.attach(driver)
        peers.append(peer)
        return driver

    listener = listen(url, ssl_context=ssl_context, websocket=websocket)
    accept = new_acceptor(driver_loop, listener, make_connection)
    accept.start()
    return Server(accept, peers)
