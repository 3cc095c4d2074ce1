"""One rsio connection as a synchronous application sees it (either side):
subscribe to the peer's publishers as a blocking iterator
(:meth:`RsioPeer.subscribe`), as packed batches for fixed-size streams
(:meth:`RsioPeer.subscribe_packed`, the fast path: no Python call per
element) or as a Reactive Streams Publisher (:meth:`RsioPeer.publisher`).
Calls from any thread are handed to the connection's owning thread, which
alone drives the sans-IO core through :class:`~.engine.RsioEngine`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer
from ..drive.publishers import RemoteStreamPublisher, SubscriberSink
from ..drive.queues import CreditQueue
from ..drive.streams import StreamIterator, check_prefetch
from .engine import RsioEngine, Subscription

__all__ = [
    "DEFAULT_PACKED_PREFETCH",
    "DEFAULT_PREFETCH",
    "PackedIterator",
    "RsioPeer",
    "subscription_publisher",
]

DEFAULT_PREFETCH = 256
DEFAULT_PACKED_PREFETCH = 65_536


class PackedIterator(StreamIterator[bytes]):
    """Blocking iterator over a fixed-size stream, one ``bytes`` per batch
    (``len(batch) // element_size`` elements back to back, as they came off
    the wire). ``prefetch`` counts *elements*. ``close()`` cancels."""

    def __init__(
        self,
        queue: CreditQueue[bytes],
        sub: Subscription,
        prefetch: int,
        request_more: Callable[[int], None],
        cancel: Callable[[], None],
        timeout: float | None,
        explain: Callable[[], str] | None = None,
    ) -> None:
        super().__init__(
            queue,
            prefetch,
            request_more,
            cancel,
            timeout,
            units=lambda b: len(b) // sub.element_size,
            explain=explain,
        )
        self._sub = sub

    @property
    def element_size(self) -> int:
        """The stream's element size (known once the first batch arrived)."""
        return self._sub.element_size


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
        :class:`~.errors.RsioError` for the publisher's onError;
        closing the iterator cancels."""
        prefetch = check_prefetch(prefetch)
        queue: CreditQueue[bytes] = CreditQueue(granted=prefetch)
        sub = Subscription(name, queue)
        self._start(sub, prefetch)
        return StreamIterator(
            queue,
            prefetch,
            lambda n: self._more(sub, n),
            lambda: self._cancel(sub),
            timeout,
            explain=self._engine.unexpected_input,
        )

    def subscribe_packed(
        self, name: str, prefetch: int = DEFAULT_PACKED_PREFETCH, timeout: float | None = None
    ) -> PackedIterator:
        """A fixed-size stream as batches of elements (``bytes``); fails with
        ``ValueError`` if the publisher is not in fixed-size mode."""
        prefetch = check_prefetch(prefetch)
        queue: CreditQueue[bytes] = CreditQueue(granted=prefetch)
        sub = Subscription(name, queue, packed=True)
        self._start(sub, prefetch)
        return PackedIterator(
            queue,
            sub,
            prefetch,
            lambda n: self._more(sub, n),
            lambda: self._cancel(sub),
            timeout,
            self._engine.unexpected_input,
        )

    def publisher(self, name: str) -> RemoteStreamPublisher[bytes, Subscription]:
        """The peer's publisher ``name`` as a Reactive Streams Publisher (one
        Subscriber; subscribe is sent at the first ``request(n)``; signals
        arrive on the connection thread)."""
        return subscription_publisher(self._engine, self._submit, name)


def subscription_publisher(
    engine: RsioEngine, submit: Callable[[Callable[[], object]], None], name: str
) -> RemoteStreamPublisher[bytes, Subscription]:
    """The peer's publisher ``name`` as a Publisher, for either API (``submit``
    runs a call on the connection's thread)."""

    def start(sink: SubscriberSink[bytes], n: int) -> Subscription:
        sub = Subscription(name, sink)
        engine.start_subscription(sub, n)
        return sub

    return RemoteStreamPublisher(submit, start, engine.request_more, engine.cancel)
