"""A plain ``connect()`` declares composite metadata (what Spring's and
rsocket-py's routers expect), so ``client.route(...)`` works out of the box;
a plain ``serve`` handler sees what it saw before; raw metadata bytes on such
a connection raise ValueError at the call, before anything is sent (raw
bytes need an explicit ``metadata_mime_type``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sansrs.adapters.rsocket import (
    COMPOSITE_METADATA,
    Client,
    LoadBalancedClient,
    Payload,
    Request,
    Router,
    Server,
    aio,
    connect,
    serve,
)
from sansrs.adapters.rsocket.demo import DemoHandler

from sansrs.rsocket.extensions import compose, composite_framing_error
from sansrs.streams import CollectingSubscriber

WAIT = 10.0
RAW = "application/octet-stream"


class Plain:
    """A plain handler (no router): records the SETUP's metadata MIME type
    and every request's metadata, echoes the data."""

    def __init__(self) -> None:
        self.setup_mime: list[str] = []
        self.metadata: list[bytes | None] = []
        self.pushed = threading.Event()

    def accept_setup(self, setup: Any, peer: object) -> None:
        self.setup_mime.append(setup.metadata_mime_type)

    def request_response(self, request: Request) -> bytes:
        self.metadata.append(request.metadata)
        return request.data

    def metadata_push(self, metadata: bytes) -> None:
        self.metadata.append(metadata)
        self.pushed.set()


@pytest.fixture
def plain() -> Iterator[tuple[Plain, Server]]:
    handler = Plain()
    with serve("tcp://127.0.0.1:0", handler) as server:
        yield handler, server


def test_rsocket_connect_declares_composite_metadata_by_default(
    plain: tuple[Plain, Server],
) -> None:
    handler, server = plain
    with connect(server.url) as c:
        assert c.request_response(b"x", timeout=WAIT) == Payload(b"x")
    assert handler.setup_mime == [COMPOSITE_METADATA]


def test_rsocket_default_metadata_reaches_a_plain_handler_unchanged(
    plain: tuple[Plain, Server],
) -> None:
    handler, server = plain
    composite = compose("tenant.a")
    with connect(server.url) as c:
        c.request_response(b"none", timeout=WAIT)
        c.request_response(b"md", composite, timeout=WAIT)
        c.metadata_push(composite)
        assert handler.pushed.wait(WAIT)
    assert handler.metadata == [None, composite, composite]


def test_rsocket_route_works_out_of_the_box_against_a_router() -> None:
    router = Router()
    router.response("greet.{name}")(lambda r: b"hi " + r.variables["name"].encode())
    with serve("tcp://127.0.0.1:0", router) as server, connect(server.url) as c:
        assert c.route("greet.{name}", "ann").request_response(b"", timeout=WAIT) == Payload(
            b"hi ann"
        )
        with LoadBalancedClient([server.url]) as balanced:
            assert balanced.route("greet.bob").request_response(b"", timeout=WAIT) == Payload(
                b"hi bob"
            )


def _raw_calls(c: Client) -> dict[str, Callable[[], object]]:
    return {
        "request_response": lambda: c.request_response(b"x", b"raw", timeout=WAIT),
        "request_response str": lambda: c.request_response("x", "raw", timeout=WAIT),
        "fire_and_forget": lambda: c.fire_and_forget(b"x", b"raw"),
        "fire_and_forget_many": lambda: c.fire_and_forget_many([(b"x", b"raw")]),
        "metadata_push": lambda: c.metadata_push(b"raw"),
        "request_stream": lambda: c.request_stream(b"x", b"raw"),
        "request_channel": lambda: c.request_channel([b"x"], b"raw"),
        "request_channel pair": lambda: c.request_channel([(b"x", b"raw")]),
        "response_publisher": lambda: c.response_publisher(b"x", b"raw"),
        "stream_publisher": lambda: c.stream_publisher(b"x", b"raw"),
        "channel_publisher": lambda: c.channel_publisher([Payload(b"x", b"raw")]),
        "request_response_many": lambda: list(
            c.request_response_many([(b"x", b"raw")], timeout=WAIT)
        ),
    }


