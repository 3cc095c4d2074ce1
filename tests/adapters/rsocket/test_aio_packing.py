"""The asyncio client's streams may hold runs of plain payloads as their
bytes (``AsyncStream.put_packed`` alias ``put_data``, ``fast.PayloadPacking``) and then hand
batches out at most ``PACKED_BATCH`` at a time, so nothing made for the
consumer lives long enough for the garbage collector to promote it. Held to
a stream given the same payloads as Payloads: the same items, order,
errors, end, cancel and window, whatever the mix of single items, runs,
metadata, ``__anext__`` and ``next_batch``."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters.drive.aio_streams import PACKED_BATCH, AsyncStream
from sansrs.adapters.rsocket import aio
from sansrs.adapters.rsocket.fast import PAYLOAD_PACKING, PayloadPacking
from sansrs.adapters.rsocket.types import Payload

WAIT = 10.0


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 40))


def plain(n: int, start: int = 0) -> list[Payload]:
    return [Payload(b"%d" % i) for i in range(start, start + n)]


def packed_stream(prefetch: int = 100_000) -> AsyncStream[Payload]:
    return AsyncStream(prefetch, lambda n: None, lambda: None, packing=PAYLOAD_PACKING)


def test_rsocket_aio_packing_makes_payloads_of_data_and_keeps_payloads_as_they_are() -> None:
    packing = PayloadPacking()
    assert packing.unpack_all([b"0", b"1", b"2"]) == plain(3)
    assert [packing.unpack(e) for e in [b"0", b"1"]] == plain(2)
    mixed = [b"0", Payload(b"a", b"m"), Payload(b"b"), Payload(b"c", b""), b"1"]
    assert packing.unpack_all(mixed) == [
        Payload(b"0"), Payload(b"a", b"m"), Payload(b"b"), Payload(b"c", b""), Payload(b"1")
    ]
    # Empty metadata is metadata: it stays b"", never None.
    assert packing.unpack(Payload(b"x", b"")) == Payload(b"x", b"")


def test_rsocket_aio_stream_put_packed_queues_untracked_bytes_and_needs_a_packing() -> None:
    stream = packed_stream()
    stream.put_packed([b"a", b"b"])
    assert not any(map(gc.is_tracked, stream._items))
    with pytest.raises(TypeError, match="packing"):
        AsyncStream(8, lambda n: None, lambda: None).put_packed([b"a"])


def test_rsocket_aio_stream_takes_runs_as_data_only_with_a_packing() -> None:
    """``put_data`` is what an engine hands a run of plain payloads to as
    their bytes: a packed stream's ``put_packed``, None on any other."""
    stream = packed_stream()
    assert stream.put_data is not None
    stream.put_data([b"0", b"1"])
    stream.finish()
    assert AsyncStream(8, lambda n: None, lambda: None).put_data is None

    async def main() -> None:
        assert [p async for p in stream] == plain(2)

    run(main)


def test_rsocket_aio_client_streams_are_packed() -> None:
    """The client's streams use the packing (not only the stream type)."""

    class Streamer:
        def request_stream(self, request: Any) -> list[bytes]:
            return [b"a", b"b"]

    async def main() -> None:
        async with (
            aio.serve("tcp://127.0.0.1:0", Streamer()) as server,
            aio.connect(server.url) as client,
        ):
            stream = client.request_stream(b"q", timeout=WAIT)
            assert stream.put_data == stream.put_packed
            assert [p async for p in stream] == [Payload(b"a"), Payload(b"b")]

    run(main)


def test_rsocket_aio_packed_batches_are_at_most_packed_batch_long() -> None:
    stream = packed_stream()
    total = 2 * PACKED_BATCH + 10
    stream.put_packed([p.data for p in plain(total)])
    stream.finish()
    sizes: list[int] = []
    items: list[Payload] = []

    async def main() -> None:
        async for batch in stream.batches():
            sizes.append(len(batch))
            items.extend(batch)

    run(main)
    assert sizes == [PACKED_BATCH, PACKED_BATCH, 10]
    assert items == plain(total)


def test_rsocket_aio_packed_batches_bring_no_collection_past_the_youngest() -> None:
    """A window of plain items put as their bytes (what the engine's runs
    are) and taken in batches: each batch dies before the collector's first
    threshold, so no collection of an older generation runs (one that did
    promoted the batch's payloads and led to full collections)."""
    stream = packed_stream()
    stream.put_packed([b"%d" % i for i in range(20_000)])
    stream.finish()
    older: list[int] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] > 0:
            older.append(info["generation"])

    taken: list[int] = []

    async def main() -> None:
        gc.collect()
        gc.callbacks.append(watch)
        try:
            async for batch in stream.batches():
                taken.append(len(batch))
        finally:
            gc.callbacks.remove(watch)

    run(main)
    assert sum(taken) == 20_000
    assert older == []


# -- differential: packed vs plain, under any mix of puts and takes --------------

ITEM = st.tuples(st.binary(max_size=3), st.one_of(st.none(), st.binary(max_size=2)))
OP = st.one_of(
    st.tuples(st.just("put"), ITEM),
    st.tuples(st.just("put_many"), st.lists(ITEM, max_size=40)),
    st.tuples(st.just("put_plain_run"), st.integers(1, 1300)),
    st.tuples(st.just("take"), st.integers(1, 5)),
    st.tuples(st.just("batch"), st.just(0)),
    st.tuples(st.just("cancel"), st.just(0)),
)
ENDING = st.sampled_from(["complete", "error", "close"])


