"""Every protocol under asyncio, over TCP and WebSocket: rsio and Ditto run
on the same asyncio driver as RSocket (the engine contract), interoperate
with the synchronous API in both directions, and serve async sources."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from sansrs.adapters import ditto, rsio, rsocket
from sansrs.adapters.ditto import aio as ditto_aio
from sansrs.adapters.ditto.history import HistoryRequest, InMemoryHistory
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsio import aio as rsio_aio
from sansrs.adapters.rsio.demo import CounterPublisher, demo_publishers
from sansrs.adapters.rsocket import aio as rsocket_aio
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.transport.websocket import WebSocketHandshakeError

from sansrs.ditto import DittoRemoteError
from sansrs.streams import IterablePublisher

WAIT = 10.0
URLS = {"tcp": "tcp://127.0.0.1:0", "ws": "ws://127.0.0.1:0/rs"}
NS = "org.eclipse.ditto"


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 30))


def counter(i: int) -> bytes:
    return struct.pack(">Q", i)


async def squares(n: int) -> AsyncIterator[bytes]:
    for i in range(n):
        await asyncio.sleep(0)  # a real async source: yields to the loop
        yield b"%d" % (i * i)


def rsio_publishers(name: str) -> Any:
    if name == "squares":
        return squares(50)
    if name == "listed":
        return [b"a", b"b", b"c"]
    return demo_publishers(name)


@pytest.mark.parametrize("transport", ["tcp", "ws"])
def test_rsio_asyncio_client_and_server(transport: str) -> None:
    async def main() -> None:
        async with (
            await rsio_aio.serve(URLS[transport], rsio_publishers) as server,
            await rsio_aio.connect(server.url) as client,
        ):
            got = [x async for x in client.subscribe("counter/1000", prefetch=64, timeout=WAIT)]
            assert got == [counter(i) for i in range(1000)]
            packed = b"".join(
                [b async for b in client.subscribe_packed("counter/5000", prefetch=512)]
            )
            assert packed == b"".join(counter(i) for i in range(5000))
            assert [x async for x in client.subscribe("squares", prefetch=4)] == [
                b"%d" % (i * i) for i in range(50)
            ]
            assert [x async for x in client.subscribe("listed")] == [b"a", b"b", b"c"]
            with pytest.raises(rsio.RsioError, match="no publisher"):
                async for _ in client.subscribe("missing"):
                    pass
            # cancel early: the connection stays usable
            stream = client.subscribe("counter", prefetch=8)
            assert await anext(stream) == counter(0)
            await stream.aclose()
            assert [x async for x in client.subscribe("counter/3")] == [
                counter(i) for i in range(3)
            ]
            (peer,) = server.peers
            assert not peer.closed

    run(main)


@pytest.mark.parametrize("transport", ["tcp", "ws"])
def test_rsio_asyncio_interoperates_with_the_threaded_api(transport: str) -> None:
    """An async client of a threaded server, and a threaded client of an async
    server (run on another thread: the threaded client blocks)."""

    async def main() -> None:
        with rsio.serve(URLS[transport], demo_publishers) as sync_server:
            async with await rsio_aio.connect(sync_server.url) as client:
                got = [x async for x in client.subscribe("counter/100")]
                assert got == [counter(i) for i in range(100)]
        async with await rsio_aio.serve(URLS[transport], rsio_publishers) as server:

            def threaded_client() -> list[bytes]:
                with rsio.connect(server.url) as c:
                    return list(c.subscribe("squares", timeout=WAIT))

            got = await asyncio.to_thread(threaded_client)
            assert got == [b"%d" % (i * i) for i in range(50)]

    run(main)


def test_rsio_asyncio_publisher_of_the_peer() -> None:
    """``publisher(name)`` under asyncio: a Reactive Streams Publisher whose
    signals arrive on the event loop's thread."""

    async def main() -> None:
        async with (
            await rsio_aio.serve(
                URLS["tcp"], {"abc": IterablePublisher(lambda: [b"a", b"b", b"c"])}
            ) as server,
            await rsio_aio.connect(server.url) as client,
        ):
            done = asyncio.get_running_loop().create_future()
            seen: list[bytes] = []

            class Collect:
                def on_subscribe(self, s: Any) -> None:
                    s.request(10)

                def on_next(self, item: bytes) -> None:
                    seen.append(item)

                def on_error(self, e: BaseException) -> None:
                    done.set_exception(e)

                def on_complete(self) -> None:
                    done.set_result(None)

            client.publisher("abc").subscribe(Collect())
            await asyncio.wait_for(done, WAIT)
            assert seen == [b"a", b"b", b"c"]

    run(main)


