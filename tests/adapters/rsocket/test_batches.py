"""The batch consumer APIs held to the item-at-a-time paths, on every driver
(thread, selector, asyncio) over TCP and WebSocket: ``request_stream_batches``
(sync and asyncio), ``batch_publisher`` (a Publisher of lists) and
``fire_and_forget_many`` (sync and asyncio) give the same items, in the same
order, with the same errors as ``request_stream`` / ``fire_and_forget``; a
consumer that stops reading stops the producer (bounded by the prefetch
window, counted on the server)."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sansrs.adapters.rsocket import PayloadBatch, aio
from sansrs.adapters.rsocket.client import Client, connect
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.fast import DataRuns
from sansrs.adapters.rsocket.server import Server, serve
from sansrs.adapters.rsocket.types import Payload, Request

from sansrs.rsocket.extensions import compose
from tests.adapters.rsocket.test_interceptors import Recorder

WAIT = 10.0
SCHEMES = ("tcp://127.0.0.1:0", "ws://127.0.0.1:0/rs")
SYNC_LOOPS = ("thread", "selector")


def item(i: int, plain: bool = False) -> Payload:
    """Item ``i`` of a stream: lengths vary, every third carries metadata
    (so both the plain and the general receive paths are used) unless
    ``plain`` (none has: the client keeps them all as bytes until read)."""
    data = b"%d:" % i + b"x" * (i % 37)
    return Payload(data, b"m%d" % i if i % 3 == 0 and not plain else None)


class Producer:
    """The server's handler: ``{"n": N, "fail": bool}`` streams N items (and
    then fails with ``ValueError`` if asked); ``{"endless": true}`` streams
    until cancelled. ``pulled`` counts the items the server's pump took,
    ``cancelled`` is set when a stream is cancelled; fire-and-forgets are
    recorded in order, ``fnf-count`` answers how many arrived."""

    def __init__(self) -> None:
        self.pulled = 0
        self.cancelled = threading.Event()
        self.reached: tuple[int, threading.Event] | None = None
        self.fnf: list[tuple[bytes, bytes | None]] = []

    def request_response(self, request: Request) -> Payload:
        return Payload(b"%d" % len(self.fnf))

    def fire_and_forget(self, request: Request) -> None:
        self.fnf.append((request.data, request.metadata))

    def request_stream(self, request: Request) -> Iterator[Payload]:
        spec = json.loads(request.data)
        if spec.get("refuse"):
            raise ValueError("refused at once")
        return self._items(spec)

    def _items(self, spec: dict[str, Any]) -> Iterator[Payload]:
        try:
            i = 0
            while spec.get("endless") or i < spec["n"]:
                self.pulled += 1
                reached = self.reached
                if reached is not None and self.pulled >= reached[0]:
                    reached[1].set()
                yield item(i, bool(spec.get("plain")))
                i += 1
            if spec.get("fail"):
                raise ValueError(f"failed after {i} items")
        except GeneratorExit:
            self.cancelled.set()
            raise


@pytest.fixture(scope="module", params=SCHEMES, ids=("tcp", "ws"))
def server(request: pytest.FixtureRequest) -> Iterator[tuple[Server, Producer]]:
    producer = Producer()
    with serve(request.param, handler_factory=lambda peer: producer) as s:
        yield s, producer


@pytest.fixture
def producer(server: tuple[Server, Producer]) -> Producer:
    p = server[1]
    p.pulled, p.reached = 0, None
    p.cancelled.clear()
    p.fnf.clear()
    return p


def spec(n: int, fail: bool = False, **more: object) -> str:
    return json.dumps({"n": n, "fail": fail, **more})


# -- the outcome of a stream, however it was consumed -------------------------

Outcome = tuple[list[Payload], tuple[str, int, str] | None]


def outcome_of(consume: Callable[[list[Payload]], None]) -> Outcome:
    """The items ``consume`` collected and the error it ended with (type,
    code, message), for comparing one consumer with another."""
    got: list[Payload] = []
    try:
        consume(got)
    except RSocketError as exc:
        return got, (type(exc).__name__, exc.error_code, exc.message)
    return got, None


def sync_items(client: Client, request: str, prefetch: int) -> Outcome:
    def consume(got: list[Payload]) -> None:
        with client.request_stream(request, prefetch=prefetch, timeout=WAIT) as items:
            got.extend(items)

    return outcome_of(consume)


def sync_batches(client: Client, request: str, prefetch: int) -> Outcome:
    def consume(got: list[Payload]) -> None:
        with client.request_stream_batches(request, prefetch=prefetch, timeout=WAIT) as batches:
            for batch in batches:
                assert batch, "a batch is never empty"
                got.extend(batch)

    return outcome_of(consume)


class BatchSubscriber:
    """Collects a Publisher of lists, asking for one list at a time."""

    def __init__(self) -> None:
        self.items: list[Payload] = []
        self.lists = 0
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.subscription: Any = None

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, batch: list[Payload]) -> None:
        assert batch, "a batch is never empty"
        self.items.extend(batch)
        self.lists += 1
        self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def publisher_batches(client: Client, request: str, prefetch: int) -> Outcome:
    def consume(got: list[Payload]) -> None:
        subscriber = BatchSubscriber()
        client.batch_publisher(request, prefetch=prefetch).subscribe(subscriber)
        assert subscriber.done.wait(WAIT)
        got.extend(subscriber.items)
        if subscriber.error is not None:
            raise subscriber.error

    return outcome_of(consume)


CASES = [
    pytest.param(spec(2000), 64, id="complete"),
    pytest.param(spec(0), 16, id="empty"),
    pytest.param(spec(301, fail=True), 32, id="error-mid-stream"),
    pytest.param(spec(0, refuse=True), 8, id="refused"),
    pytest.param(spec(5000), 8192, id="large-window"),
    pytest.param(spec(2000, plain=True), 64, id="plain"),
    pytest.param(spec(301, fail=True, plain=True), 32, id="plain-error-mid-stream"),
    pytest.param(spec(5000, plain=True), 8192, id="plain-large-window"),
]


@pytest.mark.parametrize("loop", SYNC_LOOPS)
@pytest.mark.parametrize(("request_", "prefetch"), CASES)
def test_rsocket_batches_sync_same_items_order_and_errors_as_item_iterator(
    server: tuple[Server, Producer], producer: Producer, loop: str, request_: str, prefetch: int
) -> None:
    with connect(server[0].url, loop=loop) as client:
        expected = sync_items(client, request_, prefetch)
        assert sync_batches(client, request_, prefetch) == expected
        assert publisher_batches(client, request_, prefetch) == expected
    items, error = expected
    asked = json.loads(request_)
    assert items == [item(i, bool(asked.get("plain"))) for i in range(asked["n"])]
    assert all(type(p) is Payload for p in items)
    assert (error is None) == (not asked["fail"] and not asked.get("refuse"))


@pytest.mark.parametrize("loop", SYNC_LOOPS)
@pytest.mark.parametrize("plain", [True, False], ids=("plain", "metadata"))
def test_rsocket_batches_sync_are_payload_batches_made_as_they_are_read(
    server: tuple[Server, Producer], producer: Producer, loop: str, plain: bool
) -> None:
    got: list[Payload] = []
    with (
        connect(server[0].url, loop=loop) as client,
        client.request_stream_batches(spec(600, plain=plain), prefetch=64) as batches,
    ):
        for batch in batches:
            assert type(batch) is PayloadBatch
            # One without metadata is made when read, not held: a new,
            # equal Payload each time (one with metadata waits as itself).
            first = batch[0]
            assert first == batch[0]
            assert (first is not batch[0]) == (first.metadata is None)
            got.extend(batch)
    assert got == [item(i, plain) for i in range(600)]


@pytest.mark.parametrize("loop", SYNC_LOOPS)
@pytest.mark.parametrize("plain", [True, False], ids=("plain", "metadata"))
def test_rsocket_stream_next_loops_and_batches_mixed_give_the_item_iterators_items(
    server: tuple[Server, Producer], producer: Producer, loop: str, plain: bool
) -> None:
    request_ = spec(3000, plain=plain)
    with connect(server[0].url, loop=loop) as client:
        expected = sync_items(client, request_, 128)

        def consume(got: list[Payload]) -> None:
            with client.request_stream(request_, prefetch=128, timeout=WAIT) as it:
                got.extend(next(it) for _ in range(3))
                for p in it:
                    got.append(p)
                    if len(got) == 70:
                        break
                got.extend(it.next_batch())
                got.append(next(it))
                for batch in it.batches():
                    got.extend(batch)
                    if len(got) > 1500:
                        break
                got.extend(it)

        assert outcome_of(consume) == expected
    assert expected == ([item(i, plain) for i in range(3000)], None)


@pytest.mark.parametrize("loop", SYNC_LOOPS)
def test_rsocket_stream_runs_reach_a_blocking_stream_as_bytes(
    server: tuple[Server, Producer], producer: Producer, loop: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The core's runs (items without metadata) go into the queue as their
    # data, no Payload made on the connection thread: made eagerly and held
    # up to prefetch, they were promoted by the GC (bench_tcp.py stream16).
    calls: list[str] = []
    put_data, put_many = DataRuns.put_data, DataRuns.put_many

    def spy_data(self: DataRuns, data: list[bytes]) -> None:
        calls.append("put_data")
        put_data(self, data)

    def spy_many(self: DataRuns, items: list[Payload]) -> None:
        calls.append("put_many")
        put_many(self, items)

    monkeypatch.setattr(DataRuns, "put_data", spy_data)
    monkeypatch.setattr(DataRuns, "put_many", spy_many)
    with (
        connect(server[0].url, loop=loop) as client,
        client.request_stream(spec(2000, plain=True), prefetch=256, timeout=WAIT) as it,
    ):
        entries = it.next_entries()
        assert all(type(e) is bytes for e in entries)
        assert not any(map(gc.is_tracked, entries))
        got = [Payload(e) for e in entries] + list(it)
    assert got == [item(i, True) for i in range(2000)]
    assert "put_data" in calls and "put_many" not in calls


@pytest.mark.parametrize("loop", SYNC_LOOPS)
@pytest.mark.parametrize("plain", [True, False], ids=("plain", "metadata"))
def test_rsocket_observed_stream_counts_its_runs_and_keeps_them_as_bytes(
    server: tuple[Server, Producer], producer: Producer, loop: str, plain: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A request interceptor's observer in front of the queue counts what
    # arrives and passes the runs on as bytes (as without interceptors).
    runs: list[int] = []
    put_data = DataRuns.put_data

    def spy_data(self: DataRuns, data: list[bytes]) -> None:
        runs.append(len(data))
        put_data(self, data)

    monkeypatch.setattr(DataRuns, "put_data", spy_data)
    recorder = Recorder()
    with connect(server[0].url, loop=loop, interceptors=recorder.interceptors()) as client:
        got = sync_items(client, spec(2000, plain=plain), 256)
    recorder.wait_ended(1)
    expected = [item(i, plain) for i in range(2000)]
    assert got == (expected, None)
    info = recorder.end_of("request_stream", "complete")
    assert info.items_in == 2000
    assert info.bytes_in == sum(len(p.data) + len(p.metadata or b"") for p in expected)
    # The runs reached the queue as bytes: items without metadata only.
    assert 0 < sum(runs) <= sum(p.metadata is None for p in expected)


@pytest.mark.parametrize(("request_", "prefetch"), CASES)
def test_rsocket_batches_asyncio_same_items_order_and_errors_as_item_iterator(
    server: tuple[Server, Producer], producer: Producer, request_: str, prefetch: int
) -> None:
    async def consume(client: aio.AsyncClient, batches: bool) -> Outcome:
        got: list[Payload] = []
        try:
            if batches:
                async with client.request_stream_batches(
                    request_, prefetch=prefetch, timeout=WAIT
                ) as lists:
                    async for batch in lists:
                        assert batch
                        got.extend(batch)
            else:
                async with client.request_stream(request_, prefetch=prefetch, timeout=WAIT) as it:
                    async for p in it:
                        got.append(p)
        except RSocketError as exc:
            return got, (type(exc).__name__, exc.error_code, exc.message)
        return got, None

    async def main() -> None:
        async with await aio.connect(server[0].url) as client:
            expected = await consume(client, batches=False)
            assert await consume(client, batches=True) == expected
            asked = json.loads(request_)
            assert expected[0] == [item(i, bool(asked.get("plain"))) for i in range(asked["n"])]

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("loop", SYNC_LOOPS)
def test_rsocket_batches_break_cancels_the_stream_like_the_item_iterator(
    server: tuple[Server, Producer], producer: Producer, loop: str
) -> None:
    with connect(server[0].url, loop=loop) as client:
        taken: list[Payload] = []
        with client.request_stream(spec(0, endless=True), prefetch=16, timeout=WAIT) as items:
            for p in items:
                taken.append(p)
                if len(taken) == 50:
                    break
        assert producer.cancelled.wait(WAIT)
        producer.cancelled.clear()
        batched: list[Payload] = []
        with client.request_stream_batches(
            spec(0, endless=True), prefetch=16, timeout=WAIT
        ) as batches:
            for batch in batches:
                batched.extend(batch)
                if len(batched) >= 50:
                    break
        assert producer.cancelled.wait(WAIT)
        assert batched[:50] == taken == [item(i) for i in range(50)]
        # The connection goes on.
        assert client.request_response(b"?", timeout=WAIT) is not None


def test_rsocket_batches_asyncio_break_cancels_the_stream(
    server: tuple[Server, Producer], producer: Producer
) -> None:
    async def main() -> None:
        async with await aio.connect(server[0].url) as client:
            got: list[Payload] = []
            async with client.request_stream_batches(
                spec(0, endless=True), prefetch=16, timeout=WAIT
            ) as batches:
                async for batch in batches:
                    got.extend(batch)
                    if len(got) >= 50:
                        break
            assert got[:50] == [item(i) for i in range(50)]
            assert await asyncio.to_thread(producer.cancelled.wait, WAIT)

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("loop", SYNC_LOOPS)
def test_rsocket_batch_publisher_cancel_stops_the_stream(
    server: tuple[Server, Producer], producer: Producer, loop: str
) -> None:
    class CancelAfterFirst(BatchSubscriber):
        def on_next(self, batch: list[Payload]) -> None:
            self.items.extend(batch)
            self.subscription.cancel()
            self.done.set()

    with connect(server[0].url, loop=loop) as client:
        subscriber = CancelAfterFirst()
        client.batch_publisher(spec(0, endless=True), prefetch=16).subscribe(subscriber)
        assert subscriber.done.wait(WAIT)
        assert producer.cancelled.wait(WAIT)
        assert subscriber.items == [item(i) for i in range(len(subscriber.items))]
        assert 0 < len(subscriber.items) <= 16


# -- backpressure: a consumer that stops reading stops the producer -------------


@pytest.mark.parametrize("loop", SYNC_LOOPS)
def test_rsocket_batches_stopped_consumer_stops_producer_within_prefetch(
    server: tuple[Server, Producer], producer: Producer, loop: str
) -> None:
    prefetch = 64
    with connect(server[0].url, loop=loop) as client:
        with client.request_stream_batches(
            spec(0, endless=True), prefetch=prefetch, timeout=WAIT
        ) as batches:
            consumed = 0
            while consumed < 3 * prefetch:  # past several replenishments
                consumed += len(next(batches))
            # Granted so far: the window plus every full half-window consumed.
            granted = prefetch + consumed - consumed % (prefetch // 2)
            reached = threading.Event()
            producer.reached = (granted, reached)
            if producer.pulled < granted:
                assert reached.wait(WAIT)
            # A round trip behind the credit: the server has handled it all.
            client.request_response(b"?", timeout=WAIT)
            # One item read ahead of the credit at most, never sent early.
            assert granted <= producer.pulled <= granted + 1
        assert producer.cancelled.wait(WAIT)


def test_rsocket_batch_publisher_without_demand_holds_at_most_prefetch(
    server: tuple[Server, Producer], producer: Producer
) -> None:
    prefetch = 32

    class OneList(BatchSubscriber):
        def on_next(self, batch: list[Payload]) -> None:
            self.items.extend(batch)
            self.done.set()  # and asks for nothing more

    with connect(server[0].url) as client:
        subscriber = OneList()
        reached = threading.Event()
        producer.reached = (prefetch, reached)
        client.batch_publisher(spec(0, endless=True), prefetch=prefetch).subscribe(subscriber)
        assert subscriber.done.wait(WAIT)
        assert reached.wait(WAIT)
        client.request_response(b"?", timeout=WAIT)
        # The first list may have replenished the window (half of it or
        # more); nothing beyond it was asked for.
        assert producer.pulled <= prefetch + len(subscriber.items) + 1
        subscriber.subscription.cancel()
        assert producer.cancelled.wait(WAIT)


# -- fire-and-forget, many at once ---------------------------------------------

FNF_ITEMS: list[object] = [
    b"a",
    "text",
    (b"data", b"md"),
    ("s", "m"),
    Payload(b"p", None),
    Payload(b"q", b"r"),
    *[b"%d" % i for i in range(5000)],
]


def _received(client: Client, producer: Producer, count: int) -> list[tuple[bytes, bytes | None]]:
    reply = client.request_response(b"fnf-count", timeout=WAIT)
    assert reply is not None and int(reply.data) == count
    got = list(producer.fnf)
    producer.fnf.clear()
    return got


@pytest.mark.parametrize("loop", SYNC_LOOPS)
def test_rsocket_fire_and_forget_many_sends_what_one_at_a_time_sends(
    server: tuple[Server, Producer], producer: Producer, loop: str
) -> None:
    with connect(server[0].url, loop=loop, metadata_mime_type=RAW) as client:
        for x in FNF_ITEMS:
            client.fire_and_forget(x)  # type: ignore[arg-type]
        one_by_one = _received(client, producer, len(FNF_ITEMS))
        assert client.fire_and_forget_many(iter(FNF_ITEMS), timeout=WAIT) == len(FNF_ITEMS)
        assert _received(client, producer, len(FNF_ITEMS)) == one_by_one
        assert one_by_one[:6] == [
            (b"a", None), (b"text", None), (b"data", b"md"), (b"s", b"m"), (b"p", None),
            (b"q", b"r"),
        ]


#: FNF_ITEMS carry raw metadata bytes: declared as such (connect's default
#: is composite metadata, which refuses bytes that are not).
RAW = "application/octet-stream"


@pytest.mark.parametrize("loop", SYNC_LOOPS)
def test_rsocket_fire_and_forget_many_raw_metadata_with_the_default_raises_after_the_ones_before(
    server: tuple[Server, Producer], producer: Producer, loop: str
) -> None:
    items: list[object] = [b"a", (b"b", compose("r")), (b"c", b"raw"), b"never"]
    with connect(server[0].url, loop=loop) as client:
        with pytest.raises(ValueError, match="not composite"):
            client.fire_and_forget_many(items)
        assert _received(client, producer, 2) == [(b"a", None), (b"b", compose("r"))]


@pytest.mark.parametrize("loop", SYNC_LOOPS)
def test_rsocket_fire_and_forget_many_bad_item_raises_after_the_ones_before(
    server: tuple[Server, Producer], producer: Producer, loop: str
) -> None:
    items: list[object] = [b"%d" % i for i in range(3000)] + [42, b"never"]
    with connect(server[0].url, loop=loop) as client:
        with pytest.raises(TypeError, match="data must be bytes or str"):
            client.fire_and_forget_many(items)
        assert _received(client, producer, 3000) == [(b"%d" % i, None) for i in range(3000)]


def test_rsocket_fire_and_forget_many_asyncio_sends_what_one_at_a_time_sends(
    server: tuple[Server, Producer], producer: Producer
) -> None:
    async def main() -> None:
        async with await aio.connect(server[0].url, metadata_mime_type=RAW) as client:
            for x in FNF_ITEMS:
                await client.fire_and_forget(x)  # type: ignore[arg-type]
            one_by_one = await _count(client, len(FNF_ITEMS))
            assert await client.fire_and_forget_many(FNF_ITEMS) == len(FNF_ITEMS)
            assert await _count(client, len(FNF_ITEMS)) == one_by_one
            with pytest.raises(TypeError, match="data must be bytes or str"):
                await client.fire_and_forget_many([b"x", b"y", 42, b"z"])
            assert await _count(client, 2) == [(b"x", None), (b"y", None)]

    async def _count(client: aio.AsyncClient, count: int) -> list[tuple[bytes, bytes | None]]:
        reply = await client.request_response(b"fnf-count", timeout=WAIT)
        assert reply is not None and int(reply.data) == count
        got = list(producer.fnf)
        producer.fnf.clear()
        return got

    asyncio.run(asyncio.wait_for(main(), 30))
