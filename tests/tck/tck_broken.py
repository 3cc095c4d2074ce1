"""Deliberately broken Publishers: a naive hand-rolled Publisher with one bug switched on.

Written without sansrs.streams' building blocks, the way a hand-rolled
implementation would be. ``BrokenPublisher(elements, Bugs())`` is correct (the
control) for a Subscriber that follows rule 2.7: its demand and its "signalling
now" flag have no lock, so request() from two threads at once can lose demand.
Each flag of ``Bugs`` breaks one rule, the way real code does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from sansrs.streams import MAX_DEMAND, Subscriber

#: After this many request() calls the "late" bugs start (a dozen requests are fine).
LATE_REQUESTS = 12
#: After this many elements the "late" cancel bugs start.
LATE_ELEMENTS = 100


def wrap64(value: int) -> int:
    """Java's ``long`` addition: two's complement, wrapping at 2**63."""
    return (value + 2**63) % 2**64 - 2**63


@dataclass(frozen=True, slots=True, kw_only=True)
class Bugs:
    over_deliver: bool = False  # one on_next more than requested (rule 1.1)
    signal_after_complete: bool = False  # on_next after on_complete (rule 1.7)
    concurrent: bool = False  # every on_next on a fresh thread (rule 1.3)
    recursive: bool = False  # on_next straight from request, no trampoline (rule 3.3)
    ignore_bad_request: bool = False  # request(0) is silently ignored (rule 3.9)
    ignore_negative_request: bool = False  # request(-n) is silently ignored (rule 3.9)
    bad_request_wrong_error: bool = False  # request(0) signals RuntimeError (rule 3.9)
    bad_request_raises: bool = False  # request(0) raises instead of signalling (3.9)
    vague_bad_request: bool = False  # rule 3.9 error without citing the rule (optional 3.9)
    keep_subscribers: bool = False  # never drops the Subscriber (rule 3.13)
    accept_none: bool = False  # subscribe(None) does not raise (rule 1.9)
    never_complete: bool = False  # finite stream without on_complete (rule 1.5)
    complete_only_on_exact_demand: bool = False  # no on_complete if demand is left (1.2)
    extra_element: bool = False  # create_publisher(n) publishes n + 1 elements
    none_element: bool = False  # element #2 is None (rule 2.13)
    ignore_cancel: bool = False  # keeps emitting after cancel (rule 3.12)
    cancel_not_idempotent: bool = False  # a second cancel() raises (rule 3.7)
    overflow_error: bool = False  # on_error when demand passes 2**63-1 (rule 3.17)
    request_after_cancel_raises: bool = False  # request after cancel raises (rule 3.6)
    no_on_subscribe: bool = False  # signals without on_subscribe (rule 1.9)
    on_subscribe_twice: bool = False  # calls on_subscribe twice (rule 2.12)
    lose_request_in_on_subscribe: bool = False  # demand from inside on_subscribe lost (3.2)
    lose_reentrant_request: bool = False  # demand from inside on_next lost (3.2)
    # -- the subtle ones (issue kinds) --
    extra_after_dozen_requests: bool = False  # request #13 on registers n + 1 (rule 1.1)
    short_after_dozen_requests: bool = False  # request #13 on registers n - 1 (rule 3.8)
    cancel_only_early: bool = False  # cancel ignored after 100 elements (rule 3.12)
    release_only_early: bool = False  # cancel keeps the Subscriber after 100 elements (3.13)
    wrapping_demand: bool = False  # 64-bit demand that wraps around (rule 3.17)
    negative_demand_error: bool = False  # wraps, then signals on_error (rule 3.17)
    overflow_raises: bool = False  # request raises OverflowError past 2**63-1 (rule 3.17)
    overflow_check_off_by_one: bool = False  # raises when demand reaches 2**63-1 (3.17)
    int32_demand: bool = False  # demand kept in 32 signed bits (rule 3.17)


class BrokenPublisher:
    def __init__(self, elements: int, bugs: Bugs) -> None:
        self.elements = elements + 1 if bugs.extra_element else elements
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
        subscription.starting = True
        subscriber.on_subscribe(subscription)
        subscription.starting = False
        if self.bugs.on_subscribe_twice:
            subscriber.on_subscribe(subscription)

    def __repr__(self) -> str:
        return f"BrokenPublisher({self.elements})"


class _BrokenSubscription:
    def __init__(self, publisher: BrokenPublisher, subscriber: Subscriber[int]) -> None:
        self.publisher = publisher
        self.bugs = publisher.bugs
        self.subscriber: Subscriber[int] | None = subscriber
        self.demand = 0
        self.sent = 0
        self.calls = 0
        self.cancelled = False
        self.cancels = 0
        self.completed = False
        self.emitting = False
        self.starting = False
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
        if (self.starting and bugs.lose_request_in_on_subscribe) or (
                self.emitting and bugs.lose_reentrant_request):
            return
        if n <= 0:
            self._bad_request(subscriber, n)
            return
        self.calls += 1
        if self.calls > LATE_REQUESTS:
            n += 1 if bugs.extra_after_dozen_requests else 0
            n -= 1 if bugs.short_after_dozen_requests else 0
        if not self._add_demand(subscriber, n):
            return
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

    def _bad_request(self, subscriber: Subscriber[int], n: int) -> None:
        bugs = self.bugs
        if bugs.ignore_bad_request or (n < 0 and bugs.ignore_negative_request):
            return
        if bugs.bad_request_raises:
            raise ValueError(f"request({n}): n must be > 0")
        self.cancelled = True
        if bugs.bad_request_wrong_error:
            subscriber.on_error(RuntimeError(f"bad request({n})"))
            return
        text = "bad request" if bugs.vague_bad_request else "rule 3.9: request must be > 0"
        subscriber.on_error(ValueError(text))

    def _add_demand(self, subscriber: Subscriber[int], n: int) -> bool:
        """Add ``n``; False if the subscription ended on the way."""
        bugs = self.bugs
        if bugs.overflow_raises and self.demand + n > MAX_DEMAND:
            raise OverflowError("demand does not fit in 64 bits")
        if bugs.overflow_check_off_by_one and self.demand + n >= MAX_DEMAND:
            raise OverflowError("demand does not fit in 64 bits")
        if bugs.int32_demand:
            self.demand = (self.demand + n + 2**31) % 2**32 - 2**31
            return True
        if bugs.wrapping_demand or bugs.negative_demand_error:
            self.demand = wrap64(self.demand + n)
            if self.demand < 0 and bugs.negative_demand_error:
                self.cancelled = True
                subscriber.on_error(RuntimeError(f"negative demand {self.demand}"))
                return False
            return True
        self.demand += n
        if self.demand > MAX_DEMAND:
            if bugs.overflow_error:
                self.cancelled = True
                subscriber.on_error(ArithmeticError("demand overflow"))
                return False
            self.demand = MAX_DEMAND
        return True

    def _emit(self, subscriber: Subscriber[int]) -> None:
        bugs = self.bugs
        while self.demand > 0 and (not self.cancelled or bugs.ignore_cancel):
            if self.sent >= self.publisher.elements:
                self._complete(subscriber)
                return
            self.demand -= 1
            self.sent += 1
            subscriber.on_next(None if bugs.none_element and self.sent == 2 else self.sent)
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
        bugs = self.bugs
        if self.completed or bugs.never_complete:
            return
        if bugs.complete_only_on_exact_demand and self.demand != 0:
            return
        self.completed = True
        subscriber.on_complete()

    def cancel(self) -> None:
        bugs = self.bugs
        self.cancels += 1
        if self.cancels > 1 and bugs.cancel_not_idempotent:
            raise RuntimeError("already cancelled")
        late = self.sent > LATE_ELEMENTS
        if late and bugs.cancel_only_early:
            return  # "nobody cancels that late": the flag is checked only while starting up
        self.cancelled = True
        subscriber = self.subscriber
        if bugs.ignore_cancel and subscriber is not None:
            # "flush on cancel": everything left goes out, demand or not
            while self.sent < self.publisher.elements:
                self.sent += 1
                subscriber.on_next(self.sent)
        if not bugs.keep_subscribers and not (late and bugs.release_only_early):
            self.subscriber = None
        if late and bugs.release_only_early:
            _LATE_CANCELLED.append(self)  # "kept for statistics"


#: Where ``release_only_early`` keeps its cancelled subscriptions (and so their Subscribers).
_LATE_CANCELLED: list[_BrokenSubscription] = []


class BrokenFailedPublisher:
    """A Publisher in a failed state, signalling its failure wrongly."""

    def __init__(self, *, complete_after_error: bool = False,
                 skip_on_subscribe: bool = False) -> None:
        self.complete_after_error = complete_after_error
        self.skip_on_subscribe = skip_on_subscribe

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None")
        if not self.skip_on_subscribe:
            subscriber.on_subscribe(_NoopSubscription())
        subscriber.on_error(RuntimeError("failed on purpose"))
        if self.complete_after_error:
            subscriber.on_complete()  # "make sure it is closed"


class _NoopSubscription:
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass
