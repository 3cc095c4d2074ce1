"""Fire-and-forgets that arrive together reach the handler many at a time
(``Handler.fire_and_forget_many``), on every driver (thread, selector,
asyncio; TCP and WebSocket): the same requests in the same order as one at
a time; a handler without the method gets ``fire_and_forget`` per request;
a failing handler call loses no other request and is logged; interceptors
see every request of a run with its own outcome; a Router hands a run to
its fallback's ``fire_and_forget_many`` or to a ``many=True`` route, and
otherwise routes each request as one."""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import sys
import threading
from collections.abc import Callable
from operator import attrgetter
from typing import Any, cast

import pytest
from sansrs.adapters.rsocket import Payload, RoutedRequest, Router, aio, connect, serve
from sansrs.adapters.rsocket.interceptors import Interceptors, Outcome, RequestInfo
from sansrs.adapters.rsocket.resume import ResumeOptions, connect_resumable, serve_resumable
from sansrs.adapters.rsocket.types import Request
from sansrs.adapters.tools.faults import FaultProxy

from sansrs.rsocket.extensions import compose

WAIT = 10.0
LOGGER = "sansrs.adapters.rsocket"
COUNT = 5000
ITEMS = [b"%d" % i for i in range(COUNT)]
RAW = "application/octet-stream"


class Recorder:
    """A handler that keeps what it got, and how (``batches``: the size of
    each call); ``request_response`` answers how many arrived.
    ``fail_on``: data that makes a call raise (after recording it)."""

    def __init__(self, fail_on: bytes | None = None) -> None:
        self.got: list[tuple[bytes, bytes | None]] = []
        self.batches: list[int] = []
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def request_response(self, request: Request) -> Payload:
        return Payload(b"%d" % len(self.got))

    def _take(self, requests: list[Request]) -> None:
        with self.lock:
            self.got += [(r.data, r.metadata) for r in requests]
            self.batches.append(len(requests))
        if self.fail_on is not None and any(r.data == self.fail_on for r in requests):
            raise ValueError(f"refused {self.fail_on!r}")


class Many(Recorder):
    def fire_and_forget_many(self, requests: list[Request]) -> None:
        self._take(requests)


class One(Recorder):
    def fire_and_forget(self, request: Request) -> None:
        self._take([request])


class AsyncMany(Recorder):
    async def fire_and_forget_many(self, requests: list[Request]) -> None:
        self._take(requests)

    async def request_response(self, request: Request) -> Payload:  # type: ignore[override]
        # A task too, started after those of the runs before it: it counts them all.
        return Payload(b"%d" % len(self.got))


def _send_sync(url: str, items: list[object], **kw: Any) -> int:
    with connect(url, metadata_mime_type=RAW, **kw) as client:
        client.fire_and_forget_many(items, timeout=WAIT)
        reply = client.request_response(b"count", timeout=WAIT)  # behind every fnf
        assert reply is not None
        return int(reply.data)


Serve = Callable[[object, list[object]], int]


def _serve_sync(loop: str, scheme: str) -> Serve:
    def run(handler: object, items: list[object]) -> int:
        with serve(f"{scheme}://127.0.0.1:0", handler, loop=loop) as server:
            return _send_sync(server.url, items)

    return run


def _serve_aio(handler: object, items: list[object]) -> int:
    async def main() -> int:
        async with await aio.serve("tcp://127.0.0.1:0", handler) as server:
            return await asyncio.to_thread(_send_sync, server.url, items)

    return asyncio.run(asyncio.wait_for(main(), 30))


DRIVERS: dict[str, Serve] = {
    "thread-tcp": _serve_sync("thread", "tcp"),
    "thread-ws": _serve_sync("thread", "ws"),
    "selector-tcp": _serve_sync("selector", "tcp"),
    "asyncio-tcp": _serve_aio,
}


@pytest.fixture(params=sorted(DRIVERS))
def driver(request: pytest.FixtureRequest) -> Serve:
    return DRIVERS[request.param]


