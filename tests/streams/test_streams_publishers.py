"""Rules of sections 1 and 3 as kept by the ready-made Publishers."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs.streams import (
    MAX_DEMAND,
    RULE_3_9,
    IllegalArgumentError,
    Publisher,
    Subscriber,
    Subscription,
    add_demand,
    empty_publisher,
    error_publisher,
    from_generator,
    from_iterable,
    range_publisher,
    set_subscriber_error_hook,
)
from tests.streams.streams_recording import Recorder


class CountingSource:
    """An iterator that counts how often it was pulled and whether it was closed."""

    def __init__(self, count: int | None = None) -> None:
        self.pulled = 0
        self.closed = 0
        self.count = count

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if self.count is not None and self.pulled >= self.count:
            raise StopIteration
        self.pulled += 1
        return self.pulled

    def close(self) -> None:
        self.closed += 1


def test_protocols_are_runtime_checkable() -> None:
    rec = Recorder()
    publisher = range_publisher(0, 1)
    assert isinstance(publisher, Publisher)
    assert isinstance(rec, Subscriber)
    publisher.subscribe(rec)
    assert isinstance(rec.subscription, Subscription)


def test_rs_1_1_never_more_on_next_than_requested() -> None:
    rec = Recorder()
    range_publisher(0, 10).subscribe(rec)
    assert rec.items == []
    rec.request(3)
    assert rec.items == [0, 1, 2]
    rec.request(2)
    assert rec.items == [0, 1, 2, 3, 4]


@settings(max_examples=60, deadline=None)
@given(requests=st.lists(st.integers(min_value=1, max_value=7), max_size=12),
       size=st.integers(min_value=0, max_value=30))
def test_rs_1_1_and_1_5_delivered_is_min_of_requested_and_available(
        requests: list[int], size: int) -> None:
    rec = Recorder()
    from_generator(lambda: iter(range(size))).subscribe(rec)
    total = 0
    for n in requests:
        rec.request(n)
        total += n
        assert rec.items == list(range(min(total, size)))
    # a generator is looked one item ahead once the demand is used up, so
    # its end is seen right behind its last item: requesting exactly all completes
    assert rec.kinds.count("complete") == (1 if total >= size and total > 0 else 0)


def test_rs_1_2_may_signal_less_than_requested_then_complete() -> None:
    rec = Recorder(request_on_subscribe=10)
    range_publisher(0, 3).subscribe(rec)
    assert rec.kinds == ["subscribe", "next", "next", "next", "complete"]


def test_rs_1_3_signals_are_serialized_under_concurrent_requests() -> None:
    inside = [0]
    overlaps = []
    done = threading.Event()

    class Sub(Recorder):
        def on_next(self, item: object) -> None:
            inside[0] += 1
            if inside[0] != 1:
                overlaps.append(item)
            threading.Event().wait(0.00005)  # widen the window for an overlap
            super().on_next(item)
            inside[0] -= 1

        def on_complete(self) -> None:
            super().on_complete()
            done.set()

    rec = Sub()
    range_publisher(0, 400).subscribe(rec)
    def request_many() -> None:
        for _ in range(100):
            rec.request(1)

    threads = [threading.Thread(target=request_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert done.wait(10)
    assert overlaps == []
    assert rec.items == list(range(400))
    assert rec.kinds[-1] == "complete"


def test_rs_1_4_a_failing_source_signals_on_error() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise OSError("disk on fire")

    rec = Recorder(request_on_subscribe=5)
    from_generator(failing).subscribe(rec)
    assert rec.items == [1]
    assert isinstance(rec.error, OSError)


def test_rs_1_5_sized_source_completes_without_further_demand() -> None:
    rec = Recorder(request_on_subscribe=3)
    from_iterable([1, 2, 3]).subscribe(rec)
    assert rec.kinds == ["subscribe", "next", "next", "next", "complete"]


def test_rs_1_5_empty_publisher_completes_without_demand() -> None:
    rec = Recorder()
    empty_publisher().subscribe(rec)
    assert rec.kinds == ["subscribe", "complete"]


def test_rs_1_6_and_1_7_nothing_after_on_complete() -> None:
    source = CountingSource(count=1)
    rec = Recorder(request_on_subscribe=5)
    from_generator(lambda: source).subscribe(rec)
    assert rec.kinds == ["subscribe", "next", "complete"]
    rec.request(5)
    rec.request(0)  # would be a 3.9 error if the subscription were still live
    rec.cancel()
    assert rec.kinds == ["subscribe", "next", "complete"]


def test_rs_1_7_nothing_after_on_error() -> None:
    rec = Recorder()
    error_publisher(RuntimeError("x")).subscribe(rec)
    rec.request(1)
    rec.request(-1)
    assert rec.kinds == ["subscribe", "error"]


def test_rs_1_8_and_3_12_cancel_stops_signals_even_from_inside_on_next() -> None:
    def cancel_at_two(rec: Recorder, item: int) -> None:
        if item == 2:
            rec.cancel()

    rec = Recorder(request_on_subscribe=100, on_next_hook=cancel_at_two)
    range_publisher(0).subscribe(rec)
    assert rec.items == [0, 1, 2]


def test_rs_1_9_subscribe_none_raises_type_error() -> None:
    for publisher in (range_publisher(0, 1), empty_publisher(), error_publisher(ValueError())):
        with pytest.raises(TypeError, match=r"1\.9"):
            publisher.subscribe(None)  # type: ignore[arg-type]


def test_rs_1_9_on_subscribe_comes_first_and_failures_go_through_on_error() -> None:
    def broken_factory() -> list[int]:
        raise LookupError("no data")

    rec = Recorder()
    from_generator(broken_factory).subscribe(rec)
    assert rec.kinds == ["subscribe", "error"]
    assert isinstance(rec.error, LookupError)


def test_rs_1_9_failed_publisher_signals_on_subscribe_then_on_error() -> None:
    error = RuntimeError("down")
    rec = Recorder()
    error_publisher(error).subscribe(rec)
    assert rec.events == [("subscribe", None), ("error", error)]


def test_rs_1_11_reiterable_source_serves_each_subscriber_from_the_start() -> None:
    publisher = from_iterable([1, 2, 3])
    first, second = Recorder(request_on_subscribe=2), Recorder(request_on_subscribe=5)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.items == [1, 2]
    assert second.items == [1, 2, 3]


def test_rs_1_11_one_shot_iterator_rejects_a_second_subscriber_via_on_error() -> None:
    publisher = from_iterable(iter([1, 2]))
    first, second = Recorder(request_on_subscribe=5), Recorder(request_on_subscribe=5)
    publisher.subscribe(first)
    publisher.subscribe(second)
    assert first.items == [1, 2]
    assert second.kinds == ["subscribe", "error"]
    assert "rule 1.11" in str(second.error)


def test_rs_3_2_request_from_on_subscribe_and_on_next() -> None:
    rec = Recorder(request_on_subscribe=1, on_next_hook=lambda r, item: r.request(1))
    range_publisher(0, 5).subscribe(rec)
    assert rec.items == [0, 1, 2, 3, 4]
    assert rec.kinds[-1] == "complete"


def test_rs_3_3_recursion_between_request_and_on_next_is_bounded() -> None:
    depth = [0]
    max_depth = [0]
    received = [0]

    class Sub(Recorder):
        def on_next(self, item: object) -> None:
            depth[0] += 1
            max_depth[0] = max(max_depth[0], depth[0])
            received[0] += 1
            if received[0] < 5000:
                self.request(1)
            depth[0] -= 1

    rec = Sub(request_on_subscribe=1)
    range_publisher(0).subscribe(rec)
    assert received[0] == 5000  # far deeper than the stack would allow with recursion
    assert max_depth[0] == 1


def test_rs_3_5_cancel_is_idempotent_and_thread_safe() -> None:
    source = CountingSource()
    rec = Recorder(request_on_subscribe=1)
    from_generator(lambda: source).subscribe(rec)
    barrier = threading.Barrier(4)

    def cancel_many() -> None:
        barrier.wait(5)
        for _ in range(50):
            rec.cancel()

    threads = [threading.Thread(target=cancel_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert source.closed == 1
    assert rec.kinds == ["subscribe", "next"]


def test_rs_3_6_request_after_cancel_is_a_no_op() -> None:
    source = CountingSource()
    rec = Recorder(request_on_subscribe=2)
    from_generator(lambda: source).subscribe(rec)
    rec.cancel()
    rec.request(10)
    rec.request(0)
    assert source.pulled == 3  # the 2 requested and the one looked ahead, none after
    assert rec.kinds == ["subscribe", "next", "next"]


def test_rs_3_7_cancel_after_cancel_is_a_no_op() -> None:
    source = CountingSource()
    rec = Recorder()
    from_generator(lambda: source).subscribe(rec)
    rec.cancel()
    rec.cancel()
    assert source.closed == 1


def test_rs_3_8_request_registers_demand() -> None:
    source = CountingSource()
    rec = Recorder()
    from_generator(lambda: source).subscribe(rec)
    assert source.pulled == 0  # pulled only on demand
    rec.request(4)
    assert source.pulled == 5  # and one ahead once it is used up: was the 4th the last?
    assert rec.kinds == ["subscribe"] + ["next"] * 4


@pytest.mark.parametrize("n", [0, -1, -(2**63)])
def test_rs_3_9_non_positive_request_signals_on_error_citing_the_rule(n: int) -> None:
    source = CountingSource()
    rec = Recorder()
    from_generator(lambda: source).subscribe(rec)
    rec.request(n)
    assert rec.kinds == ["subscribe", "error"]
    assert isinstance(rec.error, IllegalArgumentError)
    assert isinstance(rec.error, ValueError)
    assert "Rule 3.9" in str(rec.error) and RULE_3_9 in str(rec.error)
    assert source.closed == 1  # the failed subscription released its source


def test_request_with_a_non_integer_raises_type_error() -> None:
    rec = Recorder()
    range_publisher(0, 3).subscribe(rec)
    for bad in (None, 1.5, "1", True):
        with pytest.raises(TypeError):
            rec.request(bad)  # type: ignore[arg-type]


def test_rs_3_11_request_may_call_on_complete_synchronously() -> None:
    rec = Recorder()
    from_generator(lambda: iter([7])).subscribe(rec)
    rec.request(2)
    assert rec.kinds == ["subscribe", "next", "complete"]  # before request returned


def test_rs_3_10_request_may_call_on_next_synchronously() -> None:
    rec = Recorder()
    range_publisher(0, 3).subscribe(rec)
    rec.request(1)
    assert rec.items == [0]  # delivered before request returned


def test_rs_3_13_cancel_drops_the_reference_to_the_subscriber() -> None:
    publisher = range_publisher(0)
    rec = Recorder(request_on_subscribe=1)
    publisher.subscribe(rec)
    subscription = rec.subscription
    ref = weakref.ref(rec)
    rec.cancel()
    del rec
    gc.collect()
    assert ref() is None
    assert subscription is not None


def test_generator_is_closed_on_cancel_so_its_finally_runs() -> None:
    cleaned = []

    def numbers() -> Iterator[int]:
        try:
            yield from range(100)
        finally:
            cleaned.append(True)

    rec = Recorder(request_on_subscribe=2)
    from_generator(numbers).subscribe(rec)
    rec.cancel()
    assert cleaned == [True]


def test_rs_2_13_raising_subscriber_cancels_its_subscription_and_is_reported() -> None:
    reported: list[tuple[BaseException, object]] = []
    source = CountingSource()

    class Raising(Recorder):
        def on_next(self, item: object) -> None:
            raise KeyError("bug in subscriber")

    set_subscriber_error_hook(lambda error, sub: reported.append((error, sub)))
    try:
        rec = Raising()
        from_generator(lambda: source).subscribe(rec)
        rec.request(5)  # rule 3.16: returns normally
        rec.request(5)
    finally:
        set_subscriber_error_hook(None)
    assert source.pulled == 1 and source.closed == 1
    assert len(reported) == 1 and isinstance(reported[0][0], KeyError)
    assert reported[0][1] is rec


def test_rs_2_13_default_hook_logs(caplog: pytest.LogCaptureFixture) -> None:
    class Raising(Recorder):
        def on_subscribe(self, subscription: Subscription) -> None:
            raise KeyError("bug")

    range_publisher(0, 1).subscribe(Raising())
    assert "rule 2.13" in caplog.text


def test_rs_3_17_demand_saturates_at_2_63_minus_1() -> None:
    assert add_demand(MAX_DEMAND - 1, 1) == MAX_DEMAND
    assert add_demand(MAX_DEMAND, MAX_DEMAND) == MAX_DEMAND
    assert add_demand(5, 6) == 11


def test_rs_3_17_demand_above_long_max_does_not_signal_on_error() -> None:
    def more(rec: Recorder, item: int) -> None:
        if item < 10:
            rec.request(MAX_DEMAND - 1)
        else:
            rec.cancel()

    rec = Recorder(request_on_subscribe=1, on_next_hook=more)
    range_publisher(0).subscribe(rec)
    assert rec.items == list(range(11))
    assert rec.error is None


def test_rs_3_17_cumulative_demand_up_to_long_max() -> None:
    rec = Recorder()
    range_publisher(0, 3).subscribe(rec)
    rec.request(MAX_DEMAND // 2)
    rec.request(MAX_DEMAND // 2)
    rec.request(1)
    assert rec.kinds == ["subscribe", "next", "next", "next", "complete"]


def test_range_publisher_validates_count() -> None:
    with pytest.raises(ValueError):
        range_publisher(0, -1)


def test_none_element_from_the_source_fails_the_stream() -> None:
    rec = Recorder(request_on_subscribe=3)
    from_iterable([1, None, 3]).subscribe(rec)
    assert rec.items == [1]
    assert isinstance(rec.error, TypeError)


def test_generator_whose_cleanup_raises_is_reported_and_cancel_returns_normally(
        caplog: pytest.LogCaptureFixture) -> None:
    def numbers() -> Iterator[int]:
        try:
            yield from range(10)
        finally:
            raise OSError("cleanup failed")

    rec = Recorder(request_on_subscribe=1)
    from_generator(numbers).subscribe(rec)
    rec.cancel()
    assert "cleaning up" in caplog.text


def test_rs_1_8_cancel_inside_on_subscribe_suppresses_the_terminal_signal() -> None:
    class CancelAtOnce(Recorder):
        def on_subscribe(self, subscription: Subscription) -> None:
            super().on_subscribe(subscription)
            subscription.cancel()

    for publisher in (empty_publisher(), error_publisher(RuntimeError("x")), range_publisher(0)):
        rec = CancelAtOnce()
        publisher.subscribe(rec)
        rec.request(5)
        assert rec.kinds == ["subscribe"]