def _history() -> InMemoryHistory:
    return InMemoryHistory(
        {
            "topic": f"{NS}/thing-{t}/things/twin/events/modified",
            "headers": {},
            "path": "/attributes/counter",
            "value": i,
            "revision": i,
            "timestamp": f"2023-01-01T00:00:{i:02d}Z",
        }
        for t in (1, 2)
        for i in range(1, 21)
    )


class AsyncHistory:
    """A history source whose ``open`` returns an async generator."""

    def __init__(self) -> None:
        self.inner = _history()

    def open(self, request: HistoryRequest) -> Any:
        events = list(self.inner.open(request))

        async def gen() -> AsyncIterator[Any]:
            for event in events:
                await asyncio.sleep(0)
                yield event

        return gen()


@pytest.mark.parametrize("source", ["iterable", "async"])
def test_ditto_asyncio_client_and_server(source: str) -> None:
    history = _history() if source == "iterable" else AsyncHistory()

    async def main() -> None:
        async with (
            await ditto_aio.serve(
                "ws://127.0.0.1:0/ws/2", history, authenticate=ditto.require_bearer("t0k")
            ) as server,
            await ditto_aio.connect(server.url, token="t0k") as client,
        ):
            events = [
                e
                async for e in client.subscribe_for_persisted_events(
                    f"{NS}:thing-1", from_revision=5, to_revision=9, prefetch=2, timeout=WAIT
                )
            ]
            assert [e["revision"] for e in events] == [5, 6, 7, 8, 9]
            with pytest.raises(DittoRemoteError) as info:
                async for _ in client.subscribe_for_persisted_events(f"{NS}:nothing"):
                    pass
            assert info.value.status == 404
            if source == "iterable":
                pages = [p async for p in client.search(options="size(1)")]
                assert [len(p) for p in pages] == [1, 1]
            (peer,) = server.peers
            assert peer.inspect(lambda engine: engine.open_subscriptions) == 0
            with pytest.raises(WebSocketHandshakeError) as refused:
                await ditto_aio.connect(server.url, token="wrong")
            assert refused.value.status == 401

    run(main)


def test_ditto_asyncio_interoperates_with_the_threaded_api() -> None:
    async def main() -> None:
        with ditto.serve("ws://127.0.0.1:0/ws/2", _history()) as sync_server:
            async with await ditto_aio.connect(sync_server.url) as client:
                got = [
                    e["revision"]
                    async for e in client.subscribe_for_persisted_events(
                        f"{NS}:thing-2", from_revision=-3
                    )
                ]
                assert got == [18, 19, 20]
        async with await ditto_aio.serve("ws://127.0.0.1:0/ws/2", _history()) as server:

            def threaded_client() -> list[int]:
                with ditto.connect(server.url) as c:
                    stream = c.subscribe_for_persisted_events(f"{NS}:thing-1", timeout=WAIT)
                    return [e["revision"] for e in stream]

            assert await asyncio.to_thread(threaded_client) == list(range(1, 21))

    run(main)


def test_rsocket_asyncio_over_websocket() -> None:
    async def main() -> None:
        async with (
            await rsocket_aio.serve(URLS["ws"], handler_factory=DemoHandler) as server,
            await rsocket_aio.connect(server.url) as client,
        ):
            reply = await client.request_response(b"hi", timeout=WAIT)
            assert reply == rsocket.Payload(b"hi")
            got = [p.data async for p in client.request_stream(b'{"n": 300, "size": 3}')]
            assert got == [str(i).zfill(3).encode() for i in range(300)]

    run(main)


def test_asyncio_close_fails_outstanding_calls_with_connection_closed() -> None:
    async def main() -> None:
        async with await rsio_aio.serve(URLS["tcp"], {"forever": CounterPublisher()}) as server:
            client = await rsio_aio.connect(server.url)
            stream = client.subscribe("forever", prefetch=4)
            assert await anext(stream) == counter(0)
            await server.close()
            with pytest.raises(ConnectionClosed):
                async for _ in stream:
                    pass
            await client.wait_closed()
            assert client.closed

    run(main)
