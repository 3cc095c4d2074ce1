"""A stream's consumer drives its idle connection itself (docs/architecture.md,
"Threads"): a blocking iterator that finds nothing queued reads the socket on
its own thread, and asks for more (REQUEST_N) and cancels on its own thread,
instead of handing each to the connection's thread and waiting to be woken.
The connection's thread is held in a call of the test's (so it reads and
writes nothing): what arrives, arrives only because the consumer drove the
connection. No sleeps: events, hooks and the server's own counts."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConnection
from sansrs.adapters.drive import streams as streams_module
from sansrs.adapters.drive.peer import DrivenPeer
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.drive.streams import StreamIterator
from sansrs.adapters.rsocket import Payload, Request, aio, connect, serve

from ..peers.scripted import Wire, payload_frame, scripted_peer
from .direct import driver_of, reads_by_thread, settle

WAIT = 10.0


class Endless:
    """Streams ``{"n": N}`` items (``"n": -1``: until cancelled); counts what
    its pump pulled and says when that reaches ``reached[0]``."""

    def __init__(self) -> None:
        self.pulled = 0
        self.reached: tuple[int, threading.Event] | None = None
        self.cancelled = threading.Event()

    def request_response(self, request: Request) -> None:
        return None  # completes empty

    def request_stream(self, request: Request) -> Iterator[bytes]:
        n = json.loads(request.data)["n"]
        try:
            i = 0
            while n < 0 or i < n:
                self.pulled += 1
                if self.reached is not None and self.pulled >= self.reached[0]:
                    self.reached[1].set()
                yield b"%d" % i
                i += 1
        except GeneratorExit:
            self.cancelled.set()
            raise


@pytest.fixture
def endless() -> Iterator[tuple[Endless, str]]:
    handler = Endless()
    with serve("tcp://127.0.0.1:0", handler) as server:
        yield handler, server.url


class Held:
    """The connection's own thread (its reactor) held in a call until
    released, the connection idle: a request-response answered (the first
    turns and timers run), what the reactor owed done."""

    def __init__(self, client: Any) -> None:
        driver = self.driver = driver_of(client)
        client.request_response(b"warm", timeout=WAIT)
        settle(driver)
        self._release = threading.Event()
        held = threading.Event()

        def hold() -> None:
            held.set()
            self._release.wait(WAIT)

        driver.loop.call_soon(hold)
        assert held.wait(WAIT)

    def release(self) -> None:
        self._release.set()


def items_of(batches: bool) -> Callable[[Any, int, int], list[Payload]]:
    def consume(client: Any, n: int, prefetch: int) -> list[Payload]:
        request = json.dumps({"n": n})
        if batches:
            got: list[Payload] = []
            with client.request_stream_batches(request, prefetch=prefetch, timeout=WAIT) as lists:
                for batch in lists:
                    got.extend(batch)
            return got
        with client.request_stream(request, prefetch=prefetch, timeout=WAIT) as items:
            return list(items)

    return consume


@pytest.mark.parametrize("batches", [False, True], ids=["items", "batches"])
def test_a_waiting_stream_consumer_reads_its_items_on_its_own_thread(
    endless: tuple[Endless, str],
    loop_kind: str | Loop,
    monkeypatch: pytest.MonkeyPatch,
    batches: bool,
) -> None:
    _, url = endless
    with connect(url, loop=loop_kind) as client:
        held = Held(client)
        try:
            readers = reads_by_thread(monkeypatch, client)
            # 1,000 items through a window of 64: the REQUEST_STREAM and every
            # REQUEST_N written, and every item read, by this thread.
            got = items_of(batches)(client, 1000, 64)
        finally:
            held.release()
        assert got == [Payload(b"%d" % i) for i in range(1000)]
        assert readers and set(readers) == {threading.get_ident()}
        assert client.request_response(b"?", timeout=WAIT) is None  # the connection goes on


def test_a_stream_consumer_asks_for_more_on_its_own_thread(
    endless: tuple[Endless, str], loop_kind: str | Loop
) -> None:
    handler, url = endless
    with connect(url, loop=loop_kind) as client:
        held = Held(client)
        try:
            with client.request_stream(json.dumps({"n": -1}), prefetch=8, timeout=WAIT) as items:
                for _ in range(4):  # half the window: REQUEST_N 4 is due
                    next(items)
                reached = threading.Event()
                handler.reached = (12, reached)
                if handler.pulled < 12:
                    # Only a REQUEST_N written by this thread lets the server go
                    # past the window: the connection's thread writes nothing.
                    assert reached.wait(WAIT)
            # Closing the iterator cancels on this thread, too.
            assert handler.cancelled.wait(WAIT)
        finally:
            held.release()


def test_a_reactor_that_finds_the_connection_taken_stops_watching_until_it_is_back(
    loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve("tcp://127.0.0.1:0", Endless())
    with server, connect(server.url, loop=loop_kind) as client:
        driver = driver_of(client)
        client.request_response(b"warm", timeout=WAIT)
        settle(driver)
        missed = threading.Event()
        misses: list[int] = []
        miss = LoopConnection._miss

        def hooked_miss(self: LoopConnection) -> None:
            misses.append(1)
            miss(self)
            missed.set()

        monkeypatch.setattr(LoopConnection, "_miss", hooked_miss)
        release = threading.Event()
        taken = threading.Event()

        def hold() -> None:  # a direct call that waits for nothing: the socket stays watched
            taken.set()
            release.wait(WAIT)

        holder = threading.Thread(target=driver.call_direct, args=(hold, lambda: True, 0.0))
        holder.start()
        try:
            assert taken.wait(WAIT)
            # The peer writes: the client's socket is readable while it is taken.
            server.peers[0].fire_and_forget(b"readable")
            assert missed.wait(WAIT)
            passes = threading.Event()
            driver.loop.call_soon(passes.set)  # another pass of the reactor (it polls first)
            assert passes.wait(WAIT)
            assert len(misses) == 1  # not once per pass: it no longer watches the socket
        finally:
            release.set()
            holder.join(WAIT)
        # Back: the reactor watches (and reads) the socket again.
        assert client.request_response(b"after", timeout=WAIT) is None


def _one_item_then_garbage(wire: Wire) -> None:
    sid, _ = wire.read_request()  # the warm-up request-response
    wire.send_frame(payload_frame(sid, b"warm", complete=True))
    sid, _ = wire.read_request()  # the stream
    wire.send_frame(payload_frame(sid, b"first"))
    wire.send_frame(b"garbage!!")  # a frame of no RSocket type
    wire.hold()


@pytest.mark.timeout(30)
def test_a_protocol_error_read_by_the_consumer_ends_its_stream_with_that_error(
    loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scripted_peer(_one_item_then_garbage) as peer, connect(peer.url, loop=loop_kind) as client:
        driver = driver_of(client)
        got: list[Payload] = []
        ended: queue.Queue[BaseException | None] = queue.Queue()

        def consume() -> None:
            try:
                with client.request_stream(b"q", timeout=WAIT) as items:
                    got.extend(items)
                ended.put(None)
            except BaseException as exc:
                ended.put(exc)

        consumer = threading.Thread(target=consume)
        broken = threading.Event()
        feed = driver._feed

        def hooked(data: bytes, now: float) -> None:
            feed(data, now)
            if threading.get_ident() == consumer.ident and driver.engine.wants_close():
                broken.set()  # the garbage was read on the consumer's thread

        monkeypatch.setattr(driver, "_feed", hooked)
        held = Held(client)
        try:
            consumer.start()
            assert broken.wait(WAIT)
        finally:
            # The connection's thread finishes the connection (the consumer
            # handed it back, asking for a turn): the stream ends with why.
            released = time.monotonic()
            held.release()
        error = ended.get(timeout=WAIT)
        consumer.join(WAIT)
        assert isinstance(error, ConnectionClosed), error
        assert "protocol error" in str(error)
        assert time.monotonic() - released < WAIT / 2  # not the iterator's timeout
        assert got == [Payload(b"first")]
        assert client.wait_closed(WAIT)


def test_asyncio_stream_consumer_request_n_leaves_without_yielding_to_the_loop(
    endless: tuple[Endless, str],
) -> None:
    handler, url = endless

    async def main() -> None:
        async with await aio.connect(url) as client, client.request_stream(
            json.dumps({"n": -1}), prefetch=8, timeout=WAIT
        ) as items:
            for _ in range(4):  # half the window: REQUEST_N 4 is due
                await items.__anext__()
            reached = threading.Event()
            handler.reached = (12, reached)
            if handler.pulled < 12:
                # The loop is blocked here, as by a consumer busy with its
                # items: only a REQUEST_N already written lets the server on.
                assert reached.wait(WAIT)

    asyncio.run(asyncio.wait_for(main(), 3 * WAIT))


# -- StreamIterator with a driver's direct call, alone ---------------------------------


def test_stream_iterator_waits_on_its_queue_when_the_connection_is_busy() -> None:
    queue: CreditQueue[int] = CreditQueue(granted=4)
    reactor = threading.Thread(target=queue.put_many, args=([1, 2],))

    def busy(call: Any, until: Callable[[], bool], timeout: float | None) -> bool:
        assert timeout == 5.0 and not until()
        reactor.start()  # the connection's thread reads and delivers
        return False  # (the connection was taken: nothing done here)

    items = StreamIterator(queue, 4, lambda n: None, lambda: None, 5.0, drive=busy)
    assert items.next_batch() == [1, 2]
    reactor.join(WAIT)


class Recording(CreditQueue[int]):
    """A queue that records the timeout of each wait for a batch."""

    def __init__(self) -> None:
        super().__init__(granted=4)
        self.timeouts: list[float | None] = []

    def get_batch(self, timeout: float | None = None, max_items: int = 1024) -> list[int]:
        self.timeouts.append(timeout)
        return super().get_batch(timeout, max_items)


def test_stream_iterator_timeout_counts_the_direct_read_and_names_the_callers_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = Recording()
    clock = [100.0]
    monkeypatch.setattr(streams_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    def silent(call: Any, until: Callable[[], bool], timeout: float | None) -> bool:
        assert timeout == 0.2 and not until()
        clock[0] += 0.2  # the direct read waited its whole timeout: nothing came
        return True

    items = StreamIterator(queue, 4, lambda n: None, lambda: None, 0.2, drive=silent)
    with pytest.raises(TimeoutError, match=r"^no item within 0\.2 s$"):
        next(items)
    assert queue.timeouts == [0.0]  # the queue is not waited on for the timeout again


class Driver:
    """A driver that records how a call reached it (``direct``: its
    ``call_direct`` answer; None: it has none, as under asyncio)."""

    def __init__(self, direct: bool | None) -> None:
        self.calls: list[tuple[str, float | None]] = []
        self.is_owner = False
        if direct is not None:

            def call_direct(call: Any, until: Callable[[], bool], timeout: float | None) -> bool:
                self.calls.append(("direct", timeout))
                if direct:
                    call()
                return direct

            self.call_direct = call_direct

    def call_soon(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        self.calls.append(("soon", timeout))
        fn()


@pytest.mark.parametrize(
    ("direct", "path"),
    [(True, [("direct", 0.0)]), (False, [("direct", 0.0), ("soon", 2.0)]), (None, [("soon", 2.0)])],
    ids=["idle", "busy", "no-direct-calls"],
)
def test_submit_direct_runs_here_when_idle_and_hands_over_otherwise(
    direct: bool | None, path: list[tuple[str, float | None]]
) -> None:
    driver = Driver(direct)
    ran: list[int] = []
    DrivenPeer(driver)._submit_direct(lambda: ran.append(1), 2.0)  # type: ignore[arg-type]
    assert ran == [1]  # exactly once, whichever way
    assert driver.calls == path

