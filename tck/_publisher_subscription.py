"""Section 3 of PublisherVerification: the Subscription rules, seen from a Subscriber."""

from __future__ import annotations

import threading
import weakref
from typing import TypeVar

from sansrs.streams import MAX_DEMAND, Publisher, Subscription

from ._base import optional, required, untested
from ._manual import BlackholeSubscriber, ManualSubscriber, call_implementation, subscribe
from ._probes import Latch
from ._publisher_stress import PublisherStressRules

__all__ = ["SubscriptionRules"]

T = TypeVar("T")


class SubscriptionRules(PublisherStressRules[T]):
    __test__ = False

    # -- SUBSCRIPTION TESTS ------------------------------------------------------

    @required("3.2")
    def test_required_spec_3_2_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe(
        self,
    ) -> None:
        env = self.env

        class Sub(ManualSubscriber[T]):
            def on_subscribe(self, subscription: Subscription) -> None:
                super().on_subscribe(subscription)
                for _ in range(3):
                    self.request(1)

            def on_next(self, item: T) -> None:
                super().on_next(item)
                if self.requested < 6:
                    self.request(1)

        def run(pub: Publisher[T]) -> None:
            sub = Sub(env)
            subscribe(env, pub, sub)
            try:
                # "allow" means the requests count: all 6 elements must come
                sub.next_elements(6, f"Publisher {pub!r} did not honour request(1) calls made "
                                     "synchronously from on_subscribe and on_next")
                env.verify_no_async_errors()
            finally:
                sub.cancel()

        self.active_publisher_test(6, False, run)

    @required("3.3")
    def test_required_spec_3_3_must_not_allow_unbounded_recursion(self) -> None:
        env = self.env
        bound = self.bounded_depth_of_on_next_and_request_recursion()
        limit = bound + 1
        depth = threading.local()
        completed = Latch(env)

        class Sub(ManualSubscriber[T]):
            signals = 0

            def on_next(self, item: T) -> None:
                # no super(): only stack depth matters, and elements need not be drained
                self.signals += 1
                current = getattr(depth, "value", 0) + 1
                depth.value = current
                try:
                    if current > bound:
                        completed.close()
                        raise env.violation("3.3", f"Got {current} on_next calls within thread "
                                            f"{threading.current_thread().name}, yet expected "
                                            f"recursive bound was {bound}: request() called "
                                            "from on_next MUST NOT signal on_next again deeper "
                                            "than that (rule 3.3)")
                    if self.signals >= limit:
                        completed.close()  # enough signals without exceeding the bound
                        return
                    self.request(1)
                finally:
                    depth.value = current - 1

            def on_complete(self) -> None:
                super().on_complete()
                completed.close()

            def on_error(self, error: BaseException) -> None:
                super().on_error(error)
                completed.close()

        def run(pub: Publisher[T]) -> None:
            sub = Sub(env)
            try:
                subscribe(env, pub, sub)
                sub.request(1)  # kick off request -> on_next -> request ...
                completed.expect_close(f"Unable to validate call stack depth safety, awaited at "
                                       f"most {limit} signals or completion")
                env.verify_no_async_errors(delay=False)
            finally:
                sub.cancel()

        self.active_publisher_test(limit, False, run)

    @untested("3.4")
    def test_untested_spec_3_4_request_should_not_perform_heavy_computations(self) -> None: ...

    @untested("3.5")
    def test_untested_spec_3_5_cancel_must_not_synchronously_perform_heavy_computation(
        self,
    ) -> None: ...

    @required("3.6")
    def test_required_spec_3_6_after_subscription_is_cancelled_request_must_be_nops(self) -> None:
        env = self.env

        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.cancel()
            for _ in range(3):
                sub.request(1)  # the Subscriber keeps using the cancelled Subscription
            sub.expect_none()
            env.verify_no_async_errors(delay=False)

        self.active_publisher_test(3, False, run)

    @required("3.7")
    def test_required_spec_3_7_after_subscription_is_cancelled_additional_cancelations_must_be_nops(
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            subscription = sub.subscription.value()
            sub.checker.mark_cancelled()
            for _ in range(3):
                call_implementation(self.env, "Subscription.cancel()", subscription.cancel)
            sub.expect_none()
            self.env.verify_no_async_errors(delay=False)

        self.active_publisher_test(1, False, run)

    def _expect_illegal_argument(self, sub: ManualSubscriber[T]) -> BaseException:
        error = sub.expect_error(ValueError)
        return error

    @required("3.9")
    def test_required_spec_3_9_request_zero_must_signal_illegal_argument_exception(self) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(0)
            self._expect_illegal_argument(sub)

        self.active_publisher_test(10, False, run)

    @required("3.9")
    def test_required_spec_3_9_request_negative_number_must_signal_illegal_argument_exception(
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(-self.env.rng.randint(1, 2**31 - 1))
            self._expect_illegal_argument(sub)

        self.active_publisher_test(10, False, run)

    @optional("3.9")
    def test_optional_spec_3_9_request_negative_number_may_signal_illegal_argument_exception_with_specific_message(  # noqa: E501
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(-self.env.rng.randint(1, 2**31 - 1))
            error = self._expect_illegal_argument(sub)
            text = str(error)
            wanted = ("3.9", "non-positive subscription request", "negative subscription request")
            assert any(part in text for part in wanted), (
                f"Got expected {type(error).__name__} but its message {text!r} mentions none "
                f"of {wanted}")

        self.active_publisher_test(10, False, run)

    @required("3.12")
    def test_required_spec_3_12_cancel_must_make_the_publisher_to_eventually_stop_signaling(
        self,
    ) -> None:
        demand1, demand2 = 10, 5
        total = demand1 + demand2
        env = self.env

        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(demand1)
            sub.request(demand2)
            # wait for a first element before cancelling: an asynchronous Publisher may
            # legally handle the cancel before it ever emitted anything
            sub.next_element()
            sub.cancel()
            # what was outstanding may still arrive (rule 2.8); the Subscriber's checks fail
            # anything beyond it (rule 3.12), so the stream must go quiet by itself
            signalled = 1 + sub.received.drain_until_quiet(env.no_signals_timeout)
            assert signalled <= total, (
                f"Publisher signalled [{signalled}] elements, which is more than the "
                f"signalled demand: {total}")

        self.active_publisher_test(20, False, run)

    @required("3.13")
    def test_required_spec_3_13_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        env = self.env

        def subscribe_and_cancel(pub: Publisher[T]) -> weakref.ref[ManualSubscriber[T]]:
            sub = self._new(pub)
            ref = weakref.ref(sub)
            sub.request(1)
            sub.next_element()
            sub.cancel()
            return ref

        def run(pub: Publisher[T]) -> None:
            ref = subscribe_and_cancel(pub)
            if not env.wait_for_collection(ref):
                env.flop(f"Publisher {pub!r} did not drop its reference to the test Subscriber "
                         f"within {env.gc_timeout_ms} ms after cancellation")
            env.verify_no_async_errors(delay=False)

        self.active_publisher_test(3, False, run)

    @required("3.17")
    def test_required_spec_3_17_must_support_a_pending_element_count_up_to_long_max_value(
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(MAX_DEMAND)
            sub.next_elements(3)
            sub.expect_completion()
            self.env.verify_no_async_errors(delay=False)

        self.active_publisher_test(3, True, run)

    @required("3.17")
    def test_required_spec_3_17_must_support_a_cumulative_pending_element_count_up_to_long_max_value(  # noqa: E501
        self,
    ) -> None:
        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            sub.request(MAX_DEMAND // 2)
            sub.request(MAX_DEMAND // 2)
            sub.request(1)  # pending is now exactly 2**63-1
            sub.next_elements(3)
            sub.expect_completion()
            try:
                self.env.verify_no_async_errors(delay=False)
            finally:
                sub.cancel()

        self.active_publisher_test(3, True, run)

    @required("3.17")
    def test_required_spec_3_17_must_not_signal_on_error_when_pending_above_long_max_value(
        self,
    ) -> None:
        env = self.env

        class Sub(BlackholeSubscriber[T]):
            calls = 10  # overflow is expected after 2 calls already

            def on_next(self, item: T) -> None:
                super().on_next(item)
                if self.calls > 0:
                    self.calls -= 1
                    self.request(MAX_DEMAND - 1)
                else:
                    self.cancel()

        def run(pub: Publisher[T]) -> None:
            sub = Sub(env)
            subscribe(env, pub, sub)
            sub.request(1)
            try:
                env.verify_no_async_errors()
            finally:
                sub.cancel()

        self.active_publisher_test(2**31 - 1, False, run)
