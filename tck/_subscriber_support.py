"""What the Subscriber verifications are built from: probes, proxies, stages and the
Subscriptions the kit hands a Subscriber under test.

The kit plays the Publisher (``ManualPublisher``); a whitebox Subscriber reports
what it receives to a ``WhiteboxSubscriberProbe``, a blackbox one is wrapped in a
``BlackboxSubscriberProxy``. ``TerminalWatchSubscription`` checks rule 2.3 by what
the Subscriber does, not by the names of the methods it runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from sansrs.streams import MAX_DEMAND, Publisher, Subscriber, Subscription, from_generator

from ._env import TestEnvironment
from ._manual import ManualPublisher, ManualSubscriber, call_implementation, new_manual_subscriber
from ._probes import Latch, Promise, Receptacle

__all__ = [
    "BlackboxProbe",
    "BlackboxSubscriberProxy",
    "BlackboxTestStage",
    "HelperPublishers",
    "NoopSubscription",
    "SecondSubscription",
    "SubscriberPuppet",
    "TerminalWatchSubscription",
    "TestFailure",
    "WhiteboxSubscriberProbe",
    "WhiteboxTestStage",
]

T = TypeVar("T")


class TestFailure(Exception):
    """The error the kit signals through ``on_error`` in its own tests."""

    __test__ = False


class SubscriberPuppet(Protocol):
    """What a whitebox test asks the Subscriber under test to do."""

    def trigger_request(self, elements: int) -> None:
        """Make the Subscriber call ``request(elements)`` on its Subscription."""

    def signal_cancel(self) -> None:
        """Make the Subscriber call ``cancel()`` on its Subscription."""


class HelperPublishers(Generic[T]):
    """The elements and the Publisher that feed a Subscriber under test (overridable)."""

    def create_element(self, element: int) -> T:
        """The element number ``element`` of helper streams (default: the int itself)."""
        return element  # type: ignore[return-value]

    def create_helper_publisher(self, elements: int) -> Publisher[T]:
        """The Publisher feeding the Subscriber under test; infinite at ``2**63-1``."""
        make = self.create_element
        if elements >= MAX_DEMAND:
            return from_generator(lambda: (make(i) for i in itertools.count()))
        return from_generator(lambda: (make(i) for i in range(elements)))


class BlackboxProbe(Generic[T]):
    """Records what the Subscriber under test reports (or what a proxy sees)."""

    def __init__(self, env: TestEnvironment, subscriber: Promise[Subscriber[T]]) -> None:
        self.env = env
        self.subscriber = subscriber
        self.elements: Receptacle[T] = Receptacle(env)
        self.error: Promise[BaseException] = Promise(env)

    def register_on_next(self, element: T) -> None:
        self.elements.add(element)

    def register_on_complete(self) -> None:
        if not self.elements.complete():
            self.env.flop("Subscriber.on_complete was called a second time, which is illegal "
                          "according to rule 1.7")

    def register_on_error(self, cause: BaseException) -> None:
        if not self.error.complete(cause):
            self.env.flop("Subscriber.on_error was called a second time, which is illegal "
                          "according to rule 1.7")

    def _sub(self) -> object:
        return self.subscriber.value() if self.subscriber.is_completed() else None

    def expect_next(self, expected: T, timeout: float | None = None) -> None:
        received = self.elements.next(
            timeout, f"Subscriber {self._sub()!r} did not call register_on_next({expected!r})")
        if received != expected:
            self.env.flop(f"Subscriber {self._sub()!r} called register_on_next({received!r}) "
                          f"rather than register_on_next({expected!r})")

    def expect_completion(self, timeout: float | None = None, message: str | None = None) -> None:
        self.elements.expect_completion(
            timeout, message or f"Subscriber {self._sub()!r} did not call register_on_complete()")

    def expect_error(self, expected: BaseException | type[BaseException],
                     timeout: float | None = None) -> BaseException:
        error = self.error.expect_completion(
            timeout, f"Subscriber {self._sub()!r} did not call register_on_error({expected!r})")
        ok = (isinstance(error, expected) if isinstance(expected, type) else error is expected)
        if not ok:
            self.env.flop(f"Subscriber {self._sub()!r} called register_on_error({error!r}) "
                          f"rather than register_on_error({expected!r})")
        return error

    def expect_none(self, within: float | None = None) -> None:
        self.elements.expect_none(within, "Expected nothing, but got")


class WhiteboxSubscriberProbe(BlackboxProbe[T]):
    """Passed to ``create_subscriber``: the Subscriber reports its signals here."""

    def __init__(self, env: TestEnvironment, subscriber: Promise[Subscriber[T]]) -> None:
        super().__init__(env, subscriber)
        self.puppet: Promise[SubscriberPuppet] = Promise(env)

    def register_on_subscribe(self, puppet: SubscriberPuppet) -> None:
        """Call from ``on_subscribe`` once the Subscription is stored."""
        self.puppet.complete(puppet)


class BlackboxSubscriberProxy(BlackboxProbe[T]):
    """Wraps the Subscriber under test to observe the signals it receives."""

    def __init__(self, env: TestEnvironment, subscriber: Subscriber[T]) -> None:
        super().__init__(env, Promise.completed(env, subscriber))
        self.target = subscriber

    def on_subscribe(self, subscription: Subscription) -> None:
        self.target.on_subscribe(subscription)

    def on_next(self, item: T) -> None:
        self.register_on_next(item)
        self.target.on_next(item)

    def on_error(self, error: BaseException) -> None:
        self.register_on_error(error)
        self.target.on_error(error)

    def on_complete(self) -> None:
        self.register_on_complete()
        self.target.on_complete()

    def __repr__(self) -> str:
        return f"{type(self.target).__name__}"


class TerminalWatchSubscription:
    """Rule 2.3, by behaviour: a call once the kit has begun ``on_complete``/``on_error``.

    Whatever the Subscriber names the code it runs (an alias, a lambda, a helper,
    a worker thread it hands the signal to), a ``request`` or ``cancel`` that reaches
    this Subscription from the moment the terminal signal starts is a violation.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._signal: str | None = None
        self._returned = False

    def request(self, n: int) -> None:
        self._check(f"request({n})")

    def cancel(self) -> None:
        self._check("cancel()")

    def _check(self, what: str) -> None:
        signal = self._signal
        if signal is None:
            return  # before the terminal signal: any call is fine
        when = "after it returned from" if self._returned else "while it was running"
        raise self._env.violation(
            "2.3", f"Subscription.{what} was called {when} Subscriber.{signal}: on_complete and "
            "on_error MUST NOT call any methods on the Subscription (rule 2.3)")

    def signal_terminal(self, subscriber: Subscriber[T], signal: str) -> None:
        """Send ``on_complete`` or ``on_error`` to ``subscriber``; watch from now on."""
        self._signal = signal
        name = type(subscriber).__name__
        if signal == "on_complete":
            call_implementation(self._env, f"{name}.on_complete()", subscriber.on_complete)
        else:
            error = TestFailure("test error")
            call_implementation(self._env, f"{name}.on_error({error!r})", subscriber.on_error,
                                error)
        self._returned = True

    def __repr__(self) -> str:
        return "TerminalWatchSubscription(rule 2.3)"


