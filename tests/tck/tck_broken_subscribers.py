"""Deliberately broken Subscribers and Processors, one bug each.

``BrokenSubscriber(**flags)`` is a naive Subscriber requesting one element at a
time, correct with no flag on. The classes below it break rule 2.3 in ways a
name-based check cannot see (an alias, a lambda, a worker thread), break the
whitebox contract, or are Processors with one bug.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sansrs.streams import MapProcessor, Subscription
from tests.tck.tck_processor import BroadcastProcessor, ProcessorBugs


class BrokenSubscriber:
    """A Subscriber with one bug; otherwise requests 1 at a time."""

    def __init__(self, *, request_zero: bool = False, never_request: bool = False,
                 cancel_in_on_complete: bool = False, request_in_on_error: bool = False,
                 ignore_second_subscription: bool = False,
                 request_on_second_subscription: bool = False,
                 raise_on_second_subscription: bool = False,
                 accept_none_subscription: bool = False, accept_none_item: bool = False,
                 accept_none_error: bool = False, wrong_error_on_none: bool = False,
                 require_request_before_complete: bool = False,
                 require_request_before_error: bool = False,
                 require_everything_before_complete: bool = False,
                 require_everything_before_error: bool = False,
                 raise_in_on_next: bool = False) -> None:
        self.request_zero = request_zero
        self.never_request = never_request
        self.cancel_in_on_complete = cancel_in_on_complete
        self.request_in_on_error = request_in_on_error
        self.ignore_second_subscription = ignore_second_subscription
        self.request_on_second_subscription = request_on_second_subscription
        self.raise_on_second_subscription = raise_on_second_subscription
        self.accept_none_subscription = accept_none_subscription
        self.accept_none_item = accept_none_item
        self.accept_none_error = accept_none_error
        self.wrong_error_on_none = wrong_error_on_none
        self.require_request_before_complete = require_request_before_complete
        self.require_request_before_error = require_request_before_error
        self.require_everything_before_complete = require_everything_before_complete
        self.require_everything_before_error = require_everything_before_error
        self.raise_in_on_next = raise_in_on_next
        self.subscription: Subscription | None = None
        self.requested = 0
        self.received = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None and not self.accept_none_subscription:
            raise TypeError("subscription must not be None")
        if self.subscription is not None:
            if self.raise_on_second_subscription:
                raise RuntimeError("already subscribed")
            if self.request_on_second_subscription:
                subscription.request(1)
            elif not self.ignore_second_subscription:
                subscription.cancel()
            return
        self.subscription = subscription
        if subscription is not None and not self.never_request:
            self.requested += 1
            subscription.request(0 if self.request_zero else 1)

    def on_next(self, item: int) -> None:
        if item is None and not self.accept_none_item:
            if self.wrong_error_on_none:
                raise ValueError("no None please")
            raise TypeError("item must not be None")
        if self.raise_in_on_next:
            raise RuntimeError(f"could not process {item!r}")
        self.received += 1
        if self.subscription is not None:
            self.requested += 1
            self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        if error is None and not self.accept_none_error:
            raise TypeError("error must not be None")
        if self.require_request_before_error:
            assert self.requested, "on_error before any request"
        if self.require_everything_before_error:
            assert self.received >= self.requested, "on_error with elements still requested"
        if self.request_in_on_error and self.subscription is not None:
            self.subscription.request(1)

    def on_complete(self) -> None:
        if self.require_request_before_complete:
            assert self.requested, "on_complete before any request"
        if self.require_everything_before_complete:
            assert self.received >= self.requested, "on_complete with elements still requested"
        if self.cancel_in_on_complete and self.subscription is not None:
            self.subscription.cancel()


# -- rule 2.3, whatever the names -----------------------------------------------------------


class AliasSubscriber(BrokenSubscriber):
    """``on_complete`` is another name for ``_shutdown``, which cancels (rule 2.3)."""

    def _shutdown(self) -> None:
        if self.subscription is not None:
            self.subscription.cancel()  # "release the upstream"

    on_complete = _shutdown


class LambdaSubscriber(BrokenSubscriber):
    """Its ``on_error`` is a lambda set per instance that asks for more (rule 2.3)."""

    def __init__(self) -> None:
        super().__init__()
        self.on_error: Callable[[BaseException], None] = (  # type: ignore[assignment]
            lambda error: self.subscription.request(1) if self.subscription else None)


class WorkerSubscriber(BrokenSubscriber):
    """Hands each terminal signal to a worker thread, which cancels (rule 2.3)."""

    def __init__(self) -> None:
        super().__init__()
        self.done = threading.Event()

    def _finish(self) -> None:
        if self.subscription is not None:
            self.subscription.cancel()
        self.done.set()

    def on_complete(self) -> None:
        threading.Thread(target=self._finish, daemon=True).start()

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None")
        threading.Thread(target=self._finish, daemon=True).start()


# -- whitebox -----------------------------------------------------------------------------------


class ProbedSubscriber(BrokenSubscriber):
    """A BrokenSubscriber reporting to a whitebox probe; the puppet may be broken too."""

    def __init__(self, probe: Any, *, short_requests: bool = False,
                 cancel_ignored: bool = False, raise_after_cancel: bool = False,
                 **flags: bool) -> None:
        super().__init__(never_request=True, **flags)
        self.probe = probe
        self.short_requests = short_requests
        self.cancel_ignored = cancel_ignored
        self.raise_after_cancel = raise_after_cancel
        self.cancelled = False

    def on_subscribe(self, subscription: Subscription) -> None:
        first = self.subscription is None
        super().on_subscribe(subscription)
        if first and subscription is not None:
            self.probe.register_on_subscribe(_Puppet(self))

    def on_next(self, item: int) -> None:
        if self.cancelled and self.raise_after_cancel:
            raise RuntimeError(f"on_next({item!r}) after I cancelled")
        if item is None:
            raise TypeError("item must not be None")
        self.probe.register_on_next(item)

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        self.probe.register_on_error(error)

    def on_complete(self) -> None:
        super().on_complete()
        self.probe.register_on_complete()


class _Puppet:
    def __init__(self, subscriber: ProbedSubscriber) -> None:
        self.subscriber = subscriber

    def trigger_request(self, elements: int) -> None:
        subscription = self.subscriber.subscription
        assert subscription is not None
        if self.subscriber.request_zero:
            elements = 0
        subscription.request(min(elements, 1) if self.subscriber.short_requests else elements)

    def signal_cancel(self) -> None:
        self.subscriber.cancelled = True
        if not self.subscriber.cancel_ignored and self.subscriber.subscription is not None:
            self.subscriber.subscription.cancel()


# -- Processors -----------------------------------------------------------------------------------


class ErrorSwallowingProcessor(MapProcessor[int, int]):
    """Turns an upstream error into completion: breaks rule 4.2."""

    def __init__(self, buffer_size: int) -> None:
        super().__init__(lambda x: x, buffer_size=buffer_size)

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None")
        self.on_complete()


def broken_processor(**bugs: bool) -> Callable[[int], BroadcastProcessor]:
    """A factory of multicast Processors with ``ProcessorBugs(**bugs)``."""
    return lambda buffer_size: BroadcastProcessor(buffer_size, ProcessorBugs(**bugs))
