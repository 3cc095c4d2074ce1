"""The asyncio client's ``fire_and_forget`` one call at a time (``bench_tcp.py``
row ``fnf16 --impl sansrs-asyncio``): plain ``bytes`` data waits in a list
handed to the engine a part at a time (``engine.fire_and_forget_data``),
before any later request of the peer; a caller that awaits nothing else
lets the loop run once a part waits; the peer sends the same requests in
the same order as the frame-per-call path (anything else than plain bytes);
while the connection holds ``high_water`` unwritten bytes (a peer reading
nothing), the caller waits at a part's end (not memory), until the
connection drains or ends."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.drive.config import LoopConfig
from sansrs.adapters.rsocket import Payload, SessionLost, aio, serve
from sansrs.adapters.rsocket.aio import FNF_PART
from sansrs.adapters.rsocket.engine import RSocketEngine
from sansrs.adapters.rsocket.server import Server
from sansrs.adapters.rsocket.types import Request

WAIT = 10.0
RAW = "application/octet-stream"


class Recorder:
    """Keeps every fire-and-forget and metadata push, in order of arrival;
    ``request_response`` answers how many arrived."""

    def __init__(self) -> None:
        self.got: list[tuple[str, bytes, bytes | None]] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)

    def fire_and_forget(self, request: Request) -> None:
        with self.lock:
            self.got.append(("fnf", request.data, request.metadata))
            self.arrived.notify_all()

    def metadata_push(self, metadata: bytes) -> None:
        with self.lock:
            self.got.append(("push", b"", metadata))
            self.arrived.notify_all()

    def request_response(self, request: Request) -> Payload:
        with self.lock:
            return Payload(b"%d" % len(self.got))

    def take(self) -> list[tuple[str, bytes, bytes | None]]:
        with self.lock:
            got, self.got = self.got, []
        return got

    def take_when(self, count: int) -> list[tuple[str, bytes, bytes | None]]:
        """:meth:`take` once ``count`` have arrived (the server's thread
        handles them after the client's call returned), or after ``WAIT``."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.got) >= count, WAIT)
            got, self.got = self.got, []
        return got


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Server, Recorder]]:
    handler = Recorder()
    with serve("tcp://127.0.0.1:0", handler) as srv:
        yield srv, handler


def _engine_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Sizes of the engine's fire-and-forget calls: ``one`` (a frame per
    call), ``data`` (a part of plain bytes)."""
    calls: dict[str, list[int]] = {"one": [], "data": []}
    one, data = RSocketEngine.fire_and_forget, RSocketEngine.fire_and_forget_data

    def fire_and_forget(self: RSocketEngine, payload: Payload) -> None:
        calls["one"].append(1)
        one(self, payload)

    def fire_and_forget_data(self: RSocketEngine, items: list[bytes]) -> None:
        calls["data"].append(len(items))
        data(self, items)

    monkeypatch.setattr(RSocketEngine, "fire_and_forget", fire_and_forget)
    monkeypatch.setattr(RSocketEngine, "fire_and_forget_data", fire_and_forget_data)
    return calls


@pytest.mark.timeout(60)
def test_rsocket_asyncio_fire_and_forget_plain_bytes_reach_the_engine_a_part_at_a_time(
    server: tuple[Server, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    server[1].take()
    calls = _engine_calls(monkeypatch)
    count = 2 * FNF_PART + 5
    items = [b"%d" % i for i in range(count)]

    async def main() -> None:
        async with await aio.connect(server[0].url, metadata_mime_type=RAW) as client:
            for x in items:
                await client.fire_and_forget(x)
            reply = await client.request_response(b"count", timeout=WAIT)  # behind them all
            assert reply is not None and int(reply.data) == count

    asyncio.run(asyncio.wait_for(main(), 30))
    assert calls == {"one": [], "data": [FNF_PART, FNF_PART, 5]}
    assert server[1].take() == [("fnf", x, None) for x in items]


@pytest.mark.timeout(60)
def test_rsocket_asyncio_fire_and_forget_lets_the_loop_run_once_a_part_waits(
    server: tuple[Server, Recorder],
) -> None:
    """A caller that awaits nothing but ``fire_and_forget`` does not hold
    the loop (and every item in memory) until it is done: the loop runs,
    and writes, at least once per part."""

    async def main() -> None:
        async with await aio.connect(server[0].url, metadata_mime_type=RAW) as client:
            loop = asyncio.get_running_loop()
            turns = 0

            def tick() -> None:
                nonlocal turns
                turns += 1
                loop.call_soon(tick)

            loop.call_soon(tick)
            seen = []
            for i in range(3 * FNF_PART):
                await client.fire_and_forget(b"x")
                if (i + 1) % FNF_PART == 0:
                    seen.append(turns)
            assert seen[0] >= 1 and seen[1] > seen[0] and seen[2] > seen[1]
            reply = await client.request_response(b"count", timeout=WAIT)
            assert reply is not None and int(reply.data) == 3 * FNF_PART

    asyncio.run(asyncio.wait_for(main(), 30))
    server[1].take()


@pytest.mark.timeout(60)
def test_rsocket_asyncio_fire_and_forget_after_the_connection_ended_raises(
    server: tuple[Server, Recorder],
) -> None:
    server[1].take()

    async def main() -> None:
        client = await aio.connect(server[0].url, metadata_mime_type=RAW)
        await client.fire_and_forget(b"before")
        await client.close()
        with pytest.raises(ConnectionClosed):
            await client.fire_and_forget(b"after")

    asyncio.run(asyncio.wait_for(main(), 30))
    assert server[1].take_when(1) == [("fnf", b"before", None)]  # flushed by the close


# An operation of the differential: a plain-bytes fnf (the waiting list), an
# fnf with metadata or of str data (the frame-per-call path), a metadata push,
# a fire_and_forget_many, or a request-response (the express path) between them.
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("bytes"), st.binary(max_size=8)),
        st.tuples(st.just("meta"), st.binary(max_size=4)),
        st.tuples(st.just("str"), st.text(max_size=4)),
        st.tuples(st.just("push"), st.binary(min_size=1, max_size=4)),
        st.tuples(st.just("many"), st.integers(0, 3)),
        st.tuples(st.just("count"), st.none()),
    ),
    max_size=40,
)


async def _apply(client: aio.AsyncClient, ops: list[tuple[str, Any]]) -> list[Any]:
    """Run ``ops``: what the server should have got, in order, and the
    count each request-response should answer."""
    expected: list[Any] = []
    for op, arg in ops:
        if op == "bytes":
            await client.fire_and_forget(arg)
            expected.append(("fnf", arg, None))
        elif op == "meta":
            await client.fire_and_forget(b"d", arg)
            expected.append(("fnf", b"d", arg))
        elif op == "str":
            await client.fire_and_forget(arg)
            expected.append(("fnf", arg.encode(), None))
        elif op == "push":
            await client.metadata_push(arg)
            expected.append(("push", b"", arg))
        elif op == "many":
            items = [b"m%d" % i for i in range(arg)]
            await client.fire_and_forget_many(items)
            expected += [("fnf", x, None) for x in items]
        else:
            reply = await client.request_response(b"count", timeout=WAIT)
            assert reply is not None
            assert int(reply.data) == len(expected)  # every earlier request arrived first
    return expected


@pytest.mark.timeout(120)
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_rsocket_asyncio_fire_and_forget_waiting_ones_keep_their_place_among_requests(
    server: tuple[Server, Recorder], ops: list[tuple[str, Any]]
) -> None:
    """Differential: the requests the server gets, in order, are the calls
    made, whichever path each took (the waiting list or a frame per call)."""
    handler = server[1]
    handler.take()

    async def main() -> list[Any]:
        async with await aio.connect(server[0].url, metadata_mime_type=RAW) as client:
            expected = await _apply(client, ops)
            reply = await client.request_response(b"count", timeout=WAIT)
            assert reply is not None and int(reply.data) == len(expected)
            return expected

    expected = asyncio.run(asyncio.wait_for(main(), 30))
    assert handler.take() == expected


class StalledPeer:
    """A TCP listener whose one connection reads nothing until ``go`` is
    set, then reads everything to the end (the bytes it got: ``got``).
    Small socket buffers, so that the client's own buffer fills."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.url = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.go = threading.Event()
        self.got = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        sock, _ = self.listener.accept()
        with sock, contextlib.suppress(ConnectionResetError):  # reset: the second run
            self.go.wait(WAIT)
            while chunk := sock.recv(1 << 20):
                self.got += len(chunk)

    def close(self) -> None:
        self.go.set()
        self.listener.close()
        self.thread.join(WAIT)


def _stalled_client_run(
    send: Callable[[aio.AsyncClient, bytes, int], Awaitable[object]],
    parts: int,
    connect: Callable[[str], Awaitable[aio.AsyncClient]] = aio.connect,
) -> None:
    """``send`` of ``parts`` parts of 512-byte items to a peer that reads
    nothing: the sending task waits for room once the connection holds
    ``high_water`` unwritten bytes, its buffer stays within that and two
    parts; once the peer reads, every item arrives; then the same wait ends
    when the connection is reset."""
    item = b"x" * 512
    count = parts * FNF_PART
    high = LoopConfig().high_water
    part_bytes = FNF_PART * (len(item) + 9)
    peer = StalledPeer()

    async def main() -> None:
        client = await connect(peer.url)
        client.transport.sock.setsockopt(  # type: ignore[attr-defined]
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
        )
        task = asyncio.create_task(send(client, item, count))
        most = 0
        for _ in range(200):  # loop iterations: the task runs as far as it can
            await asyncio.sleep(0)
            most = max(most, client.driver.buffered)
        assert not task.done()  # waiting for room, not queueing every part
        assert high <= client.driver.buffered and most <= high + 2 * part_bytes
        peer.go.set()
        await asyncio.wait_for(task, WAIT)
        if connect is not aio.connect:
            # A resumable session: the raw peer never confirms what it read
            # (the close says so); a reset would only make it resume.
            with contextlib.suppress(SessionLost):
                await client.close()
            return
        await client.close()
        # A wait that the connection's end ends (reset while the peer reads nothing).
        peer2 = StalledPeer()
        try:
            client = await aio.connect(peer2.url)
            client.transport.sock.setsockopt(  # type: ignore[attr-defined]
                socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
            )
            task = asyncio.create_task(send(client, item, count))
            for _ in range(200):
                await asyncio.sleep(0)
            assert not task.done()
            client.abort()
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(task, WAIT)
        finally:
            peer2.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        peer.close()
    assert peer.got > count * len(item)  # every item (and the SETUP) arrived


