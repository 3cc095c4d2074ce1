"""Deliberately broken Publishers, Subscribers and Processors: the kit must fail them.

Written without sansrs.streams' building blocks, the way a hand-rolled
implementation would be, each with exactly one bug switched on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from sansrs.streams import MAX_DEMAND, MapProcessor, Subscriber, Subscription


@dataclass(frozen=True, slots=True, kw_only=True)
class Bugs:
    over_deliver: bool = False  # one on_next more than requested (rule 1.1)
    signal_after_complete: bool = False  # on_next after on_complete (rule 1.7)
    concurrent: bool = False  # every on_next on a fresh thread (rule 1.3)
    recursive: bool = False  # on_next straight from request, no trampoline (rule 3.3)
    ignore_bad_request: bool = False  # request(0) is silently ignored (rule 3.9)
    vague_bad_request: bool = False  # rule 3.9 error without citing the rule (optional 3.9)
    keep_subscribers: bool = False  # never drops the Subscriber (rule 3.13)
    accept_none: bool = False  # subscribe(None) does not raise (rule 1.9)
    never_complete: bool = False  # finite stream without on_complete (rule 1.5)
    ignore_cancel: bool = False  # keeps emitting after cancel (rule 3.12)
    overflow_error: bool = False  # on_error when demand passes 2**63-1 (rule 3.17)
    request_after_cancel_raises: bool = False  # request after cancel raises (rule 3.6)
    no_on_subscribe: bool = False  # signals without on_subscribe (rule 1.9)


class BrokenPublisher:
    def __init__(self, elements: int, bugs: Bugs) -> None:
        self.elements = elements
        self.bugs = bugs
        self.kept: list[Any] = []

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None and not self.bugs.accept_none:
            raise TypeError("subscriber must not be None")
        if subscriber is None:
            return
        subscription = _BrokenSubscription(self, subscriber)
        if self.bugs.keep_subscribers:
            self.kept.append(subscriber)
        if self.bugs.no_on_subscribe:
            subscription.request(1)
            return
        subscriber.on_subscribe(subscription)

    def __repr__(self) -> str:
        return f"BrokenPublisher({self.elements}, {self.bugs})"


class _BrokenSubscription:
    def __init__(self, publisher: BrokenPublisher, subscriber: Subscriber[int]) -> None:
        self.publisher = publisher
        self.bugs = publisher.bugs
        self.subscriber: Subscriber[int] | None = subscriber
        self.demand = 0
        self.sent = 0
        self.cancelled = False
        self.completed = False
        self.emitting = False
        self.lock = threading.Lock()

    def request(self, n: int) -> None:
        bugs = self.bugs
        subscriber = self.subscriber
        if self.cancelled and bugs.request_after_cancel_raises:
            raise RuntimeError("request after cancel")
        if subscriber is None or (self.cancelled and not bugs.ignore_cancel):
            return
        if self.completed:
            if bugs.signal_after_complete:
                subscriber.on_next(-1)
            return
        if n <= 0:
            if bugs.ignore_bad_request:
                return
            self.cancelled = True
            text = "bad request" if bugs.vague_bad_request else "rule 3.9: request must be > 0"
            subscriber.on_error(ValueError(text))
            return
        self.demand += n
        if self.demand > MAX_DEMAND:
            if bugs.overflow_error:
                self.cancelled = True
                subscriber.on_error(ArithmeticError("demand overflow"))
                return
            self.demand = MAX_DEMAND
        if bugs.concurrent:
            self._emit_on_threads(subscriber)
            return
        if self.emitting and not bugs.recursive:
            return
        self.emitting = True
        try:
            self._emit(subscriber)
        finally:
            self.emitting = False

    def _emit(self, subscriber: Subscriber[int]) -> None:
        bugs = self.bugs
        while self.demand > 0 and (not self.cancelled or bugs.ignore_cancel):
            if self.sent >= self.publisher.elements:
                self._complete(subscriber)
                return
            self.demand -= 1
            self.sent += 1
            subscriber.on_next(self.sent)
            if bugs.over_deliver and self.demand == 0 and self.sent < self.publisher.elements:
                self.sent += 1
                subscriber.on_next(self.sent)
        if self.sent >= self.publisher.elements and not self.cancelled:
            self._complete(subscriber)

    def _emit_on_threads(self, subscriber: Subscriber[int]) -> None:
        def one(value: int, last: bool) -> None:
            subscriber.on_next(value)
            if last:
                self._complete(subscriber)

        with self.lock:
            while self.demand > 0 and self.sent < self.publisher.elements:
                self.demand -= 1
                self.sent += 1
                last = self.sent == self.publisher.elements
                threading.Thread(target=one, args=(self.sent, last), daemon=True).start()

    def _complete(self, subscriber: Subscriber[int]) -> None:
        if self.completed or self.bugs.never_complete:
            return
        self.completed = True
        subscriber.on_complete()

    def cancel(self) -> None:
        self.cancelled = True
        subscriber = self.subscriber
        if self.bugs.ignore_cancel and subscriber is not None:
            # "flush on cancel": everything left goes out, demand or not
            while self.sent < self.publisher.elements:
                self.sent += 1
                subscriber.on_next(self.sent)
        if not self.bugs.keep_subscribers:
            self.subscriber = None


# -- Subscribers ---------------------------------------------------------------------


class BrokenSubscriber:
    """A Subscriber with one bug; otherwise requests 1 at a time."""

    def __init__(self, *, request_zero: bool = False, cancel_in_on_complete: bool = False,
                 ignore_second_subscription: bool = False, accept_none: bool = False,
                 request_in_on_error: bool = False) -> None:
        self.request_zero = request_zero
        self.cancel_in_on_complete = cancel_in_on_complete
        self.ignore_second_subscription = ignore_second_subscription
        self.accept_none = accept_none
        self.request_in_on_error = request_in_on_error
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None and not self.accept_none:
            raise TypeError("subscription must not be None")
        if self.subscription is not None:
            if not self.ignore_second_subscription:
                subscription.cancel()
            return
        self.subscription = subscription
        subscription.request(0 if self.request_zero else 1)

    def on_next(self, item: int) -> None:
        if item is None and not self.accept_none:
            raise TypeError("item must not be None")
        if self.subscription is not None:
            self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        if error is None and not self.accept_none:
            raise TypeError("error must not be None")
        if self.request_in_on_error and self.subscription is not None:
            self.subscription.request(1)

    def on_complete(self) -> None:
        if self.cancel_in_on_complete and self.subscription is not None:
            self.subscription.cancel()


class ErrorSwallowingProcessor(MapProcessor[int, int]):
    """Turns an upstream error into completion: breaks rule 4.2."""

    def __init__(self, buffer_size: int) -> None:
        super().__init__(lambda x: x, buffer_size=buffer_size)

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None")
        self.on_complete()