def test_rsocket_raw_metadata_with_the_default_raises_at_the_call(
    plain: tuple[Plain, Server],
) -> None:
    handler, server = plain
    with connect(server.url) as c:
        for name, call in _raw_calls(c).items():
            with pytest.raises(ValueError, match="metadata_mime_type='application/octet-stream'"):
                call()
            assert handler.metadata == [], name  # nothing was sent
        assert c.request_response(b"still", timeout=WAIT) == Payload(b"still")


def test_rsocket_raw_metadata_with_an_explicit_raw_mime_is_sent_as_is(
    plain: tuple[Plain, Server],
) -> None:
    handler, server = plain
    with connect(server.url, metadata_mime_type=RAW) as c:
        assert c.request_response(b"x", b"raw", timeout=WAIT) == Payload(b"x")
        with pytest.raises(ValueError, match="composite metadata"):
            c.route("anything")
    assert (handler.setup_mime, handler.metadata) == ([RAW], [b"raw"])


def test_rsocket_server_requests_are_not_checked_against_the_client_mime() -> None:
    # The server's requester follows its client's declaration; its own
    # metadata is the application's business (plain servers unaffected).
    seen: list[bytes | None] = []
    got = threading.Event()

    class Answering:
        def request_response(self, request: Request) -> bytes:
            seen.append(request.metadata)
            got.set()
            return b"ok"

    with (
        serve("tcp://127.0.0.1:0", handler_factory=DemoHandler) as server,
        connect(server.url, handler=Answering()) as c,
    ):
        c.request_response(b"x", timeout=WAIT)  # the server has its peer now
        (peer,) = server.peers
        done = threading.Event()
        sub: CollectingSubscriber[Payload] = CollectingSubscriber(on_done=lambda _: done.set())
        peer.response_publisher(b"q", b"raw").subscribe(sub)
        assert got.wait(WAIT) and done.wait(WAIT)
    assert (sub.items, sub.error, seen) == ([Payload(b"ok")], None, [b"raw"])


def test_rsocket_async_raw_metadata_with_the_default_raises_at_the_call(
    plain: tuple[Plain, Server],
) -> None:
    handler, server = plain

    async def main() -> None:
        async with await aio.connect(server.url) as client:
            with pytest.raises(ValueError, match="not composite"):
                await client.request_response(b"x", b"raw", timeout=WAIT)
            with pytest.raises(ValueError, match="not composite"):
                await client.fire_and_forget(b"x", b"raw")
            with pytest.raises(ValueError, match="not composite"):
                await client.metadata_push(b"raw")
            with pytest.raises(ValueError, match="not composite"):
                await client.fire_and_forget_many([(b"x", b"raw")])
            with pytest.raises(ValueError, match="not composite"):
                client.request_stream(b"x", b"raw")
            with pytest.raises(ValueError, match="not composite"):
                client.request_channel([b"x"], b"raw")
            md = compose("a.route")
            assert await client.request_response(b"y", md, timeout=WAIT) == Payload(b"y")

    asyncio.run(main())
    assert handler.metadata == [compose("a.route")]


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        (b"", None),
        (compose("r") + compose("s", data_mime="application/json"), None),
        (compose("r") + b"\xab\x00\x00\x00", None),  # an id newer than our table: framed
        (b"raw", "entry type name of 115 bytes runs past the end"),
        (b"\x80", "entry has no complete 24-bit length"),
        (b"\x80\x00\x00\x02x", "entry content runs past the end"),
        (compose("r")[:-1], "entry content runs past the end"),
    ],
)
def test_rsocket_composite_framing_error_names_what_does_not_fit(
    metadata: bytes, error: str | None
) -> None:
    assert composite_framing_error(metadata) == error
