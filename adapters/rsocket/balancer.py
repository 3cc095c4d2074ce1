"""A load-balanced RSocket client over N servers, with the API of one
client (docs/extensions.md, "Load balancing").

    with LoadBalancedClient(["tcp://a:7000", "tcp://b:7000"],
                            strategy=WeightedStrategy()) as client:
        client.request_response(b"hi", timeout=5)
        client.route("users.{id}.get", 42).request_response(b"")

- Targets: a list of URLs, or a callable returning the current list (asked
  again every ``config.refresh_interval`` s; a target that left is no
  longer chosen and is closed once its requests are done).
- Connections open lazily, when a target is first chosen, and again after
  a failure once its backoff has passed (exponential, with jitter).
- A request is never handed to a closed connection: a target whose
  connection is closed is taken out of the choice before the request is
  placed, and the next one is tried. A request in flight on a connection
  that dies fails with :class:`~..drive.errors.ConnectionClosed` naming the
  target (never silently lost); it is not retried (it may have run).
- :class:`~.balancer_strategy.RoundRobinStrategy` (default) or
  :class:`~.balancer_strategy.WeightedStrategy` (latency and availability,
  as rsocket-java's weighted load balancer).

Thread-safe, as the single client. ``connect`` options (``auth=``,
``metadata_mime_type=``, ``loop=``...) apply to every connection.
"""

from __future__ import annotations

import contextlib
import random as _random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from typing_extensions import Unpack

from ..drive.errors import ConnectionClosed
from .balancer_pool import (
    RETRY_ANOTHER,
    Balancing,
    NoTargetAvailable,
    StreamAccount,
    Target,
    TargetPool,
)
from .balancer_strategy import BalancerConfig, RoundRobinStrategy, Strategy, WeightedStrategy
from .client import Client, connect
from .peer import DEFAULT_PREFETCH
from .routed import RoutedRequester, RouteOptions
from .types import Payload

__all__ = [
    "BalancerConfig",
    "LoadBalancedClient",
    "NoTargetAvailable",
    "RoundRobinStrategy",
    "WeightedStrategy",
]

T = TypeVar("T")