async def _one_at_a_time(client: aio.AsyncClient, item: bytes, count: int) -> None:
    for _ in range(count):
        await client.fire_and_forget(item)


async def _many(client: aio.AsyncClient, item: bytes, count: int) -> None:
    await client.fire_and_forget_many([item] * count)


@pytest.mark.timeout(60)
def test_rsocket_asyncio_fire_and_forget_waits_for_room_while_the_peer_reads_nothing() -> None:
    _stalled_client_run(_one_at_a_time, 8)


@pytest.mark.timeout(60)
def test_rsocket_asyncio_fire_and_forget_many_waits_for_room_while_the_peer_reads_nothing() -> None:
    _stalled_client_run(_many, 8)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("send", [_one_at_a_time, _many], ids=["one-at-a-time", "many"])
def test_rsocket_asyncio_fire_and_forget_room_counts_the_output_the_engine_still_holds(
    send: Callable[[aio.AsyncClient, bytes, int], Awaitable[object]],
) -> None:
    """While older bytes wait in the connection's buffer a turn leaves the
    engine's new output in the engine (``writes.write_now``): the room a
    part waits for counts both, or every part would go into the engine
    while a buffer smaller than ``high_water`` drains. A high_water above
    one part makes that state come at once against a peer reading nothing."""
    item = b"x" * 512
    part_bytes = FNF_PART * (len(item) + 9)
    high = 4 * part_bytes
    count = 16 * FNF_PART
    peer = StalledPeer()

    async def main() -> None:
        config = LoopConfig(high_water=high, pause_reading_at=None)
        client = await aio.connect(peer.url, loop_config=config)
        client.transport.sock.setsockopt(  # type: ignore[attr-defined]
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
        )
        conn = client._engine.conn  # type: ignore[attr-defined]
        task = asyncio.create_task(send(client, item, count))
        most = 0
        for _ in range(400):  # loop iterations: the task runs as far as it can
            await asyncio.sleep(0)
            most = max(most, client.driver.buffered + conn.queued_output)
        assert not task.done()  # waiting for room, not every part queued
        assert high <= client.driver.buffered + conn.queued_output
        assert most <= high + 2 * part_bytes
        client.abort()
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(task, WAIT)

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        peer.close()


@pytest.mark.timeout(60)
def test_rsocket_asyncio_metadata_push_waits_for_room_while_the_peer_reads_nothing() -> None:
    # A loop of pushes never suspended: every push queued a call on the loop
    # and, run, a frame in the output however much was unwritten.
    item = b"m" * 512
    high = LoopConfig().high_water
    peer = StalledPeer()
    pushed = [0]

    async def pushes(client: aio.AsyncClient, count: int) -> None:
        for _ in range(count):
            await client.metadata_push(item)
            pushed[0] += 1

    async def main() -> None:
        client = await aio.connect(peer.url, metadata_mime_type="application/octet-stream")
        client.transport.sock.setsockopt(  # type: ignore[attr-defined]
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
        )
        count = 4 * high // len(item)
        task = asyncio.create_task(pushes(client, count))
        unwritten = lambda: client.driver.buffered + client._engine.conn.queued_output  # noqa: E731
        most = 0
        for _ in range(count):  # loop iterations, each a push at most
            await asyncio.sleep(0)
            most = max(most, unwritten())
            if task.done():
                break
        assert not task.done()  # waiting for room, not queueing every push
        assert high <= unwritten() and most <= high + 2 * (len(item) + 9)
        peer.go.set()
        await asyncio.wait_for(task, WAIT)
        await client.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        peer.close()
    assert peer.got > 4 * high  # every push arrived


@pytest.mark.timeout(60)
@pytest.mark.parametrize("send", [_one_at_a_time, _many], ids=["one-at-a-time", "many"])
def test_rsocket_asyncio_resumable_fire_and_forget_waits_for_room_while_the_peer_reads_nothing(
    send: Callable[[aio.AsyncClient, bytes, int], Awaitable[object]],
) -> None:
    # A session's driver is no LoopConnection: the room was never waited
    # for, and every part joined the transport's buffer.
    from sansrs.adapters.rsocket.resume.aio import connect_resumable

    _stalled_client_run(send, 8, connect_resumable)
