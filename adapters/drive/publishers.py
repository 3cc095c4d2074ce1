"""A remote stream as a Reactive Streams Publisher, for every protocol.

- :class:`RemoteStreamPublisher`: one Subscriber; the request goes out at
  its first ``request(n)``, and every signal arrives on the connection
  thread (rule 1.3), demand and cancellation crossing to it.
- :class:`SubscriberSink`: what the engine feeds on the connection thread
  (the I/O-side interface of :class:`~.queues.CreditQueue`), delivering to
  the Subscriber; a Subscriber that raises (rule 2.13) is treated as
  cancelled and the connection goes on.

Nothing here knows a wire protocol; bindings pass callables that do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Generic, TypeVar

from sansrs.streams import MAX_DEMAND, RULE_3_9, IllegalArgumentError, add_demand

from .queues import refill_batch

__all__ = ["BatchSubscriberSink", "RemoteStreamPublisher", "SubscriberSink"]

T = TypeVar("T")
H = TypeVar("H")
_log = logging.getLogger("sansrs.adapters")


class SubscriberSink(Generic[T]):
    """Delivers a remote stream to a Reactive Streams Subscriber, on the
    connection thread; the same I/O-side interface as :class:`CreditQueue`
    (``put``, ``put_many``, ``finish``, ``close``), so an engine feeds either.

    A Subscriber method that raises breaks rule 2.13; the sink then treats the
    subscription as cancelled (``on_broken``) and the connection goes on."""

    __slots__ = ("_done", "_subscriber", "on_broken")

    def __init__(self, subscriber: Any) -> None:
        self._subscriber = subscriber
        self._done = False
        self.on_broken: Callable[[], None] | None = None

    @property
    def done(self) -> bool:
        return self._done

    def put(self, item: T) -> None:
        if self._done:
            return
        try:
            self._subscriber.on_next(item)
        except Exception:
            _log.exception("Subscriber.on_next raised (rule 2.13); cancelling its stream")
            self._done = True
            if self.on_broken is not None:
                self.on_broken()

    def put_many(self, items: Iterable[T]) -> None:
        for item in items:
            self.put(item)

    def finish(self, error: BaseException | None = None) -> None:
        if self._done:
            return
        self._done = True
        try:
            if error is None:
                self._subscriber.on_complete()
            else:
                self._subscriber.on_error(error)
        except Exception:
            _log.exception("Subscriber.on_complete/on_error raised (rule 2.13)")

    def close(self, error: BaseException | None = None) -> None:
        self._done = True


class BatchSubscriberSink(SubscriberSink[list[T]]):
    """Delivers a remote stream to a Subscriber of lists (a Publisher of
    batches): each ``on_next`` carries every item that arrived and was not
    delivered yet, and the Subscriber's demand counts lists. The remote
    demand is a window of ``prefetch`` items of its own, replenished through
    ``request_more(n)`` (set by the binding) as the lists are delivered: at
    most ``prefetch`` items wait here for the Subscriber's demand. The end
    (completion or error) follows the last list. Connection thread only.
    ``make_batch`` (set by the binding, optional) turns what waited into
    what ``on_next`` carries (e.g. a protocol's sequence type of its own
    whose items wait as their bytes)."""

    __slots__ = ("_consumed", "_demand", "_ended", "_error", "_pending", "_refill",
                 "make_batch", "request_more")

    def __init__(self, subscriber: Any, prefetch: int) -> None:
        super().__init__(subscriber)
        self._pending: list[T] = []
        self._demand = 0
        self._refill = refill_batch(prefetch, None)
        self._consumed = 0
        self._ended = False
        self._error: BaseException | None = None
        self.request_more: Callable[[int], None] | None = None
        self.make_batch: Callable[[list[Any]], object] | None = None

    def add_demand(self, n: int) -> None:
        """The Subscriber asked for ``n`` more lists."""
        self._demand = add_demand(self._demand, n)
        self._deliver()

    # Fed items (the engine's side), it delivers lists: not a substitutable override.
    def put(self, item: T) -> None:  # type: ignore[override]
        self.put_many([item])

    def put_many(self, items: Iterable[T]) -> None:  # type: ignore[override]
        if self._done or self._ended:
            return
        self._pending.extend(items)
        self._deliver()

    def finish(self, error: BaseException | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = error
        self._deliver()

    def _deliver(self) -> None:
        if self._done:
            return
        if self._demand and self._pending:
            batch, self._pending = self._pending, []
            self._demand -= 1
            self._consumed += len(batch)
            make = self.make_batch
            delivered: Any = batch if make is None else make(batch)
            SubscriberSink.put(self, delivered)
            if self._consumed >= self._refill and not self._ended and not self._done:
                n, self._consumed = self._consumed, 0
                if self.request_more is not None:
                    self.request_more(n)
        if self._ended and not self._pending:
            SubscriberSink.finish(self, self._error)


class RemoteStreamPublisher(Generic[T, H]):
    """A remote stream as a Reactive Streams Publisher (one Subscriber).

    Protocol-agnostic: the binding passes ``submit(fn)`` (run ``fn`` on the
    connection thread; raises ``ConnectionError`` once the connection is gone)
    and, run on that thread, ``start(sink, n) -> handle`` (begin the remote
    request with initial demand ``n``), ``more(handle, n)`` and
    ``cancel(handle)``. The request is sent at the first ``request(n)``.
    Every signal, ``on_subscribe`` included, arrives on the connection thread,
    so signals are serialized (rule 1.3); ``request(n <= 0)`` signals
    ``IllegalArgumentError`` and cancels (rule 3.9). ``sink(subscriber)``
    makes the sink ``start`` is given (a :class:`BatchSubscriberSink` for a
    Publisher of batches)."""

    def __init__(
        self,
        submit: Callable[[Callable[[], object]], None],
        start: Callable[[SubscriberSink[T], int], H],
        more: Callable[[H, int], None],
        cancel: Callable[[H], None],
        sink: Callable[[Any], SubscriberSink[T]] = SubscriberSink,
    ) -> None:
        self._new_sink = sink
        self._submit = submit
        self._start = start
        self._more = more
        self._cancel = cancel
        self._subscribed = False
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Any) -> None:
        if subscriber is None:
            raise TypeError("subscribe(None)")  # rule 1.9
        with self._lock:
            again, self._subscribed = self._subscribed, True
        if again:
            subscriber.on_subscribe(_NoSubscription())
            subscriber.on_error(RuntimeError("this request was already subscribed"))  # 1.9
            return
        sink = self._new_sink(subscriber)
        subscription = _RemoteSubscription(self, sink)
        sink.on_broken = subscription.cancel_now

        def signal_subscribe() -> None:
            try:
                subscriber.on_subscribe(subscription)
            except Exception:
                _log.exception("Subscriber.on_subscribe raised (rule 2.13); cancelling")
                subscription.cancel_now()

        try:
            self._submit(signal_subscribe)
        except ConnectionError as exc:
            subscriber.on_subscribe(_NoSubscription())
            subscriber.on_error(exc)


class _NoSubscription:
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


class _RemoteSubscription(Generic[T, H]):
    """Calls from any thread, handed to the connection thread in order; the
    ``_handle`` fields are touched on that thread only."""

    def __init__(self, publisher: RemoteStreamPublisher[T, H], sink: SubscriberSink[T]) -> None:
        self._publisher = publisher
        self._sink = sink
        self._requested = False
        self._lock = publisher._lock  # one Subscriber per publisher: share its lock
        self._handle: H | None = None
        self._has_handle = False
        self._early = 0  # demand of later request() calls that reached the thread first
        self._cancelled = False

    def _run(self, fn: Callable[[], object]) -> None:
        try:
            self._publisher._submit(fn)
        except ConnectionError as exc:
            self._sink.finish(exc)

    def request(self, n: int) -> None:
        if n <= 0:
            error = IllegalArgumentError(f"{RULE_3_9} (got {n})")

            def fail() -> None:
                if not self._cancelled:
                    self._sink.finish(error)
                    self.cancel_now()

            self._run(fail)
            return
        n = min(n, MAX_DEMAND)
        with self._lock:
            first, self._requested = not self._requested, True
        self._run(partial(self._start_now if first else self._more_now, n))

    def _start_now(self, n: int) -> None:
        if self._cancelled:
            return
        self._handle = self._publisher._start(self._sink, add_demand(n, self._early))
        self._has_handle = True

    def _more_now(self, n: int) -> None:
        if self._cancelled:
            return
        if not self._has_handle:
            # request() calls from several threads: a later one may be handed over before
            # the first one's start; its demand joins the start (rule 3.8)
            self._early = add_demand(self._early, n)
            return
        self._publisher._more(self._handle, n)  # type: ignore[arg-type]

    def cancel(self) -> None:
        with contextlib.suppress(ConnectionError):
            self._publisher._submit(self.cancel_now)

    def cancel_now(self) -> None:
        """On the connection thread: cancel (idempotent, rule 3.5)."""
        if self._cancelled:
            return
        self._cancelled = True
        self._sink.close()
        if self._has_handle:
            self._publisher._cancel(self._handle)  # type: ignore[arg-type]
