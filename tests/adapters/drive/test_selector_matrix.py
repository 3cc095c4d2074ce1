"""Every interaction model of the synchronous RSocket API on every driver
loop (thread per connection, the shared selector loop, a private selector
loop) over every byte-stream transport (TCP, Unix sockets, TLS)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionThread, Loop, LoopConnection
from sansrs.adapters.rsocket.client import Client, connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.server import Server, serve
from sansrs.adapters.rsocket.types import Payload

from tests.adapters.transport.tls_certs import certs

WAIT = 10.0


@pytest.fixture(scope="module")
def private_loop() -> Iterator[Loop]:
    loop = Loop(name="test-private-loop").start()
    yield loop
    assert loop.stop(WAIT)


def _url_and_options(transport: str, tmp: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if transport == "tcp":
        return "tcp://127.0.0.1:0", {}, {}
    if transport == "unix":
        return f"unix://{tmp}/rs.sock", {}, {}
    c = certs()
    return (
        "tls://127.0.0.1:0",
        {"ssl_context": c.server_context()},
        {"ssl_context": c.client_context()},
    )


@pytest.fixture(params=["tcp", "unix", "tls"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["thread", "selector", "private"])
def loop_choice(request: pytest.FixtureRequest, private_loop: Loop) -> str | Loop:
    return private_loop if request.param == "private" else str(request.param)


@pytest.fixture
def pair(transport: str, loop_choice: str | Loop) -> Iterator[tuple[Server, Client]]:
    with tempfile.TemporaryDirectory(prefix="sansrs-") as tmp:
        url, server_opts, client_opts = _url_and_options(transport, tmp)
        with (
            serve(url, handler_factory=DemoHandler, loop=loop_choice, **server_opts) as server,
            # The demo's raw metadata, declared so (connect's default is composite).
            connect(
                server.url,
                loop=loop_choice,
                metadata_mime_type="application/octet-stream",
                **client_opts,
            ) as client,
        ):
            yield server, client
        if transport == "unix":
            assert not os.path.exists(f"{tmp}/rs.sock")  # the listener removed its file


def test_every_interaction_model(pair: tuple[Server, Client], loop_choice: str | Loop) -> None:
    server, client = pair
    expected_driver = ConnectionThread if loop_choice == "thread" else LoopConnection
    assert isinstance(client._thread, expected_driver)
    # request-response, data and metadata echoed; application error
    assert client.request_response(b"hello", b"md", timeout=WAIT) == Payload(b"hello", b"md")
    with pytest.raises(RSocketError) as info:
        client.request_response(b"error: nope", timeout=WAIT)
    assert info.value.error_code == 0x201 and info.value.message == "rejected: error: nope"
    # fire-and-forget and metadata push, counted in order on the connection
    for _ in range(3):
        client.fire_and_forget(b"ping")
    client.metadata_push(b"m1")
    client.metadata_push(b"last")
    assert client.request_response(b"fnf-count", timeout=WAIT) == Payload(b"3")
    assert client.request_response(b"mp-last", timeout=WAIT) == Payload(b"last=last")
    # request-stream with a small window: replenished as consumed
    request = json.dumps({"n": 1000, "size": 6})
    with client.request_stream(request, prefetch=32, timeout=WAIT) as items:
        assert [p.data for p in items] == [str(i).zfill(6).encode() for i in range(1000)]
    # request-channel: echoed with metadata
    outbound = [Payload(b"c%d" % i, b"m%d" % i) for i in range(100)]
    with client.request_channel(outbound, prefetch=16, timeout=WAIT) as items:
        assert list(items) == outbound
    # the Publisher form
    got: list[Any] = []
    done = __import__("threading").Event()

    class Sub:
        def on_subscribe(self, s: Any) -> None:
            s.request(10)

        def on_next(self, p: Payload) -> None:
            got.append(p.data)

        def on_error(self, e: BaseException) -> None:
            got.append(e)
            done.set()

        def on_complete(self) -> None:
            done.set()

    client.stream_publisher(json.dumps({"n": 5, "size": 1})).subscribe(Sub())
    assert done.wait(WAIT) and got == [b"0", b"1", b"2", b"3", b"4"]
    # a server-initiated request to the client (no handler there: rejected)
    (peer,) = server.peers
    with pytest.raises(RSocketError) as info:
        peer.request_response(b"to the client", timeout=WAIT)
    assert info.value.error_code == 0x202


def test_five_mib_request_response(pair: tuple[Server, Client]) -> None:
    _, client = pair
    big = bytes(range(256)) * (5 * 4096)
    reply = client.request_response(big, b"meta", timeout=WAIT)
    assert reply is not None and reply.data == big and reply.metadata == b"meta"


def test_leases_and_a_burst_behind_setup(transport: str, loop_choice: str | Loop) -> None:
    """Leases on both ends; 2,000 fire-and-forgets made at once after
    connecting, most of them before the first LEASE: they wait in order and
    all go out when it comes (two or more waiters once looped forever)."""
    with tempfile.TemporaryDirectory(prefix="sansrs-") as tmp:
        url, server_opts, client_opts = _url_and_options(transport, tmp)
        with serve(
            url, handler_factory=DemoHandler, loop=loop_choice, lease=True, **server_opts
        ) as server:
            with connect(server.url, loop=loop_choice, lease=True, **client_opts) as c:
                assert c.request_response(b"leased", timeout=WAIT) == Payload(b"leased")
            with connect(server.url, loop=loop_choice, lease=True, **client_opts) as c:
                for _ in range(2000):
                    c.fire_and_forget(b"f")
                assert c.request_response(b"fnf-count", timeout=WAIT) == Payload(b"2000")
