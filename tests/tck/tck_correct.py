"""Correct implementations written without sansrs.streams' building blocks.

The kit must pass them all (no false failures), whatever their design:

- ``IteratorPublisher``: pulls a fresh iterator (or generator) per Subscriber on
  the requesting thread, serialized by a lock and a work-in-progress counter;
- ``ThreadPoolPublisher``: signals from the threads of a shared executor, one
  drain task at a time per Subscriber;
- ``AsyncioPublisher``: all state lives on an asyncio event loop (its own thread);
  ``request`` and ``cancel`` hop onto the loop with ``call_soon_threadsafe``;
- ``ThreadPoolSubscriber``: processes its signals on an executor thread, as rule
  2.2 recommends, and requests in batches.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sansrs.streams import (
    MAX_DEMAND,
    RULE_3_9,
    IllegalArgumentError,
    Subscriber,
    Subscription,
    add_demand,
)

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tck-correct-pool")


def _require(value: object, what: str) -> None:
    if value is None:
        raise TypeError(f"{what} must not be None")


def ended_by_bad_request(holder: Any, n: int) -> bool:
    """True when ``holder.subscriber`` is gone, or ``n <= 0`` ended it now (rule 3.9)."""
    subscriber = holder.subscriber
    if subscriber is None:
        return True
    if n > 0:
        return False
    holder.subscriber = None
    subscriber.on_error(IllegalArgumentError(f"{RULE_3_9} Got {n}."))
    return True


class Ledger:
    """A Subscription's demand, its bad request and cancellation, behind one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.demand = 0
        self.bad: int | None = None
        self.cancelled = False

    def request(self, n: int) -> None:
        with self.lock:
            if self.cancelled:
                return
            if n <= 0:
                self.bad = n
            else:
                self.demand = add_demand(self.demand, n)

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True


