"""More deliberately broken Publishers: bugs that need their own structure.

Threads racing on the demand, signals from every requesting thread,
state kept per Subscriber, locks held while signalling, a subscribe() that
waits for its Subscriber. Each is a plausible way to write a Publisher.
"""

from __future__ import annotations

import threading
from typing import Any

from sansrs.streams import RULE_3_9, IllegalArgumentError, Subscriber, add_demand
from tests.tck.tck_broken import BrokenPublisher, Bugs
from tests.tck.tck_correct import ended_by_bad_request


class _Base:
    def __init__(self, elements: int) -> None:
        self.elements = elements

    def _check(self, subscriber: object) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.elements})"


# -- demand updated without synchronization --------------------------------------------


class UnsyncThreadPublisher(_Base):
    """A worker thread per Subscriber; ``request`` adds to the demand without a lock.

    ``add_demand(self.demand, n)`` reads, calls, then writes: a worker decrement or
    another ``request`` in between is lost (rules 3.8 and 1.1 under contention).
    """

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._check(subscriber)
        subscription = _UnsyncSubscription(self.elements, subscriber)
        threading.Thread(target=subscription.run, daemon=True).start()


class _UnsyncSubscription:
    def __init__(self, elements: int, subscriber: Subscriber[int]) -> None:
        self.elements = elements
        self.subscriber: Subscriber[int] | None = subscriber
        self.demand = 0
        self.bad: int | None = None
        self.cancelled = False
        self.wake = threading.Event()

    def request(self, n: int) -> None:
        if n <= 0:
            self.bad = n
        else:
            self.demand = add_demand(self.demand, n)  # BUG: read-modify-write, no lock
        self.wake.set()

    def cancel(self) -> None:
        self.cancelled = True
        self.wake.set()

    def run(self) -> None:
        subscriber = self.subscriber
        assert subscriber is not None
        subscriber.on_subscribe(self)
        sent = 0
        while not self.cancelled:
            self.wake.wait()
            self.wake.clear()
            if self.bad is not None and not self.cancelled:
                subscriber.on_error(IllegalArgumentError(f"{RULE_3_9} Got {self.bad}."))
                break
            while self.demand > 0 and not self.cancelled:
                self.demand -= 1
                sent += 1
                subscriber.on_next(sent)
                if sent == self.elements:
                    subscriber.on_complete()
                    self.cancelled = True
        self.subscriber = None


