"""Correct implementations of every design the kit must not fail (no false failures).

Hand-rolled, independent of sansrs.streams' building blocks (``tck_correct``,
``tck_processor``): iterator- and generator-backed, thread-pool and asyncio
signalling Publishers, a thread-pool Subscriber, a multicast Processor. The
Publishers and Processors sansrs ships run in ``test_tck_publishers`` and
``test_tck_processors_subscribers``.
"""

from __future__ import annotations

import itertools

from sansrs.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    WhiteboxSubscriberProbe,
)

from sansrs.streams import MAX_DEMAND, Processor, Publisher, Subscriber
from tests.tck.tck_correct import (
    AsyncioPublisher,
    IteratorPublisher,
    ThreadPoolPublisher,
    ThreadPoolSubscriber,
    counting,
)
from tests.tck.tck_fast_env import FAST_ENV
from tests.tck.tck_processor import BroadcastProcessor


class TestHandRolledIteratorPublisher(PublisherVerification[int]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        if elements >= MAX_DEMAND:
            return IteratorPublisher(lambda: itertools.count(1), "count()")
        return IteratorPublisher(lambda: range(1, elements + 1), f"range({elements})")


class TestHandRolledGeneratorPublisher(PublisherVerification[int]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return IteratorPublisher(lambda: counting(elements), f"counting({elements})")


class TestThreadPoolPublisher(PublisherVerification[int]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return ThreadPoolPublisher(elements)


class TestAsyncioPublisher(PublisherVerification[int]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        return AsyncioPublisher(elements)


class TestThreadPoolSubscriberBlackbox(SubscriberBlackboxVerification[int]):
    env = FAST_ENV

    def create_subscriber(self) -> Subscriber[int]:
        return ThreadPoolSubscriber()


class TestThreadPoolSubscriberWhitebox(SubscriberWhiteboxVerification[int]):
    env = FAST_ENV

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
        return ThreadPoolSubscriber(probe)


class TestMulticastProcessor(IdentityProcessorVerification[int]):
    """Multicast: the tests that need two Subscribers at once run too."""

    env = FAST_ENV

    def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
        return BroadcastProcessor(buffer_size)
