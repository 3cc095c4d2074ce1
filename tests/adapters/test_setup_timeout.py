"""A server drops a client that connects but never sets up its protocol
(RSocket SETUP, rsio hello) after ``LoopConfig.handshake_timeout``: half-open
or silent clients cannot pile up, and other connections are unaffected."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import pytest
from sansrs.adapters.drive import Loop, LoopConfig
from sansrs.adapters import rsio as rsio_sync
from sansrs.adapters.rsio.demo import demo_publishers
from sansrs.adapters import rsocket as rsocket_sync
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.types import Payload
from sansrs.adapters.transport.urls import parse_url

from sansrs.rsio import ServerHello, encode_message

WAIT = 10.0


@pytest.fixture
def loop() -> Iterator[Loop]:
    loop = Loop(LoopConfig(handshake_timeout=0.2), name="setup-timeout").start()
    try:
        yield loop
    finally:
        loop.stop(WAIT)


def _assert_dropped(port: int, first_bytes: bytes, check_others: Callable[[], None]) -> bytes:
    """Connect, send ``first_bytes``, and read until the server drops us;
    returns what it sent before (an rsio server says hello first)."""
    stuck = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    received = b""
    with stuck:
        if first_bytes:
            stuck.sendall(first_bytes)
        check_others()
        with contextlib.suppress(ConnectionResetError):  # RST: also dropped
            while chunk := stuck.recv(4096):
                received += chunk
        check_others()
    return received


@pytest.mark.parametrize(
    "first_bytes",
    [b"", b"\x00\x00\x40\x00\x00"],  # nothing; half of a SETUP frame's header
    ids=["silent", "half-setup"],
)
def test_rsocket_server_drops_a_client_that_never_sends_setup(
    loop: Loop, first_bytes: bytes
) -> None:
    with (
        rsocket_sync.serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop=loop) as server,
        rsocket_sync.connect(server.url, loop=loop) as good,
    ):

        def others() -> None:
            assert good.request_response(b"ok", timeout=WAIT) == Payload(b"ok")

        assert _assert_dropped(parse_url(server.url).port, first_bytes, others) == b""


@pytest.mark.parametrize("first_bytes", [b"", b"\x01"], ids=["silent", "half-hello"])
def test_rsio_server_drops_a_client_that_never_says_hello(loop: Loop, first_bytes: bytes) -> None:
    with (
        rsio_sync.serve("tcp://127.0.0.1:0", demo_publishers, loop=loop) as server,
        rsio_sync.connect(server.url, loop=loop) as good,
    ):

        def others() -> None:
            assert len(list(good.subscribe("counter/3", 4, WAIT))) == 3

        sent = _assert_dropped(parse_url(server.url).port, first_bytes, others)
        assert sent == encode_message(ServerHello(0))  # its optimistic hello, nothing more


def test_clients_and_established_connections_have_no_setup_deadline(loop: Loop) -> None:
    """The deadline only covers a server waiting for the first frame: an
    established connection idle for longer than the timeout stays up."""
    with (
        rsocket_sync.serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, loop=loop) as server,
        rsocket_sync.connect(server.url, loop=loop) as client,
    ):
        assert client.request_response(b"a", timeout=WAIT) == Payload(b"a")
        # Wait past the timeout on a condition that never comes true.
        assert not client.wait_closed(0.5)
        assert client.request_response(b"b", timeout=WAIT) == Payload(b"b")
