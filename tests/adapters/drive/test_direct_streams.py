"""A stream's consumer asks for more (REQUEST_N) and cancels on its own thread
while its connection is idle (docs/architecture.md, "Threads"), instead of
handing each to the connection's thread, where it waited for the GIL until
the consumer ran dry. The connection's thread is held in a call of the
test's (so it writes nothing): what the server sees, it sees only because
the consumer wrote it. No sleeps: events, hooks and the server's own counts."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import Loop, LoopConnection
from sansrs.adapters.drive.peer import DrivenPeer
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.rsocket import Payload, Request, aio, connect, serve

from ..peers.scripted import Wire, payload_frame
from .direct import driver_of, settle

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


@pytest.fixture(params=["tcp://127.0.0.1:0", "ws://127.0.0.1:0/rsocket"], ids=["tcp", "ws"])
def endless(request: pytest.FixtureRequest) -> Iterator[tuple[Endless, str]]:
    """The server, over TCP and over WebSocket: a ws:// consumer's REQUEST_N
    takes the same direct write (its transport frames and masks it on the
    consumer's thread), or ws streams would wait for the GIL where TCP's do
    not (issue #34: WebSocket within 10 % of TCP)."""
    handler = Endless()
    with serve(request.param, handler) as server:
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


def test_a_stream_consumer_asks_for_more_on_its_own_thread(
    endless: tuple[Endless, str], loop_kind: str | Loop
) -> None:
    handler, url = endless
    with (
        connect(url, loop=loop_kind) as client,
        client.request_stream(json.dumps({"n": -1}), prefetch=8, timeout=WAIT) as items,
    ):
        for _ in range(3):
            next(items)
        # The window's 8 items are queued (the warm-up's answer in Held
        # came after them); the connection's thread is held from here.
        held = Held(client)
        try:
            reached = threading.Event()
            handler.reached = (12, reached)
            next(items)  # the 4th: half the window, REQUEST_N 4 is due
            if handler.pulled < 12:
                # Only a REQUEST_N written by this thread lets the server go
                # past the window: the connection's thread writes nothing.
                assert reached.wait(WAIT)
            items.close()
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


class Recording(CreditQueue[int]):
    """A queue that records the timeout of each wait for a batch."""

    def __init__(self) -> None:
        super().__init__(granted=4)
        self.timeouts: list[float | None] = []

    def get_batch(self, timeout: float | None = None, max_items: int = 1024) -> list[int]:
        self.timeouts.append(timeout)
        return super().get_batch(timeout, max_items)


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