@pytest.mark.timeout(60)
def test_rsocket_fire_and_forget_many_handler_takes_runs_in_order(driver: Serve) -> None:
    items: list[object] = [*ITEMS[:10], (b"md", b"m"), *ITEMS[10:]]
    handler = Many()
    assert driver(handler, items) == len(items)
    assert handler.got == [(b"md", b"m") if x == (b"md", b"m") else (x, None) for x in items]
    assert max(handler.batches) > 1  # many at a time, not one by one
    assert len(handler.batches) < len(items) // 4


@pytest.mark.timeout(60)
def test_rsocket_fire_and_forget_many_async_handler_under_asyncio() -> None:
    handler = AsyncMany()
    assert _serve_aio(handler, list(ITEMS)) == COUNT
    assert [d for d, _ in handler.got] == ITEMS
    assert max(handler.batches) > 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_fire_and_forget_many_handler_takes_a_lone_request_as_a_list_of_one(
    loop: str,
) -> None:
    """Under leases the core reports each request alone (no runs): a handler
    with only ``fire_and_forget_many`` still gets every one."""
    handler = Many()
    with (
        serve("tcp://127.0.0.1:0", handler, loop=loop, lease=True) as server,
        connect(server.url, loop=loop, lease=True, lease_requests=10_000) as client,
    ):
        client.fire_and_forget_many(ITEMS[:500], timeout=WAIT)
        reply = client.request_response(b"count", timeout=WAIT)
        assert reply is not None and int(reply.data) == 500
    assert [d for d, _ in handler.got] == ITEMS[:500]
    assert set(handler.batches) == {1}


@pytest.mark.timeout(60)
def test_rsocket_handler_without_fire_and_forget_many_gets_each_in_order(driver: Serve) -> None:
    handler = One()
    assert driver(handler, list(ITEMS)) == COUNT
    assert [d for d, _ in handler.got] == ITEMS
    assert set(handler.batches) == {1}


