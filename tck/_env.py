"""The TCK's test environment: timeouts, asynchronous error collection, and
the probes (latches, promises, receptacles, manual subscribers/publishers)
the verifications are built from.

This is a test-support layer: it uses threads and clocks to wait for
asynchronous signals, which the sans-IO core never does.
"""

from __future__ import annotations

import gc
import os
import queue
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar

from sansrs.streams import MAX_DEMAND, Publisher, Subscriber, Subscription, add_demand

__all__ = [
    "Latch",
    "ManualPublisher",
    "ManualSubscriber",
    "Promise",
    "Receptacle",
    "TestEnvironment",
]

T = TypeVar("T")
V = TypeVar("V")


def _env_ms(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"Unable to parse {name} env value [{raw}] as an integer") from None


@dataclass
class TestEnvironment:
    """Timeouts (milliseconds) and the asynchronous errors seen during one test.

    ``from_environ()`` reads the Java TCK's variables ``DEFAULT_TIMEOUT_MILLIS``,
    ``DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS``, ``DEFAULT_POLL_TIMEOUT_MILLIS`` and
    ``PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS``.
    """

    __test__ = False  # not a pytest test class despite its name

    default_timeout_ms: int = 100
    default_no_signals_timeout_ms: int = 100
    default_poll_timeout_ms: int = 10
    gc_timeout_ms: int = 300
    async_errors: list[BaseException] = field(default_factory=list, repr=False)

    @classmethod
    def from_environ(
        cls,
        *,
        default_timeout_ms: int = 100,
        default_no_signals_timeout_ms: int | None = None,
        default_poll_timeout_ms: int = 10,
        gc_timeout_ms: int = 300,
    ) -> TestEnvironment:
        """Defaults given here, overridden by the environment variables."""
        timeout = _env_ms("DEFAULT_TIMEOUT_MILLIS", default_timeout_ms)
        return cls(
            default_timeout_ms=timeout,
            default_no_signals_timeout_ms=_env_ms(
                "DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS",
                timeout if default_no_signals_timeout_ms is None else default_no_signals_timeout_ms,
            ),
            default_poll_timeout_ms=_env_ms("DEFAULT_POLL_TIMEOUT_MILLIS", default_poll_timeout_ms),
            gc_timeout_ms=_env_ms("PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS", gc_timeout_ms),
        )

    # -- seconds, for the waiting primitives --------------------------------------

    @property
    def timeout(self) -> float:
        return self.default_timeout_ms / 1000

    @property
    def no_signals_timeout(self) -> float:
        return self.default_no_signals_timeout_ms / 1000

    @property
    def poll_interval(self) -> float:
        return self.default_poll_timeout_ms / 1000

    # -- asynchronous errors -----------------------------------------------------

    def clear_async_errors(self) -> None:
        self.async_errors.clear()

    def flop(self, message: str) -> NoReturn:
        """Record a failure (it may happen on another thread) and raise it here."""
        error = AssertionError(message)
        self.async_errors.append(error)
        raise error

    def record_error(self, error: BaseException) -> None:
        """Record an error signalled to a test Subscriber (``on_error``)."""
        self.async_errors.append(error)

    def drop_async_error(self) -> BaseException | None:
        try:
            return self.async_errors.pop(0)
        except IndexError:
            return None

    def describe_async_errors(self) -> str:
        return "\n".join(f"  - {_describe(e)}" for e in list(self.async_errors))

    def verify_no_async_errors(self, *, delay: bool = True) -> None:
        """Fail if any asynchronous error was recorded (after the no-signals wait)."""
        if delay:
            time.sleep(self.no_signals_timeout)
        if self.async_errors:
            errors = self.describe_async_errors()
            raise AssertionError("Asynchronous errors were recorded:\n" + errors)

    def expect_error(self, kind: type[BaseException], timeout: float | None = None,
                     message: str = "") -> BaseException:
        """Wait for a recorded error of ``kind``, remove and return it."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            for error in list(self.async_errors):
                if isinstance(error, kind):
                    self.async_errors.remove(error)
                    return error
            if time.monotonic() >= deadline:
                seen = self.describe_async_errors() or "  (none)"
                raise AssertionError(
                    f"{message}Expected an error of type {kind.__name__} within "
                    f"{self.default_timeout_ms} ms; recorded errors:\n{seen}")
            time.sleep(self.poll_interval)

    def new_manual_subscriber(self, publisher: Publisher[T],
                              timeout: float | None = None) -> ManualSubscriber[T]:
        subscriber: ManualSubscriber[T] = ManualSubscriber(self)
        self.subscribe(publisher, subscriber, timeout)
        return subscriber

    def subscribe(self, publisher: Publisher[T], subscriber: ManualSubscriber[T],
                  timeout: float | None = None) -> None:
        publisher.subscribe(subscriber)
        subscriber.subscription.expect_completion(
            timeout, f"Publisher {publisher!r} did not call on_subscribe (rule 1.9)")

    def wait_for_collection(self, ref: weakref.ref[Any]) -> bool:
        """Collect garbage until ``ref`` dies or the GC timeout passes (rule 3.13)."""
        deadline = time.monotonic() + self.gc_timeout_ms / 1000
        while True:
            gc.collect()
            if ref() is None:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.poll_interval)


def _describe(error: BaseException) -> str:
    if isinstance(error, AssertionError):
        return str(error)
    return f"unexpected on_error({error!r})"


class Latch:
    """A one-shot gate: ``close()`` once, wait for it with ``expect_close``."""

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._event = threading.Event()

    def close(self) -> None:
        self._event.set()

    def is_closed(self) -> bool:
        return self._event.is_set()

    def assert_open(self, message: str) -> None:
        if self._event.is_set():
            self._env.flop(message)

    def assert_closed(self, message: str) -> None:
        if not self._event.is_set():
            self._env.flop(message)

    def expect_close(self, message: str, timeout: float | None = None) -> None:
        if not self._event.wait(self._env.timeout if timeout is None else timeout):
            self._env.flop(message)


class Promise(Generic[V]):
    """A value that is set at most once and can be waited for."""

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._value: V | None = None

    @classmethod
    def completed(cls, env: TestEnvironment, value: V) -> Promise[V]:
        promise: Promise[V] = cls(env)
        promise.complete(value)
        return promise

    def complete(self, value: V) -> bool:
        """Set the value; False if it was already set."""
        with self._lock:
            if self._event.is_set():
                return False
            self._value = value
            self._event.set()
            return True

    def is_completed(self) -> bool:
        return self._event.is_set()

    def value(self) -> V:
        if not self._event.is_set():
            self._env.flop("Cannot access a Promise value before it was completed")
        assert self._value is not None
        return self._value

    def expect_completion(self, timeout: float | None, message: str) -> V:
        if not self._event.wait(self._env.timeout if timeout is None else timeout):
            self._env.flop(message)
        return self.value()


class _End:
    """End of the stream: ``on_complete``, or ``on_error`` when ``error`` is set."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error

    def __repr__(self) -> str:
        return "<end-of-stream>" if self.error is None else f"on_error({self.error!r})"


