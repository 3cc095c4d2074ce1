"""sansrs.adapters.rsocket.aio: the RSocket engine under asyncio, with async
iterators for streams, async handlers, and interop with the other drivers."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import aio
from sansrs.adapters.rsocket.client import connect as sync_connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.server import serve as sync_serve
from sansrs.adapters.rsocket.types import Payload, Request

from tests.adapters.transport.tls_certs import certs

#: Raw metadata bytes, declared as such (connect's default is composite).
RAW = "application/octet-stream"

WAIT = 10.0


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 40))


def _options(transport: str, tmp: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if transport == "tcp":
        return "tcp://127.0.0.1:0", {}, {}
    if transport == "unix":
        return f"unix://{tmp}/aio.sock", {}, {}
    c = certs()
    return (
        "tls://127.0.0.1:0",
        {"ssl_context": c.server_context()},
        {"ssl_context": c.client_context()},
    )


@pytest.mark.parametrize("transport", ["tcp", "unix", "tls"])
def test_every_interaction_model(transport: str, tmp_path: Path) -> None:
    url, server_opts, client_opts = _options(transport, tmp_path)

    async def main() -> None:
        async with (
            await aio.serve(url, handler_factory=DemoHandler, **server_opts) as server,
            await aio.connect(server.url, metadata_mime_type=RAW, **client_opts) as client,
        ):
            assert await client.request_response(b"hi", b"md", timeout=WAIT) == Payload(
                b"hi", b"md"
            )
            with pytest.raises(RSocketError) as info:
                await client.request_response(b"error: x", timeout=WAIT)
            assert info.value.error_code == 0x201
            for _ in range(3):
                await client.fire_and_forget(b"f")
            await client.metadata_push(b"pushed")
            assert await client.request_response(b"fnf-count", timeout=WAIT) == Payload(b"3")
            assert await client.request_response(b"mp-last", timeout=WAIT) == Payload(
                b"last=pushed"
            )
            request = json.dumps({"n": 1000, "size": 5})
            got = [p.data async for p in client.request_stream(request, prefetch=32)]
            assert got == [str(i).zfill(5).encode() for i in range(1000)]

            async def outbound() -> AsyncIterator[Payload]:
                for i in range(100):
                    yield Payload(b"c%d" % i, b"m%d" % i)

            echoed = [p async for p in client.request_channel(outbound(), prefetch=16)]
            assert echoed == [Payload(b"c%d" % i, b"m%d" % i) for i in range(100)]
            echoed = [p.data async for p in client.request_channel([b"a", b"b"], timeout=WAIT)]
            assert echoed == [b"a", b"b"]
            big = bytes(range(256)) * 8192
            reply = await client.request_response(big, timeout=WAIT)
            assert reply is not None and reply.data == big
            (peer,) = server.peers
            with pytest.raises(RSocketError) as info:
                await peer.request_response(b"to the client", timeout=WAIT)
            assert info.value.error_code == 0x202  # the client has no handler

    run(main)
    if transport == "unix":
        assert not (tmp_path / "aio.sock").exists()


class AsyncHandler:
    def __init__(self) -> None:
        self.pulled = 0
        self.stream_closed = asyncio.Event()

    async def request_response(self, request: Request) -> bytes | None:
        await asyncio.sleep(0)
        if request.data == b"boom":
            raise ValueError("async handler exploded")
        if request.data == b"empty":
            return None
        return request.data.upper()

    async def request_stream(self, request: Request) -> AsyncIterator[bytes]:
        try:
            for i in range(10_000_000):
                self.pulled += 1
                yield b"%d" % i
        finally:
            self.stream_closed.set()

    async def request_channel(
        self, request: Request, inbound: AsyncIterator[Payload]
    ) -> AsyncIterator[bytes]:
        yield b"first:" + request.data
        async for p in inbound:
            yield p.data[::-1]


def test_async_handlers_are_awaited_and_pulled_within_credit() -> None:
    async def main() -> None:
        handler = AsyncHandler()
        async with (
            await aio.serve("tcp://127.0.0.1:0", handler) as server,
            await aio.connect(server.url) as client,
        ):
            assert await client.request_response(b"up", timeout=WAIT) == Payload(b"UP")
            assert await client.request_response(b"empty", timeout=WAIT) is None
            with pytest.raises(RSocketError, match="async handler exploded") as info:
                await client.request_response(b"boom", timeout=WAIT)
            assert info.value.error_code == 0x201
            stream = client.request_stream(b"", prefetch=64, timeout=WAIT)
            first = await anext(stream)
            assert first.data == b"0"
            # A full round trip later the generator is still within the window.
            assert await client.request_response(b"sync", timeout=WAIT) == Payload(b"SYNC")
            assert handler.pulled <= 64 + 1
            await stream.aclose()
            await asyncio.wait_for(handler.stream_closed.wait(), WAIT)
            got = [p.data async for p in client.request_channel([b"ab", b"cd", b"ef"])]
            assert got == [b"first:ab", b"dc", b"fe"]

    run(main)


def test_timeout_and_task_cancellation_cancel_the_request() -> None:
    async def main() -> None:
        release = asyncio.Event()

        class Slow:
            async def request_response(self, request: Request) -> bytes:
                await release.wait()
                return b"late"

        async with (
            await aio.serve("tcp://127.0.0.1:0", Slow()) as server,
            await aio.connect(server.url) as client,
        ):
            with pytest.raises(TimeoutError):
                await client.request_response(b"x", timeout=0.05)
            task = asyncio.ensure_future(client.request_response(b"y"))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            release.set()
            assert await client.request_response(b"z", timeout=WAIT) == Payload(b"late")

    run(main)


def test_asyncio_client_against_selector_server_and_sync_client_against_asyncio() -> None:
    with sync_serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop="selector") as srv:

        async def main() -> None:
            async with await aio.connect(srv.url) as client:
                request = json.dumps({"n": 300, "size": 3})
                assert len([p async for p in client.request_stream(request)]) == 300

        run(main)

    async def main2() -> None:
        async with await aio.serve("tcp://127.0.0.1:0", AsyncHandler()) as server:

            def blocking() -> list[bytes]:
                with sync_connect(server.url) as c:
                    assert c.request_response(b"sync", timeout=WAIT) == Payload(b"SYNC")
                    with c.request_stream(b"", prefetch=8, timeout=WAIT) as items:
                        return [next(items).data for _ in range(20)]

            assert await asyncio.to_thread(blocking) == [b"%d" % i for i in range(20)]

    run(main2)


def test_dead_peer_fails_outstanding_requests_via_keepalive() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    t = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    t.start()

    async def main() -> None:
        client = await aio.connect(
            f"tcp://127.0.0.1:{port}", keepalive_interval=0.05, max_lifetime=0.3
        )
        with pytest.raises(ConnectionClosed, match=r"keepalive|lifetime|silent"):
            await client.request_response(b"anyone?", timeout=WAIT)
        await asyncio.wait_for(client.wait_closed(), WAIT)
        assert client.closed
        with pytest.raises(ConnectionClosed):
            await client.request_response(b"again")

    try:
        run(main)
    finally:
        t.join(WAIT)
        for s in accepted:
            s.close()
        listener.close()


def test_server_close_and_abort_fail_outstanding_streams() -> None:
    async def main() -> None:
        server = await aio.serve("tcp://127.0.0.1:0", handler_factory=DemoHandler)
        client = await aio.connect(server.url)
        endless = json.dumps({"n": 10_000_000, "size": 4})
        stream = client.request_stream(endless, prefetch=8, timeout=WAIT)
        await anext(stream)
        await server.close(timeout=WAIT)
        with pytest.raises(ConnectionClosed):
            async for _ in stream:
                pass
        await asyncio.wait_for(client.wait_closed(), WAIT)

        server = await aio.serve("tcp://127.0.0.1:0", handler_factory=DemoHandler)
        client = await aio.connect(server.url)
        stream = client.request_stream(endless, prefetch=8, timeout=WAIT)
        await anext(stream)
        client.abort()
        with pytest.raises(ConnectionClosed, match="abort"):
            async for _ in stream:
                pass
        await server.close(timeout=WAIT)

    run(main)


def test_tls_host_name_is_checked_by_default() -> None:
    import ssl

    async def main() -> None:
        c = certs()
        async with await aio.serve(
            "tls://127.0.0.1:0", DemoHandler(), ssl_context=c.server_context()
        ) as server:
            with pytest.raises(ssl.SSLCertVerificationError):
                await aio.connect(server.url)  # system CAs do not know ours
            with pytest.raises(ssl.SSLCertVerificationError):
                await aio.connect(
                    server.url, ssl_context=c.client_context(), server_hostname="example.com"
                )

    run(main)


def test_bad_arguments_are_refused() -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="ssl_context"):
            await aio.serve("tls://127.0.0.1:0", DemoHandler())
        with pytest.raises(ValueError, match="scheme"):
            await aio.connect("http://127.0.0.1:1/x")
        with pytest.raises(TypeError):
            await aio.serve("tcp://127.0.0.1:0", DemoHandler(), handler_factory=DemoHandler)

    run(main)


def test_a_peer_that_never_reads_is_no_longer_read_from() -> None:
    """Back-pressure on output: a raw peer floods request-responses and reads
    nothing. Past ``pause_reading_at`` buffered answers the server stops
    reading it, so what it can send stays bounded."""
    import select

    from sansrs.adapters.drive import LoopConfig

    from sansrs.rsocket import Connection, Role

    config = LoopConfig(high_water=64 * 1024, pause_reading_at=256 * 1024)
    stop = threading.Event()
    info: dict[str, Any] = {}

    async def serve_until_stopped(ready: threading.Event) -> None:
        async with await aio.serve(
            "tcp://127.0.0.1:0", DemoHandler(), loop_config=config
        ) as server:
            info["url"] = server.url
            ready.set()
            info["buffered"] = 0
            while not stop.is_set():
                await asyncio.sleep(0.01)
                for peer in server.peers:
                    info["buffered"] = max(info["buffered"], peer.driver.buffered)

    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(serve_until_stopped(ready)))
    thread.start()
    try:
        assert ready.wait(WAIT)
        port = int(info["url"].rsplit(":", 1)[1])
        sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        core = Connection(Role.CLIENT)
        core.setup()
        sock.sendall(core.data_to_send())
        sock.setblocking(False)
        sent = 0
        pending = b""
        while sent < 64 * 1024 * 1024:
            if not pending:
                for _ in range(64):
                    core.request_response(b"r" * 1000)
                pending = core.data_to_send()
            if not select.select([], [sock], [], 0.5)[1]:
                break  # nothing drained for 0.5 s: the server stopped reading
            try:
                n = sock.send(pending)
            except BlockingIOError:
                continue
            sent += n
            pending = pending[n:]
        assert sent < 16 * 1024 * 1024, sent
        sock.close()
    finally:
        stop.set()
        thread.join(WAIT)
    assert info["buffered"] < 256 * 1024 + 512 * 1024


def test_express_requests_written_in_part_are_finished_by_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The express path writes a request's frame itself: when the socket
    takes a part, the rest waits in the driver's buffer, the requests after
    it queue behind it (never ahead), and the loop writes them; every answer
    arrives, in order, under concurrency too."""

    async def main() -> None:
        async with (
            await aio.serve("tcp://127.0.0.1:0", handler_factory=DemoHandler) as server,
            await aio.connect(server.url) as client,
        ):
            assert await client.request_response(b"warm", timeout=WAIT) == Payload(b"warm")
            transport = client._driver.transport
            original = transport.send
            short = [True]

            def send(data: Any) -> int:
                if short and len(data) > 4:
                    short.clear()
                    return int(original(bytes(data[:4])))  # the kernel took 4 bytes
                return int(original(data))

            monkeypatch.setattr(transport, "send", send)
            answers = await asyncio.gather(
                *(client.request_response(b"q%d" % i, timeout=WAIT) for i in range(3))
            )
            assert answers == [Payload(b"q0"), Payload(b"q1"), Payload(b"q2")]
            assert not short  # the short write happened
            assert await client.request_response("text", timeout=WAIT) == Payload(b"text")

    run(main)
