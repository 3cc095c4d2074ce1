"""The knobs and helpers shared by the Publisher tests (PublisherVerification)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

import pytest

from sansrs.streams import MAX_DEMAND, Publisher

from ._base import Verification
from ._env import StressSettings
from ._manual import ManualSubscriber, new_manual_subscriber

__all__ = ["PublisherTestBase"]

T = TypeVar("T")


class PublisherTestBase(Verification, Generic[T]):
    """What a user implements (``create_publisher``) and what the tests run on."""

    __test__ = False

    #: Sizes of the long-haul, late-cancel and concurrency tests.
    stress: StressSettings = StressSettings()

    # -- user knobs --------------------------------------------------------------

    @abstractmethod
    def create_publisher(self, elements: int) -> Publisher[T]:
        """A Publisher of exactly ``elements`` elements; infinite when ``elements == 2**63-1``."""

    def create_failed_publisher(self) -> Publisher[T] | None:
        """A Publisher in a failed state (rule 1.9: ``on_subscribe`` then ``on_error``).

        Return None (the default) to skip the tests that need one.
        """
        return None

    def max_elements_from_publisher(self) -> int:
        """The most elements the Publisher can produce; ``2**63-1`` means it never completes."""
        return MAX_DEMAND - 1

    def bounded_depth_of_on_next_and_request_recursion(self) -> int:
        """The recursion depth ``on_next -> request -> on_next`` allowed (rule 3.3)."""
        return 1

    def skip_stochastic_tests(self) -> bool:
        return False

    def request_needs_external_synchronization(self) -> bool:
        """True if the Subscription relies on rule 2.7: callers serialize ``request()``.

        Rule 2.7 lets a Subscription assume that its Subscriber never calls it from two
        threads at once. By default the kit calls ``request()`` from several threads at
        once (most Subscriptions are meant to be thread-safe); return True and it takes a
        lock around each call instead (still from several threads, still racing with
        your own threads' signalling).
        """
        return False

    # -- infrastructure ------------------------------------------------------------

    def active_publisher_test(self, elements: int, completion_signal_required: bool,
                              body: Callable[[Publisher[T]], None]) -> None:
        maximum = self.max_elements_from_publisher()
        if elements > maximum:
            pytest.skip(f"Unable to run this test, as required elements nr: {elements} is higher "
                        f"than supported by given producer: {maximum}")
        if completion_signal_required and maximum == MAX_DEMAND:
            pytest.skip("Unable to run this test, as it requires an on_complete signal, which this "
                        "Publisher is unable to provide (max_elements_from_publisher() == 2**63-1)")
        with self.env.doing(f"calling create_publisher({elements}), which has not returned"):
            publisher = self.create_publisher(elements)
        self.env.subject = publisher
        body(publisher)
        self.env.verify_no_async_errors(delay=False)

    def when_has_error_publisher_test(self, body: Callable[[Publisher[T]], None]) -> None:
        with self.env.doing("calling create_failed_publisher(), which has not returned"):
            publisher = self.create_failed_publisher()
        if publisher is None:
            pytest.skip("Skipping because no error state Publisher provided, and the test "
                        "requires it. Implement create_failed_publisher() to run this test.")
        self.env.subject = publisher
        body(publisher)

    def scaled(self, wanted: int, completion_signal_required: bool = False) -> int:
        """``wanted`` elements, or fewer if the Publisher cannot produce that many."""
        maximum = self.max_elements_from_publisher()
        if completion_signal_required and maximum == MAX_DEMAND:
            return wanted  # active_publisher_test skips it with the reason
        return max(1, min(wanted, maximum))

    def finite(self) -> bool:
        return self.max_elements_from_publisher() != MAX_DEMAND

    def _new(self, publisher: Publisher[T]) -> ManualSubscriber[T]:
        return new_manual_subscriber(self.env, publisher)
