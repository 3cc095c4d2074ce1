"""The knobs and helpers shared by the Publisher tests (PublisherVerification)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

import pytest

from sansrs.streams import MAX_DEMAND, Publisher

from ._base import Verification
from ._env import ManualSubscriber

__all__ = ["PublisherTestBase"]

T = TypeVar("T")


class PublisherTestBase(Verification, Generic[T]):
    """What a user implements (``create_publisher``) and what the tests run on."""

    __test__ = False

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
        publisher = self.create_publisher(elements)
        body(publisher)
        self.env.verify_no_async_errors(delay=False)

    def when_has_error_publisher_test(self, body: Callable[[Publisher[T]], None]) -> None:
        publisher = self.create_failed_publisher()
        if publisher is None:
            pytest.skip("Skipping because no error state Publisher provided, and the test "
                        "requires it. Implement create_failed_publisher() to run this test.")
        body(publisher)

    def _new(self, publisher: Publisher[T]) -> ManualSubscriber[T]:
        return self.env.new_manual_subscriber(publisher)
