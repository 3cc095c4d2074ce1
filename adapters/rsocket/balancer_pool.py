"""The targets of a load-balanced client and their bookkeeping, shared by the
synchronous :class:`~.balancer.LoadBalancedClient` and its asyncio form
(:class:`~.aio_balancer.LoadBalancedClient`): which targets are listed,
which may be chosen now (a closed connection taken out before a request
could reach it, a failed target backing off), the strategy's pick, and
what a request's end tells the statistics (:class:`TargetPool`); the order
in which a request tries the targets, what opening a connection and a
request's failure tell the pool, the error that names a lost target
(:class:`Balancing`), and a stream's account until it ends
(:class:`StreamAccount`). The clients add only how they wait (blocking, or
awaited) and the request methods.

The clock and randomness are injected (``clock``, ``rnd``): tests move
time by hand.
"""

from __future__ import annotations

import random as _random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, NoReturn, Protocol, TypeVar

from ..drive.errors import ConnectionClosed
from .balancer_strategy import BalancerConfig, RoundRobinStrategy, Strategy, TargetStats
from .errors import RSocketError
from .routed import RouteOptions, check_connect_options, route_metadata

__all__ = [
    "RETRY_ANOTHER",
    "Balancing",
    "Connection",
    "NoTargetAvailable",
    "StreamAccount",
    "Target",
    "TargetPool",
]


class NoTargetAvailable(ConnectionClosed):
    """No target can take a request now (all backing off, none listed)."""


class Connection(Protocol):
    """What the pool needs of a connection: whether it is closed."""

    @property
    def closed(self) -> bool: ...


C = TypeVar("C", bound=Connection)


class Target(Generic[C]):
    """One server: its connection (None until opened, or after a failure)."""

    __slots__ = ("client", "failures", "lock", "removed", "retry_at", "stats", "url")

    def __init__(self, url: str, config: BalancerConfig, rnd: _random.Random, lock: Any) -> None:
        self.url = url
        self.client: C | None = None
        self.stats = TargetStats(config, rnd)
        self.failures = 0
        self.retry_at = 0.0
        self.removed = False
        #: Held while opening the connection (a threading or an asyncio
        #: lock, as the client runs): one attempt at a time.
        self.lock = lock