class WorkLoop:
    """Runs ``work`` on one thread at a time: a call made while it runs (from any thread,
    or from inside it) makes the running one loop once more, so nothing is missed."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self.lock = threading.Lock()
        self.wip = 0

    def schedule(self) -> None:
        with self.lock:
            self.wip += 1
            if self.wip > 1:
                return  # the thread running now will loop once more
        missed = 1
        while True:
            self.work()
            with self.lock:
                self.wip -= missed
                missed = self.wip
                if missed == 0:
                    return


# -- a lock and a work-in-progress counter ------------------------------------------------------


class IteratorPublisher:
    """A fresh iterator from ``factory()`` per Subscriber, pulled on demand."""

    def __init__(self, factory: Callable[[], Iterable[int]], name: str = "iterator") -> None:
        self.factory = factory
        self.name = name

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        _require(subscriber, "subscriber")
        _IteratorSubscription(iter(self.factory()), subscriber).start()

    def __repr__(self) -> str:
        return f"IteratorPublisher({self.name})"


class _IteratorSubscription:
    def __init__(self, iterator: Iterator[int], subscriber: Subscriber[int]) -> None:
        self.iterator: Iterator[int] | None = iterator
        self.subscriber: Subscriber[int] | None = subscriber
        self.ledger = Ledger()
        self.loop = WorkLoop(self._drain)
        self.started = False

    def start(self) -> None:
        self.loop.schedule()

    def request(self, n: int) -> None:
        self.ledger.request(n)
        self.loop.schedule()

    def cancel(self) -> None:
        self.ledger.cancel()
        self.loop.schedule()

    def _drain(self) -> None:
        subscriber = self.subscriber
        if subscriber is None:
            return
        if not self.started:
            self.started = True
            subscriber.on_subscribe(self)
        ledger = self.ledger
        while True:
            with ledger.lock:
                if ledger.cancelled:
                    self._release()
                    return
                bad, demand = ledger.bad, ledger.demand
                if bad is None and demand == 0:
                    return
                if demand != MAX_DEMAND and bad is None:
                    ledger.demand -= 1
            if bad is not None:
                self._end(IllegalArgumentError(f"{RULE_3_9} Got {bad}."))
                return
            assert self.iterator is not None
            try:
                item = next(self.iterator)
            except StopIteration:
                self._end(None)
                return
            subscriber.on_next(item)

    def _end(self, error: BaseException | None) -> None:
        subscriber = self.subscriber
        self.ledger.cancel()
        self._release()
        if subscriber is not None:
            if error is None:
                subscriber.on_complete()
            else:
                subscriber.on_error(error)

    def _release(self) -> None:
        iterator, self.iterator, self.subscriber = self.iterator, None, None
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def counting(elements: int) -> Iterator[int]:
    """A generator of ``elements`` numbers (infinite at 2**63-1)."""
    n = 0
    while elements >= MAX_DEMAND or n < elements:
        n += 1
        yield n


# -- signalling from a thread pool -----------------------------------------------------------


class ThreadPoolPublisher:
    """Signals from a shared executor; a drain task per Subscriber, one at a time."""

    def __init__(self, elements: int) -> None:
        self.elements = elements

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        _require(subscriber, "subscriber")
        _PoolSubscription(self.elements, subscriber).request_drain()

    def __repr__(self) -> str:
        return f"ThreadPoolPublisher({self.elements})"


class _PoolSubscription:
    BATCH = 64  # elements per task: other Subscribers get their turn

    def __init__(self, elements: int, subscriber: Subscriber[int]) -> None:
        self.elements = elements
        self.subscriber: Subscriber[int] | None = subscriber
        self.ledger = Ledger()
        self.lock = self.ledger.lock
        self.scheduled = False
        self.started = False
        self.sent = 0

    def request(self, n: int) -> None:
        self.ledger.request(n)
        self.request_drain()

    def cancel(self) -> None:
        self.ledger.cancel()
        self.request_drain()

    def request_drain(self) -> None:
        with self.lock:
            if self.scheduled:
                return
            self.scheduled = True
        _POOL.submit(self._run)

    def _run(self) -> None:
        subscriber = self.subscriber
        if subscriber is not None:
            if not self.started:
                self.started = True
                subscriber.on_subscribe(self)
            self._emit(subscriber)
        ledger = self.ledger
        with self.lock:  # the same lock as ``scheduled``: no wake-up is missed
            self.scheduled = False
            again = self.subscriber is not None and (
                ledger.cancelled or ledger.bad is not None or ledger.demand > 0
                or self.sent == self.elements)
        if again:
            self.request_drain()

    def _emit(self, subscriber: Subscriber[int]) -> None:
        for _ in range(self.BATCH):
            with self.lock:
                action, value = self._next()
            if action == "next":
                subscriber.on_next(value)
                continue
            if action == "error":
                subscriber.on_error(value)
            elif action == "complete":
                subscriber.on_complete()
            return

    def _next(self) -> tuple[str, Any]:
        """What to signal next (called under the lock); the terminal ones release."""
        ledger = self.ledger
        if ledger.cancelled:
            self.subscriber = None
            return "stop", None
        if ledger.bad is not None:
            ledger.cancelled, self.subscriber = True, None
            return "error", IllegalArgumentError(f"{RULE_3_9} Got {ledger.bad}.")
        if self.sent == self.elements:
            ledger.cancelled, self.subscriber = True, None
            return "complete", None
        if ledger.demand == 0:
            return "wait", None
        if ledger.demand != MAX_DEMAND:
            ledger.demand -= 1
        self.sent += 1
        return "next", self.sent


# -- signalling from an asyncio event loop ----------------------------------------------------


class _Loop:
    """One event loop on a daemon thread, shared by every AsyncioPublisher."""

    loop: asyncio.AbstractEventLoop | None = None
    lock = threading.Lock()

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls.lock:
            if cls.loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="tck-correct-asyncio",
                                 daemon=True).start()
                cls.loop = loop
            return cls.loop


class AsyncioPublisher:
    """State lives on the event loop; the Subscription hops there for every call."""

    def __init__(self, elements: int) -> None:
        self.elements = elements

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        _require(subscriber, "subscriber")
        loop = _Loop.get()
        subscription = _LoopSubscription(loop, self.elements, subscriber)
        loop.call_soon_threadsafe(subscription.start)

    def __repr__(self) -> str:
        return f"AsyncioPublisher({self.elements})"


class _LoopSubscription:
    BATCH = 64

    def __init__(self, loop: asyncio.AbstractEventLoop, elements: int,
                 subscriber: Subscriber[int]) -> None:
        self.loop = loop
        self.elements = elements
        self.subscriber: Subscriber[int] | None = subscriber
        self.demand = 0
        self.sent = 0
        self.pending = False

    # called from any thread
    def request(self, n: int) -> None:
        self.loop.call_soon_threadsafe(self._on_request, n)

    def cancel(self) -> None:
        self.loop.call_soon_threadsafe(self._on_cancel)

    # on the loop
    def start(self) -> None:
        subscriber = self.subscriber
        assert subscriber is not None
        subscriber.on_subscribe(self)

    def _on_request(self, n: int) -> None:
        if ended_by_bad_request(self, n):
            return
        self.demand = add_demand(self.demand, n)
        self._emit()

    def _on_cancel(self) -> None:
        self.subscriber = None

    def _emit(self) -> None:
        self.pending = False
        for _ in range(self.BATCH):
            subscriber = self.subscriber
            if subscriber is None or self.demand == 0:
                return
            if self.sent == self.elements:
                self.subscriber = None
                subscriber.on_complete()
                return
            if self.demand != MAX_DEMAND:
                self.demand -= 1
            self.sent += 1
            subscriber.on_next(self.sent)
        if not self.pending:  # let other callbacks (cancel) in between batches
            self.pending = True
            self.loop.call_soon(self._emit)


# -- a Subscriber that processes on a thread pool ---------------------------------------------


class ThreadPoolSubscriber:
    """Hands every signal to an executor; processes them in order, one at a time.

    Keeps ``BATCH`` elements requested, replenishing half of it at a time. ``probe``
    (whitebox) hears what it processes.
    """

    BATCH = 8

    def __init__(self, probe: Any = None) -> None:
        self.probe = probe
        self.lock = threading.Lock()
        self.inbox: deque[tuple[str, Any]] = deque()
        self.running = False
        self.subscription: Subscription | None = None
        self.done = False
        self.received = 0
        self.items: list[int] = []

    def on_subscribe(self, subscription: Subscription) -> None:
        _require(subscription, "subscription")
        self._post("subscribe", subscription)

    def on_next(self, item: int) -> None:
        _require(item, "item")
        self._post("next", item)

    def on_error(self, error: BaseException) -> None:
        _require(error, "error")
        self._post("error", error)

    def on_complete(self) -> None:
        self._post("complete", None)

    def _post(self, kind: str, value: Any) -> None:
        with self.lock:
            self.inbox.append((kind, value))
            if self.running:
                return
            self.running = True
        _POOL.submit(self._process)

    def _process(self) -> None:
        while True:
            with self.lock:
                if not self.inbox:
                    self.running = False
                    return
                kind, value = self.inbox.popleft()
            getattr(self, f"_handle_{kind}")(value)

    def _handle_subscribe(self, subscription: Subscription) -> None:
        if self.subscription is not None or self.done:
            subscription.cancel()  # rule 2.5
            return
        self.subscription = subscription
        if self.probe is not None:
            self.probe.register_on_subscribe(_Puppet(subscription))
        else:
            subscription.request(self.BATCH)

    def _handle_next(self, item: int) -> None:
        if self.done:
            return  # rule 2.8: after cancel, elements may still come
        self.items.append(item)
        if self.probe is not None:
            self.probe.register_on_next(item)
            return
        self.received += 1
        if self.received == self.BATCH // 2 and self.subscription is not None:
            self.received = 0
            self.subscription.request(self.BATCH // 2)

    def _handle_error(self, error: BaseException) -> None:
        self.done, self.subscription = True, None  # rule 2.4
        if self.probe is not None:
            self.probe.register_on_error(error)

    def _handle_complete(self, _: None) -> None:
        self.done, self.subscription = True, None
        if self.probe is not None:
            self.probe.register_on_complete()


class _Puppet:
    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def trigger_request(self, elements: int) -> None:
        self.subscription.request(elements)

    def signal_cancel(self) -> None:
        self.subscription.cancel()