class NoopSubscription:
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


class SecondSubscription:
    """Given to a Subscriber that already has one: it must be cancelled (rule 2.5)."""

    def __init__(self, env: TestEnvironment, cancelled: Latch, forbid_requests: bool) -> None:
        self._env = env
        self._cancelled = cancelled
        self._forbid_requests = forbid_requests

    def request(self, n: int) -> None:
        if self._forbid_requests:
            raise self._env.violation("2.5", f"Subscriber called request({n}) on a second "
                                      "Subscription it MUST cancel (rule 2.5)")

    def cancel(self) -> None:
        self._cancelled.close()

    def __repr__(self) -> str:
        return "SecondSubscription(should get cancelled)"


class WhiteboxTestStage(ManualPublisher[T]):
    """The stage of a whitebox test: the kit plays the Publisher."""

    def __init__(self, env: TestEnvironment, helpers: HelperPublishers[T],
                 create_subscriber: Callable[[WhiteboxSubscriberProbe[T]], Subscriber[T]],
                 run_default_init: bool) -> None:
        super().__init__(env)
        self.last: T | None = None
        self.probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env, self.subscriber)
        if run_default_init:
            self.tees = new_manual_subscriber(env, helpers.create_helper_publisher(MAX_DEMAND),
                                              under_test=False)
            with env.doing("calling create_subscriber(probe), which has not returned"):
                subscriber = create_subscriber(self.probe)
            env.subject = subscriber
            self.subscribe(subscriber)
            self.probe.puppet.expect_completion(
                None, f"Subscriber {self.sub()!r} did not call register_on_subscribe")

    def sub(self) -> Subscriber[T]:
        return self.subscriber.value()

    def puppet(self) -> SubscriberPuppet:
        return self.probe.puppet.value()

    def next_t(self) -> T:
        self.last = self.tees.request_next_element()
        return self.last

    def signal_next(self) -> T:
        element = self.next_t()
        self.send_next(element)
        return element


class BlackboxTestStage(ManualPublisher[T]):
    def __init__(self, env: TestEnvironment, helpers: HelperPublishers[T],
                 create_subscriber: Callable[[], Subscriber[T]]) -> None:
        super().__init__(env)
        self.tees: ManualSubscriber[T] = new_manual_subscriber(
            env, helpers.create_helper_publisher(MAX_DEMAND), under_test=False)
        with env.doing("calling create_subscriber(), which has not returned"):
            subscriber = create_subscriber()
        env.subject = subscriber
        self.proxy: BlackboxSubscriberProxy[T] = BlackboxSubscriberProxy(env, subscriber)
        self.subscribe(self.proxy)

    def sub(self) -> Subscriber[T]:
        return self.subscriber.value()

    def sub_proxy(self) -> BlackboxSubscriberProxy[T]:
        return self.proxy

    def signal_next(self) -> T:
        element = self.tees.request_next_element()
        self.send_next(element)
        return element
