"""The Router and routed clients under asyncio: async handlers, the asyncio
client's ``route(...)``, SETUP rejection; the same answers as the
synchronous drivers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import (
    COMPOSITE_METADATA,
    ApplicationError,
    BearerAuth,
    CustomAuth,
    Payload,
    RoutedRequest,
    Router,
    RSocketError,
    SimpleAuth,
    aio,
    connect,
)

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import Authentication, response_data_mime
from sansrs.streams import IterablePublisher
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


# -- an async authenticate, awaited --------------------------------------------------------


class AsyncChecks:
    """An ``async def authenticate``: ann's password, or a bearer token;
    every call is recorded once it has been awaited past a suspension."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    async def __call__(self, auth: Authentication) -> str | None:
        await asyncio.sleep(0)  # a real check awaits (a database, a token service)
        if isinstance(auth, SimpleAuth):
            self.checked.append(auth.username)
            if auth.password == "pw-" + auth.username:
                return auth.username
            raise ApplicationError(f"wrong password for {auth.username}")
        if isinstance(auth, BearerAuth):
            self.checked.append("bearer")
            return "service" if auth.token == "t0ken" else None
        raise ValueError("unexpected credentials")  # logged, answered generically


def async_auth_router(checks: AsyncChecks, published: list[bytes]) -> Router:
    router = Router(authenticate=checks)

    @router.response("whoami")
    def whoami(request: RoutedRequest) -> bytes:
        return request.principal.encode()

    @router.response("whoami.async")
    async def whoami_async(request: RoutedRequest) -> bytes:
        return b"async " + request.principal.encode()

    @router.response("whoami.published")
    def whoami_published(request: RoutedRequest) -> Any:
        return IterablePublisher(lambda: [request.principal.encode()])

    @router.stream("count")
    def count(request: RoutedRequest) -> Iterator[bytes]:
        for i in range(3):
            yield b"%d:%s" % (i, request.principal.encode())

    @router.stream("published")
    def publish(request: RoutedRequest) -> Any:
        return IterablePublisher(lambda: [b"p1", b"p2"])

    @router.channel("echo")
    async def echo(
        request: RoutedRequest, inbound: AsyncIterator[Payload]
    ) -> AsyncIterator[bytes]:
        yield request.principal.encode()
        async for item in inbound:
            yield item.data

    @router.fnf("note")
    async def note(request: RoutedRequest) -> None:
        published.append(request.principal.encode() + b":" + request.data)

    return router


def test_router_async_authenticate_is_awaited_at_setup() -> None:
    async def main() -> None:
        checks = AsyncChecks()
        async with await aio.serve("tcp://127.0.0.1:0", async_auth_router(checks, [])) as server:
            async with await aio.connect(server.url, auth=ANN) as client:
                reply = await client.route("whoami").request_response(b"", timeout=WAIT)
                assert reply == Payload(b"ann")
            assert checks.checked == ["ann"]
            for auth, refusal in (
                (SimpleAuth("ann", "bad"), "wrong password for ann"),
                (BearerAuth("nope"), "authentication failed"),  # None: refused
                (CustomAuth("x/y", b""), "authentication failed"),  # raised: logged
            ):
                async with await aio.connect(server.url, auth=auth) as client:
                    with pytest.raises(ConnectionClosed, match=f"REJECTED_SETUP.*{refusal}"):
                        await client.route("whoami").request_response(b"", timeout=WAIT)

    run(main)


def test_router_async_authenticate_is_awaited_per_request() -> None:
    async def main() -> None:
        checks = AsyncChecks()
        notes: list[bytes] = []
        router = async_auth_router(checks, notes)
        async with (
            await aio.serve("tcp://127.0.0.1:0", router) as server,
            await aio.connect(server.url, metadata_mime_type=COMPOSITE_METADATA) as client,
        ):
            bearer = BearerAuth("t0ken")
            reply = await client.route("whoami", auth=bearer).request_response(b"", timeout=WAIT)
            assert reply == Payload(b"service")
            reply = await client.route("whoami.async", auth=ANN).request_response(
                b"", timeout=WAIT
            )
            assert reply == Payload(b"async ann")
            reply = await client.route("whoami.published", auth=ANN).request_response(
                b"", timeout=WAIT
            )
            assert reply == Payload(b"ann")
            items = client.route("count", auth=ANN).request_stream(b"", timeout=WAIT)
            assert [p.data async for p in items] == [b"0:ann", b"1:ann", b"2:ann"]
            items = client.route("published", auth=ANN).request_stream(b"", timeout=WAIT)
            assert [p.data async for p in items] == [b"p1", b"p2"]
            channel = client.route("echo", auth=ANN).request_channel([b"x", b"y"], timeout=WAIT)
            assert [p.data async for p in channel] == [b"ann", b"y"]
            assert checks.checked == ["bearer", "ann", "ann", "ann", "ann", "ann"]
            # refused: REJECTED, the handler never runs
            for route in ("whoami", "count", "echo"):
                bad = client.route(route, auth=SimpleAuth("ann", "bad"))
                with pytest.raises(RSocketError) as info:
                    if route == "whoami":
                        await bad.request_response(b"", timeout=WAIT)
                    elif route == "count":
                        [p async for p in bad.request_stream(b"", timeout=WAIT)]
                    else:
                        [p async for p in bad.request_channel([b"z"], timeout=WAIT)]
                assert info.value.error_code == ErrorCode.REJECTED
                assert info.value.message == "wrong password for ann"
            await client.route("note", auth=SimpleAuth("ann", "bad")).fire_and_forget(b"no")
            await client.route("note", auth=ANN).fire_and_forget(b"yes")
            while not notes:  # the refused one came first on the same connection
                await asyncio.sleep(0.01)
            assert notes == [b"ann:yes"]
            with pytest.raises(RSocketError) as info:  # no credentials: none required met
                await client.route("whoami").request_response(b"", timeout=WAIT)
            assert info.value.message == "authentication required"

    run(main)


def test_router_async_setup_route_handler_is_awaited_and_can_reject() -> None:
    async def main() -> None:
        router = Router()
        connected: list[str] = []

        @router.setup("client.{name}")
        async def on_connect(request: RoutedRequest) -> None:
            await asyncio.sleep(0)
            if request.variables["name"] == "evil":
                raise PermissionError("go away")
            connected.append(request.variables["name"])

        router.response("hello")(lambda r: b"hello")
        async with await aio.serve("tcp://127.0.0.1:0", router) as server:
            async with await aio.connect(server.url, setup_route="client.a") as client:
                reply = await client.route("hello").request_response(b"", timeout=WAIT)
                assert reply == Payload(b"hello") and connected == ["a"]
            async with await aio.connect(server.url, setup_route="client.evil") as client:
                with pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*go away"):
                    await client.route("hello").request_response(b"", timeout=WAIT)
            assert connected == ["a"]

    run(main)