class LoadBalancedClient:
    """Requests spread over several servers; the methods of
    :class:`~.client.Client`. ``connector(url, **options)`` opens one
    connection (default: :func:`~.client.connect`); ``clock`` and ``rnd``
    are injectable for tests."""

    def __init__(
        self,
        targets: Sequence[str] | Callable[[], Sequence[str]],
        *,
        strategy: Strategy | None = None,
        config: BalancerConfig | None = None,
        connector: Callable[..., Client] = connect,
        clock: Callable[[], float] = time.monotonic,
        rnd: _random.Random | None = None,
        **options: Any,
    ) -> None:
        pool: TargetPool[Client] = TargetPool(
            targets, config=config, strategy=strategy, clock=clock, rnd=rnd,
            drop=_close_now, new_lock=threading.Lock,
        )
        self._core = Balancing(pool, options)
        self._pool = pool
        self._connector = connector

    @property
    def config(self) -> BalancerConfig:
        return self._pool.config

    @property
    def strategy(self) -> Strategy:
        return self._pool.strategy

    @property
    def targets(self) -> list[str]:
        return self._pool.urls

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per target: connected, pending requests, requests completed and
        failed (because of the connection), connection failures in a row,
        median round trip (µs), availability, weight."""
        return self._pool.stats()

    # -- choosing a connection (the decisions: Balancing) --------------------------------
    def _choose(self) -> tuple[Target[Client], Client]:
        """A target and its open connection; connects lazily, skips closed
        connections and targets backing off."""
        candidates = self._core.candidates()
        while True:
            target, client = next(candidates)
            if client is not None:
                return target, client
            try:
                return target, self._open(target)
            except RETRY_ANOTHER:
                continue

    def _open(self, target: Target[Client]) -> Client:
        with target.lock:  # others wanting this target wait for one attempt
            client = self._pool.open_client(target)
            if client is not None:
                return client
            try:
                client = self._connector(target.url, **self._core.connect_options())
            except BaseException as exc:
                self._core.connect_failed(target, exc)
                raise
            self._pool.connected(target, client)
            return client

    def _start(
        self, fn: Callable[[Client], T], timed: bool
    ) -> tuple[Target[Client], float | None, T]:
        """``fn`` on a chosen connection; if it raises, the request is over
        (a lost connection's error names the target)."""
        target, client = self._choose()
        started = self._core.started(timed)
        try:
            return target, started, fn(client)
        except BaseException as exc:
            self._core.fail(target, started, exc)

    def _call(self, fn: Callable[[Client], T], *, timed: bool = True) -> T:
        target, started, result = self._start(fn, timed)
        self._pool.release(target, started, None)
        return result

    # -- the client's API ---------------------------------------------------------------
    # Client's signatures by choice (a drop-in), each forwarded to a chosen connection.
    def request_response(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> Payload | None:
        return self._call(lambda c: c.request_response(data, metadata, timeout))

    def request_response_many(
        self,
        requests: Iterable[object],
        *,
        in_flight: int = 64,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> Iterator[Payload | None]:
        """Pipelined on one chosen connection (answers stay in order)."""
        return self._stream(
            lambda c: c.request_response_many(
                requests, in_flight=in_flight, timeout=timeout, return_exceptions=return_exceptions
            )
        )

    def fire_and_forget(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> None:
        self._call(lambda c: c.fire_and_forget(data, metadata, timeout), timed=False)

    def metadata_push(self, metadata: bytes | str, timeout: float | None = None) -> None:
        self._call(lambda c: c.metadata_push(metadata, timeout), timed=False)

    def request_stream(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> Iterator[Payload]:
        return self._stream(lambda c: c.request_stream(data, metadata, prefetch, timeout))

    def request_channel(
        self,
        data: Iterable[object],
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> Iterator[Payload]:
        return self._stream(lambda c: c.request_channel(data, metadata, prefetch, timeout))

    def response_publisher(self, data: bytes | str, metadata: bytes | str | None = None) -> Any:
        """As ``Client.response_publisher``, on a chosen connection (not counted
        in the target's pending requests)."""
        return self._call(lambda c: c.response_publisher(data, metadata), timed=False)

    def stream_publisher(self, data: bytes | str, metadata: bytes | str | None = None) -> Any:
        return self._call(lambda c: c.stream_publisher(data, metadata), timed=False)

    def channel_publisher(self, data: Iterable[object], metadata: bytes | str | None = None) -> Any:
        return self._call(lambda c: c.channel_publisher(data, metadata), timed=False)

    def _stream(self, start: Callable[[Client], Iterator[T]]) -> _TrackedStream[T]:
        """A stream started on a chosen connection, tracked until it ends."""
        target, _, items = self._start(start, False)
        account: StreamAccount[Client] = StreamAccount(self._pool.release)
        account.place(target)
        return _TrackedStream(items, account)

    def route(
        self, route: str, *variables: object, **options: Unpack[RouteOptions]
    ) -> RoutedRequester:
        """Routed requests, each placed on a chosen connection (as
        ``Client.route``; connect with composite metadata)."""
        return RoutedRequester(self, self._core.route(route, variables, options))

    # -- lifecycle --------------------------------------------------------------------
    def close(self) -> None:
        """Close every connection (requests in flight fail with ConnectionClosed)."""
        for client in self._pool.close():
            _close_now(client)

    @property
    def closed(self) -> bool:
        return self._pool.closed

    def __enter__(self) -> LoadBalancedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LoadBalancedClient({self.targets!r}, {type(self.strategy).__name__})"


def _close_now(client: Client) -> None:
    """Close without waiting (requests in flight fail with ConnectionClosed)."""
    with contextlib.suppress(ConnectionClosed):
        client.close(timeout=0)


class _TrackedStream(Iterator[T]):
    """A stream from one target; tells the balancer once it ends
    (:class:`~.balancer_pool.StreamAccount`). Errors of a lost connection
    name the target."""

    __slots__ = ("_account", "_items")

    def __init__(self, items: Iterator[T], account: StreamAccount[Client]) -> None:
        self._items = items
        self._account = account

    def __next__(self) -> T:
        try:
            return next(self._items)
        except BaseException as exc:
            self._account.fail(exc)

    def close(self) -> None:
        with contextlib.suppress(AttributeError):
            self._items.close()  # type: ignore[attr-defined]
        self._account.finish(None)

    def __enter__(self) -> _TrackedStream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self._account.finish(None)
