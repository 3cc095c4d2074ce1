"""The kit's own Subscriber and Publisher, driven step by step by a test.

``ManualSubscriber`` requests only what the test asks for and checks every
signal it receives (``SignalChecker``); ``ManualPublisher`` plays the Publisher
for a Subscriber under test and sends an element only against demand it has
seen. Every call into the implementation goes through ``call_implementation``:
it declares what the kit is doing (for the deadline report) and turns an
exception the implementation raises into a report naming the call, the rule
that says it must return normally, and the implementation's traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sansrs.streams import MAX_DEMAND, Publisher, Subscriber, Subscription, add_demand

from ._env import RuleViolation, TestEnvironment
from ._probes import Latch, Promise, Receptacle
from ._signals import SignalChecker

__all__ = [
    "BlackholeSubscriber",
    "ManualPublisher",
    "ManualSubscriber",
    "call_implementation",
    "new_manual_subscriber",
    "subscribe",
]

T = TypeVar("T")

#: The rule saying a call MUST return normally, by the method called.
RETURN_RULES = {"subscribe": "1.9", "request": "3.16", "cancel": "3.15", "on_subscribe": "2.13",
                "on_next": "2.13", "on_error": "2.13", "on_complete": "2.13"}


def call_implementation(env: TestEnvironment, what: str, function: Callable[..., object],
                        *args: object) -> None:
    """Call the implementation (``what``: e.g. ``Subscription.request(1)``)."""
    with env.doing(f"calling {what}, which has not returned"):
        try:
            function(*args)
        except Exception as error:
            if isinstance(error, RuleViolation) or any(error is e for e in env.async_errors):
                raise  # a kit check that fired inside the call
            method, _, argument = what.partition(".")[2].partition("(")
            rule = RETURN_RULES.get(method)
            must = f": it MUST return normally (rule {rule})" if rule else ""
            if method == "request" and _non_positive(argument):
                must = ": request(n <= 0) MUST signal on_error (rule 3.9) and return normally"
            # the test's rule names the situation; the detail names the rule for raising
            raise env.violation(None, f"{what} raised {error!r}{must}", site=(),
                                cause=error) from error


def subscribe(env: TestEnvironment, publisher: Publisher[T], subscriber: Subscriber[T],
              timeout: float | None = None) -> None:
    """``publisher.subscribe(subscriber)`` for a kit Subscriber; waits for ``on_subscribe``."""
    call_implementation(env, f"Publisher.subscribe() of {publisher!r}", publisher.subscribe,
                        subscriber)
    promise = getattr(subscriber, "subscription", None)
    if isinstance(promise, Promise):
        promise.expect_completion(
            timeout, f"Publisher {publisher!r} did not call on_subscribe within "
            f"{int(1000 * (env.timeout if timeout is None else timeout))} ms (rule 1.9)")


def new_manual_subscriber(env: TestEnvironment, publisher: Publisher[T],
                          timeout: float | None = None, *,
                          under_test: bool = True) -> ManualSubscriber[T]:
    """A ManualSubscriber subscribed to ``publisher`` (``under_test=False``: a helper)."""
    subscriber: ManualSubscriber[T] = ManualSubscriber(env, under_test=under_test)
    subscribe(env, publisher, subscriber, timeout)
    return subscriber


class ManualSubscriber(Generic[T]):
    """A Subscriber driven by the test: it requests only what the test asks for.

    Every signal is checked as it arrives (``SignalChecker``: rules 1.1, 1.3,
    1.7, 1.9, 2.12, 2.13, 3.12). Unexpected ``on_error`` signals are recorded
    as asynchronous errors.
    """

    keep_elements = True

    def __init__(self, env: TestEnvironment, *, check_concurrency: bool = True,
                 under_test: bool = True) -> None:
        self.env = env
        self.checker = SignalChecker(env, check_concurrency=check_concurrency,
                                     under_test=under_test)
        self.subscription: Promise[Subscription] = Promise(env)
        self.received: Receptacle[T] = Receptacle(env)

    def __repr__(self) -> str:
        return f"ManualSubscriber({self.checker!r})"

    @property
    def requested(self) -> int:
        return self.checker.requested

    @property
    def delivered(self) -> int:
        return self.checker.delivered

    @property
    def terminated(self) -> bool:
        return self.checker.terminal is not None

    # -- signals from the Publisher ---------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        self.checker.enter("on_subscribe")
        try:
            if self.checker.check_on_subscribe(subscription):
                self.subscription.complete(subscription)
            else:
                self.on_second_subscribe(subscription)
        finally:
            self.checker.leave()

    def on_second_subscribe(self, subscription: Subscription) -> None:
        """A second ``on_subscribe``: a rule 2.12 violation (a test may tolerate it)."""
        raise self.checker.second_on_subscribe()

    def on_next(self, item: T) -> None:
        self.checker.enter(f"on_next({item!r})")
        try:
            self.checker.check_on_next(item)
            if self.keep_elements:
                self.received.add(item)
        finally:
            self.checker.leave()

    def on_error(self, error: BaseException) -> None:
        self.checker.enter(f"on_error({error!r})")
        try:
            self.checker.check_terminal(f"on_error({error!r})", error, is_error=True)
            self.take_error(error)
        finally:
            self.checker.leave()

    def take_error(self, error: BaseException) -> None:
        """A (checked) ``on_error``: recorded as unexpected, and it ends the stream."""
        self.env.record_error(error)
        self.received.fail(error)

    def on_complete(self) -> None:
        self.checker.enter("on_complete")
        try:
            self.checker.check_terminal("on_complete")
            self.received.complete()
        finally:
            self.checker.leave()

    # -- driven by the test ----------------------------------------------------------

    def request(self, n: int) -> None:
        self.checker.add_request(n)
        call_implementation(self.env, f"Subscription.request({_count(n)})",
                            self.subscription.value().request, n)

    def cancel(self) -> None:
        if self.subscription.is_completed():
            self.checker.mark_cancelled()
            call_implementation(self.env, "Subscription.cancel()",
                                self.subscription.value().cancel)

    def next_element(self, message: str = "Did not receive expected element",
                     timeout: float | None = None) -> T:
        return self.received.next(timeout, message)

    def next_elements(self, n: int, message: str = "Did not receive expected elements",
                      timeout: float | None = None) -> list[T]:
        return self.received.next_n(n, timeout, message)

    def request_next_element(self, message: str = "Did not receive expected element") -> T:
        self.request(1)
        return self.next_element(message)

    def request_next_element_or_end_of_stream(
            self, message: str = "Did not receive expected element or completion"
    ) -> tuple[bool, T | None]:
        self.request(1)
        return self.received.next_or_end(None, message)

    def request_end_of_stream(self, message: str = "Did not receive expected on_complete") -> None:
        self.request(1)
        self.expect_completion(message=message)

    def expect_completion(self, timeout: float | None = None,
                          message: str = "Did not receive expected on_complete") -> None:
        self.received.expect_completion(timeout, message)

    def expect_none(self, message: str = "Did not expect a signal, but got", *,
                    within: float | None = None) -> None:
        self.received.expect_none(within, message)

    def expect_error(self, kind: type[BaseException] = BaseException,
                     timeout: float | None = None) -> BaseException:
        return self.env.expect_error(kind, timeout, f"{self!r}: ")


class BlackholeSubscriber(ManualSubscriber[T]):
    """A ManualSubscriber that drops elements (it only counts and checks them)."""

    keep_elements = False


class _ManualSubscription:
    def __init__(self, publisher: ManualPublisher[Any]) -> None:
        self._publisher = publisher

    def request(self, n: int) -> None:
        self._publisher.requests.add(n)

    def cancel(self) -> None:
        self._publisher.cancelled.close()

    def __repr__(self) -> str:
        return "ManualPublisher's Subscription"


class ManualPublisher(Generic[T]):
    """A Publisher driven by the test, for verifying Subscribers.

    It sends an element only against demand it has seen via
    ``expect_request`` (rule 1.1) and checks that requests are positive.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self.subscriber: Promise[Subscriber[T]] = Promise(env)
        self.requests: Receptacle[int] = Receptacle(env)
        self.cancelled = Latch(env)
        self.pending_demand = 0

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        if not self.subscriber.complete(subscriber):
            self.env.flop("ManualPublisher supports only one Subscriber")
        call_implementation(self.env, f"{_name(subscriber)}.on_subscribe(Subscription)",
                            subscriber.on_subscribe, _ManualSubscription(self))

    def send_next(self, element: T) -> None:
        if self.pending_demand <= 0:
            self.env.flop(f"Cannot send on_next({element!r}): the Subscriber has not requested "
                          "it (no pending demand, rules 1.1 and 2.1)")
        if self.pending_demand != MAX_DEMAND:
            self.pending_demand -= 1
        subscriber = self.subscriber.value()
        call_implementation(self.env, f"{_name(subscriber)}.on_next({element!r})",
                            subscriber.on_next, element)

    def send_completion(self) -> None:
        subscriber = self.subscriber.value()
        call_implementation(self.env, f"{_name(subscriber)}.on_complete()",
                            subscriber.on_complete)

    def send_error(self, error: BaseException) -> None:
        subscriber = self.subscriber.value()
        call_implementation(self.env, f"{_name(subscriber)}.on_error({error!r})",
                            subscriber.on_error, error)

    def expect_request(self, timeout: float | None = None,
                       message: str = "Did not receive expected request() call") -> int:
        n = self.requests.next(timeout, message)
        if n <= 0:
            self.env.flop(f"Subscriber requested {n}: requests must be > 0 "
                          "(rules 2.1 and 3.9: a Subscriber signals demand with request(n > 0))")
        self.pending_demand = add_demand(self.pending_demand, n)
        return n

    def expect_exact_request(self, expected: int, timeout: float | None = None) -> None:
        n = self.expect_request(timeout)
        if n != expected:
            self.env.flop(f"Received request({n}) but expected request({expected})")

    def expect_no_request(self, timeout: float | None = None) -> None:
        self.requests.expect_none(timeout, "Received an unexpected request:")

    def expect_cancelling(self, timeout: float | None = None,
                          message: str = "Did not receive expected cancel() call") -> None:
        self.cancelled.expect_close(message, timeout)

    def is_cancelled(self) -> bool:
        return self.cancelled.is_closed()


def _non_positive(argument: str) -> bool:
    try:
        return int(argument.rstrip(")")) <= 0
    except ValueError:
        return False


def _count(n: int) -> str:
    return "2**63-1" if n == MAX_DEMAND else str(n)


def _name(subscriber: object) -> str:
    """The class name of the Subscriber under test (through a kit proxy)."""
    return type(getattr(subscriber, "target", subscriber)).__name__
