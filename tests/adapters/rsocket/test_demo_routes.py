"""The demo responder's routes (adapters/rsocket/demo_routes.py): the demo
contract by route, one state per connection shared with route-less requests."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sansrs.adapters.rsocket import (
    COMPOSITE_METADATA,
    Client,
    Payload,
    RSocketError,
    SimpleAuth,
    connect,
    serve,
)
from sansrs.adapters.rsocket.demo_routes import demo_router_factory

WAIT = 10.0


@pytest.fixture
def client() -> Iterator[Client]:
    with (
        serve("tcp://127.0.0.1:0", handler_factory=demo_router_factory()) as server,
        connect(server.url, metadata_mime_type=COMPOSITE_METADATA) as c,
    ):
        yield c


def test_demo_routes_echo_every_interaction_model(client: Client) -> None:
    echo = client.route("echo")
    assert echo.request_response(b"hi", timeout=WAIT) == Payload(b"hi")
    with echo.request_stream(b"one", timeout=WAIT) as items:
        assert [p.data for p in items] == [b"one"]
    with echo.request_channel([b"a", Payload(b"b", b"m")], timeout=WAIT) as items:
        assert [(p.data, p.metadata) for p in items] == [(b"a", None), (b"b", b"m")]


def test_demo_routes_counters_are_shared_with_route_less_requests(client: Client) -> None:
    client.route("fnf").fire_and_forget(b"1")
    client.route("echo").fire_and_forget(b"2")
    client.fire_and_forget(b"3")  # the plain demo responder, same connection state
    client.route("push").metadata_push([("text/plain", b"pushed")])
    # frames of one connection are handled in order: all three are counted
    assert client.route("fnf-count").request_response(b"", timeout=WAIT) == Payload(b"3")
    assert client.route("mp-count").request_response(b"", timeout=WAIT) == Payload(b"1")
    last = client.route("mp-last").request_response(b"", timeout=WAIT)
    assert last is not None and last.data.startswith(b"last=") and last.data.endswith(b"pushed")
    stats = client.route("stats").request_response(b"", timeout=WAIT)
    assert stats is not None and json.loads(stats.data)["fire_and_forget"] == 3


def test_demo_routes_stream_error_and_whoami(client: Client) -> None:
    with client.route("stream").request_stream('{"n": 2, "size": 3}', timeout=WAIT) as items:
        assert [p.data for p in items] == [b"000", b"001"]
    with pytest.raises(RSocketError, match="rejected: x"):
        client.route("error").request_response(b"x", timeout=WAIT)
    assert client.route("whoami").request_response(b"", timeout=WAIT) == Payload(b"anonymous")


def test_demo_routes_with_credentials() -> None:
    factory = demo_router_factory([SimpleAuth("ann", "pw")])
    with (
        serve("tcp://127.0.0.1:0", handler_factory=factory) as server,
        connect(server.url, auth=SimpleAuth("ann", "pw")) as c,
    ):
        assert c.route("whoami").request_response(b"", timeout=WAIT) == Payload(b"ann")
        assert c.request_response(b"plain", timeout=WAIT) == Payload(b"plain")
