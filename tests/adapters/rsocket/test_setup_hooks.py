"""The SETUP hook (``accept_setup(setup, peer)``) on every driver: an
``async def`` hook is awaited by the asyncio server and its verdict
honoured (the SETUP waits, requests pipelined behind it are held and then
answered by the handler it chose; raising, or being cancelled, is
REJECTED_SETUP); the synchronous servers refuse it up front (``TypeError``
at ``serve``) and, where they cannot see it coming (``handler_factory``),
reject the SETUP without running it: never accepted unchecked."""

from __future__ import annotations

import asyncio
import socket
import threading
import warnings
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed, LoopConfig
from sansrs.adapters.rsocket import (
    Payload,
    Request,
    RSocketError,
    aio,
    connect,
    connect_resumable,
    serve,
    serve_resumable,
)

from sansrs.rsocket import Connection, ConnectionConfig, ErrorCode, Role
from sansrs.rsocket.events import ConnectionTerminated

WAIT = 10.0


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 40))


class Answer:
    """The handler an accepted SETUP gets: answers with its name."""

    def __init__(self, name: bytes) -> None:
        self.name = name

    async def request_response(self, request: Request) -> bytes:
        return self.name + b":" + request.data


class AsyncGate:
    """An ``async def accept_setup``: lets in SETUP data ``b"friend"``
    (answered by a per-connection handler), rejects anything else; waits
    for ``release`` first when given one."""

    def __init__(self, release: asyncio.Event | None = None) -> None:
        self.release = release
        self.checked: list[bytes] = []
        self.cancelled = asyncio.Event()

    async def accept_setup(self, setup: Any, peer: object) -> object:
        if self.release is not None:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        self.checked.append(setup.data)
        if setup.data != b"friend":
            raise PermissionError("not a friend")
        return Answer(b"in")

    async def request_response(self, request: Request) -> bytes:
        return b"unchecked"  # only a skipped hook would leave this handler answering


# -- asyncio: awaited, verdict honoured --------------------------------------------------


def test_async_accept_setup_refusing_is_rejected_setup_under_asyncio() -> None:
    async def main() -> None:
        gate = AsyncGate()
        async with await aio.serve("tcp://127.0.0.1:0", gate) as server:
            async with await aio.connect(server.url, setup_data=b"stranger") as client:
                with pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*not a friend"):
                    await client.request_response(b"x", timeout=WAIT)
            assert gate.checked == [b"stranger"]

    run(main)


def test_async_accept_setup_accepting_chooses_the_handler_under_asyncio() -> None:
    async def main() -> None:
        gate = AsyncGate()
        async with (
            await aio.serve("tcp://127.0.0.1:0", gate) as server,
            await aio.connect(server.url, setup_data=b"friend") as client,
        ):
            assert await client.request_response(b"x", timeout=WAIT) == Payload(b"in:x")
            assert gate.checked == [b"friend"]

    run(main)


def test_async_accept_setup_holds_requests_sent_behind_setup_until_it_decides() -> None:
    async def main() -> None:
        release = asyncio.Event()
        gate = AsyncGate(release)
        async with (
            await aio.serve("tcp://127.0.0.1:0", gate) as server,
            await aio.connect(server.url, setup_data=b"friend") as client,
        ):
            asked = asyncio.ensure_future(client.request_response(b"early", timeout=WAIT))
            await client.fire_and_forget(b"f")
            for _ in range(20):  # the server's loop runs, the hook still waits
                await asyncio.sleep(0)
            assert not asked.done() and gate.checked == []
            release.set()
            assert await asked == Payload(b"in:early")  # the chosen handler, not the gate

    run(main)


def test_async_accept_setup_is_bounded_by_the_handshake_timeout() -> None:
    async def main() -> None:
        gate = AsyncGate(asyncio.Event())  # never released
        config = LoopConfig(handshake_timeout=0.3)
        async with (
            await aio.serve("tcp://127.0.0.1:0", gate, loop_config=config) as server,
            await aio.connect(server.url, setup_data=b"friend") as client,
        ):
            with pytest.raises(ConnectionClosed):
                await client.request_response(b"x", timeout=WAIT)
            await asyncio.wait_for(gate.cancelled.wait(), WAIT)  # nobody waits for it
            assert gate.checked == []

    run(main)


def test_async_accept_setup_returning_rsocket_error_keeps_its_setup_code() -> None:
    class Unsupported:
        async def accept_setup(self, setup: Any, peer: object) -> object:
            raise RSocketError(ErrorCode.UNSUPPORTED_SETUP, "no such version")

    async def main() -> None:
        async with (
            await aio.serve("tcp://127.0.0.1:0", Unsupported()) as server,
            await aio.connect(server.url) as client,
        ):
            with pytest.raises(ConnectionClosed, match=r"UNSUPPORTED_SETUP.*no such version"):
                await client.request_response(b"x", timeout=WAIT)

    run(main)


def test_sync_client_sees_the_async_verdict_of_an_asyncio_server() -> None:
    async def main() -> None:
        async with await aio.serve("tcp://127.0.0.1:0", AsyncGate()) as server:

            def call(data: bytes) -> Payload | None:
                with connect(server.url, setup_data=data) as c:
                    return c.request_response(b"x", timeout=WAIT)

            assert await asyncio.to_thread(call, b"friend") == Payload(b"in:x")
            with pytest.raises(ConnectionClosed, match="REJECTED_SETUP"):
                await asyncio.to_thread(call, b"foe")

    run(main)


