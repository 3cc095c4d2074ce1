"""The load-balanced client under asyncio: the synchronous
:class:`~.balancer.LoadBalancedClient`'s behaviour (targets, lazy
connections, backoff, strategies: :mod:`.balancer_pool`,
:mod:`.balancer_strategy`) with the asyncio client's API.

    async with LoadBalancedClient(["tcp://a:7000", "tcp://b:7000"],
                                  strategy=WeightedStrategy()) as client:
        await client.request_response(b"hi", timeout=5)
        async for p in client.request_stream(b"feed"):
            ...
        await client.route("users.{id}.get", 42).request_response(b"")

Connections are opened with :func:`~.aio.connect` (awaited on the loop,
one attempt per target at a time); a request is never handed to a closed
connection; one in flight on a connection that dies fails with
``ConnectionClosed`` naming the target. Use it from the event loop's
thread, as the asyncio client.
"""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from typing import Any, Self, TypeVar

from typing_extensions import Unpack

from ..drive.aio import AsyncStream
from ..drive.errors import ConnectionClosed
from .aio import AsyncClient, connect
from .balancer_pool import (
    RETRY_ANOTHER,
    Balancing,
    NoTargetAvailable,
    Release,
    StreamAccount,
    Target,
    TargetPool,
)
from .balancer_strategy import BalancerConfig, RoundRobinStrategy, Strategy, WeightedStrategy
from .errors import RSocketError
from .peer import DEFAULT_PREFETCH
from .routed import AsyncRoutedRequester, RouteOptions
from .types import Payload

__all__ = [
    "BalancerConfig",
    "LoadBalancedClient",
    "NoTargetAvailable",
    "RoundRobinStrategy",
    "WeightedStrategy",
]

T = TypeVar("T")
Started = tuple[Target[AsyncClient], AsyncStream[Payload]]


class LoadBalancedClient:
    """Requests spread over several servers, under asyncio; the methods of
    :class:`~.aio.AsyncClient`. ``connector(url, **options)`` opens one
    connection (default: :func:`~.aio.connect`); ``clock`` and ``rnd`` are
    injectable for tests; ``options`` (``auth=``, ``metadata_mime_type=``...)
    go to every connection."""

    def __init__(
        self,
        targets: Sequence[str] | Callable[[], Sequence[str]],
        *,
        strategy: Strategy | None = None,
        config: BalancerConfig | None = None,
        connector: Callable[..., Awaitable[AsyncClient]] = connect,
        clock: Callable[[], float] = time.monotonic,
        rnd: _random.Random | None = None,
        **options: Any,
    ) -> None:
        pool: TargetPool[AsyncClient] = TargetPool(
            targets, config=config, strategy=strategy, clock=clock, rnd=rnd,
            drop=_close_soon, new_lock=asyncio.Lock,
        )
        # A request cancelled while its connection opens: not the target's fault.
        self._core = Balancing(pool, options, abandoned=(asyncio.CancelledError,))
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
        """As the synchronous balancer's ``stats()``."""
        return self._pool.stats()

    # -- choosing a connection (the decisions: Balancing; awaited here) -----------------
    async def _choose(self) -> tuple[Target[AsyncClient], AsyncClient]:
        candidates = self._core.candidates()
        while True:
            target, client = next(candidates)
            if client is not None:
                return target, client
            try:
                return target, await self._open(target)
            except RETRY_ANOTHER:
                continue

    async def _open(self, target: Target[AsyncClient]) -> AsyncClient:
        async with target.lock:  # others wanting this target await one attempt
            client = self._pool.open_client(target)
            if client is not None:
                return client
            try:
                client = await self._connector(target.url, **self._core.connect_options())
            except BaseException as exc:
                self._core.connect_failed(target, exc)
                raise
            self._pool.connected(target, client)
            return client

    async def _call(
        self, fn: Callable[[AsyncClient], Awaitable[T]], *, timed: bool = True
    ) -> T:
        target, client = await self._choose()
        started = self._core.started(timed)
        try:
            result = await fn(client)
        except BaseException as exc:
            self._core.fail(target, started, exc)
        self._pool.release(target, started, None)
        return result

    async def _start_stream(
        self, start: Callable[[AsyncClient], AsyncStream[Payload]]
    ) -> Started:
        target, client = await self._choose()
        try:
            return target, start(client)
        except BaseException as exc:
            self._core.fail(target, None, exc)

    # -- the asyncio client's API ---------------------------------------------------
    # AsyncClient's signatures by choice (a drop-in), each forwarded to a chosen connection.
    async def request_response(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> Payload | None:
        return await self._call(lambda c: c.request_response(data, metadata, timeout))

    async def fire_and_forget(self, data: bytes | str, metadata: bytes | str | None = None) -> None:
        await self._call(lambda c: c.fire_and_forget(data, metadata), timed=False)

    async def metadata_push(self, metadata: bytes | str) -> None:
        await self._call(lambda c: c.metadata_push(metadata), timed=False)

    def request_stream(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> TrackedStream:
        """A stream on a chosen connection, chosen (and opened) at the first
        ``async for`` step; tracked until it ends."""
        return TrackedStream(
            lambda: self._start_stream(
                lambda c: c.request_stream(data, metadata, prefetch, timeout)
            ),
            self._pool.release,
        )

    def request_channel(
        self,
        items: Iterable[object] | AsyncIterable[object],
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> TrackedStream:
        return TrackedStream(
            lambda: self._start_stream(
                lambda c: c.request_channel(items, metadata, prefetch, timeout)
            ),
            self._pool.release,
        )

    def route(
        self, route: str, *variables: object, **options: Unpack[RouteOptions]
    ) -> AsyncRoutedRequester:
        """Routed requests, each placed on a chosen connection (as
        ``AsyncClient.route``; connect with composite metadata)."""
        return AsyncRoutedRequester(self, self._core.route(route, variables, options))

    # -- lifecycle --------------------------------------------------------------------
    async def close(self) -> None:
        """Close every connection (requests in flight fail with ConnectionClosed)."""
        clients = self._pool.close()
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

    @property
    def closed(self) -> bool:
        return self._pool.closed

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"aio.LoadBalancedClient({self.targets!r}, {type(self.strategy).__name__})"


def _close_soon(client: AsyncClient) -> None:
    """A target that left the list, idle: its connection closes gracefully,
    not awaited."""
    client.driver.close(timeout=0)


class TrackedStream:
    """A stream from one target, as an async iterator: the target is chosen
    (its connection opened if need be) at the first step; the balancer
    learns when it ends (:class:`~.balancer_pool.StreamAccount`; a
    ``TimeoutError`` bounds one wait and ends nothing, as on a plain
    client's stream). Errors of a lost connection name the target."""

    __slots__ = ("_account", "_items", "_start")

    def __init__(
        self,
        start: Callable[[], Awaitable[Started]],
        release: Release[AsyncClient],
    ) -> None:
        self._start: Callable[[], Awaitable[Started]] | None = start
        self._account = StreamAccount(release, (ConnectionClosed, RSocketError))
        self._items: AsyncStream[Payload] | None = None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Payload:
        if self._items is None:
            start, self._start = self._start, None
            if start is None:
                raise StopAsyncIteration
            target, self._items = await start()
            self._account.place(target)
        if self._account.ended:
            raise StopAsyncIteration
        try:
            return await self._items.__anext__()
        except BaseException as exc:
            self._account.fail(exc)

    async def aclose(self) -> None:
        """Cancel the stream if it is still running; idempotent."""
        self._start = None
        if self._items is not None:
            await self._items.aclose()
        self._account.finish(None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
