"""SubscriberWhiteboxVerification and SubscriberBlackboxVerification (sections 2, 3)."""

from __future__ import annotations

import itertools
from abc import abstractmethod
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from sansrs.streams import MAX_DEMAND, Publisher, Subscriber, Subscription, from_generator

from ._base import Verification, required, untested
from ._env import Latch, ManualPublisher, ManualSubscriber, Promise, Receptacle, TestEnvironment
from ._env import frames_named as _frames_named

__all__ = [
    "BlackboxSubscriberProxy",
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "WhiteboxSubscriberProbe",
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


class _HelperMixin(Generic[T]):
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


class _ForbiddenInTerminalSubscription:
    """Rule 2.3: flags request/cancel made from inside on_complete/on_error."""

    def __init__(self, env: TestEnvironment, signal: str) -> None:
        self._env = env
        self._signal = signal

    def _check(self, what: str) -> None:
        caller = _frames_named(self._signal)
        if caller is not None:
            self._env.flop(f"Subscription.{what} MUST NOT be called from Subscriber."
                           f"{self._signal} (rule 2.3)! (Caller: {caller})")

    def request(self, n: int) -> None:
        self._check(f"request({n})")

    def cancel(self) -> None:
        self._check("cancel()")


class _NoopSubscription:
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


class _SecondSubscription:
    def __init__(self, cancelled: Latch, on_request: Callable[[int], None] | None) -> None:
        self._cancelled = cancelled
        self._on_request = on_request

    def request(self, n: int) -> None:
        if self._on_request is not None:
            self._on_request(n)

    def cancel(self) -> None:
        self._cancelled.close()

    def __repr__(self) -> str:
        return "SecondSubscription(should get cancelled)"


class WhiteboxTestStage(ManualPublisher[T]):
    """The stage of a whitebox test: the kit plays the Publisher."""

    def __init__(self, verification: SubscriberWhiteboxRules[T], run_default_init: bool) -> None:
        env = verification.env
        super().__init__(env)
        self.verification = verification
        self.last: T | None = None
        self.probe: WhiteboxSubscriberProbe[T] = WhiteboxSubscriberProbe(env, self.subscriber)
        if run_default_init:
            self.tees = env.new_manual_subscriber(verification.create_helper_publisher(MAX_DEMAND))
            self.subscribe(verification.create_subscriber(self.probe))
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


class SubscriberWhiteboxRules(Verification, _HelperMixin[T]):
    """The whitebox Subscriber tests (reused by IdentityProcessorVerification)."""

    __test__ = False

    @abstractmethod
    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> Subscriber[T]:
        """A new Subscriber that reports its signals to ``probe``.

        In ``on_subscribe`` call ``probe.register_on_subscribe(puppet)`` with a
        ``SubscriberPuppet`` that requests/cancels on the Subscription; in
        ``on_next``/``on_complete``/``on_error`` call the matching
        ``probe.register_*`` method.
        """

    def _stage(self, run_default_init: bool = True) -> WhiteboxTestStage[T]:
        return WhiteboxTestStage(self, run_default_init)

    @required(None)
    def test_required_exercise_whitebox_happy_path(self) -> None:
        stage = self._stage()
        stage.puppet().trigger_request(1)
        stage.puppet().trigger_request(1)
        received = stage.expect_request()
        stage.probe.expect_next(stage.signal_next())
        stage.puppet().trigger_request(1)
        if received == 1:
            stage.expect_request()
        stage.probe.expect_next(stage.signal_next())
        stage.puppet().signal_cancel()
        stage.expect_cancelling()
        self.env.verify_no_async_errors()

    @required("2.1")
    def test_required_spec_2_1_must_signal_demand_via_subscription_request(self) -> None:
        stage = self._stage()
        stage.puppet().trigger_request(1)
        stage.expect_request()
        stage.signal_next()

    @untested("2.2")
    def test_untested_spec_2_2_should_asynchronously_dispatch(self) -> None: ...

    def _terminal_must_not_call(self, signal: str) -> None:
        stage = self._stage(run_default_init=False)
        sub = self.create_subscriber(stage.probe)
        sub.on_subscribe(_ForbiddenInTerminalSubscription(self.env, signal))
        if signal == "on_complete":
            sub.on_complete()
        else:
            sub.on_error(TestFailure("test error"))
        self.env.verify_no_async_errors(delay=False)

    @required("2.3")
    def test_required_spec_2_3_must_not_call_methods_on_subscription_or_publisher_in_on_complete(
        self,
    ) -> None:
        self._terminal_must_not_call("on_complete")

    @required("2.3")
    def test_required_spec_2_3_must_not_call_methods_on_subscription_or_publisher_in_on_error(
        self,
    ) -> None:
        self._terminal_must_not_call("on_error")

    @untested("2.4")
    def test_untested_spec_2_4_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None: ...

    @required("2.5")
    def test_required_spec_2_5_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        cancelled = Latch(self.env)
        stage.sub().on_subscribe(_SecondSubscription(cancelled, None))
        cancelled.expect_close("Expected 2nd Subscription given to subscriber to be cancelled, "
                               "but Subscription.cancel() was not called")
        self.env.verify_no_async_errors()

    @untested("2.6")
    def test_untested_spec_2_6_must_call_subscription_cancel_if_it_is_no_longer_valid(
        self,
    ) -> None: ...

    @untested("2.7")
    def test_untested_spec_2_7_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None: ...

    @required("2.8")
    def test_required_spec_2_8_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.puppet().trigger_request(1)
        stage.puppet().signal_cancel()
        stage.expect_request()
        stage.signal_next()
        stage.puppet().trigger_request(1)
        stage.puppet().trigger_request(1)
        self.env.verify_no_async_errors()

    @required("2.9")
    def test_required_spec_2_9_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.puppet().trigger_request(1)
        stage.send_completion()
        stage.probe.expect_completion()
        self.env.verify_no_async_errors()

    @required("2.9")
    def test_required_spec_2_9_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.send_completion()
        stage.probe.expect_completion()
        self.env.verify_no_async_errors()

    @required("2.10")
    def test_required_spec_2_10_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.puppet().trigger_request(1)
        stage.puppet().trigger_request(1)
        error = TestFailure("test error")
        stage.send_error(error)
        stage.probe.expect_error(error)
        self.env.verify_no_async_errors(delay=False)

    @required("2.10")
    def test_required_spec_2_10_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        error = TestFailure("test error")
        stage.send_error(error)
        stage.probe.expect_error(error)
        self.env.verify_no_async_errors(delay=False)

    @untested("2.11")
    def test_untested_spec_2_11_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None: ...

    @untested("2.12")
    def test_untested_spec_2_12_must_not_call_on_subscribe_more_than_once_based_on_object_equality_spec_violation(  # noqa: E501
        self,
    ) -> None: ...

    @untested("2.13")
    def test_untested_spec_2_13_failing_on_signal_invocation(self) -> None: ...

    def _expect_type_error(self, call: Callable[[], None], what: str) -> None:
        try:
            call()
        except TypeError:
            return
        raise AssertionError(f"{what} did not raise TypeError (Java: NullPointerException)")

    @required("2.13")
    def test_required_spec_2_13_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        self._expect_type_error(lambda: stage.sub().on_subscribe(None),  # type: ignore[arg-type]
                                "on_subscribe(None)")
        self.env.verify_no_async_errors(delay=False)

    @required("2.13")
    def test_required_spec_2_13_on_next_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        stage = self._stage()
        self._expect_type_error(lambda: stage.sub().on_next(None),  # type: ignore[arg-type]
                                "on_next(None)")
        self.env.verify_no_async_errors(delay=False)

    @required("2.13")
    def test_required_spec_2_13_on_error_must_throw_null_pointer_exception_when_parameters_are_null(
        self,
    ) -> None:
        stage = self._stage()
        self._expect_type_error(lambda: stage.sub().on_error(None),  # type: ignore[arg-type]
                                "on_error(None)")
        self.env.verify_no_async_errors(delay=False)

    @untested("3.1")
    def test_untested_spec_3_1_must_not_be_called_outside_subscriber_context(self) -> None: ...

    @required("3.8")
    def test_required_spec_3_8_request_must_register_given_number_elements_to_be_produced(
        self,
    ) -> None:
        stage = self._stage()
        stage.puppet().trigger_request(2)
        for _ in range(2):
            while stage.pending_demand == 0:
                stage.expect_request()
            stage.probe.expect_next(stage.signal_next())
        stage.probe.expect_none()
        stage.puppet().trigger_request(3)
        self.env.verify_no_async_errors()

    @untested("3.10")
    def test_untested_spec_3_10_request_may_synchronously_call_on_next_on_subscriber(
        self,
    ) -> None: ...

    @untested("3.11")
    def test_untested_spec_3_11_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None: ...

    @untested("3.14")
    def test_untested_spec_3_14_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None: ...

    @untested("3.15")
    def test_untested_spec_3_15_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None: ...

    @untested("3.16")
    def test_untested_spec_3_16_request_must_not_throw_exception_and_must_on_error_the_subscriber(
        self,
    ) -> None: ...


class SubscriberWhiteboxVerification(SubscriberWhiteboxRules[T]):
    """Subclass and implement ``create_subscriber(probe)``; see docs/tck.md."""

    __test__ = False


class BlackboxTestStage(ManualPublisher[T]):
    def __init__(self, verification: SubscriberBlackboxVerification[T],
                 run_default_init: bool) -> None:
        env = verification.env
        super().__init__(env)
        self.proxy: BlackboxSubscriberProxy[T] | None = None
        if run_default_init:
            self.tees: ManualSubscriber[T] = env.new_manual_subscriber(
                verification.create_helper_publisher(MAX_DEMAND))
            self.proxy = BlackboxSubscriberProxy(env, verification.create_subscriber())
            self.subscribe(self.proxy)

    def sub(self) -> Subscriber[T]:
        return self.subscriber.value()

    def sub_proxy(self) -> BlackboxSubscriberProxy[T]:
        assert self.proxy is not None
        return self.proxy

    def signal_next(self) -> T:
        element = self.tees.request_next_element()
        self.send_next(element)
        return element


class SubscriberBlackboxVerification(Verification, _HelperMixin[T]):
    """Verifies a Subscriber without its cooperation; implement ``create_subscriber()``."""

    __test__ = False

    @abstractmethod
    def create_subscriber(self) -> Subscriber[T]:
        """A new Subscriber under test."""

    def trigger_request(self, subscriber: Subscriber[T]) -> None:
        """Override if the Subscriber needs an external nudge before it requests."""

    def _stage(self, run_default_init: bool = True) -> BlackboxTestStage[T]:
        return BlackboxTestStage(self, run_default_init)

    @required("2.1")
    def test_required_spec_2_1_blackbox_must_signal_demand_via_subscription_request(self) -> None:
        stage = self._stage()
        self.trigger_request(stage.sub_proxy().target)
        requested = stage.expect_request()
        # cope with up to the requested number, but not absurd amounts
        for i in range(min(requested, 512)):
            if i % 10 == 0 and stage.is_cancelled():
                break
            stage.signal_next()
        # completing early is legal (rule 1.2)
        stage.send_completion()

    @untested("2.2")
    def test_untested_spec_2_2_blackbox_should_asynchronously_dispatch(self) -> None: ...

    def _terminal_must_not_call(self, signal: str) -> None:
        sub = self.create_subscriber()
        sub.on_subscribe(_ForbiddenInTerminalSubscription(self.env, signal))
        if signal == "on_complete":
            sub.on_complete()
        else:
            sub.on_error(TestFailure("test error"))
        self.env.verify_no_async_errors(delay=False)

    @required("2.3")
    def test_required_spec_2_3_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete(  # noqa: E501
        self,
    ) -> None:
        self._terminal_must_not_call("on_complete")

    @required("2.3")
    def test_required_spec_2_3_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error(  # noqa: E501
        self,
    ) -> None:
        self._terminal_must_not_call("on_error")

    @untested("2.4")
    def test_untested_spec_2_4_blackbox_must_consider_the_subscription_as_cancelled_in_after_recieving_on_complete_or_on_error(  # noqa: E501
        self,
    ) -> None: ...

    @required("2.5")
    def test_required_spec_2_5_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        env = self.env
        cancelled = Latch(env)

        def on_request(n: int) -> None:
            env.flop(f"Subscriber {stage.sub()!r} illegally called request({n}) on a second "
                     "Subscription")

        stage.sub().on_subscribe(_SecondSubscription(cancelled, on_request))
        cancelled.expect_close("Expected SecondSubscription given to subscriber to be cancelled, "
                               "but Subscription.cancel() was not called.")
        env.verify_no_async_errors(delay=False)
        stage.send_completion()

    @untested("2.6")
    def test_untested_spec_2_6_blackbox_must_call_subscription_cancel_if_it_is_no_longer_valid(
        self,
    ) -> None: ...

    @untested("2.7")
    def test_untested_spec_2_7_blackbox_must_ensure_all_calls_on_its_subscription_take_place_from_the_same_thread_or_take_care_of_synchronization(  # noqa: E501
        self,
    ) -> None: ...

    @untested("2.8")
    def test_untested_spec_2_8_blackbox_must_be_prepared_to_receive_on_next_signals_after_having_called_subscription_cancel(  # noqa: E501
        self,
    ) -> None: ...

    @required("2.9")
    def test_required_spec_2_9_blackbox_must_be_prepared_to_receive_an_on_complete_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        self.trigger_request(stage.sub_proxy().target)
        stage.expect_request()
        stage.sub().on_complete()
        stage.sub_proxy().expect_completion()

    @required("2.9")
    def test_required_spec_2_9_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.sub().on_complete()
        stage.sub_proxy().expect_completion()

    @required("2.10")
    def test_required_spec_2_10_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        self.trigger_request(stage.sub_proxy().target)
        stage.expect_request()
        stage.sub().on_error(TestFailure("test error"))
        stage.sub_proxy().expect_error(BaseException)

    @required("2.10")
    def test_required_spec_2_10_blackbox_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.sub().on_error(TestFailure("test error"))
        stage.sub_proxy().expect_error(BaseException)

    @untested("2.11")
    def test_untested_spec_2_11_blackbox_must_make_sure_that_all_calls_on_its_methods_happen_before_the_processing_of_the_respective_events(  # noqa: E501
        self,
    ) -> None: ...

    @untested("2.12")
    def test_untested_spec_2_12_blackbox_must_not_call_on_subscribe_more_than_once_based_on_object_equality(  # noqa: E501
        self,
    ) -> None: ...

    @untested("2.13")
    def test_untested_spec_2_13_blackbox_failing_on_signal_invocation(self) -> None: ...

    def _null_check(self, call: Callable[[Subscriber[T]], None], what: str,
                    subscribe_first: bool) -> None:
        sub = self.create_subscriber()
        if subscribe_first:
            sub.on_subscribe(_NoopSubscription())
        try:
            call(sub)
        except TypeError:
            pass
        else:
            raise AssertionError(f"{what} did not raise TypeError (Java: NullPointerException)")
        self.env.verify_no_async_errors(delay=False)

    @required("2.13")
    def test_required_spec_2_13_blackbox_on_subscribe_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        self._null_check(lambda s: s.on_subscribe(None),  # type: ignore[arg-type]
                         "on_subscribe(None)", False)

    @required("2.13")
    def test_required_spec_2_13_blackbox_on_next_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        self._null_check(lambda s: s.on_next(None),  # type: ignore[arg-type]
                         "on_next(None)", True)

    @required("2.13")
    def test_required_spec_2_13_blackbox_on_error_must_throw_null_pointer_exception_when_parameters_are_null(  # noqa: E501
        self,
    ) -> None:
        self._null_check(lambda s: s.on_error(None),  # type: ignore[arg-type]
                         "on_error(None)", True)

    @untested("3.1")
    def test_untested_spec_3_1_blackbox_must_not_be_called_outside_subscriber_context(
        self,
    ) -> None: ...

    @untested("3.8")
    def test_untested_spec_3_8_blackbox_request_must_register_given_number_elements_to_be_produced(
        self,
    ) -> None: ...

    @untested("3.10")
    def test_untested_spec_3_10_blackbox_request_may_synchronously_call_on_next_on_subscriber(
        self,
    ) -> None: ...

    @untested("3.11")
    def test_untested_spec_3_11_blackbox_request_may_synchronously_call_on_complete_or_on_error(
        self,
    ) -> None: ...

    @untested("3.14")
    def test_untested_spec_3_14_blackbox_cancel_may_cause_the_publisher_to_shutdown_if_no_other_subscription_exists(  # noqa: E501
        self,
    ) -> None: ...

    @untested("3.15")
    def test_untested_spec_3_15_blackbox_cancel_must_not_throw_exception_and_must_signal_on_error(
        self,
    ) -> None: ...

    @untested("3.16")
    def test_untested_spec_3_16_blackbox_request_must_not_throw_exception_and_must_on_error_the_subscriber(  # noqa: E501
        self,
    ) -> None: ...
