"""SubscriberWhiteboxVerification and SubscriberBlackboxVerification (sections 2, 3)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

from sansrs.streams import Subscriber

from ._base import Verification, required, untested
from ._manual import call_implementation
from ._probes import Latch
from ._subscriber_support import (
    BlackboxSubscriberProxy,
    BlackboxTestStage,
    HelperPublishers,
    NoopSubscription,
    SecondSubscription,
    SubscriberPuppet,
    TerminalWatchSubscription,
    TestFailure,
    WhiteboxSubscriberProbe,
    WhiteboxTestStage,
)

__all__ = [
    "BlackboxSubscriberProxy",
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "WhiteboxSubscriberProbe",
]

T = TypeVar("T")


class SubscriberWhiteboxRules(Verification, HelperPublishers[T]):
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
        return WhiteboxTestStage(self.env, self, self.create_subscriber, run_default_init)

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
        with self.env.doing("calling create_subscriber(probe), which has not returned"):
            sub = self.create_subscriber(stage.probe)
        self.env.subject = sub
        _terminal_must_not_call(self, sub, signal)

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
        call_implementation(self.env, f"{_name(stage.sub())}.on_subscribe(SecondSubscription)",
                            stage.sub().on_subscribe, SecondSubscription(self.env, cancelled,
                                                                         False))
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
        _expect_type_error(self, call, what)

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


class SubscriberBlackboxVerification(Verification, HelperPublishers[T]):
    """Verifies a Subscriber without its cooperation; implement ``create_subscriber()``."""

    __test__ = False

    @abstractmethod
    def create_subscriber(self) -> Subscriber[T]:
        """A new Subscriber under test."""

    def trigger_request(self, subscriber: Subscriber[T]) -> None:
        """Override if the Subscriber needs an external nudge before it requests."""

    def _stage(self) -> BlackboxTestStage[T]:
        return BlackboxTestStage(self.env, self, self.create_subscriber)

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
        with self.env.doing("calling create_subscriber(), which has not returned"):
            sub = self.create_subscriber()
        self.env.subject = sub
        _terminal_must_not_call(self, sub, signal)

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
        call_implementation(env, f"{_name(stage.sub())}.on_subscribe(SecondSubscription)",
                            stage.sub().on_subscribe, SecondSubscription(env, cancelled, True))
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
        stage.send_completion()
        stage.sub_proxy().expect_completion()

    @required("2.9")
    def test_required_spec_2_9_blackbox_must_be_prepared_to_receive_an_on_complete_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.send_completion()
        stage.sub_proxy().expect_completion()

    @required("2.10")
    def test_required_spec_2_10_blackbox_must_be_prepared_to_receive_an_on_error_signal_with_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        self.trigger_request(stage.sub_proxy().target)
        stage.expect_request()
        stage.send_error(TestFailure("test error"))
        stage.sub_proxy().expect_error(BaseException)

    @required("2.10")
    def test_required_spec_2_10_blackbox_must_be_prepared_to_receive_an_on_error_signal_without_preceding_request_call(  # noqa: E501
        self,
    ) -> None:
        stage = self._stage()
        stage.send_error(TestFailure("test error"))
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
        with self.env.doing("calling create_subscriber(), which has not returned"):
            sub = self.create_subscriber()
        self.env.subject = sub
        if subscribe_first:
            call_implementation(self.env, f"{_name(sub)}.on_subscribe(Subscription)",
                                sub.on_subscribe, NoopSubscription())
        _expect_type_error(self, lambda: call(sub), what)
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


def _name(subscriber: object) -> str:
    return type(getattr(subscriber, "target", subscriber)).__name__


def _terminal_must_not_call(verification: Verification, sub: Subscriber[T], signal: str) -> None:
    """Rule 2.3 by behaviour: no Subscription call once the terminal signal has begun."""
    env = verification.env
    watch = TerminalWatchSubscription(env)
    call_implementation(env, f"{_name(sub)}.on_subscribe(Subscription)", sub.on_subscribe, watch)
    env.quiet_period()  # an asynchronous Subscriber may still request for on_subscribe: fine
    watch.signal_terminal(sub, signal)
    env.quiet_period()  # ... but not while it processes the terminal signal
    env.verify_no_async_errors(delay=False)


def _expect_type_error(verification: Verification, call: Callable[[], None], what: str) -> None:
    """Rule 2.13: a None argument raises TypeError (Java: NullPointerException)."""
    env = verification.env
    try:
        with env.doing(f"calling {what}, which has not returned"):
            call()
    except TypeError:
        return
    except Exception as error:
        raise env.violation(None, f"{what} raised {error!r} instead of TypeError (Java: "
                            "NullPointerException, rule 2.13)", site=(), cause=error) from error
    raise AssertionError(f"{what} did not raise TypeError (Java: NullPointerException)")