# -- synchronous drivers: refused, never skipped ------------------------------------------


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_sync_serve_refuses_an_async_accept_setup_up_front(loop: str) -> None:
    with pytest.raises(TypeError, match=r"aio\.serve"):
        serve("tcp://127.0.0.1:0", AsyncGate(), loop=loop)
    with pytest.raises(TypeError, match=r"aio\.serve"):
        serve_resumable("tcp://127.0.0.1:0", AsyncGate(), loop=loop)
    with pytest.raises(TypeError, match=r"aio\.serve"):
        connect("tcp://127.0.0.1:1", handler=AsyncGate(), loop=loop)
    with pytest.raises(TypeError, match=r"aio\.serve"):
        connect_resumable("tcp://127.0.0.1:1", handler=AsyncGate(), loop=loop)


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_sync_server_rejects_setup_when_a_factory_hands_it_an_async_hook(loop: str) -> None:
    gate = AsyncGate()
    with (
        warnings.catch_warnings(),
        serve("tcp://127.0.0.1:0", handler_factory=lambda peer: gate, loop=loop) as server,
        connect(server.url, setup_data=b"friend", loop=loop) as client,
    ):
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        with pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*aio\.serve"):
            client.request_response(b"x", timeout=WAIT)
    assert gate.checked == []  # never ran; and never taken for a yes


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_accept_setup_returning_a_future_defers_the_setup_on_sync_drivers(loop: str) -> None:
    verdicts: list[Future[object]] = []
    reached = [threading.Event(), threading.Event()]

    class Deferred:
        def accept_setup(self, setup: Any, peer: object) -> Future[object]:
            verdicts.append(Future())
            reached[len(verdicts) - 1].set()
            return verdicts[-1]

        def request_response(self, request: Request) -> bytes:
            return b"unchecked"

    with serve("tcp://127.0.0.1:0", Deferred(), loop=loop) as server:
        with connect(server.url, loop=loop) as client:
            outcome: list[object] = []
            caller = threading.Thread(
                target=lambda: outcome.append(_catch(client.request_response, b"x"))
            )
            caller.start()
            assert reached[0].wait(WAIT)
            caller.join(0.2)
            assert caller.is_alive() and outcome == []  # held while undecided
            verdicts[0].set_result(_SyncAnswer())
            caller.join(WAIT)
            assert outcome == [Payload(b"decided:x")]
        with connect(server.url, loop=loop) as client:
            assert reached[1].wait(WAIT)
            verdicts[1].set_exception(PermissionError("later, no"))
            with pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*later, no"):
                client.request_response(b"x", timeout=WAIT)


class _SyncAnswer:
    def request_response(self, request: Request) -> bytes:
        return b"decided:" + request.data


def _catch(call: Callable[..., object], *args: object) -> object:
    try:
        return call(*args, timeout=WAIT)
    except Exception as exc:
        return exc


def test_async_accept_setup_is_awaited_by_the_asyncio_resumable_server() -> None:
    from sansrs.adapters.rsocket.resume.aio import connect_resumable as aconnect_resumable
    from sansrs.adapters.rsocket.resume.aio import serve_resumable as aserve_resumable

    async def main() -> None:
        gate = AsyncGate()
        async with await aserve_resumable("tcp://127.0.0.1:0", gate) as server:
            async with await aconnect_resumable(server.url, setup_data=b"friend") as client:
                assert await client.request_response(b"x", timeout=WAIT) == Payload(b"in:x")
            async with await aconnect_resumable(server.url, setup_data=b"foe") as client:
                with pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*not a friend"):
                    await client.request_response(b"x", timeout=WAIT)
            assert gate.checked == [b"friend", b"foe"]

    run(main)


def test_async_accept_setup_holds_at_most_max_early_frames_behind_setup() -> None:
    """While the hook waits, the frames behind SETUP are held by the core,
    bounded: one more than ``max_early_frames`` ends the connection with
    ERROR[CONNECTION_ERROR] (never an unbounded buffer, never accepted
    unchecked)."""

    def flood(url: str, frames: int) -> Any:
        host, port = url.removeprefix("tcp://").rsplit(":", 1)
        conn = Connection(Role.CLIENT, ConnectionConfig())
        conn.setup()
        for _ in range(frames):
            conn.request_fnf(b"early", None)
        with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
            sock.sendall(conn.data_to_send())
            while True:
                data = sock.recv(65536)
                assert data, "closed without an ERROR frame"
                conn.receive_data(data, 0.0)
                for event in conn.events():
                    if isinstance(event, ConnectionTerminated):
                        return event

    async def main() -> None:
        gate = AsyncGate(asyncio.Event())  # undecided throughout
        async with await aio.serve("tcp://127.0.0.1:0", gate) as server:
            ended = await asyncio.to_thread(flood, server.url, 1025)
            assert ended.error_code == ErrorCode.CONNECTION_ERROR
            assert "too many frames before SETUP was accepted" in ended.message
            await asyncio.wait_for(gate.cancelled.wait(), WAIT)
            assert gate.checked == []

    run(main)