END = _End()


class Receptacle(Generic[V]):
    """Elements received by a test Subscriber, then an end-of-stream marker.

    An ``on_error`` also ends the stream here, so that a test waiting for an
    element or completion fails at once, naming the error, instead of timing out.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._queue: queue.SimpleQueue[V | _End] = queue.SimpleQueue()
        self._completed = False

    def add(self, value: V) -> None:
        self._queue.put(value)

    def complete(self) -> bool:
        if self._completed:
            return False
        self._completed = True
        self._queue.put(END)
        return True

    def fail(self, error: BaseException) -> None:
        self._queue.put(_End(error))

    def _check_error(self, got: object, message: str) -> None:
        if isinstance(got, _End) and got.error is not None:
            self._env.flop(f"{message}: got on_error({got.error!r})")

    def _get(self, timeout: float | None) -> V | _End | None:
        try:
            return self._queue.get(timeout=self._env.timeout if timeout is None else timeout)
        except queue.Empty:
            return None

    def next(self, timeout: float | None, message: str) -> V:
        got = self._get(timeout)
        if got is None:
            self._env.flop(f"{message} (timeout after {self._ms(timeout)} ms)")
        self._check_error(got, message)
        if isinstance(got, _End):
            self._env.flop(f"{message}: expected an element but got end-of-stream")
        return got

    def next_or_end(self, timeout: float | None, message: str) -> tuple[bool, V | None]:
        got = self._get(timeout)
        if got is None:
            self._env.flop(f"{message} (timeout after {self._ms(timeout)} ms)")
        self._check_error(got, message)
        if isinstance(got, _End):
            return False, None
        return True, got

    def next_n(self, n: int, timeout: float | None, message: str) -> list[V]:
        deadline = time.monotonic() + (self._env.timeout if timeout is None else timeout)
        result: list[V] = []
        while len(result) < n:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                got = self._queue.get(timeout=remaining)
            except queue.Empty:
                self._env.flop(f"{message}: got only {len(result)} of {n} elements in time")
            self._check_error(got, f"{message} (after {len(result)} of {n} elements)")
            if isinstance(got, _End):
                self._env.flop(f"{message}: expected {n} elements but got end-of-stream "
                               f"after {len(result)}")
            result.append(got)
        return result

    def expect_completion(self, timeout: float | None, message: str) -> None:
        got = self._get(timeout)
        if got is None:
            self._env.flop(f"{message} (timeout after {self._ms(timeout)} ms)")
        self._check_error(got, message)
        if not isinstance(got, _End):
            self._env.flop(f"{message}: expected end-of-stream but got element {got!r}")

    def expect_none(self, within: float | None, message: str) -> None:
        wait = self._env.no_signals_timeout if within is None else within
        try:
            got = self._queue.get(timeout=wait)
        except queue.Empty:
            return
        if isinstance(got, _End):
            what = "on_complete" if got.error is None else f"on_error({got.error!r})"
        else:
            what = f"on_next({got!r})"
        self._env.flop(f"{message} unexpected {what}")

    def _ms(self, timeout: float | None) -> int:
        return int(1000 * (self._env.timeout if timeout is None else timeout))


class ManualSubscriber(Generic[T]):
    """A Subscriber driven by the test: it requests only what the test asks for.

    It checks what a Subscriber can see of the Publisher rules: nothing before
    ``on_subscribe`` (1.9), ``on_subscribe`` once (2.12), no more ``on_next``
    than requested (1.1) and nothing after a terminal signal (1.7).
    Unexpected ``on_error`` signals are recorded as asynchronous errors.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self.env = env
        self.subscription: Promise[Subscription] = Promise(env)
        self.received: Receptacle[T] = Receptacle(env)
        self.requested = 0
        self.delivered = 0
        self.terminated = False

    def __repr__(self) -> str:
        return f"ManualSubscriber(requested={self.requested}, delivered={self.delivered})"

    def _check_subscribed(self, signal: str) -> None:
        if not self.subscription.is_completed():
            self.env.flop(f"Subscriber.{signal} was called before on_subscribe (rule 1.9)")

    def _check_not_terminated(self, signal: str) -> None:
        if self.terminated:
            self.env.flop(f"Subscriber.{signal} was called after a terminal signal (rule 1.7)")

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            self.env.flop("on_subscribe(None) (rule 2.13)")
        if not self.subscription.complete(subscription):
            self.env.flop("on_subscribe was called twice on the same Subscriber (rules 1.9, 2.12)")

    def on_next(self, item: T) -> None:
        self._check_subscribed(f"on_next({item!r})")
        self._check_not_terminated(f"on_next({item!r})")
        self.delivered += 1
        if self.delivered > self.requested:
            self.env.flop(
                f"Publisher signalled on_next #{self.delivered} ({item!r}) but only "
                f"{self.requested} elements were requested (rule 1.1)")
        self.received.add(item)

    def on_error(self, error: BaseException) -> None:
        self._check_subscribed(f"on_error({error!r})")
        self._check_not_terminated(f"on_error({error!r})")
        self.terminated = True
        self.env.record_error(error)
        self.received.fail(error)

    def on_complete(self) -> None:
        self._check_subscribed("on_complete")
        self._check_not_terminated("on_complete")
        self.terminated = True
        self.received.complete()

    # -- driven by the test ----------------------------------------------------

    def request(self, n: int) -> None:
        if n > 0:
            self.requested = add_demand(self.requested, n)
        self.subscription.value().request(n)

    def cancel(self) -> None:
        if self.subscription.is_completed():
            self.subscription.value().cancel()

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
    """A ManualSubscriber that drops elements (it only counts them)."""

    def on_next(self, item: T) -> None:
        self._check_subscribed(f"on_next({item!r})")


class _ManualSubscription:
    def __init__(self, publisher: ManualPublisher[Any]) -> None:
        self._publisher = publisher

    def request(self, n: int) -> None:
        self._publisher.requests.add(n)

    def cancel(self) -> None:
        self._publisher.cancelled.close()


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
        subscriber.on_subscribe(_ManualSubscription(self))

    def send_next(self, element: T) -> None:
        if self.pending_demand <= 0:
            self.env.flop(f"Cannot send on_next({element!r}): the Subscriber has not requested "
                          "it (no pending demand, rules 1.1 and 2.1)")
        if self.pending_demand != MAX_DEMAND:
            self.pending_demand -= 1
        self.subscriber.value().on_next(element)

    def send_completion(self) -> None:
        self.subscriber.value().on_complete()

    def send_error(self, error: BaseException) -> None:
        self.subscriber.value().on_error(error)

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


def frames_named(*names: str) -> str | None:
    """The first caller frame running one of ``names`` (rule 2.3 checks), as text."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in names:
            return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return None

