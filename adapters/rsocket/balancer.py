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
from .balancer_strategy import (
    BalancerConfig,
    RoundRobinStrategy,
    Strategy,
    TargetStats,
    WeightedStrategy,
)
from .client import Client, connect
from .errors import RSocketError
from .options import EngineOptions
from .peer import DEFAULT_PREFETCH
from .routed import RoutedRequester, RouteOptions, check_composite, route_metadata
from .types import Payload

__all__ = [
    "BalancerConfig",
    "LoadBalancedClient",
    "NoTargetAvailable",
    "RoundRobinStrategy",
    "WeightedStrategy",
]

T = TypeVar("T")


class NoTargetAvailable(ConnectionClosed):
    """No target can take a request now (all backing off, none listed)."""


class _Target:
    """One server: its connection (None until opened, or after a failure)."""

    __slots__ = ("client", "connecting", "failures", "lock", "removed", "retry_at", "stats", "url")

    def __init__(self, url: str, config: BalancerConfig, rnd: _random.Random) -> None:
        self.url = url
        self.client: Client | None = None
        self.stats = TargetStats(config, rnd)
        self.failures = 0
        self.retry_at = 0.0
        self.removed = False
        self.connecting = False
        #: Held while opening the connection: one attempt at a time.
        self.lock = threading.Lock()


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
        self.config = config or BalancerConfig()
        self.strategy: Strategy = strategy or RoundRobinStrategy()
        self._source = targets if callable(targets) else None
        self._connector = connector
        self._options = options
        self._clock = clock
        self._rnd = rnd or _random.Random()
        # Re-entrant: a stream iterator collected (its __del__) while this
        # thread holds the lock releases its target too.
        self._lock = threading.RLock()
        self._targets: list[_Target] = []
        self._closed = False
        self._refresh_at = 0.0
        self._set_targets(targets() if callable(targets) else targets)

    # -- targets -----------------------------------------------------------------
    def _set_targets(self, urls: Iterable[str]) -> None:
        wanted = list(dict.fromkeys(urls))
        with self._lock:
            known = {t.url: t for t in self._targets}
            kept = []
            for url in wanted:
                target = known.pop(url, None) or _Target(url, self.config, self._rnd)
                kept.append(target)
            for gone in known.values():  # closed once idle (see _release)
                gone.removed = True
                gone.stats.usable = False
                if gone.stats.pending == 0:
                    self._drop(gone)
            self._targets = kept

    def _drop(self, target: _Target) -> None:
        client, target.client = target.client, None
        if client is not None:
            with contextlib.suppress(ConnectionClosed):
                client.close(timeout=0)

    def _refresh(self, now: float) -> None:
        if self._source is not None and now >= self._refresh_at:
            self._refresh_at = now + self.config.refresh_interval
            self._set_targets(self._source())

    @property
    def targets(self) -> list[str]:
        return [t.url for t in self._targets]

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per target: connected, pending requests, requests completed and
        failed (because of the connection), connection failures in a row,
        median round trip (µs), availability, weight."""
        now = self._clock()
        with self._lock:
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
                for t in self._targets
            }

    # -- choosing a connection -------------------------------------------------------
    def _choose(self) -> tuple[_Target, Client]:
        """A target and its open connection; connects lazily, skips closed
        connections and targets backing off."""
        if self._closed:
            raise ConnectionClosed("load-balanced client closed")
        now = self._clock()
        self._refresh(now)
        tried: set[int] = set()
        while True:
            with self._lock:
                candidates = [t for t in self._targets if id(t) not in tried]
                for t in candidates:
                    t.stats.usable = self._usable(t, now)
                index = self.strategy.select([t.stats for t in candidates], now, self._rnd)
                if index is None:
                    raise NoTargetAvailable(self._why_none(now))
                target = candidates[index]
                target.stats.started(now)  # counted before the lock is let go
            client = target.client
            if client is not None and not client.closed:
                return target, client
            try:
                return target, self._open(target)
            except (OSError, ConnectionClosed, TimeoutError):
                tried.add(id(target))  # backing off now; try another

    def _usable(self, target: _Target, now: float) -> bool:
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

    def _failed(self, target: _Target, now: float) -> None:
        target.failures += 1
        target.retry_at = now + self.config.backoff(target.failures, self._rnd)
        target.stats.failed(now)

    def _open(self, target: _Target) -> Client:
        with target.lock:  # others wanting this target wait for one attempt
            client = target.client
            if client is not None and not client.closed:
                return client
            try:
                options = {"connect_timeout": self.config.connect_timeout, **self._options}
                client = self._connector(target.url, **options)
            except BaseException:
                with self._lock:
                    target.stats.pending = max(0, target.stats.pending - 1)
                    self._failed(target, self._clock())
                raise
            with self._lock:
                target.client = client
                target.failures = 0
                target.stats.availability.insert(1.0, self._clock())
            return client

    def _why_none(self, now: float) -> str:
        if not self._targets:
            return "no target listed"
        waits = [f"{t.url} retries in {max(0.0, t.retry_at - now):.2f} s" for t in self._targets]
        return "no target available: " + "; ".join(waits)

    def _release(self, target: _Target, started: float | None, error: BaseException | None) -> None:
        """A request on ``target`` ended; ``started``: a latency sample from then."""
        now = self._clock()
        lost = isinstance(error, ConnectionClosed)
        with self._lock:
            target.stats.finished(None if error is not None else started, not lost, now)
            if lost and target.client is not None and target.client.closed:
                target.client = None
                self._failed(target, now)
            if target.removed and target.stats.pending == 0:
                self._drop(target)

    def _start(self, fn: Callable[[Client], T], timed: bool) -> tuple[_Target, float | None, T]:
        """``fn`` on a chosen connection; if it raises, the request is over
        (a lost connection's error names the target)."""
        target, client = self._choose()
        started = self._clock() if timed else None
        try:
            return target, started, fn(client)
        except ConnectionClosed as exc:
            self._release(target, started, exc)
            raise ConnectionClosed(f"{target.url}: {exc}") from exc
        except BaseException as exc:
            self._release(target, started, exc)
            raise

    def _call(self, fn: Callable[[Client], T], *, timed: bool = True) -> T:
        target, started, result = self._start(fn, timed)
        self._release(target, started, None)
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
        return _TrackedStream(items, lambda error: self._release(target, None, error), target.url)

    def route(
        self, route: str, *variables: object, **options: Unpack[RouteOptions]
    ) -> RoutedRequester:
        """Routed requests, each placed on a chosen connection (as
        ``Client.route``; connect with composite metadata)."""
        if self._options.get("auth") is None and self._options.get("setup_route") is None:
            check_composite(
                self._options.get("metadata_mime_type", EngineOptions.metadata_mime_type)
            )
        return RoutedRequester(self, route_metadata(route, variables, **options))

    # -- lifecycle --------------------------------------------------------------------
    def close(self) -> None:
        """Close every connection (requests in flight fail with ConnectionClosed)."""
        self._closed = True
        with self._lock:
            targets, self._targets = self._targets, []
        for target in targets:
            self._drop(target)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> LoadBalancedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LoadBalancedClient({self.targets!r}, {type(self.strategy).__name__})"


class _TrackedStream(Iterator[T]):
    """A stream from one target; tells the balancer once it ends. Errors of
    a lost connection name the target."""

    __slots__ = ("_done", "_items", "_url")

    def __init__(
        self, items: Iterator[T], done: Callable[[BaseException | None], None], url: str
    ) -> None:
        self._items = items
        self._done: Callable[[BaseException | None], None] | None = done
        self._url = url

    def _finish(self, error: BaseException | None) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(error)

    def __next__(self) -> T:
        try:
            return next(self._items)
        except StopIteration:
            self._finish(None)
            raise
        except ConnectionClosed as exc:
            self._finish(exc)
            raise ConnectionClosed(f"{self._url}: {exc}") from exc
        except RSocketError as exc:
            self._finish(exc)
            raise

    def close(self) -> None:
        with contextlib.suppress(AttributeError):
            self._items.close()  # type: ignore[attr-defined]
        self._finish(None)

    def __enter__(self) -> _TrackedStream[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self._finish(None)
