"""Protocol-agnostic session pieces: prefetch iterators and credit-bound outbound."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.drive.streams import (
    IteratorSource,
    Outbound,
    PublisherSource,
    StreamIterator,
    ThreadedSource,
    make_source,
)


class Recorder:
    def __init__(self) -> None:
        self.requested: list[int] = []
        self.cancelled = 0

    def request(self, n: int) -> None:
        self.requested.append(n)

    def cancel(self) -> None:
        self.cancelled += 1


def _iterator(prefetch: int) -> tuple[CreditQueue[int], StreamIterator[int], Recorder]:
    q: CreditQueue[int] = CreditQueue(granted=prefetch)
    rec = Recorder()
    return q, StreamIterator(q, prefetch, rec.request, rec.cancel, timeout=1.0), rec


def test_iterator_replenishes_half_the_window_as_items_are_consumed() -> None:
    q, it, rec = _iterator(4)
    for i in range(4):
        q.put(i)
    assert next(it) == 0 and rec.requested == []
    assert next(it) == 1 and rec.requested == [2]
    assert q.granted == 6
    q.put(4)
    q.put(5)
    q.finish()
    assert list(it) == [2, 3, 4, 5]
    assert rec.cancelled == 0


def test_iterator_does_not_ask_for_more_after_the_stream_ended() -> None:
    q, it, rec = _iterator(2)
    q.put(0)
    q.finish()
    assert list(it) == [0]
    assert rec.requested == []
    it.close()
    assert rec.cancelled == 0


def test_closing_a_running_iterator_cancels_once() -> None:
    q, it, rec = _iterator(8)
    q.put(1)
    with it:
        assert next(it) == 1
    it.close()
    assert rec.cancelled == 1
    assert q.closed
    with pytest.raises(StopIteration):
        next(it)


def test_iterator_timeout_leaves_the_stream_usable() -> None:
    q, it, _ = _iterator(2)
    it._timeout = 0.01
    with pytest.raises(TimeoutError):
        next(it)
    q.put(7)
    assert next(it) == 7


def test_iterator_raises_the_stream_error_after_items() -> None:
    q, it, _ = _iterator(2)
    q.put(1)
    q.finish(RuntimeError("remote failed"))
    assert next(it) == 1
    with pytest.raises(RuntimeError, match="remote failed"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_iterator_rejects_non_positive_prefetch() -> None:
    with pytest.raises(ValueError):
        StreamIterator(CreditQueue[int](), 0, lambda n: None, lambda: None)


class Sink:
    def __init__(self) -> None:
        self.items: list[tuple[Any, bool]] = []
        self.completed = 0
        self.errors: list[BaseException] = []

    def emit(self, item: Any, last: bool) -> None:
        self.items.append((item, last))

    def complete(self) -> None:
        self.completed += 1

    def fail(self, exc: BaseException) -> None:
        self.errors.append(exc)

    def outbound(self, source: Any, credit: int = 0) -> Outbound[Any]:
        return Outbound(source, self.emit, self.complete, self.fail, credit)


def test_outbound_sends_only_within_credit_and_marks_the_last() -> None:
    pulled: list[int] = []

    def gen() -> Iterator[int]:
        for i in range(5):
            pulled.append(i)
            yield i

    sink = Sink()
    out = sink.outbound(IteratorSource(gen()), credit=2)
    assert out.pump(100) is False
    assert sink.items == [(0, False), (1, False)]
    assert len(pulled) == 3  # one read ahead, never sent
    out.add_credit(10)
    assert out.pump(100) is False
    assert sink.items[-1] == (4, True)
    assert out.finished and sink.completed == 0


def test_outbound_budget_limits_one_pump_and_reports_more() -> None:
    sink = Sink()
    out = sink.outbound(IteratorSource(range(10)), credit=10)
    assert out.pump(3) is True
    assert [i for i, _ in sink.items] == [0, 1, 2]


def test_outbound_exhausted_exactly_at_credit_sends_bare_complete() -> None:
    sink = Sink()

    class Opaque:
        """An iterator that only learns it is done when asked again."""

        def __init__(self) -> None:
            self.left = 2

        def __iter__(self) -> Opaque:
            return self

        def __next__(self) -> int:
            if self.left == 0:
                raise StopIteration
            self.left -= 1
            return self.left

    out = sink.outbound(IteratorSource(Opaque()), credit=2)
    out.pump(10)
    assert [last for _, last in sink.items] == [False, True]
    empty = sink.outbound(IteratorSource(()), credit=1)
    empty.pump(10)
    assert sink.completed == 1 and empty.finished


def test_outbound_turns_a_source_exception_into_fail() -> None:
    def gen() -> Iterator[int]:
        yield 1
        raise ValueError("handler broke")

    sink = Sink()
    out = sink.outbound(IteratorSource(gen()), credit=5)
    assert out.pump(10) is False
    assert len(sink.errors) == 1 and str(sink.errors[0]) == "handler broke"
    assert out.finished


def test_outbound_cancel_closes_the_generator() -> None:
    closed = threading.Event()

    def gen() -> Iterator[int]:
        try:
            yield from range(100)
        finally:
            closed.set()

    sink = Sink()
    out = sink.outbound(IteratorSource(gen()), credit=1)
    out.pump(10)
    out.cancel()
    assert closed.is_set()
    assert out.pump(10) is False


def test_ten_million_item_generator_is_pulled_lazily() -> None:
    sink = Sink()
    out = sink.outbound(IteratorSource(iter(range(10_000_000))), credit=3)
    out.pump(1_000_000)
    assert len(sink.items) == 3


class ListPublisher:
    """A minimal publisher signalling synchronously on request."""

    def __init__(self, items: list[int]) -> None:
        self.items = items
        self.cancelled = False

    def subscribe(self, subscriber: Any) -> None:
        publisher = self

        class Sub:
            def request(self, n: int) -> None:
                for _ in range(n):
                    if not publisher.items:
                        break
                    subscriber.on_next(publisher.items.pop(0))
                if not publisher.items:
                    subscriber.on_complete()

            def cancel(self) -> None:
                publisher.cancelled = True

        subscriber.on_subscribe(Sub())


def test_publisher_source_requests_exactly_the_credit() -> None:
    notified: list[int] = []
    pub = ListPublisher([1, 2, 3])
    source = make_source(pub, is_single=lambda r: False, notify=lambda: notified.append(1))
    assert isinstance(source, PublisherSource)
    sink = Sink()
    out = sink.outbound(source, credit=2)
    assert not notified and pub.items == [1, 2, 3]  # asked only once pulled
    assert out.pump(10) is False
    assert notified  # on_next woke the loop
    assert [i for i, _ in sink.items] == [1, 2]
    out.add_credit(5)
    out.pump(10)
    assert [i for i, _ in sink.items] == [1, 2, 3]
    assert out.finished


def test_publisher_source_cancel_cancels_the_subscription() -> None:
    pub = ListPublisher([1, 2, 3])
    source = make_source(pub, is_single=lambda r: False, notify=lambda: None)
    out = Sink().outbound(source, credit=1)
    out.cancel()
    assert pub.cancelled


def test_publisher_source_rejects_null_signals() -> None:
    source: PublisherSource[int] = PublisherSource(ListPublisher([]), lambda: None)
    with pytest.raises(TypeError):
        source.on_next(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        source.on_error(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        source.on_subscribe(None)


def test_make_source_shapes() -> None:
    def single(r: object) -> bool:
        return isinstance(r, bytes)

    def drain(src: Any) -> list[Any]:
        sink = Sink()
        out = sink.outbound(src, credit=100)
        out.pump(100)
        return [i for i, _ in sink.items]

    assert drain(make_source(b"one", is_single=single, notify=lambda: None)) == [b"one"]
    assert drain(make_source([1, 2], is_single=single, notify=lambda: None)) == [1, 2]
    assert drain(make_source(None, is_single=single, notify=lambda: None)) == []
    with pytest.raises(TypeError, match="iterable"):
        make_source(42, is_single=single, notify=lambda: None)


def test_threaded_source_pulls_only_within_demand_off_the_caller_thread() -> None:
    pulled: list[str] = []
    notified = threading.Event()

    def gen() -> Iterator[int]:
        for i in range(100):
            pulled.append(threading.current_thread().name)
            yield i

    source = make_source(gen(), is_single=lambda r: False, notify=notified.set, threaded="w")
    sink = Sink()
    out = sink.outbound(source, credit=3)
    got: list[int] = []
    while True:
        out.pump(100)  # asks the worker for what the credit allows
        got = [i for i, _ in sink.items]
        if len(got) == 3:
            break
        assert notified.wait(5)
        notified.clear()
    assert got == [0, 1, 2]
    out.cancel()
    assert isinstance(source, ThreadedSource) and source.join(5)
    # Nothing taken beyond the credit but the one item looked ahead once it
    # is used up (to complete right behind the last item, were it the last).
    assert set(pulled) == {"w"} and len(pulled) in (3, 4)


def test_threaded_source_completes_right_behind_exactly_the_credit() -> None:
    """An iterable of exactly N items under a credit of N completes without
    more credit: the worker looks one item ahead once the credit is used up."""
    notified = threading.Event()
    source = make_source(iter([1, 2]), is_single=lambda r: False, notify=notified.set,
                         threaded="w")
    sink = Sink()
    out = sink.outbound(source, credit=2)
    while True:
        out.pump(100)  # never more credit than the 2
        if out.finished:
            break
        assert notified.wait(5)
        notified.clear()
    # The last item carries the completion (or a bare one follows it).
    assert sink.items[-1] == (2, True) or sink.completed
    assert [i for i, _ in sink.items] == [1, 2] and not sink.errors
    assert isinstance(source, ThreadedSource) and source.join(5)


def test_threaded_source_forwards_errors_and_completion() -> None:
    def gen() -> Iterator[int]:
        yield 1
        raise KeyError("bad")

    woke = threading.Event()
    source = ThreadedSource(gen(), woke.set, "w2")
    sink = Sink()
    out = sink.outbound(source, credit=10)
    out.pump(10)
    while not out.finished:
        assert woke.wait(5)
        woke.clear()
        out.pump(10)
    assert [i for i, _ in sink.items] == [1]
    assert len(sink.errors) == 1 and isinstance(sink.errors[0], KeyError)


class BatchSink(Sink):
    """A sink that also takes batches (``emit_many``); ``room`` items at most
    before it says the transport is behind (it then takes a part)."""

    def __init__(self, room: int = 1 << 30) -> None:
        super().__init__()
        self.room = room
        self.batches: list[int] = []

    def emit_many(self, items: list[Any]) -> int:
        n = min(len(items), self.room)
        self.room -= n
        self.batches.append(n)
        self.items.extend((item, False) for item in items[:n])
        return n

    def outbound(self, source: Any, credit: int = 0) -> Outbound[Any]:
        return Outbound(source, self.emit, self.complete, self.fail, credit, None, self.emit_many)


def test_outbound_batches_send_within_credit_and_mark_the_last() -> None:
    pulled: list[int] = []

    def gen() -> Iterator[int]:
        for i in range(50):
            pulled.append(i)
            yield i

    sink = BatchSink()
    out = sink.outbound(IteratorSource(gen()), credit=20)
    assert out.pump(100) is False
    assert [i for i, _ in sink.items] == list(range(20))
    assert len(pulled) == 21  # one read ahead of the credit, never sent early
    out.add_credit(100)
    assert out.pump(100) is False
    assert [i for i, _ in sink.items] == list(range(50))
    assert sink.items[-1] == (49, True) and out.finished and sink.completed == 0
    assert max(sink.batches) > 1  # batches, not one call per item


def test_outbound_batches_resume_where_the_transport_stopped() -> None:
    sink = BatchSink(room=7)
    out = sink.outbound(IteratorSource(range(30)), credit=30)
    assert out.pump(100) is True  # behind: more to send on a later turn
    assert [i for i, _ in sink.items] == list(range(7))
    sink.room = 1 << 30
    assert out.pump(100) is False
    assert [i for i, _ in sink.items] == list(range(30))  # nothing lost, nothing twice
    assert sink.items[-1][1] is True


def test_outbound_batches_send_what_came_before_a_failing_pull() -> None:
    def gen() -> Iterator[int]:
        yield from range(5)
        raise ValueError("handler broke")

    sink = BatchSink()
    out = sink.outbound(IteratorSource(gen()), credit=100)
    assert out.pump(100) is False
    assert [i for i, _ in sink.items] == list(range(5))
    assert len(sink.errors) == 1 and str(sink.errors[0]) == "handler broke"


def test_outbound_batches_of_large_items_stay_small() -> None:
    pulled = 0

    def gen() -> Iterator[bytes]:
        nonlocal pulled
        for _ in range(100):
            pulled += 1
            yield b"x" * 100_000

    sink = BatchSink(room=3)
    out = sink.outbound(IteratorSource(gen()), credit=100)
    out.pump(100)  # the transport takes 3, then is behind
    assert len(sink.items) == 3
    assert pulled <= 6  # a batch is about 128 KiB beyond what the transport took


def test_outbound_batches_empty_source_sends_a_bare_complete() -> None:
    sink = BatchSink()
    out = sink.outbound(IteratorSource(()), credit=5)
    assert out.pump(10) is False
    assert sink.completed == 1 and not sink.items and out.finished


def test_iterator_closed_inside_a_for_loop_ends_the_loop() -> None:
    q, it, rec = _iterator(8)
    for i in range(6):
        q.put(i)
    seen = []
    for item in it:  # the loop takes the six as one local batch
        seen.append(item)
        if item == 1:
            it.close()
    assert seen == [0, 1]
    assert rec.cancelled == 1


def test_iterator_loop_left_by_break_loses_no_item() -> None:
    q, it, rec = _iterator(8)
    for i in range(6):
        q.put(i)
    q.finish()
    for item in it:
        if item == 2:
            break
    assert next(it) == 3
    assert it.next_batch() == [4, 5]
    assert list(it) == []
    assert rec.cancelled == 0


def test_iterator_loop_counts_items_once_with_next_and_batches_mixed() -> None:
    q, it, rec = _iterator(8)
    for i in range(8):
        q.put(i)
    assert next(it) == 0  # counted at once
    for item in it:
        if item == 3:
            break
    assert it.next_batch() == [4, 5, 6, 7]  # the rest of the local batch
    # Eight handed out: the window is granted back in half-windows, no more.
    assert sum(rec.requested) == 8 and q.granted == 16


class Made:
    """A ``make`` that tags each entry as it is iterated, and counts them."""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self, entries: Iterator[int]) -> Iterator[str]:
        return map(self._tag, entries)

    def _tag(self, entry: int) -> str:
        self.made += 1
        return f"<{entry}>"


def test_iterator_closed_inside_a_for_loop_makes_nothing_of_what_is_left() -> None:
    q: CreditQueue[int] = CreditQueue(granted=8)
    rec, made = Recorder(), Made()
    it = StreamIterator(q, 8, rec.request, rec.cancel, timeout=1.0, make=made)
    for i in range(6):
        q.put(i)
    seen = []
    for item in it:  # the loop takes the six as one local batch
        seen.append(item)
        if item == "<1>":
            it.close()
    assert seen == ["<0>", "<1>"] and made.made == 2
    assert rec.cancelled == 1


#: What a consumer does next: ("next",), ("loop", k) (a for loop left by
#: break after k items), ("batch",) (next_batch), ("entries",) (next_entries).
_STEP = st.one_of(
    st.just(("next",)),
    st.tuples(st.just("loop"), st.integers(1, 9)),
    st.just(("batch",)),
    st.just(("entries",)),
)


def _consume(it: StreamIterator[Any], steps: list[tuple[Any, ...]]) -> list[list[Any]]:
    """What each step handed out (a step at the end hands out nothing)."""
    out: list[list[Any]] = []
    for step in steps:
        try:
            if step[0] == "next":
                out.append([next(it)])
            elif step[0] == "loop":
                got = []
                for x in it:
                    got.append(x)
                    if len(got) == step[1]:
                        break
                out.append(got)
            elif step[0] == "batch":
                out.append(it.next_batch())
            else:
                out.append(it.next_entries())
        except StopIteration:
            out.append([])
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 7), min_size=1, max_size=8),
    st.lists(_STEP, max_size=14),
    st.integers(1, 16),
)
def test_iterator_with_make_hands_out_the_same_items_and_grants_as_without(
    runs: list[int], steps: list[tuple[Any, ...]], prefetch: int
) -> None:
    # Differential: entries made items by ``make`` as they are handed out
    # (a protocol's payloads kept as bytes) against the plain iterator: the
    # same items in the same order, the same grants, from any mix of calls.
    results = []
    for make in (None, Made()):
        q: CreditQueue[int] = CreditQueue(granted=prefetch)
        rec = Recorder()
        it: StreamIterator[Any] = StreamIterator(
            q, prefetch, rec.request, rec.cancel, timeout=0.0, make=make
        )
        n = 0
        for size in runs:  # within the window: what the peer may send
            room = q.granted - n
            for _ in range(min(size, room)):
                q.put(n)
                n += 1
        q.finish()
        out = _consume(it, steps)
        if make is not None:  # next_entries hands out what the queue held
            out = [[x if s[0] == "entries" else int(x[1:-1]) for x in part]
                   for s, part in zip(steps, out, strict=True)]
            assert make.made <= n
        results.append((out, rec.requested, q.granted))
    assert results[0] == results[1]


def test_iterator_loop_left_by_break_keeps_a_generator_make_running() -> None:
    # The loop takes items through itertools.chain, which closes nothing
    # when left (a generator delegating with ``yield from`` closed a
    # generator ``make`` at break, and the rest of its local batch was lost).
    def tagged(entries: Iterator[int]) -> Iterator[str]:
        for e in entries:
            yield f"<{e}>"

    q: CreditQueue[int] = CreditQueue(granted=8)
    rec = Recorder()
    it = StreamIterator(q, 8, rec.request, rec.cancel, timeout=1.0, make=tagged)
    for i in range(6):
        q.put(i)
    q.finish()
    for item in it:
        if item == "<1>":
            break
    assert next(it) == "<2>"
    assert list(it) == ["<3>", "<4>", "<5>"]
