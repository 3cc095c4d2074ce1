"""The same timeouts under every driver (a thread per connection, the
selector loop, asyncio): they live in the one connection turn that every
driver runs (``LoopConfig``).

- ``handshake_timeout``: a server drops a client that connects but never
  sets up its protocol (RSocket SETUP, rsio hello), so half-open or silent
  clients cannot pile up; other connections are unaffected; an established
  connection has no such deadline.
- ``idle_timeout``: a connection with no traffic either way is closed
  gracefully, its error saying why; a busy one stays.
- ``close_timeout``: a goodbye that waits for an answer (rsio's goodbyeAck)
  waits no longer than this.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from typing import Any

import pytest
from sansrs.adapters import rsio, rsocket
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConfig
from sansrs.adapters.rsio import aio as rsio_aio
from sansrs.adapters.transport.urls import parse_url

from sansrs.rsio import ClientHello, Goodbye, ServerHello, decode_message, encode_message
from tests.adapters.drive.servers import DRIVERS, WAIT, event_loop_thread, on, server


def read_until_dropped(sock: socket.socket) -> bytes:
    received = b""
    with contextlib.suppress(ConnectionResetError):  # RST: also dropped
        while chunk := sock.recv(4096):
            received += chunk
    return received


def dropped_after(url: str, first_bytes: bytes, check_others: Callable[[], None]) -> bytes:
    """Connect, send ``first_bytes``, read until the server drops us; returns
    what it sent (an rsio server says hello first)."""
    with socket.create_connection(("127.0.0.1", parse_url(url).port), timeout=WAIT) as stuck:
        if first_bytes:
            stuck.sendall(first_bytes)
        check_others()
        received = read_until_dropped(stuck)
        check_others()
    return received


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    "first_bytes",
    [b"", b"\x00\x00\x40\x00\x00"],  # nothing; half of a SETUP frame's header
    ids=["silent", "half-setup"],
)
def test_handshake_timeout_drops_an_rsocket_client_that_never_sends_setup(
    driver: str, first_bytes: bytes
) -> None:
    with (
        server(driver, "rsocket", LoopConfig(handshake_timeout=0.2)) as url,
        rsocket.connect(url) as good,
    ):

        def others() -> None:
            assert good.request_response(b"ok", timeout=WAIT) == rsocket.Payload(b"ok")

        assert dropped_after(url, first_bytes, others) == b""


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("first_bytes", [b"", b"\x01"], ids=["silent", "half-hello"])
def test_handshake_timeout_drops_an_rsio_client_that_never_says_hello(
    driver: str, first_bytes: bytes
) -> None:
    with (
        server(driver, "rsio", LoopConfig(handshake_timeout=0.2)) as url,
        rsio.connect(url) as good,
    ):

        def others() -> None:
            assert len(list(good.subscribe("counter/3", 4, WAIT))) == 3

        sent = dropped_after(url, first_bytes, others)
        assert sent == encode_message(ServerHello(0))  # its optimistic hello, nothing more


@pytest.mark.parametrize("driver", DRIVERS)
def test_handshake_timeout_does_not_apply_to_established_connections(driver: str) -> None:
    with (
        server(driver, "rsocket", LoopConfig(handshake_timeout=0.2)) as url,
        rsocket.connect(url) as client,
    ):
        assert client.request_response(b"a", timeout=WAIT) == rsocket.Payload(b"a")
        # Wait past the timeout on a condition that never comes true.
        assert not client.wait_closed(0.5)
        assert client.request_response(b"b", timeout=WAIT) == rsocket.Payload(b"b")


@pytest.mark.parametrize("driver", DRIVERS)
def test_idle_timeout_closes_a_quiet_connection_and_keeps_a_busy_one(driver: str) -> None:
    with (
        server(driver, "rsio", LoopConfig(idle_timeout=0.3)) as url,
        rsio.connect(url) as quiet,
        rsio.connect(url) as busy,
        busy.subscribe("counter", prefetch=2, timeout=WAIT) as items,
    ):
        # The busy client keeps traffic flowing until the quiet one is dropped.
        for count, _ in enumerate(items):
            if quiet.closed:
                break
            assert count < 10_000_000, "the quiet connection was never closed"
        assert quiet.wait_closed(WAIT)
        with pytest.raises(ConnectionClosed):
            list(quiet.subscribe("counter/1", timeout=WAIT))
        assert next(items) is not None  # the busy one goes on
        assert not busy.closed


@pytest.mark.parametrize("driver", DRIVERS)
def test_idle_timeout_reason_reaches_the_application(driver: str) -> None:
    """The side that times out says so in its error (here: a client on the
    driver under test, with a server that never times out)."""
    config = LoopConfig(idle_timeout=0.2)
    with server("thread", "rsio", LoopConfig()) as url:
        if driver == "asyncio":
            with event_loop_thread() as loop:

                async def quiet_client() -> BaseException | None:
                    client = await rsio_aio.connect(url, loop_config=config)
                    await client.wait_closed()
                    return client.driver.error

                error = on(loop, quiet_client())
        else:
            selector = Loop(config).start() if driver == "selector" else None
            options: dict[str, Any] = {"loop": selector} if selector else {"loop_config": config}
            try:
                with rsio.connect(url, **options) as client:
                    assert client.wait_closed(WAIT)
                    error = client._thread.error
            finally:
                if selector is not None:
                    selector.stop(WAIT)
    assert isinstance(error, ConnectionClosed)
    assert "idle_timeout" in str(error)


@pytest.mark.parametrize("driver", DRIVERS)
def test_close_timeout_bounds_a_goodbye_that_is_never_answered(driver: str) -> None:
    """The rsio server says goodbye on close and waits for goodbyeAck; a peer
    that never answers is dropped after ``close_timeout``, not waited for."""
    with server(driver, "rsio", LoopConfig(close_timeout=0.2)) as url:
        raw = socket.create_connection(("127.0.0.1", parse_url(url).port), timeout=WAIT)
        raw.sendall(encode_message(ClientHello(0)))
        hello = raw.recv(64)
        assert decode_message(hello)[0] == ServerHello(0)
    # The server closed (the with block ended, allowing WAIT s): it said
    # goodbye, then closed gracefully (FIN, not the RST of the server's own
    # deadline) without our goodbyeAck once close_timeout had passed.
    with raw:
        rest = b""
        while chunk := raw.recv(4096):  # a reset here would fail the test
            rest += chunk
    assert isinstance(decode_message(rest)[0], Goodbye)
