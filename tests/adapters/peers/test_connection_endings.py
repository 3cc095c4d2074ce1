"""The findings the misbehaving-peer matrix (test_misbehaving_peers) stands
on, each forced where it happened: a request-response waiting on its own
thread (the direct call, docs/architecture.md "Threads") when the peer's
ERROR on stream 0 arrives, a WebSocket Close after an ERROR, a SETUP hook's
ApplicationError, a timeout's message."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from sansrs.adapters import rsocket
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConfig
from sansrs.adapters.drive.errors import seconds
from sansrs.adapters.rsocket import ApplicationError, Payload
from sansrs.adapters.rsocket import aio as rsocket_aio
from sansrs.adapters.rsocket.engine import RSocketEngine
from sansrs.adapters.rsocket.errors import RSocketError, setup_rejection
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.transport.websocket import messages as ws

from tests.adapters.drive.direct import driver_of, settle

from .scripted import (
    CANCEL,
    Wire,
    error_frame,
    frame_type,
    payload_frame,
    scripted_peer,
    stream_id,
)

LONG = 5.0
PROMPT = 1.0
SAID = "scripted peer says no"
CODES = {"REJECTED_SETUP": 0x003, "CONNECTION_ERROR": 0x101}


def _answers_then(then: Callable[[Wire], None]) -> Callable[[Wire], None]:
    """A peer that answers the first request, then does ``then`` to the second."""

    def script(wire: Wire) -> None:
        sid, _ = wire.read_request()
        wire.send_frame(payload_frame(sid, b"warm", complete=True))
        wire.read_request()
        then(wire)

    return script


def _error_and_keep(code: int) -> Callable[[Wire], None]:
    def then(wire: Wire) -> None:
        wire.send_frame(error_frame(0, code, SAID))
        wire.hold()

    return then


def _error_at_first_request(code: int) -> Callable[[Wire], None]:
    def script(wire: Wire) -> None:
        wire.read_request()
        _error_and_keep(code)(wire)

    return script


@pytest.mark.timeout(10)
@pytest.mark.parametrize("transport", ["tcp", "ws"])
@pytest.mark.parametrize("loop", ["thread", "selector"])
@pytest.mark.parametrize("data", [b"question", "question"], ids=["express", "direct-call"])
@pytest.mark.parametrize("code", list(CODES))
def test_rsocket_request_response_waiting_on_its_thread_fails_at_once_on_an_error_on_stream_0(
    code: str, data: bytes | str, loop: str, transport: str
) -> None:
    """#31 finding 1: the read that brings ERROR[0] ends the direct wait;
    the peer keeps the socket open, the call has a long timeout. (Bytes
    take the express form, a str the general direct call.)"""
    script = _error_at_first_request(CODES[code])
    with (
        scripted_peer(script, websocket=transport == "ws") as peer,
        rsocket.connect(peer.url, loop=loop) as client,
    ):
        settle(driver_of(client))  # SETUP written, the reactor idle: this thread reads
        started = time.monotonic()
        with pytest.raises(ConnectionClosed, match=f"{code}.*{SAID}"):
            client.request_response(data, timeout=LONG)
        assert time.monotonic() - started < PROMPT
        # And with no timeout at all it does not block either.
        with pytest.raises(ConnectionClosed, match=SAID):
            client.request_response(data)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("transport", ["tcp", "ws"])
def test_rsocket_aio_request_response_fails_at_once_on_an_error_on_stream_0(
    transport: str,
) -> None:
    """The asyncio path (the request written by its coroutine, the answer
    read by the loop): the same ending, at once."""
    script = _answers_then(_error_and_keep(CODES["CONNECTION_ERROR"]))

    async def run() -> float:
        async with await rsocket_aio.connect(peer.url) as client:
            assert await client.request_response(b"warm-up", timeout=LONG) == Payload(b"warm")
            started = time.monotonic()
            with pytest.raises(ConnectionClosed, match=SAID):
                await client.request_response(b"question", timeout=LONG)
            return time.monotonic() - started

    with scripted_peer(script, websocket=transport == "ws") as peer:
        assert asyncio.run(run()) < PROMPT


@pytest.mark.timeout(10)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_request_response_timeout_names_the_whole_timeout(loop: str) -> None:
    """#33 finding 6: "no answer within 0.2 s", never what was left of it
    at the last wait ("0.0 s") nor a 16-digit float."""

    with scripted_peer(_answers_then(Wire.hold)) as peer, rsocket.connect(peer.url, loop=loop) as c:
        assert c.request_response(b"warm-up", timeout=LONG) == Payload(b"warm")
        settle(driver_of(c))
        with pytest.raises(TimeoutError) as raised:
            c.request_response(b"question", timeout=0.2)
    assert str(raised.value) == "no answer within 0.2 s"


@pytest.mark.timeout(10)
def test_rsocket_websocket_close_after_an_error_keeps_the_error_as_the_reason() -> None:
    """#31 finding 4: an ERROR read, then (another read) the WebSocket Close
    that follows it: the reason stays the ERROR's text, not "WebSocket 1000"."""
    engine = RSocketEngine.client(EngineOptions(), None, message_framed=True)
    engine.data_to_send()  # (the SETUP)
    engine.receive_data(ws.encode_binary(error_frame(0, 0x003, SAID)), 0.0)
    engine.receive_data(ws.encode_close(1000, "bye"), 0.0)
    reason = str(engine.close_reason())
    assert "REJECTED_SETUP" in reason and SAID in reason, reason
    assert "1000" not in reason


