"""Every Publisher sansrs ships, through the kit's PublisherVerification."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from sansrs.tck import PublisherVerification

from sansrs.streams import (
    MAX_DEMAND,
    Publisher,
    empty_publisher,
    error_publisher,
    from_generator,
    from_iterable,
    range_publisher,
)
from tests.tck.tck_async import AsyncRangePublisher
from tests.tck.tck_fast_env import FAST_ENV


class TestRangePublisher(PublisherVerification[int]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return range_publisher(0, None if elements >= MAX_DEMAND else elements)

    def create_failed_publisher(self) -> Publisher[int]:
        return error_publisher(RuntimeError("failed on purpose"))  # type: ignore[return-value]


class TestListPublisher(PublisherVerification[int]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_iterable(list(range(elements)))

    def max_elements_from_publisher(self) -> int:
        return 1000  # a materialized list: keep it small


def _numbers(count: int) -> Iterator[int]:
    yield from (itertools.count() if count >= MAX_DEMAND else range(count))


class TestGeneratorPublisher(PublisherVerification[int]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_generator(lambda: _numbers(elements))


class TestOneShotIteratorPublisher(PublisherVerification[int]):
    """A generator object serves one Subscriber: the multi-subscribe tests skip."""

    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return from_iterable(_numbers(elements))


class TestEmptyAndErrorPublishers(PublisherVerification[object]):
    """``empty_publisher`` as the 0-element Publisher, ``error_publisher`` as the failed one."""

    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[object]:
        assert elements == 0
        return empty_publisher()

    def create_failed_publisher(self) -> Publisher[object]:
        return error_publisher(RuntimeError("failed on purpose"))

    def max_elements_from_publisher(self) -> int:
        return 0


class TestAsynchronousPublisher(PublisherVerification[int]):
    """A correct Publisher that signals from its own thread passes the kit too."""

    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return AsyncRangePublisher(None if elements >= MAX_DEMAND else elements)
