"""The Router and routed clients under asyncio: async handlers, the asyncio
client's ``route(...)``, SETUP rejection; the same answers as the
synchronous drivers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import (
    COMPOSITE_METADATA,
    Payload,
    RoutedRequest,
    Router,
    RSocketError,
    SimpleAuth,
    aio,
    connect,
)

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import response_data_mime
from tests.adapters.rsocket.routed_service import Seen, make_router

#: Raw metadata bytes, declared as such (connect's default is composite).
RAW = "application/octet-stream"

WAIT = 10.0
ANN = SimpleAuth("ann", "pw-ann")


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 40))


def async_router(pushed: asyncio.Event) -> Router:
    router = Router(authenticate=lambda auth: getattr(auth, "username", None))

    @router.response("sum.{a}.{b}", produces="text/plain")
    async def add(request: RoutedRequest) -> bytes:
        await asyncio.sleep(0)
        return b"%d" % (int(request.variables["a"]) + int(request.variables["b"]))

    @router.stream("ticks")
    async def ticks(request: RoutedRequest) -> AsyncIterator[bytes]:
        for i in range(int(request.data)):
            yield b"tick %d for %s" % (i, request.principal.encode())

    @router.channel("upper")
    async def upper(
        request: RoutedRequest, inbound: AsyncIterator[Payload]
    ) -> AsyncIterator[bytes]:
        yield request.data.upper()
        async for item in inbound:
            yield item.data.upper()

    @router.push("ping")
    async def ping(request: RoutedRequest) -> None:
        pushed.set()

    return router


def test_router_async_handlers_and_async_routed_client() -> None:
    async def main() -> None:
        pushed = asyncio.Event()
        async with (
            await aio.serve("tcp://127.0.0.1:0", async_router(pushed)) as server,
            await aio.connect(server.url, auth=ANN) as client,
        ):
            reply = await client.route("sum.{a}.{b}", 2, 3).request_response(b"", timeout=WAIT)
            assert reply is not None and reply.data == b"5"
            assert response_data_mime(reply.metadata, "-") == "text/plain"
            got = [p.data async for p in client.route("ticks").request_stream(b"3", timeout=WAIT)]
            assert got == [b"tick 0 for ann", b"tick 1 for ann", b"tick 2 for ann"]

            async def words() -> AsyncIterator[bytes]:
                for w in (b"a", b"b", b"c"):
                    yield w

            channel = client.route("upper").request_channel(words(), timeout=WAIT)
            assert [p.data async for p in channel] == [b"A", b"B", b"C"]
            channel = client.route("upper").request_channel([b"x", b"y"], timeout=WAIT)
            assert [p.data async for p in channel] == [b"X", b"Y"]
            await client.route("ping").metadata_push()
            await asyncio.wait_for(pushed.wait(), WAIT)
            with pytest.raises(RSocketError) as info:
                await client.route("nope").request_response(b"", timeout=WAIT)
            assert info.value.error_code == ErrorCode.APPLICATION_ERROR
            assert info.value.message == "no handler for route 'nope'"

    run(main)


def test_router_sync_service_under_asyncio_with_fnf_and_auth() -> None:
    seen = Seen()

    async def main() -> None:
        async with (
            await aio.serve("tcp://127.0.0.1:0", make_router(seen)) as server,
            await aio.connect(server.url, metadata_mime_type=COMPOSITE_METADATA) as client,
        ):
            users = client.route("users.{id}.get", 9, auth=ANN)
            assert await users.request_response(b"", timeout=WAIT) == Payload(
                b"9:ann:application/octet-stream"
            )
            with pytest.raises(RSocketError) as info:
                await client.route("users.1.get").request_response(b"", timeout=WAIT)
            assert info.value.error_code == ErrorCode.REJECTED
            await client.route("log", auth=ANN).fire_and_forget(b"line")
            await asyncio.to_thread(seen.fnf.wait, WAIT)
            assert seen.requests[-1].data == b"line"

    run(main)


def test_router_rejects_setup_under_asyncio_and_a_sync_client_sees_it() -> None:
    async def main() -> None:
        async with await aio.serve("tcp://127.0.0.1:0", make_router(Seen())) as server:

            def call() -> None:
                with connect(server.url, auth=SimpleAuth("ann", "bad")) as c:
                    c.route("health").request_response(b"", timeout=WAIT)

            with pytest.raises(ConnectionClosed, match="REJECTED_SETUP"):
                await asyncio.to_thread(call)

    run(main)


def test_async_route_needs_composite_metadata() -> None:
    async def main() -> None:
        async with (
            await aio.serve("tcp://127.0.0.1:0", make_router(Seen())) as server,
            await aio.connect(server.url, metadata_mime_type=RAW) as client,
        ):
            with pytest.raises(ValueError, match="composite metadata"):
                client.route("health")

    run(main)