def test_rsocket_websocket_close_alone_is_the_reason() -> None:
    engine = RSocketEngine.client(EngineOptions(), None, message_framed=True)
    engine.receive_data(ws.encode_close(1001, "going away"), 0.0)
    assert str(engine.close_reason()) == "connection closed: WebSocket 1001 (going away)"


def test_rsocket_setup_hook_application_error_rejects_with_its_own_text() -> None:
    """#31 finding 4: REJECTED_SETUP carries the hook's message, not
    "APPLICATION_ERROR (0x201): ..." nested inside it."""
    assert setup_rejection(ApplicationError("bad credentials")) == (0x003, "bad credentials")
    assert setup_rejection(RSocketError(0x002, "too old")) == (0x002, "too old")
    assert setup_rejection(ValueError("nope")) == (0x003, "nope")
    assert setup_rejection(ValueError()) == (0x003, "ValueError")


@pytest.mark.timeout(10)
@pytest.mark.parametrize("url", ["tcp://127.0.0.1:0", "ws://127.0.0.1:0/"])
def test_rsocket_client_sees_a_setup_hook_application_error_as_its_text(url: str) -> None:
    class Refuses:
        def accept_setup(self, setup: object, peer: object) -> None:
            raise ApplicationError("bad credentials")

    with (
        rsocket.serve(url, Refuses()) as server,
        rsocket.connect(server.url) as client,
        pytest.raises(ConnectionClosed) as raised,
    ):
        client.request_response(b"question", timeout=LONG)
    assert str(raised.value) == "connection closed by peer: REJECTED_SETUP (0x3): bad credentials"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (2.9997537620000116, "3 s"),
        (0.2, "0.2 s"),
        (0.25, "0.25 s"),
        (30.0, "30 s"),
        (150.4, "150 s"),
    ],
)
def test_durations_in_messages_are_said_sanely(value: float, said: str) -> None:
    assert seconds(value) == said


@pytest.mark.timeout(10)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_error_codes_connection_close_from_a_peer_that_never_finishes_is_bounded(
    loop: str,
) -> None:
    """A peer's CONNECTION_CLOSE lets our open request finish (spec: Error
    Codes), for close_timeout; then the request is cancelled (the peer sees
    CANCEL: the stream terminates, as the spec's "MUST wait" has it) and
    fails with the peer's reason."""
    seen: list[tuple[int, int]] = []
    ended = threading.Event()

    def script(wire: Wire) -> None:
        sid, _ = wire.read_request()
        wire.send_frame(error_frame(0, 0x102, SAID))
        try:
            while True:  # until the client closes
                frame = wire.read_frame()
                seen.append((frame_type(frame), stream_id(frame) == sid))
        finally:
            ended.set()

    grace = 0.2
    config = LoopConfig(close_timeout=grace)
    selector = Loop(config, name="close-test").start() if loop == "selector" else None
    try:
        with (
            scripted_peer(script) as peer,
            rsocket.connect(
                peer.url, loop=selector or "thread", loop_config=None if selector else config
            ) as client,
        ):
            started = time.monotonic()
            with pytest.raises(ConnectionClosed, match=f"CONNECTION_CLOSE.*{SAID}.*close_timeout"):
                client.request_response(b"question", timeout=LONG)
            assert grace <= time.monotonic() - started < grace + PROMPT
            assert client.wait_closed(LONG)
            assert ended.wait(LONG)
    finally:
        if selector is not None:
            selector.stop(LONG)
    assert (CANCEL, True) in seen  # the request's stream, cancelled