class UnguardedEmitterPublisher(_Base):
    """Each ``request(n)`` emits its n elements at once on the calling thread; the
    counters are locked, the signalling is not: two requesting threads signal at once
    (rule 1.3)."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._check(subscriber)
        subscriber.on_subscribe(_UnguardedSubscription(self.elements, subscriber))


class _UnguardedSubscription:
    def __init__(self, elements: int, subscriber: Subscriber[int]) -> None:
        self.elements = elements
        self.subscriber: Subscriber[int] | None = subscriber
        self.lock = threading.Lock()
        self.sent = 0

    def request(self, n: int) -> None:
        subscriber = self.subscriber
        if subscriber is None or ended_by_bad_request(self, n):
            return
        for _ in range(n):
            with self.lock:
                if self.sent == self.elements or self.subscriber is None:
                    return
                self.sent += 1
                item = self.sent
            subscriber.on_next(item)  # BUG: not serialized with other threads' signals
            if item == self.elements:
                self.subscriber = None
                subscriber.on_complete()

    def cancel(self) -> None:
        self.subscriber = None


# -- the same Subscriber twice ------------------------------------------------------------


class KeyedBySubscriberPublisher(_Base):
    """Keeps subscriptions in a dict keyed by Subscriber: a second ``subscribe`` with the
    same Subscriber replaces the first, whose requests then go nowhere (rule 1.10)."""

    def __init__(self, elements: int) -> None:
        super().__init__(elements)
        self.active: dict[int, _KeyedSubscription] = {}

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._check(subscriber)
        subscription = _KeyedSubscription(self, subscriber)
        self.active[id(subscriber)] = subscription
        subscriber.on_subscribe(subscription)


class _KeyedSubscription:
    def __init__(self, publisher: KeyedBySubscriberPublisher, subscriber: Subscriber[int]) -> None:
        self.publisher = publisher
        self.key = id(subscriber)
        self.subscriber: Subscriber[int] | None = subscriber
        self.sent = 0
        self.emitting = False
        self.demand = 0

    def _current(self) -> _KeyedSubscription | None:
        return self.publisher.active.get(self.key)

    def request(self, n: int) -> None:
        current = self._current()  # BUG: looks itself up by Subscriber
        if current is None or current.subscriber is None:
            return
        if n <= 0:
            subscriber = current.subscriber
            current.cancel()
            subscriber.on_error(IllegalArgumentError(f"{RULE_3_9} Got {n}."))
            return
        current.demand = add_demand(current.demand, n)
        if current.emitting:
            return
        current.emitting = True
        try:
            current.emit()
        finally:
            current.emitting = False

    def emit(self) -> None:
        while self.demand > 0 and self.subscriber is not None:
            self.demand -= 1
            self.sent += 1
            self.subscriber.on_next(self.sent)
            if self.sent == self.publisher.elements and self.subscriber is not None:
                subscriber, self.subscriber = self.subscriber, None
                self.publisher.active.pop(self.key, None)
                subscriber.on_complete()

    def cancel(self) -> None:
        current = self._current()
        if current is not None:
            current.subscriber = None
            self.publisher.active.pop(self.key, None)


class ResubscribeRaisesPublisher(_Base):
    """Raises from ``subscribe`` when the Subscriber is already subscribed (rule 1.9:
    ``subscribe`` MUST return normally; reject with ``on_error`` instead)."""

    def __init__(self, elements: int) -> None:
        super().__init__(elements)
        self.subscribed: set[int] = set()
        self.delegate: Any = None

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._check(subscriber)
        if id(subscriber) in self.subscribed:
            raise RuntimeError("this Subscriber is already subscribed")
        self.subscribed.add(id(subscriber))
        BrokenPublisher(self.elements, Bugs()).subscribe(subscriber)


# -- blocking ---------------------------------------------------------------------------------


class LockedEmitterPublisher(_Base):
    """Holds a (non-reentrant) lock while it signals: a ``request`` from inside
    ``on_next`` waits for itself forever (rule 3.2)."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._check(subscriber)
        subscriber.on_subscribe(_LockedSubscription(self.elements, subscriber))


class _LockedSubscription:
    def __init__(self, elements: int, subscriber: Subscriber[int]) -> None:
        self.elements = elements
        self.subscriber: Subscriber[int] | None = subscriber
        self.lock = threading.Lock()
        self.sent = 0

    def request(self, n: int) -> None:
        with self.lock:  # BUG: held across on_next
            subscriber = self.subscriber
            if subscriber is None or ended_by_bad_request(self, n):
                return
            for _ in range(min(n, self.elements - self.sent)):
                self.sent += 1
                subscriber.on_next(self.sent)
            if self.sent == self.elements:
                self.subscriber = None
                subscriber.on_complete()

    def cancel(self) -> None:
        self.subscriber = None


class WaitingSubscribePublisher(_Base):
    """``subscribe`` waits until the Subscriber has requested, "so it is ready": but the
    caller of ``subscribe`` is who requests (rule 1.9: subscribe MUST return)."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self._check(subscriber)
        ready = threading.Event()
        inner: list[Any] = []

        class Gate:
            def on_subscribe(self, subscription: Any) -> None:
                inner.append(subscription)

        BrokenPublisher(self.elements, Bugs()).subscribe(Gate())  # type: ignore[arg-type]

        class Ready:
            def request(self, n: int) -> None:
                ready.set()
                inner[0].request(n)

            def cancel(self) -> None:
                ready.set()
                inner[0].cancel()

        inner[0].subscriber = subscriber
        subscriber.on_subscribe(Ready())
        ready.wait()  # BUG: blocks the caller until it requests