class TargetPool(Generic[C]):
    """The listed targets (a list of URLs, or a callable asked again every
    ``config.refresh_interval`` s) and the choice among them (``strategy``,
    default round robin; ``config`` default ``BalancerConfig()``). ``drop(client)``
    closes the connection of a target that left the list once it is idle,
    without waiting; ``new_lock()`` makes a target's connect lock."""

    def __init__(
        self,
        targets: Sequence[str] | Callable[[], Sequence[str]],
        *,
        config: BalancerConfig | None,
        strategy: Strategy | None,
        clock: Callable[[], float],
        rnd: _random.Random | None,
        drop: Callable[[C], None],
        new_lock: Callable[[], Any],
    ) -> None:
        self.config = config or BalancerConfig()
        self.strategy: Strategy = strategy or RoundRobinStrategy()
        self.clock = clock
        self.rnd = rnd or _random.Random()
        self._source = targets if callable(targets) else None
        self._drop_client = drop
        self._new_lock = new_lock
        # Re-entrant: a stream collected (its __del__) while this thread
        # holds the lock releases its target too.
        self.lock = threading.RLock()
        self.targets: list[Target[C]] = []
        self.closed = False
        self._refresh_at = 0.0
        self.set_targets(targets() if callable(targets) else targets)

    # -- targets -----------------------------------------------------------------
    def set_targets(self, urls: Iterable[str]) -> None:
        wanted = list(dict.fromkeys(urls))
        with self.lock:
            known = {t.url: t for t in self.targets}
            kept = []
            for url in wanted:
                target = known.pop(url, None) or Target(
                    url, self.config, self.rnd, self._new_lock()
                )
                kept.append(target)
            for gone in known.values():  # closed once idle (see release)
                gone.removed = True
                gone.stats.usable = False
                if gone.stats.pending == 0:
                    self._drop(gone)
            self.targets = kept

    def _drop(self, target: Target[C]) -> None:
        client, target.client = target.client, None
        if client is not None:
            self._drop_client(client)

    @property
    def urls(self) -> list[str]:
        return [t.url for t in self.targets]

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per target: connected, pending requests, requests completed and
        failed (because of the connection), connection failures in a row,
        median round trip (µs), availability, weight."""
        now = self.clock()
        with self.lock:
            return {
                t.url: {
                    "connected": t.client is not None and not t.client.closed,
                    "pending": t.stats.pending,
                    "completed": t.stats.completed,
                    "failed": t.stats.failed_requests,
                    "failures": t.failures,
                    "median_latency_us": round(t.stats.median.value, 1),
                    "availability": round(t.stats.availability.value, 3),
                    "weight": t.stats.weight(now),
                }
                for t in self.targets
            }

    # -- choosing ------------------------------------------------------------------
    def begin(self) -> float:
        """A request starts choosing: the time of its choice (the list
        refreshed if due). Raises ``ConnectionClosed`` once closed."""
        if self.closed:
            raise ConnectionClosed("load-balanced client closed")
        now = self.clock()
        if self._source is not None and now >= self._refresh_at:
            self._refresh_at = now + self.config.refresh_interval
            self.set_targets(self._source())
        return now

    def pick(self, tried: set[int], now: float) -> Target[C]:
        """The strategy's choice among the usable targets not ``tried``
        (``id`` of each), counted as a pending request on it. Its
        ``client`` may be None or closed: then the caller opens one (and
        calls :meth:`connected` or :meth:`connect_failed`)."""
        with self.lock:
            candidates = [t for t in self.targets if id(t) not in tried]
            for t in candidates:
                t.stats.usable = self._usable(t, now)
            index = self.strategy.select([t.stats for t in candidates], now, self.rnd)
            if index is None:
                raise NoTargetAvailable(self._why_none(now))
            target = candidates[index]
            target.stats.started(now)  # counted before the lock is let go
            return target

    def _usable(self, target: Target[C], now: float) -> bool:
        """Whether ``target`` may be chosen now (lock held). A closed
        connection is forgotten here, before any request could be handed
        to it, and the target backs off."""
        if target.removed:
            return False
        client = target.client
        if client is not None and client.closed:
            target.client = client = None
            self._failed(target, now)
        return client is not None or now >= target.retry_at

    def _failed(self, target: Target[C], now: float) -> None:
        target.failures += 1
        target.retry_at = now + self.config.backoff(target.failures, self.rnd)
        target.stats.failed(now)

    def _why_none(self, now: float) -> str:
        if not self.targets:
            return "no target listed"
        waits = [f"{t.url} retries in {max(0.0, t.retry_at - now):.2f} s" for t in self.targets]
        return "no target available: " + "; ".join(waits)

    def open_client(self, target: Target[C]) -> C | None:
        """The target's connection if it is open (another request may have
        opened it meanwhile), else None: open one."""
        client = target.client
        return client if client is not None and not client.closed else None

    def connected(self, target: Target[C], client: C) -> None:
        with self.lock:
            target.client = client
            target.failures = 0
            target.stats.availability.insert(1.0, self.clock())

    def connect_failed(self, target: Target[C]) -> None:
        """Opening the connection failed: the request chose no connection
        after all, and the target backs off."""
        with self.lock:
            target.stats.pending = max(0, target.stats.pending - 1)
            self._failed(target, self.clock())

    def connect_abandoned(self, target: Target[C]) -> None:
        """The request was cancelled while its connection opened: not the
        target's fault, and not a request it served."""
        with self.lock:
            target.stats.pending = max(0, target.stats.pending - 1)

    # -- a request's end ----------------------------------------------------------
    def release(
        self, target: Target[C], started: float | None, error: BaseException | None
    ) -> None:
        """A request on ``target`` ended; ``started``: a latency sample from then."""
        now = self.clock()
        lost = isinstance(error, ConnectionClosed)
        with self.lock:
            target.stats.finished(None if error is not None else started, not lost, now)
            if lost and target.client is not None and target.client.closed:
                target.client = None
                self._failed(target, now)
            if target.removed and target.stats.pending == 0:
                self._drop(target)

    def close(self) -> list[C]:
        """No more requests; returns the connections to close."""
        self.closed = True
        with self.lock:
            targets, self.targets = self.targets, []
        clients = []
        for target in targets:
            client, target.client = target.client, None
            if client is not None:
                clients.append(client)
        return clients


