"""Processor rules (4.1, 4.2), the operators, the CollectingSubscriber and the Mailbox."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any

import pytest

from sansrs.streams import (
    MAX_DEMAND,
    BatchProcessor,
    CollectingSubscriber,
    FilterProcessor,
    IllegalArgumentError,
    Mailbox,
    MapProcessor,
    Processor,
    ProcessorBase,
    Subscription,
    error_publisher,
    from_iterable,
    range_publisher,
)
from tests.streams.streams_recording import Recorder


class ManualUpstream:
    """A Subscription that records requests and cancellation."""

    def __init__(self) -> None:
        self.requests: list[int] = []
        self.cancelled = 0

    def request(self, n: int) -> None:
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancelled += 1

    @property
    def requested(self) -> int:
        return sum(self.requests)


def _wired(
    processor: ProcessorBase[int, Any], request: int = 0
) -> tuple[ManualUpstream, Recorder]:
    upstream = ManualUpstream()
    processor.on_subscribe(upstream)
    rec = Recorder(request_on_subscribe=request)
    processor.subscribe(rec)
    return upstream, rec


def test_processor_satisfies_the_processor_protocol() -> None:
    assert isinstance(MapProcessor(str), Processor)


def test_rs_4_1_processor_requests_upstream_only_for_downstream_demand() -> None:
    processor = MapProcessor[int, int](lambda x: x * 2, buffer_size=4)
    upstream, rec = _wired(processor)
    assert upstream.requests == []
    rec.request(2)
    assert upstream.requested == 2
    processor.on_next(1)
    processor.on_next(2)
    assert rec.items == [2, 4]
    rec.request(100)
    assert upstream.requested == 2 + 4  # at most buffer_size outstanding


def test_rs_4_1_processor_does_not_request_before_a_downstream_subscribes() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    upstream = ManualUpstream()
    processor.on_subscribe(upstream)
    assert upstream.requests == []


def test_rs_4_2_upstream_error_is_passed_on_immediately_without_demand() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    _upstream, rec = _wired(processor, request=1)
    processor.on_next(1)
    rec.request(0 + 1)
    error = RuntimeError("upstream failed")
    processor.on_error(error)
    assert rec.events[-1] == ("error", error)


def test_rs_4_2_error_drops_buffered_elements() -> None:
    processor = MapProcessor[int, int](lambda x: x, buffer_size=4)
    _upstream, rec = _wired(processor, request=2)
    rec.events.clear()
    processor.on_next(1)
    processor.on_next(2)
    error = RuntimeError("x")
    processor.on_error(error)
    assert rec.events == [("next", 1), ("next", 2), ("error", error)]


def test_error_before_downstream_subscribes_is_delivered_on_subscribe() -> None:
    processor = MapProcessor[object, object](lambda x: x)
    error = RuntimeError("early")
    error_publisher(error).subscribe(processor)
    rec = Recorder()
    processor.subscribe(rec)
    assert rec.events == [("subscribe", None), ("error", error)]


def test_completion_waits_for_buffered_elements() -> None:
    processor = MapProcessor[int, int](lambda x: x, buffer_size=4)
    _upstream, rec = _wired(processor, request=1)
    processor.on_next(1)
    processor.on_complete()
    assert rec.kinds == ["subscribe", "next", "complete"]


def test_rs_2_5_processor_cancels_a_second_upstream_subscription() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    first, second = ManualUpstream(), ManualUpstream()
    processor.on_subscribe(first)
    processor.on_subscribe(second)
    assert (first.cancelled, second.cancelled) == (0, 1)


def test_rs_1_11_processor_is_unicast_and_rejects_a_second_subscriber() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    _, first = _wired(processor)
    second = Recorder()
    processor.subscribe(second)
    assert first.kinds == ["subscribe"]
    assert second.kinds == ["subscribe", "error"]
    assert "rule 1.11" in str(second.error)


def test_downstream_cancel_cancels_upstream_and_drops_the_subscriber() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    upstream, rec = _wired(processor, request=3)
    ref = weakref.ref(rec)
    rec.cancel()
    assert upstream.cancelled == 1
    processor.on_next(1)  # rule 2.8: late elements are ignored
    del rec
    assert ref() is None  # rule 3.13


def test_rs_3_9_downstream_request_zero_fails_downstream_and_cancels_upstream() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    upstream, rec = _wired(processor)
    rec.request(0)
    assert isinstance(rec.error, IllegalArgumentError)
    assert "Rule 3.9" in str(rec.error)
    assert upstream.cancelled == 1


def test_rs_3_6_and_3_7_downstream_requests_and_cancels_after_cancel_are_no_ops() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    upstream, rec = _wired(processor)
    rec.cancel()
    rec.cancel()
    rec.request(5)
    rec.request(-1)
    assert upstream.cancelled == 1 and upstream.requests == []
    assert rec.kinds == ["subscribe"]


def test_rs_1_1_upstream_over_delivery_fails_the_stream() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    upstream, rec = _wired(processor, request=1)
    processor.on_next(1)
    processor.on_next(2)  # not requested
    assert rec.items == [1]
    assert "Rule 1.1" in str(rec.error)
    assert upstream.cancelled == 1


def test_rs_1_4_operator_failure_signals_on_error_and_cancels_upstream() -> None:
    processor = MapProcessor[int, float](lambda x: 1 / x)
    upstream, rec = _wired(processor, request=2)
    processor.on_next(0)
    assert isinstance(rec.error, ZeroDivisionError)
    assert upstream.cancelled == 1


@pytest.mark.parametrize("method", ["on_subscribe", "on_next", "on_error"])
def test_rs_2_13_processor_rejects_none(method: str) -> None:
    with pytest.raises(TypeError, match=r"2\.13"):
        getattr(MapProcessor(str), method)(None)


def test_rs_1_9_processor_subscribe_none_raises() -> None:
    with pytest.raises(TypeError, match=r"1\.9"):
        MapProcessor(str).subscribe(None)  # type: ignore[arg-type]


def test_rs_2_3_processor_does_not_call_upstream_from_on_complete() -> None:
    calls: list[str] = []

    class Spy(ManualUpstream):
        def request(self, n: int) -> None:
            calls.append(f"request({n})")

        def cancel(self) -> None:
            calls.append("cancel")

    processor = MapProcessor[int, int](lambda x: x)
    processor.on_subscribe(Spy())
    processor.subscribe(Recorder())
    processor.on_complete()
    processor.on_error(RuntimeError("late"))
    assert calls == []


def test_filter_keeps_requesting_until_demand_is_met() -> None:
    processor = FilterProcessor[int](lambda x: x % 3 == 0, buffer_size=2)
    range_publisher(0, 30).subscribe(processor)
    rec = Recorder(request_on_subscribe=4)
    processor.subscribe(rec)
    assert rec.items == [0, 3, 6, 9]


def test_batch_groups_by_count_and_flushes_the_rest() -> None:
    processor = BatchProcessor[int](4)
    range_publisher(0, 10).subscribe(processor)
    sink: CollectingSubscriber[list[int]] = CollectingSubscriber()
    processor.subscribe(sink)
    assert sink.items == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert sink.completed


def test_batch_requests_size_times_demand_upstream() -> None:
    processor = BatchProcessor[int](5, buffer_size=2)
    upstream, rec = _wired(processor, request=1)
    assert upstream.requested == 5
    rec.request(10)
    assert upstream.requested == 10  # buffer_size=2 batches at most


def test_processor_chain_end_to_end() -> None:
    doubled = MapProcessor[int, int](lambda x: x * 2)
    evens = FilterProcessor[int](lambda x: x % 4 == 0)
    batches = BatchProcessor[int](2)
    range_publisher(0, 10).subscribe(doubled)
    doubled.subscribe(evens)
    evens.subscribe(batches)
    sink: CollectingSubscriber[list[int]] = CollectingSubscriber(prefetch=1)
    batches.subscribe(sink)
    assert sink.items == [[0, 4], [8, 12], [16]]
    assert sink.completed


def test_processor_with_concurrent_downstream_requests_delivers_everything_in_order() -> None:
    processor = MapProcessor[int, int](lambda x: x, buffer_size=3)
    range_publisher(0, 2000).subscribe(processor)
    done = threading.Event()

    class Sub(Recorder):
        def on_complete(self) -> None:
            super().on_complete()
            done.set()

    rec = Sub()
    processor.subscribe(rec)

    def request_many() -> None:
        for _ in range(500):
            rec.request(1)

    threads = [threading.Thread(target=request_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert done.wait(10)
    assert rec.items == list(range(2000))


def test_processor_validates_arguments() -> None:
    with pytest.raises(ValueError):
        MapProcessor(str, buffer_size=0)
    with pytest.raises(ValueError):
        BatchProcessor(0)


def test_processor_base_needs_transform() -> None:
    processor: ProcessorBase[int, int] = ProcessorBase()
    _upstream, rec = _wired(processor, request=1)
    processor.on_next(1)
    assert isinstance(rec.error, NotImplementedError)


# -- CollectingSubscriber ---------------------------------------------------------------


def test_collecting_subscriber_collects_and_completes() -> None:
    finished: list[CollectingSubscriber[int]] = []
    sink: CollectingSubscriber[int] = CollectingSubscriber(on_done=finished.append)
    from_iterable([1, 2, 3]).subscribe(sink)
    assert sink.items == [1, 2, 3] and sink.completed and sink.done
    assert finished == [sink]


def test_rs_2_1_collecting_subscriber_replenishes_demand_in_batches() -> None:
    upstream = ManualUpstream()
    sink: CollectingSubscriber[int] = CollectingSubscriber(prefetch=4)
    sink.on_subscribe(upstream)
    assert upstream.requests == [4]
    sink.on_next(1)
    sink.on_next(2)
    assert upstream.requests == [4, 2]


def test_rs_2_5_collecting_subscriber_cancels_a_second_subscription() -> None:
    first, second = ManualUpstream(), ManualUpstream()
    sink: CollectingSubscriber[int] = CollectingSubscriber()
    sink.on_subscribe(first)
    sink.on_subscribe(second)
    assert (first.cancelled, second.cancelled) == (0, 1)
    assert second.requests == []


def test_rs_2_3_collecting_subscriber_leaves_subscription_alone_in_terminal_signals() -> None:
    upstream = ManualUpstream()
    sink: CollectingSubscriber[int] = CollectingSubscriber(prefetch=2)
    sink.on_subscribe(upstream)
    sink.on_error(RuntimeError("x"))
    sink.cancel()  # rule 2.4: the subscription counts as cancelled already
    assert upstream.requests == [2] and upstream.cancelled == 0
    assert isinstance(sink.error, RuntimeError)


def test_rs_2_8_collecting_subscriber_ignores_elements_after_cancel() -> None:
    upstream = ManualUpstream()
    sink: CollectingSubscriber[int] = CollectingSubscriber(prefetch=4)
    sink.on_subscribe(upstream)
    sink.cancel()
    sink.on_next(1)
    assert sink.items == [] and upstream.cancelled == 1


@pytest.mark.parametrize("method", ["on_subscribe", "on_next", "on_error"])
def test_rs_2_13_collecting_subscriber_rejects_none(method: str) -> None:
    sink: CollectingSubscriber[int] = CollectingSubscriber()
    sink.on_subscribe(ManualUpstream())
    with pytest.raises(TypeError, match=r"2\.13"):
        getattr(sink, method)(None)


def test_collecting_subscriber_validates_prefetch() -> None:
    with pytest.raises(ValueError):
        CollectingSubscriber(prefetch=0)


def test_collecting_subscriber_unbounded_requests_max_demand_once() -> None:
    upstream = ManualUpstream()
    sink: CollectingSubscriber[int] = CollectingSubscriber()
    sink.on_subscribe(upstream)
    for i in range(10):
        sink.on_next(i)
    assert upstream.requests == [MAX_DEMAND]


# -- Mailbox ------------------------------------------------------------------------------


def test_mailbox_runs_reentrant_posts_after_the_current_message() -> None:
    order: list[str] = []
    box: Mailbox[str] = Mailbox(lambda: _drain(box, order))

    def _drain(b: Mailbox[str], out: list[str]) -> None:
        while b.items:
            message = b.items.popleft()
            out.append(f"start {message}")
            if message == "a":
                b.post("b")  # re-entrant: queued, not run recursively
            out.append(f"end {message}")

    box.post("a")
    assert order == ["start a", "end a", "start b", "end b"]
    assert not box.draining()


def test_mailbox_never_drains_concurrently_and_loses_no_message() -> None:
    seen: list[int] = []
    active = [0]
    overlaps = [0]

    def drain() -> None:
        active[0] += 1
        if active[0] > 1:
            overlaps[0] += 1
        while box.items:
            seen.append(box.items.popleft())
        active[0] -= 1

    box: Mailbox[int] = Mailbox(drain)
    barrier = threading.Barrier(4)

    def produce(base: int) -> None:
        barrier.wait(5)
        for i in range(2000):
            box.post(base + i)

    threads = [threading.Thread(target=produce, args=(k * 10_000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert overlaps[0] == 0
    assert sorted(seen) == sorted(k * 10_000 + i for k in range(4) for i in range(2000))


def test_mailbox_restores_the_token_when_the_drain_raises() -> None:
    calls = [0]

    def drain() -> None:
        calls[0] += 1
        box.items.clear()
        if calls[0] == 1:
            raise RuntimeError("boom")

    box: Mailbox[int] = Mailbox(drain)
    with pytest.raises(RuntimeError):
        box.post(1)
    box.post(2)
    assert calls[0] == 2


def _transform_signature_is_iterable(p: ProcessorBase[int, int]) -> Iterable[int]:
    return p.flush()


def test_default_flush_and_pending_inputs() -> None:
    processor = MapProcessor[int, int](lambda x: x)
    assert list(_transform_signature_is_iterable(processor)) == []
    assert processor.pending_inputs() == 0
    assert "buffer_size=16" in repr(processor)
    assert isinstance(ManualUpstream(), Subscription)


def test_rs_3_16_upstream_request_that_raises_fails_the_stream_not_the_caller() -> None:
    class Raising(ManualUpstream):
        def request(self, n: int) -> None:
            raise RuntimeError("upstream broke rule 3.16")

    processor = MapProcessor[int, int](lambda x: x)
    processor.on_subscribe(Raising())
    rec = Recorder()
    processor.subscribe(rec)
    rec.request(1)  # returns normally
    assert isinstance(rec.error, RuntimeError)


def test_rs_3_15_upstream_cancel_that_raises_is_reported_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    class Raising(ManualUpstream):
        def cancel(self) -> None:
            raise RuntimeError("upstream broke rule 3.15")

    processor = MapProcessor[int, int](lambda x: x)
    processor.on_subscribe(Raising())
    rec = Recorder()
    processor.subscribe(rec)
    rec.cancel()  # returns normally
    processor.on_subscribe(Raising())  # rule 2.5 cancel of a second subscription, also raising
    assert caplog.text.count("cleaning up") == 2


def test_rs_2_13_operator_producing_none_fails_the_stream() -> None:
    processor = MapProcessor[int, object](lambda x: None)
    upstream, rec = _wired(processor, request=1)
    processor.on_next(1)
    assert rec.items == [] and isinstance(rec.error, TypeError)
    assert upstream.cancelled == 1
