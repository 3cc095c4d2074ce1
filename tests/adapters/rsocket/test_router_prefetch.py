"""A channel route's own inbound window (``Router.channel(route,
prefetch=, batch=)``), seen on the wire by a scripted requester (a plain
socket, the core's client ``Connection`` encoding and decoding frames): the
REQUEST_N that opens the window is the route's ``prefetch``, the refills
its ``batch``; other routes keep the router's window. Every driver."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.rsocket import COMPOSITE_METADATA, Payload, RoutedRequest, Router, aio, serve
from sansrs.adapters.rsocket.routing import RouterConnection

from sansrs.rsocket import Connection, ConnectionConfig, Role
from sansrs.rsocket.events import RequestNReceived
from sansrs.rsocket.extensions import compose

WAIT = 10.0


def _router() -> Router:
    router = Router(channel_prefetch=64)

    @router.channel("small", prefetch=4, batch=2)
    def small(request: RoutedRequest, inbound: Iterator[Payload]) -> Iterator[bytes]:
        for item in inbound:
            yield item.data

    @router.channel("plain")
    def plain(request: RoutedRequest, inbound: Iterator[Payload]) -> Iterator[bytes]:
        for item in inbound:
            yield item.data

    return router


class Requester:
    """A scripted client over a plain socket: what it sends is exactly the
    frames the core encodes; what it reads, the events the core decodes."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("tcp://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT)
        self.conn = Connection(Role.CLIENT, ConnectionConfig())
        self.conn.setup(metadata_mime_type=COMPOSITE_METADATA)
        self.demand: list[tuple[int, int]] = []

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def next_demand(self) -> tuple[int, int]:
        """The next REQUEST_N received: (stream id, n)."""
        while not self.demand:
            data = self.sock.recv(65536)
            assert data, "the server closed the connection"
            self.conn.receive_data(data, 0.0)
            for event in self.conn.events():
                if isinstance(event, RequestNReceived):
                    self.demand.append((event.stream_id, event.n))
        return self.demand.pop(0)

    def close(self) -> None:
        self.sock.close()


def _observe_windows(url: str) -> dict[str, Any]:
    """The REQUEST_Ns each route's channel gets: the opening one, and the
    refill after ``batch`` items were consumed."""
    requester = Requester(url)
    try:
        conn = requester.conn
        small = conn.request_channel(b"open", compose("small"), initial_n=8)
        requester.flush()
        opening = requester.next_demand()
        conn.send_payload(small, b"1", None)
        conn.send_payload(small, b"2", None)
        requester.flush()
        refill = requester.next_demand()
        plain = conn.request_channel(b"open", compose("plain"), initial_n=8)
        requester.flush()
        return {
            "small": (small, opening, refill),
            "plain": (plain, requester.next_demand()),
        }
    finally:
        requester.close()


def _check(seen: dict[str, Any]) -> None:
    small, opening, refill = seen["small"]
    assert opening == (small, 4)  # the route's prefetch
    assert refill == (small, 2)  # its batch, once two items were consumed
    plain, plain_opening = seen["plain"]
    assert plain_opening == (plain, 64)  # the router's window


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_router_channel_route_prefetch_is_the_request_n_on_the_wire(loop: str) -> None:
    with serve("tcp://127.0.0.1:0", _router(), loop=loop) as server:
        _check(_observe_windows(server.url))


def test_router_channel_route_prefetch_is_the_request_n_on_the_wire_under_asyncio() -> None:
    async def main() -> None:
        async with await aio.serve("tcp://127.0.0.1:0", _router()) as server:
            _check(await asyncio.to_thread(_observe_windows, server.url))

    asyncio.run(asyncio.wait_for(main(), 40))


def test_router_channel_window_rules() -> None:
    router = _router()
    connection = RouterConnection(router, None, "application/octet-stream", True)
    assert connection.channel_window(compose("small")) == (4, 2)
    assert connection.channel_window(compose("plain")) == (64, None)
    assert connection.channel_window(compose("nope")) == (64, None)
    assert connection.channel_window(b"\xff-malformed") == (64, None)  # its answer says why
    assert connection.channel_window(None) == (64, None)
    with pytest.raises(ValueError, match="channel"):
        router.add("request_stream", "s", lambda r: None, prefetch=4)
    with pytest.raises(ValueError):
        router.channel("zero", prefetch=0)(lambda r, i: None)
    with pytest.raises(ValueError, match="batch"):
        router.channel("b", batch=0)(lambda r, i: None)
