"""PublisherVerification: the Publisher rules (sections 1 and 3) of the TCK."""

from __future__ import annotations

import threading
from typing import TypeVar

import pytest

from sansrs.streams import Publisher, Subscription

from ._base import optional, required, stochastic, untested
from ._env import TestEnvironment
from ._manual import BlackholeSubscriber, ManualSubscriber, call_implementation, subscribe
from ._probes import Latch
from ._publisher_subscription import SubscriptionRules

__all__ = ["PublisherRules", "PublisherVerification"]

T = TypeVar("T")


class PublisherRules(SubscriptionRules[T]):
    """The tests; ``PublisherVerification`` and ``IdentityProcessorVerification`` reuse them."""

    __test__ = False

    # -- TEST SETUP VERIFICATION ------------------------------------------------

    @required(None)
    def test_required_create_publisher_1_must_produce_a_stream_of_exactly_1_element(self) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            got, _ = sub.request_next_element_or_end_of_stream(
                f"Timeout while waiting for next element from Publisher {pub!r}")
            assert got, f"Publisher {pub!r} produced no elements"
            sub.request_end_of_stream(f"Publisher {pub!r} produced more than 1 element "
                                      "or did not complete")

        self.active_publisher_test(1, True, run)

    @required(None)
    def test_required_create_publisher_3_must_produce_a_stream_of_exactly_3_elements(self) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            for produced in range(3):
                got, _ = sub.request_next_element_or_end_of_stream(
                    f"Timeout while waiting for next element from Publisher {pub!r}")
                assert got, f"Publisher {pub!r} produced only {produced} elements"
            sub.request_end_of_stream(f"Publisher {pub!r} produced more than 3 elements "
                                      "or did not complete")

        self.active_publisher_test(3, True, run)

    @required(None)
    def test_required_validate_max_elements_from_publisher(self) -> None:
        assert self.max_elements_from_publisher() >= 0, (
            "max_elements_from_publisher() MUST return a number >= 0")

    @required(None)
    def test_required_validate_bounded_depth_of_on_next_and_request_recursion(self) -> None:
        assert self.bounded_depth_of_on_next_and_request_recursion() >= 1, (
            "bounded_depth_of_on_next_and_request_recursion() must return a number >= 1")

    # -- SPEC RULE VERIFICATION --------------------------------------------------------

    @required("1.1")
    def test_required_spec_1_1_subscription_request_must_result_in_the_correct_number_of_produced_elements(  # noqa: E501
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            try:
                sub.expect_none(f"Publisher {pub!r} produced a value before the first request:")
                sub.request(1)
                sub.next_element(f"Publisher {pub!r} produced no element after first request")
                sub.expect_none(f"Publisher {pub!r} produced unrequested:")
                sub.request(1)
                sub.request(2)
                sub.next_elements(3, f"Publisher {pub!r} produced less than 3 elements after "
                                     "two respective request calls")
                sub.expect_none(f"Publisher {pub!r} produced unrequested:")
            finally:
                sub.cancel()

        self.active_publisher_test(5, False, run)

    @required("1.2")
    def test_required_spec_1_2_may_signal_less_than_requested_and_terminate_subscription(
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(10)
            sub.next_elements(3)
            sub.expect_completion()

        self.active_publisher_test(3, True, run)

    @stochastic("1.3")
    def test_stochastic_spec_1_3_must_signal_on_methods_sequentially(self) -> None:
        iterations, elements = 100, 10
        env = self.env
        for run_number in range(iterations):
            completion = Latch(env)
            subscriber = _SequentialityCheckingSubscriber[T](env, elements, completion)

            def run(pub: Publisher[T], sub: _SequentialityCheckingSubscriber[T] = subscriber,
                    latch: Latch = completion, number: int = run_number) -> None:
                call_implementation(env, f"Publisher.subscribe() of {pub!r}", pub.subscribe, sub)
                latch.expect_close(
                    f"Failed in iteration {number} of {iterations}. Expected completion signal "
                    f"after signalling {elements} elements (signalled {sub.got}), yet did not "
                    "receive it", env.timeout * elements)

            self.active_publisher_test(elements, True, run)

    @optional("1.4")
    def test_optional_spec_1_4_must_signal_on_error_when_fails(self) -> None:
        env = self.env

        def run(pub: Publisher[T]) -> None:
            sub: ManualSubscriber[T] = ManualSubscriber(env)
            subscribe(env, pub, sub)  # raising from subscribe breaks rule 1.9
            env.expect_error(BaseException, message=f"Error-state Publisher {pub!r} did not call "
                             "on_error on a new Subscriber: ")
            env.verify_no_async_errors()

        self.when_has_error_publisher_test(run)

    @required("1.5")
    def test_required_spec_1_5_must_signal_on_complete_when_finite_stream_terminates(self) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            for _ in range(3):
                sub.request_next_element()
            sub.request_end_of_stream()
            sub.expect_none()

        self.active_publisher_test(3, True, run)

    @optional("1.5")
    def test_optional_spec_1_5_empty_stream_must_terminate_by_signalling_on_complete(self) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(1)
            sub.expect_completion()
            sub.expect_none()

        self.active_publisher_test(0, True, run)

    @required("1.5")
    def test_required_spec_1_5_empty_publisher_must_signal_on_complete(self) -> None:
        """A Publisher that only ever produces empty streams has nothing to do but complete.

        (The Java TCK checks empty streams in an optional test only, which such a
        Publisher could fail unnoticed: every other test needs elements and skips.)
        """
        if self.max_elements_from_publisher() != 0:
            pytest.skip("Runs only for Publishers of empty streams (max_elements_from_publisher() "
                        "== 0); the optional 1.5 test checks the empty stream of the others")

        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(1)
            sub.expect_completion(message=f"Publisher {pub!r} of 0 elements did not signal "
                                  "on_complete after on_subscribe and request(1) (rule 1.5: a "
                                  "finite stream that terminates successfully MUST signal "
                                  "on_complete)")
            sub.expect_none()

        self.active_publisher_test(0, True, run)

    @untested("1.6")
    def test_untested_spec_1_6_must_consider_subscription_cancelled_after_on_error_or_on_complete_has_been_called(  # noqa: E501
        self,
    ) -> None: ...

    @required("1.7")
    def test_required_spec_1_7_must_not_emit_further_signals_once_on_complete_has_been_signalled(
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(10)
            sub.next_element()
            sub.expect_completion()
            sub.request(10)
            sub.expect_none()

        self.active_publisher_test(1, True, run)

    @untested("1.7")
    def test_untested_spec_1_7_must_not_emit_further_signals_once_on_error_has_been_signalled(
        self,
    ) -> None: ...

    @untested("1.8")
    def test_untested_spec_1_8_possibly_canceled_subscription_should_not_receive_on_error_or_on_complete_signals(  # noqa: E501
        self,
    ) -> None: ...

    @untested("1.9")
    def test_untested_spec_1_9_subscribe_should_not_throw_non_fatal_throwable(self) -> None: ...

    @required("1.9")
    def test_required_spec_1_9_subscribe_throw_npe_on_null_subscriber(self) -> None:
        env = self.env

        def run(pub: Publisher[T]) -> None:
            try:
                with env.doing("calling Publisher.subscribe(None), which has not returned"):
                    pub.subscribe(None)  # type: ignore[arg-type]
            except TypeError:
                pass  # the Python spelling of NullPointerException
            except Exception as error:
                raise env.violation(None, f"Publisher.subscribe(None) raised {error!r} instead "
                                    "of TypeError (Java: NullPointerException)", site=(),
                                    cause=error) from error
            else:
                env.flop("Publisher did not raise TypeError when given a None Subscriber "
                         "in subscribe()")

        self.active_publisher_test(0, False, run)

    @required("1.9")
    def test_required_spec_1_9_must_issue_on_subscribe_for_non_null_subscriber(self) -> None:
        env = self.env

        def run(pub: Publisher[T]) -> None:
            sub: ManualSubscriber[T] = ManualSubscriber(env)
            try:
                # the Subscriber checks that nothing comes before on_subscribe
                subscribe(env, pub, sub, timeout=env.timeout)
                env.verify_no_async_errors(delay=False)
            finally:
                sub.cancel()

        self.active_publisher_test(0, False, run)

    @required("1.9")
    def test_required_spec_1_9_may_reject_calls_to_subscribe_if_publisher_is_unable_or_unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe(  # noqa: E501
        self,
    ) -> None:
        env = self.env

        def run(pub: Publisher[T]) -> None:
            sub: ManualSubscriber[T] = ManualSubscriber(env)
            subscribe(env, pub, sub)
            env.expect_error(BaseException, message="Should have received on_error: ")
            # a second terminal signal (on_complete after on_error) breaks rule 1.7
            env.verify_no_async_errors()

        self.when_has_error_publisher_test(run)

    @untested("1.10")
    def test_untested_spec_1_10_reject_a_subscription_request_if_the_same_subscriber_subscribes_twice(  # noqa: E501
        self,
    ) -> None: ...

    @required("1.10")
    def test_required_spec_1_10_same_subscriber_subscribing_twice_must_not_disturb_its_first_subscription(  # noqa: E501
        self,
    ) -> None:
        """Subscribing the same Subscriber again (which rule 1.10 forbids callers) must not
        break the Publisher: ``subscribe`` returns normally (1.9), and the first Subscription
        keeps delivering exactly what is requested through it. The Publisher may ignore the
        second call, answer it with a second Subscription (which the Subscriber cancels,
        rule 2.5) or reject it with ``on_error``."""
        env = self.env

        def run(pub: Publisher[T]) -> None:
            sub = _ResubscribingSubscriber[T](env)
            subscribe(env, pub, sub)
            try:
                call_implementation(env, f"Publisher.subscribe() of {pub!r} (the same Subscriber "
                                    "again)", pub.subscribe, sub)
                env.quiet_period()  # an asynchronous Publisher answers the second call
                if sub.terminated:
                    return  # rejected with on_error: the Subscriber is done
                sub.request(3)
                sub.next_elements(3, f"After the same Subscriber subscribed a second time, "
                                     f"Publisher {pub!r} did not deliver the elements requested "
                                     "through its first Subscription")
                sub.expect_none(f"Publisher {pub!r} produced unrequested:")
            finally:
                sub.cancel()

        self.active_publisher_test(4, False, run)  # one more than requested: no completion

    @optional("1.11")
    def test_optional_spec_1_11_may_support_multi_subscribe(self) -> None:
        def run(pub: Publisher[T]) -> None:
            sub1 = self._new(pub)
            sub2 = self._new(pub)
            try:
                self.env.verify_no_async_errors()
            finally:
                sub1.cancel()
                sub2.cancel()

        self.active_publisher_test(1, False, run)

    @optional("1.11")
    def test_optional_spec_1_11_registered_subscribers_must_receive_on_next_or_on_complete_signals(
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub1 = self._new(pub)
            sub2 = self._new(pub)
            # unicast or multicast is the Publisher's choice: either signal will do
            sub1.request_next_element_or_end_of_stream()
            sub2.request_next_element_or_end_of_stream()
            try:
                self.env.verify_no_async_errors()
            finally:
                sub1.cancel()
                sub2.cancel()

        self.active_publisher_test(1, False, run)

    @optional("1.11")
    def test_optional_spec_1_11_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_one_by_one(  # noqa: E501
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub1, sub2, sub3 = self._new(pub), self._new(pub), self._new(pub)
            x = [sub1.request_next_element()]
            y = [sub2.request_next_element(), sub2.request_next_element()]
            x.append(sub1.request_next_element())
            z = [sub3.request_next_element() for _ in range(5)]
            sub3.request_end_of_stream(f"Publisher {pub!r} did not complete the stream as "
                                       "expected on 3rd subscriber")
            y += [sub2.request_next_element() for _ in range(3)]
            sub2.request_end_of_stream(f"Publisher {pub!r} did not complete the stream as "
                                       "expected on 2nd subscriber")
            x += [sub1.request_next_element() for _ in range(3)]
            sub1.request_end_of_stream(f"Publisher {pub!r} did not complete the stream as "
                                       "expected on 1st subscriber")
            assert x == y, f"Publisher {pub!r} produced {x} for subscriber 1, {y} for 2"
            assert x == z, f"Publisher {pub!r} produced {x} for subscriber 1, {z} for 3"

        self.active_publisher_test(5, True, run)

    def _many_upfront(self, check_completion: bool) -> None:
        def run(pub: Publisher[T]) -> None:
            subs = [self._new(pub) for _ in range(3)]
            # a Publisher that must touch its source to see the end needs one more request
            for sub in subs:
                sub.request(4)
            received = [sub.next_elements(3) for sub in subs]
            if check_completion:
                for sub in subs:
                    sub.expect_completion()
            assert received[0] == received[1], (
                "Expected elements to be signaled in the same sequence to 1st and 2nd subscribers")
            assert received[1] == received[2], (
                "Expected elements to be signaled in the same sequence to 2nd and 3rd subscribers")

        self.active_publisher_test(3, check_completion, run)

    @optional("1.11")
    def test_optional_spec_1_11_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront(  # noqa: E501
        self,
    ) -> None:
        self._many_upfront(False)

    @optional("1.11")
    def test_optional_spec_1_11_multicast_must_produce_the_same_elements_in_the_same_sequence_to_all_of_its_subscribers_when_requesting_many_upfront_and_complete_as_expected(  # noqa: E501
        self,
    ) -> None:
        self._many_upfront(True)


class _SequentialityCheckingSubscriber(BlackholeSubscriber[T]):
    """Rule 1.3: requests one by one, and stays inside each ``on_next`` a little, so
    that a signal a Publisher wrongly starts on another thread overlaps it and the
    ``SignalChecker`` sees it (re-entry on the same thread is allowed).
    """

    def __init__(self, env: TestEnvironment, elements: int, completion: Latch) -> None:
        super().__init__(env)
        self._elements = elements
        self._completion = completion
        self.got = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        super().on_subscribe(subscription)
        self.request(1)

    def on_next(self, item: T) -> None:
        outermost = self.checker.enter(f"on_next({item!r})")
        try:
            self.checker.check_on_next(item)
            self.got += 1
            if self.got <= self._elements:  # one more than the stream holds: some need it to end
                self.request(1)
            if outermost:
                threading.Event().wait(0.0002)
        finally:
            self.checker.leave()

    def on_complete(self) -> None:
        super().on_complete()
        self._completion.close()


class _ResubscribingSubscriber(ManualSubscriber[T]):
    """Subscribed twice: cancels a second Subscription, as rule 2.5 tells a Subscriber.

    Both Subscriptions may signal from their own threads, so overlapping signals
    are not held against the Publisher here.
    """

    def __init__(self, env: TestEnvironment) -> None:
        super().__init__(env, check_concurrency=False)

    def on_second_subscribe(self, subscription: Subscription) -> None:
        call_implementation(self.env, "Subscription.cancel() (of the second Subscription)",
                            subscription.cancel)

    def take_error(self, error: BaseException) -> None:
        """The Publisher rejected the second ``subscribe``: legal (rule 1.9), not recorded."""
        self.received.fail(error)


class PublisherVerification(PublisherRules[T]):
    """Subclass as ``class TestMyPublisher(PublisherVerification[int])`` and implement
    ``create_publisher(elements)`` (and optionally ``create_failed_publisher()``).
    """

    __test__ = False