#: A connection that could not be opened: its target backs off, the request
#: tries another.
RETRY_ANOTHER: tuple[type[BaseException], ...] = (OSError, ConnectionClosed, TimeoutError)

Release = Callable[[Target[C], float | None, BaseException | None], None]


class Balancing(Generic[C]):
    """What both forms of the load-balanced client decide, whatever their
    way of waiting: the :class:`TargetPool` (``pool``), the targets a request
    tries in turn, the ``connect`` options of every connection, what opening
    a connection and a request's end tell the pool, the error that names a
    lost target. ``abandoned``: the errors of a connect that was given up
    (not the target's fault: asyncio's cancellation); ``options``: the
    connector's keywords."""

    def __init__(
        self,
        pool: TargetPool[C],
        options: Mapping[str, Any],
        abandoned: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.pool = pool
        self.options = dict(options)
        self._abandoned = abandoned

    def candidates(self) -> Iterator[tuple[Target[C], C | None]]:
        """For one request, the targets to try in turn, each with its open
        connection (None: open one, under ``target.lock``). The next one is
        asked for only when that failed (:data:`RETRY_ANOTHER`): the target
        is then left out. ``NoTargetAvailable`` when none is left."""
        pool = self.pool
        now = pool.begin()
        tried: set[int] = set()
        while True:
            target = pool.pick(tried, now)
            yield target, pool.open_client(target)
            tried.add(id(target))  # backing off now; try another

    def connect_options(self) -> dict[str, Any]:
        """The keywords of the connector for a target."""
        return {"connect_timeout": self.pool.config.connect_timeout, **self.options}

    def connect_failed(self, target: Target[C], error: BaseException) -> None:
        """Opening ``target``'s connection raised ``error`` (the caller raises it on)."""
        if isinstance(error, self._abandoned):
            self.pool.connect_abandoned(target)
        else:
            self.pool.connect_failed(target)

    def started(self, timed: bool) -> float | None:
        """A request placed now: its start, if its latency is a sample."""
        return self.pool.clock() if timed else None

    def fail(self, target: Target[C], started: float | None, error: BaseException) -> NoReturn:
        """The request on ``target`` raised ``error``: released, and raised
        on (a lost connection's error names the target)."""
        self.pool.release(target, started, error)
        if isinstance(error, ConnectionClosed):
            raise ConnectionClosed(f"{target.url}: {error}") from error
        raise error

    def route(self, route: str, variables: tuple[object, ...], options: RouteOptions) -> bytes:
        """The metadata of routed requests (the connections' metadata must be
        composite: checked before any is opened)."""
        check_connect_options(self.options)
        return route_metadata(route, variables, **options)


class StreamAccount(Generic[C]):
    """A stream's account with the balancer, once placed on a target
    (:meth:`place`): the target is released once, when the stream ends.
    ``ends``: the errors that end it besides its end (a lost connection's
    is raised naming the target); any other error leaves it running."""

    __slots__ = ("_ends", "_release", "ended", "target", "url")

    def __init__(
        self,
        release: Release[C],
        ends: tuple[type[BaseException], ...] = (ConnectionClosed, RSocketError),
    ) -> None:
        self._release = release
        self._ends = ends
        self.target: Target[C] | None = None
        self.url = "?"
        self.ended = False

    def place(self, target: Target[C]) -> None:
        self.target = target
        self.url = target.url

    def finish(self, error: BaseException | None) -> None:
        """The stream ended (closed, completed, or failed with ``error``)."""
        self.ended = True
        target, self.target = self.target, None
        if target is not None:
            self._release(target, None, error)

    def fail(self, error: BaseException) -> NoReturn:
        """The stream's step raised ``error`` (its end included): accounted,
        and raised on."""
        if isinstance(error, (StopIteration, StopAsyncIteration)):
            self.finish(None)
        elif isinstance(error, self._ends):
            self.finish(error)
            if isinstance(error, ConnectionClosed):
                raise ConnectionClosed(f"{self.url}: {error}") from error
        raise error