@pytest.mark.timeout(60)
def test_rsocket_fire_and_forget_failing_one_loses_no_other(
    driver: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    handler = One(fail_on=b"77")
    with caplog.at_level(logging.ERROR, LOGGER):
        assert driver(handler, list(ITEMS)) == COUNT
    assert [d for d, _ in handler.got] == ITEMS
    failures = [r for r in caplog.records if "the handler raised" in r.getMessage()]
    assert len(failures) == 1 and failures[0].getMessage().startswith("fire_and_forget")


@pytest.mark.timeout(60)
def test_rsocket_fire_and_forget_many_that_raises_is_logged_and_later_runs_arrive(
    driver: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    handler = Many(fail_on=b"0")
    with caplog.at_level(logging.ERROR, LOGGER):
        assert driver(handler, list(ITEMS)) == COUNT
    assert [d for d, _ in handler.got] == ITEMS
    (failure,) = [r for r in caplog.records if "the handler raised" in r.getMessage()]
    assert failure.getMessage().startswith(f"fire_and_forget_many of {handler.batches[0]} ")


# -- interceptors -----------------------------------------------------------------


class Ends:
    """A request interceptor counting how requests ended."""

    def __init__(self) -> None:
        self.ends: collections.Counter[tuple[str, str, str | None]] = collections.Counter()
        self.bytes_in = 0
        self.cond = threading.Condition()

    def on_start(self, info: RequestInfo) -> None:
        pass

    def on_end(self, info: RequestInfo, outcome: Outcome) -> None:
        with self.cond:
            self.ends[info.model, outcome.kind, outcome.error] += 1
            if info.model == "fire_and_forget":
                self.bytes_in += info.bytes_in
            self.cond.notify_all()

    def wait(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: sum(self.ends.values()) >= n, WAIT), self.ends


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", ["thread", "selector"])
@pytest.mark.parametrize("kind", [Many, One], ids=["many", "one"])
def test_interceptors_see_every_fire_and_forget_of_a_run(loop: str, kind: type[Recorder]) -> None:
    handler = kind(fail_on=b"0")
    ends = Ends()
    interceptors = Interceptors(requests=[ends])
    with serve("tcp://127.0.0.1:0", handler, loop=loop, interceptors=interceptors) as server:
        assert _send_sync(server.url, list(ITEMS)) == COUNT
        ends.wait(COUNT + 1)
    failed = handler.batches[0] if isinstance(handler, Many) else 1
    assert ends.ends == collections.Counter({  # (a Counter: 0 and missing alike)
        ("fire_and_forget", "complete", None): COUNT - failed,
        ("fire_and_forget", "error", "ValueError"): failed,
        ("request_response", "complete", None): 1,
    })
    assert ends.bytes_in == sum(map(len, ITEMS))
    assert max(handler.batches) > 1 or isinstance(handler, One)


# -- the Router -------------------------------------------------------------------


def _router(seen: dict[str, list[Any]], fallback: object) -> Router:
    router = Router(fallback=fallback)

    @router.fnf("events", many=True)
    def events(requests: list[RoutedRequest]) -> None:
        seen["events"].append([(r.data, r.route) for r in requests])

    @router.fnf("one")
    def one(request: RoutedRequest) -> None:
        seen["one"].append(request.data)

    @router.response("count")
    def count(request: RoutedRequest) -> bytes:
        return b"ok"

    return router


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_router_takes_a_run_many_at_a_time_where_it_goes_to_one_place(loop: str) -> None:
    seen: dict[str, list[Any]] = {"events": [], "one": []}
    fallback = Many()
    events, one = compose("events"), compose("one")
    mixed = [(x, events if i % 2 else one) for i, x in enumerate(ITEMS[:100])]
    # Routed and not, alternating: each as one (the fallback: a list of one).
    unrouted = [(x, events) if i % 2 else x for i, x in enumerate(ITEMS[:200])]
    with (
        serve("tcp://127.0.0.1:0", _router(seen, fallback), loop=loop) as server,
        connect(server.url) as client,
    ):
        client.fire_and_forget_many(ITEMS, timeout=WAIT)  # no route: the fallback
        client.fire_and_forget_many([(x, events) for x in ITEMS], timeout=WAIT)
        client.fire_and_forget_many([(x, one) for x in ITEMS[:100]], timeout=WAIT)
        client.fire_and_forget_many(mixed, timeout=WAIT)
        client.fire_and_forget_many(unrouted, timeout=WAIT)
        assert client.request_response(b"", compose("count"), timeout=WAIT) is not None
    assert [d for d, _ in fallback.got] == ITEMS + ITEMS[:200:2]
    assert max(fallback.batches) > 1
    routed = [item for batch in seen["events"] for item in batch]
    assert routed == [(x, "events") for x in ITEMS] + 2 * [
        (x, "events") for i, x in enumerate(ITEMS[:100]) if i % 2
    ] + [(x, "events") for i, x in enumerate(ITEMS[100:200], 100) if i % 2]
    assert max(map(len, seen["events"])) > 1
    assert seen["one"] == ITEMS[:100] + [x for i, x in enumerate(ITEMS[:100]) if not i % 2]



# -- resumable sessions --------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_resume_fire_and_forget_runs_arrive_once_in_order_through_cuts(loop: str) -> None:
    """Runs count every frame in the session's implied position: through
    10 cuts of the connection, each fire-and-forget reaches the handler
    once, in order (a position short by a run would have the client
    retransmit it: duplicates; one too long would lose frames)."""
    rng = random.Random(34)
    handler = Many()
    items = [b"f%d" % i for i in range(20_000)]
    with (
        serve_resumable("tcp://127.0.0.1:0", handler, loop=loop) as server,
        FaultProxy(("127.0.0.1", int(server.url.rsplit(":", 1)[1])), rng=rng) as proxy,
    ):
        proxy.cut_at_random(2_000, 20_000, cuts=10)
        options = ResumeOptions(reconnect_initial=0.01, rng=rng)
        client = connect_resumable(f"tcp://127.0.0.1:{proxy.port}", loop=loop, resume=options)
        try:
            client.fire_and_forget_many(items, timeout=WAIT)
            reply = client.request_response(b"count", timeout=WAIT)
            assert reply is not None and int(reply.data) == len(items)
            assert proxy.wait_cuts(10, WAIT)
        finally:
            client.close()
    assert [d for d, _ in handler.got] == items
    assert max(handler.batches) > 1


def test_rsocket_fire_and_forget_run_requests_made_without_a_python_frame_each() -> None:
    """A run of fire-and-forgets becomes the handler's list of Requests by C
    calls alone (the server's CPU per item of ``bench_tcp.py`` rows ``fnf16``
    / ``fnf16m``): the same Requests as ``Request(data, metadata, peer)``,
    still frozen, and the Python frames run do not grow with the run."""
    from dataclasses import FrozenInstanceError

    from sansrs.adapters.rsocket.responder import Responder

    got: list[list[Request]] = []

    class Handler:
        def fire_and_forget_many(self, requests: list[Request]) -> None:
            got.append(requests)

    peer = object()
    responder = Responder(
        cast(Any, None), new_outbound=cast(Any, None), poke=cast(Any, None),
        call_soon=cast(Any, None), inbound={},
    )
    responder.bind(Handler(), peer)
    frames = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal frames
        frames += event == "call"

    for n in (10, 1000):
        data = [b"%d" % i for i in range(n)]
        metadata: list[bytes | None] = [None if i % 3 else b"m%d" % i for i in range(n)]
        frames = 0
        sys.setprofile(count)
        try:
            assert responder.on_fire_and_forget_run(data, metadata) is None
        finally:
            sys.setprofile(None)
        assert frames < 20, f"{frames} Python frames for a run of {n}"
        requests = [r for part in got for r in part]
        got.clear()
        assert requests == [Request(d, m, peer) for d, m in zip(data, metadata, strict=True)]
        assert all(type(r) is Request and r.peer is peer for r in requests)
    with pytest.raises(FrozenInstanceError):
        requests[0].data = b"changed"  # type: ignore[misc]


def _payload_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each list of Payloads the engines' ``fire_and_forget_many``
    gets from now on (the path that makes a Payload per item)."""
    from sansrs.adapters.rsocket.engine import RSocketEngine

    sizes: list[int] = []
    original = RSocketEngine.fire_and_forget_many

    def recording(self: RSocketEngine, payloads: list[Payload]) -> None:
        sizes.append(len(payloads))
        original(self, payloads)

    monkeypatch.setattr(RSocketEngine, "fire_and_forget_many", recording)
    return sizes


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_fire_and_forget_plain_bytes_framed_from_the_bytes_no_payload_made(
    loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fire_and_forget_many`` and ``fire_and_forget`` of plain ``bytes``
    reach the wire from the bytes themselves: no Payload (a tracked tuple)
    per item on the client (``bench_tcp.py`` rows ``fnf16m``, ``fnf16``);
    the handler gets them all, in order. A batch with metadata still takes
    the Payload path, in its place."""
    payload_batches = _payload_batches(monkeypatch)
    handler = Many()
    with serve("tcp://127.0.0.1:0", handler, loop=loop) as server, connect(
        server.url, metadata_mime_type=RAW, loop=loop
    ) as client:
        assert client.fire_and_forget_many(ITEMS, timeout=WAIT) == COUNT
        for data in ITEMS[:100]:
            client.fire_and_forget(data)
        first = client.request_response(b"count", timeout=WAIT)  # behind every fnf
        assert first is not None and int(first.data) == COUNT + 100
        assert payload_batches == []
        client.fire_and_forget_many([(b"md", b"m"), b"last"], timeout=WAIT)
        reply = client.request_response(b"count", timeout=WAIT)  # behind every fnf
    assert reply is not None and int(reply.data) == COUNT + 102
    assert payload_batches == [2]
    last = [(b"md", b"m"), (b"last", None)]
    assert handler.got == [(x, None) for x in ITEMS + ITEMS[:100]] + last


def test_rsocket_fire_and_forget_long_run_handed_over_in_parts_no_collection() -> None:
    """A long run (one 256 KiB read of 16-byte fire-and-forgets: ~10,000)
    reaches ``fire_and_forget_many`` in order, in parts of at most
    ``FNF_RUN_PART``, each list gone before the garbage collector's first
    generation fills: no collection promotes thousands of Requests (the
    server's CPU per item of ``bench_tcp.py`` rows ``fnf16``, ``fnf16m``);
    a failing part is the outcome of its own requests only."""
    import gc

    from sansrs.adapters.rsocket.responder import FNF_RUN_PART, Responder

    class Handler:  # keeps only untracked objects (bytes), as the demo responder counts
        def __init__(self) -> None:
            self.data: list[bytes] = []
            self.batches: list[int] = []

        def fire_and_forget_many(self, requests: list[Request]) -> None:
            self.data += map(attrgetter("data"), requests)
            self.batches.append(len(requests))
            if b"1500" in self.data[-len(requests):]:
                raise ValueError("refused b'1500'")

    handler = Handler()
    responder = Responder(
        cast(Any, None), new_outbound=cast(Any, None), poke=cast(Any, None),
        call_soon=cast(Any, None), inbound={},
    )
    responder.bind(handler, None)
    n = 10_000
    data = [b"%d" % i for i in range(n)]
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        outcomes = responder.on_fire_and_forget_run(data, [None] * n)  # one part logged
    finally:
        gc.callbacks.remove(count)
    assert len(collections) <= 1, collections  # (the failing part's log may make one)
    assert handler.data == data
    assert max(handler.batches) == FNF_RUN_PART and sum(handler.batches) == n
    assert outcomes is not None and len(outcomes) == n
    failed = [i for i, o in enumerate(outcomes) if o is not None]
    part = 1500 // FNF_RUN_PART * FNF_RUN_PART
    assert failed == list(range(part, part + FNF_RUN_PART))


@pytest.mark.parametrize("refused", [None, 0, 9_999], ids=("none", "first", "last"))
def test_rsocket_fire_and_forget_long_run_outcomes_only_of_the_failing_part(
    refused: int | None,
) -> None:
    """A long run handed over in parts: no outcomes (None) when every part
    was taken; else one per request, the failing part's its exception, the
    others' None, the last (short) part included."""
    from sansrs.adapters.rsocket.responder import FNF_RUN_PART, Responder

    bad = None if refused is None else b"%d" % refused

    class Handler:
        def fire_and_forget_many(self, requests: list[Request]) -> None:
            if any(r.data == bad for r in requests):
                raise ValueError(f"refused {bad!r}")

    responder = Responder(
        cast(Any, None), new_outbound=cast(Any, None), poke=cast(Any, None),
        call_soon=cast(Any, None), inbound={},
    )
    responder.bind(Handler(), None)
    n = 10_000
    outcomes = responder.on_fire_and_forget_run([b"%d" % i for i in range(n)], [None] * n)
    if refused is None:
        assert outcomes is None
        return
    assert outcomes is not None and len(outcomes) == n
    start = refused // FNF_RUN_PART * FNF_RUN_PART
    failing = range(start, min(start + FNF_RUN_PART, n))
    assert [i for i, o in enumerate(outcomes) if o is not None] == list(failing)


@pytest.mark.timeout(60)
def test_rsocket_fire_and_forget_many_asyncio_plain_bytes_framed_from_the_bytes_no_payload_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The asyncio client's ``fire_and_forget_many`` of plain ``bytes`` takes
    the thread drivers' path (``engine.fire_and_forget_data``): no Payload
    per item; the handler gets them all, in order. A part with metadata
    still takes the Payload path, in its place."""
    payload_batches = _payload_batches(monkeypatch)
    handler = Many()

    async def main() -> None:
        async with (
            await aio.serve("tcp://127.0.0.1:0", handler) as server,
            await aio.connect(server.url, metadata_mime_type=RAW) as client,
        ):
            assert await client.fire_and_forget_many(ITEMS) == COUNT
            first = await client.request_response(b"count", timeout=WAIT)  # behind every fnf
            assert first is not None and int(first.data) == COUNT
            assert payload_batches == []
            await client.fire_and_forget_many([(b"md", b"m"), b"last"])
            reply = await client.request_response(b"count", timeout=WAIT)
            assert reply is not None and int(reply.data) == COUNT + 2

    asyncio.run(asyncio.wait_for(main(), 30))
    assert payload_batches == [2]
    assert handler.got == [(x, None) for x in ITEMS] + [(b"md", b"m"), (b"last", None)]
