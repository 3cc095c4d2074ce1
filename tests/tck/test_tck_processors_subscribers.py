"""Every Processor and Subscriber sansrs ships, through the kit."""

from __future__ import annotations

from sansrs.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    WhiteboxSubscriberProbe,
)

from sansrs.streams import MAX_DEMAND as MAX
from sansrs.streams import (
    BatchProcessor,
    CollectingSubscriber,
    FilterProcessor,
    MapProcessor,
    Processor,
    Publisher,
    Subscriber,
    Subscription,
    error_publisher,
    range_publisher,
)
from tests.tck.tck_fast_env import FAST_ENV


class TestMapProcessor(IdentityProcessorVerification[int]):
    env = FAST_ENV

    def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
        return MapProcessor(lambda x: x, buffer_size=buffer_size)

    def create_failed_publisher(self) -> Publisher[int]:
        processor: MapProcessor[int, int] = MapProcessor(lambda x: x)
        error_publisher(RuntimeError("failed on purpose")).subscribe(processor)  # type: ignore[arg-type]
        return processor

    def max_supported_subscribers(self) -> int:
        return 1


class TestFilterProcessor(IdentityProcessorVerification[int]):
    env = FAST_ENV

    def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
        return FilterProcessor(lambda x: True, buffer_size=buffer_size)

    def max_supported_subscribers(self) -> int:
        return 1


class TestFilterProcessorDroppingHalf(PublisherVerification[int]):
    """A filter that drops elements must keep requesting upstream to meet demand."""

    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[int]:
        processor = FilterProcessor[int](lambda x: x % 2 == 0, buffer_size=4)
        range_publisher(0, None if elements >= MAX else 2 * elements).subscribe(processor)
        return processor


class TestBatchProcessor(PublisherVerification[list[int]]):
    env = FAST_ENV

    def create_publisher(self, elements: int) -> Publisher[list[int]]:
        processor = BatchProcessor[int](3, buffer_size=4)
        range_publisher(0, None if elements >= MAX else 3 * elements).subscribe(processor)
        return processor

    def create_failed_publisher(self) -> Publisher[list[int]]:
        processor = BatchProcessor[int](3)
        error_publisher(RuntimeError("failed on purpose")).subscribe(processor)  # type: ignore[arg-type]
        return processor


class TestBatchProcessorOfOne(IdentityProcessorVerification[int]):
    """``BatchProcessor(1)`` followed by unwrapping is an identity Processor."""

    env = FAST_ENV

    def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
        return _Unwrapped(buffer_size)

    def max_supported_subscribers(self) -> int:
        return 1


class _Unwrapped(BatchProcessor[int]):
    def __init__(self, buffer_size: int) -> None:
        super().__init__(1, buffer_size=buffer_size)

    def transform(self, item: int) -> list[int]:  # type: ignore[override]
        return [batch[0] for batch in super().transform(item)]


class TestCollectingSubscriberBlackbox(SubscriberBlackboxVerification[int]):
    env = FAST_ENV

    def create_subscriber(self) -> Subscriber[int]:
        return CollectingSubscriber(prefetch=8)


class TestCollectingSubscriberUnboundedBlackbox(SubscriberBlackboxVerification[int]):
    env = FAST_ENV

    def create_subscriber(self) -> Subscriber[int]:
        return CollectingSubscriber()


class _ProbedCollectingSubscriber(CollectingSubscriber[int]):
    """CollectingSubscriber reporting to a whitebox probe (the kit's whitebox contract)."""

    __slots__ = ("_probe",)

    def __init__(self, probe: WhiteboxSubscriberProbe[int]) -> None:
        super().__init__(prefetch=1)
        self._probe = probe

    def on_subscribe(self, subscription: Subscription) -> None:
        already = self._subscription is not None
        super().on_subscribe(subscription)
        if not already and subscription is not None:
            self._probe.register_on_subscribe(_Puppet(self, subscription))

    def on_next(self, item: int) -> None:
        super().on_next(item)
        self._probe.register_on_next(item)

    def on_error(self, error: BaseException) -> None:
        super().on_error(error)
        self._probe.register_on_error(error)

    def on_complete(self) -> None:
        super().on_complete()
        self._probe.register_on_complete()


class _Puppet:
    def __init__(self, subscriber: CollectingSubscriber[int], subscription: Subscription) -> None:
        self._subscriber = subscriber
        self._subscription = subscription

    def trigger_request(self, elements: int) -> None:
        self._subscription.request(elements)

    def signal_cancel(self) -> None:
        self._subscriber.cancel()


class TestCollectingSubscriberWhitebox(SubscriberWhiteboxVerification[int]):
    env = FAST_ENV

    def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
        return _ProbedCollectingSubscriber(probe)