async def drive(
    ops: list[tuple[str, Any]], ending: str, prefetch: int, packed: bool
) -> tuple[list[Payload], list[str], bool]:
    """Runs ``ops`` against one stream: what the consumer saw (items, then
    how it ended) and whether the stream ever asked for more than was
    consumed (the window: a producer within credit then never has more than
    ``prefetch`` items queued)."""
    granted = [prefetch]
    cancelled: list[bool] = []
    stream: AsyncStream[Payload] = AsyncStream(
        prefetch,
        lambda n: granted.append(n),
        lambda: cancelled.append(True),
        packing=PAYLOAD_PACKING if packed else None,
    )
    sent = taken = 0
    produced: list[Payload] = []
    seen: list[Payload] = []
    over = False

    def send(items: list[Payload]) -> None:
        nonlocal sent
        produced.extend(items)
        if len(items) == 1:
            stream.put(items[0])
        elif items:
            stream.put_many(items)
        sent += len(items)

    for op, arg in ops:
        if stream.done:
            break
        if op == "put":
            send([Payload(*arg)])
        elif op == "put_many":
            send([Payload(*a) for a in arg])
        elif op == "put_plain_run" and packed:  # as the engine's runs may come
            stream.put_packed([b"%d" % i for i in range(sent, sent + arg)])
            produced.extend(plain(arg, sent))
            sent += arg
        elif op == "put_plain_run":
            send(plain(arg, sent))
        elif op == "take":
            for _ in range(min(arg, sent - taken)):
                seen.append(await stream.__anext__())
                taken += 1
        elif op == "batch" and sent > taken:
            batch = await stream.next_batch()
            seen.extend(batch)
            taken += len(batch)
        elif op == "cancel":
            await stream.aclose()
            return seen, ["cancelled", str(bool(cancelled))], over
        over = over or sum(granted) - prefetch > taken
    if ending == "close":
        stream.close()
    else:
        stream.finish(ValueError("boom") if ending == "error" else None)
    end: list[str] = []
    while True:
        try:
            batch = await asyncio.wait_for(stream.next_batch(), WAIT)
        except StopAsyncIteration:
            end.append("end")
            break
        except ValueError as exc:
            end.append(f"error {exc}")
            continue  # raised once, then the end
        seen.extend(batch)
        taken += len(batch)
        over = over or sum(granted) - prefetch > taken
    if ending == "complete":  # every item, in the order sent, then the end
        assert (seen, end) == (produced, ["end"])
    elif ending == "error":
        assert (seen, end) == (produced, ["error boom", "end"])
    return seen, end, over


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(OP, max_size=25), ending=ENDING, prefetch=st.integers(1, 2000))
def test_rsocket_aio_packed_stream_differential_same_items_order_errors_and_window(
    ops: list[tuple[str, Any]], ending: str, prefetch: int
) -> None:
    packed = asyncio.run(drive(ops, ending, prefetch, packed=True))
    reference = asyncio.run(drive(ops, ending, prefetch, packed=False))
    if ending == "close" or any(op == "cancel" for op, _ in ops):
        # A batch may stop short of the plain one's (PACKED_BATCH), and a
        # cancel or close drops what was not handed out: what was taken is
        # the same items, in order, as far as both went.
        shorter = min(len(packed[0]), len(reference[0]))
        assert packed[0][:shorter] == reference[0][:shorter]
        assert packed[1:] == reference[1:]
    else:
        assert packed == reference
    assert not packed[2]  # never more asked for than consumed


@pytest.mark.timeout(20)
def test_rsocket_aio_packed_stream_timeout_names_the_wait() -> None:
    stream: AsyncStream[Payload] = AsyncStream(
        8, lambda n: None, lambda: None, timeout=0.01, packing=PAYLOAD_PACKING
    )

    async def main() -> None:
        with pytest.raises(TimeoutError, match="no item within"):
            await stream.__anext__()
        stream.put(Payload(b"late", b"m"))
        stream.put_packed([b"later"])
        assert await stream.__anext__() == Payload(b"late", b"m")
        assert await stream.__anext__() == Payload(b"later")

    run(main)


def test_rsocket_aio_packed_stream_counts_units_of_the_items_made() -> None:
    """``units`` sees the items as handed out (made from packed entries),
    and the window is replenished by units, item by item and by batches."""
    requested: list[int] = []
    stream: AsyncStream[Payload] = AsyncStream(
        8, requested.append, lambda: None, units=lambda p: len(p.data), packing=PAYLOAD_PACKING
    )
    stream.put_packed([b"aa", b"bbb"])  # 5 units
    stream.put(Payload(b"c", b"m"))  # 1
    stream.put_packed([b"dddd"])  # 4

    async def main() -> None:
        assert await stream.__anext__() == Payload(b"aa")
        assert requested == []  # 2 of the batch of 4 (half the window)
        assert await stream.__anext__() == Payload(b"bbb")
        assert requested == [5]
        assert await stream.next_batch() == [Payload(b"c", b"m"), Payload(b"dddd")]
        assert requested == [5, 5]
        stream.put_packed([b"eeee"])
        stream.finish()
        assert await stream.__anext__() == Payload(b"eeee")
        assert requested == [5, 5]  # done: nothing more is asked for

    run(main)
