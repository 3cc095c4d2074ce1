"""IdentityProcessorVerification: a Processor is a Publisher (section 1, 3) and a
Subscriber (section 2), plus the Processor rules (4.1, 4.2)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

import pytest

from sansrs.streams import MAX_DEMAND, Processor, Publisher, Subscriber, Subscription

from ._base import required
from ._env import TestEnvironment
from ._manual import ManualPublisher, ManualSubscriber, new_manual_subscriber, subscribe
from ._probes import Promise
from ._publisher import PublisherRules
from ._subscriber import SubscriberWhiteboxRules
from ._subscriber_support import WhiteboxSubscriberProbe

__all__ = ["IdentityProcessorVerification"]

T = TypeVar("T")

#: Elements an identity Processor must be able to buffer by default (as the Java TCK).
TEST_BUFFER_SIZE = 16


class _ErrorCollectingSubscriber(ManualSubscriber[T]):
    def __init__(self, env: TestEnvironment) -> None:
        super().__init__(env)
        self.error: Promise[BaseException] = Promise(env)

    def take_error(self, error: BaseException) -> None:
        self.error.complete(error)

    def expect_error_instance(self, cause: BaseException) -> None:
        got = self.error.expect_completion(None, "Did not receive expected error on downstream")
        if got is not cause:
            self.env.flop(f"Expected error {cause!r} but got {got!r}")


class _PuppetSubscriber(Generic[T]):
    """The downstream of the Processor under whitebox test; reports to the probe."""

    def __init__(self, env: TestEnvironment, probe: WhiteboxSubscriberProbe[T]) -> None:
        self._env = env
        self._probe = probe
        self._subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        if self._subscription is not None:
            subscription.cancel()  # the probe itself must also pass the Subscriber rules
            return
        self._subscription = subscription
        self._probe.register_on_subscribe(_Puppet(subscription))

    def on_next(self, item: T) -> None:
        self._probe.register_on_next(item)

    def on_error(self, error: BaseException) -> None:
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        self._probe.register_on_complete()


class _Puppet:
    def __init__(self, subscription: Subscription) -> None:
        self._subscription = subscription

    def trigger_request(self, elements: int) -> None:
        self._subscription.request(elements)

    def signal_cancel(self) -> None:
        self._subscription.cancel()


class _TestSetup(ManualPublisher[T]):
    """Upstream played by the kit, the Processor under test, downstream subscribers."""

    def __init__(self, verification: IdentityProcessorVerification[T]) -> None:
        env = verification.env
        super().__init__(env)
        self.tees = new_manual_subscriber(env, verification.create_helper_publisher(MAX_DEMAND),
                                          under_test=False)
        self.seen: list[T] = []
        with env.doing("calling create_identity_processor(), which has not returned"):
            self.processor = verification.create_identity_processor(
                verification.processor_buffer_size())
        env.subject = self.processor
        self.subscribe(self.processor)

    def new_subscriber(self) -> ManualSubscriber[T]:
        return new_manual_subscriber(self.env, self.processor)

    def next_t(self) -> T:
        element = self.tees.request_next_element()
        if element in self.seen:
            self.env.flop(f"Helper publisher illegally produced the same element {element!r} twice")
        self.seen.append(element)
        return element

    def expect_next_element(self, sub: ManualSubscriber[T], expected: T) -> None:
        element = sub.next_element(f"timeout while awaiting {expected!r}")
        if element != expected:
            self.env.flop(f"Received on_next({element!r}) on downstream but expected "
                          f"on_next({expected!r})")

    def send_next_t_from_upstream(self) -> T:
        element = self.next_t()
        self.send_next(element)
        return element


class IdentityProcessorVerification(PublisherRules[T], SubscriberWhiteboxRules[T]):
    """Subclass and implement ``create_identity_processor(buffer_size)``.

    The Processor must pass every element through unchanged. As a Publisher it
    is fed by the helper publisher; as a Subscriber it is driven by the kit.
    """

    __test__ = False

    @abstractmethod
    def create_identity_processor(self, buffer_size: int) -> Processor[T, T]:
        """A new Processor that forwards elements unchanged, buffering ``buffer_size``."""

    def max_supported_subscribers(self) -> int:
        """How many Subscribers the Processor serves at once (tests needing more are skipped)."""
        return MAX_DEMAND

    def processor_buffer_size(self) -> int:
        return TEST_BUFFER_SIZE

    # -- as a Publisher: fed by the helper publisher --------------------------------

    def create_publisher(self, elements: int) -> Publisher[T]:
        processor = self.create_identity_processor(self.processor_buffer_size())
        self.create_helper_publisher(elements).subscribe(processor)
        return processor

    # -- as a Subscriber: the probe sits downstream ---------------------------------

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[T]) -> Subscriber[T]:
        processor = self.create_identity_processor(self.processor_buffer_size())
        processor.subscribe(_PuppetSubscriber(self.env, probe))
        return processor

    def optional_multiple_subscribers_test(self, required_subscribers: int,
                                           body: Callable[[], None]) -> None:
        if required_subscribers > self.max_supported_subscribers():
            pytest.skip(f"The Publisher under test only supports "
                        f"{self.max_supported_subscribers()} subscribers, while this test "
                        f"requires at least {required_subscribers} to run.")
        default = IdentityProcessorVerification.max_supported_subscribers
        if type(self).max_supported_subscribers is default:
            self.env.hint(f"this test subscribes {required_subscribers} Subscribers to one "
                          "Processor; if yours is unicast (it rejects a second Subscriber), "
                          "override max_supported_subscribers() to return 1 and this test is "
                          "skipped")
        body()

    # -- Processor rules ------------------------------------------------------------

    @required("1.4")
    def test_required_spec_1_4_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_non_recoverable_error(  # noqa: E501
        self,
    ) -> None:
        def run() -> None:
            setup = _TestSetup(self)
            sub1: _ErrorCollectingSubscriber[T] = _ErrorCollectingSubscriber(self.env)
            subscribe(self.env, setup.processor, sub1)
            sub2: _ErrorCollectingSubscriber[T] = _ErrorCollectingSubscriber(self.env)
            subscribe(self.env, setup.processor, sub2)
            sub1.request(1)
            setup.expect_request()
            x = setup.send_next_t_from_upstream()
            setup.expect_next_element(sub1, x)
            sub1.request(1)
            error = RuntimeError("Test exception")
            setup.send_error(error)
            sub1.expect_error_instance(error)
            sub2.expect_error_instance(error)
            self.env.verify_no_async_errors(delay=False)

        self.optional_multiple_subscribers_test(2, run)

    @required("4.2")
    def test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream(
        self,
    ) -> None:
        setup = _TestSetup(self)
        sub: _ErrorCollectingSubscriber[T] = _ErrorCollectingSubscriber(self.env)
        subscribe(self.env, setup.processor, sub)
        error = RuntimeError("Test exception")
        setup.send_error(error)
        sub.expect_error_instance(error)  # "immediately": without any request
        self.env.verify_no_async_errors(delay=False)

    @required("4.1")
    def test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago(
        self,
    ) -> None:
        def run() -> None:
            setup = _TestSetup(self)
            sub1 = setup.new_subscriber()
            sub1.request(20)
            total = setup.expect_request()
            x = setup.send_next_t_from_upstream()
            setup.expect_next_element(sub1, x)
            if total == 1:
                total += setup.expect_request()
            y = setup.send_next_t_from_upstream()
            setup.expect_next_element(sub1, y)
            if total == 2:
                total += setup.expect_request()
            sub2 = setup.new_subscriber()
            z = setup.send_next_t_from_upstream()
            setup.expect_next_element(sub1, z)
            sub2.expect_none()  # sub2 has not requested anything yet
            sub2.request(1)
            setup.expect_next_element(sub2, z)
            if total == 3:
                setup.expect_request()
            setup.send_completion()
            sub1.expect_completion()
            sub2.expect_completion()
            self.env.verify_no_async_errors(delay=False)

        self.optional_multiple_subscribers_test(2, run)
