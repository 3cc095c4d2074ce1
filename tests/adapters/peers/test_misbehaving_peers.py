"""Every blocking or awaiting call of the RSocket and rsio clients against
every way a peer can go wrong, under every driver, over TCP and WebSocket
(docs/adapters.md, "When the peer misbehaves"). A scripted peer
(:mod:`.scripted`) plays the server; each cell asserts the error's type,
that its message names the cause, and that the call ended within its bound:
at once when the peer said or did something final (an ERROR on stream 0,
a close, a reset, bytes of another protocol), after the call's ``timeout``
or the keepalive's ``max_lifetime`` when the peer only went silent."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pytest
from sansrs.adapters import rsio, rsocket
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConfig
from sansrs.adapters.rsio import aio as rsio_aio
from sansrs.adapters.rsio.errors import RsioError
from sansrs.adapters.rsocket import aio as rsocket_aio

from .scripted import (
    PAYLOAD,
    REQUEST_CHANNEL,
    REQUEST_STREAM,
    RSIO_ON_NEXT,
    RSIO_ON_SUBSCRIBE,
    RSIO_SERVER_HELLO,
    Wire,
    error_frame,
    payload_frame,
    scripted_peer,
)

#: A call's own timeout in the cells that wait for it (a silent peer).
TIMEOUT = 0.3
#: The keepalive of every RSocket client here: a silent peer is given up
#: after MAX_LIFETIME (the bound of a call without a timeout).
KEEPALIVE = {"keepalive_interval": 0.1, "max_lifetime": 0.6}
#: The drivers' limits here: the streams a peer's CONNECTION_CLOSE left
#: open are given CLOSE_TIMEOUT to finish.
CLOSE_TIMEOUT = 0.3
CONFIG = LoopConfig(close_timeout=CLOSE_TIMEOUT)
#: A call's timeout where the peer's doing must end it first, well before.
LONG = 5.0
#: "At once": far below LONG; what a connection-level ending may take.
PROMPT = 1.0
#: Slack beyond a timeout or a lifetime (a loaded 2-core machine).
SLACK = 1.0
DRIVERS = ["thread", "selector", "asyncio"]
TRANSPORTS = ["tcp", "ws"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Expect:
    """How a cell must end: ``error`` raised, its message containing each of
    ``words``, after ``at_least`` and before ``within`` seconds."""

    error: type[BaseException] | None
    words: tuple[str, ...]
    within: float
    at_least: float = 0.0


def prompt(error: type[BaseException], *words: str) -> Expect:
    return Expect(error=error, words=words, within=PROMPT)


def timed_out(*words: str) -> Expect:
    return Expect(error=TimeoutError, words=words, within=TIMEOUT + SLACK, at_least=TIMEOUT)


def lifetime(*words: str) -> Expect:
    life = KEEPALIVE["max_lifetime"]
    return Expect(error=ConnectionClosed, words=words, within=life + SLACK, at_least=life / 2)


# -- RSocket: the peers ----------------------------------------------------------------
REJECTED_SETUP, CONNECTION_ERROR, CONNECTION_CLOSE = 0x003, 0x101, 0x102
SAID = "scripted peer says no"
#: A frame of no RSocket type (0x18).
GARBAGE = b"garbage!!"
HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
#: What an rsio server answers to an RSocket SETUP (hello, goodbye).
RSIO_REFUSAL = RSIO_SERVER_HELLO + b"\x03\x29protocol error: unknown message type 0x00"


def _error(code: int) -> Callable[[Wire], None]:
    def script(wire: Wire) -> None:
        wire.read_request()
        wire.send_frame(error_frame(0, code, SAID))
        wire.hold()

    return script


def _silent(wire: Wire) -> None:
    wire.hold()


def _silent_mid_stream(wire: Wire) -> None:
    sid, kind = wire.read_request()
    if kind in (REQUEST_STREAM, REQUEST_CHANNEL):
        wire.send_frame(payload_frame(sid, b"first"))  # one item, then nothing
    else:  # a request-response: the start of its answer, then nothing
        wire.send_partial_frame(payload_frame(sid, b"answer", complete=True))
    wire.hold()


def _half_open(wire: Wire) -> None:
    wire.read_request()
    wire.half_close()


def _reset_in_frame(wire: Wire) -> None:
    sid, _ = wire.read_request()
    wire.send_partial_frame(payload_frame(sid, b"answer", complete=True))
    wire.reset()


def _close(wire: Wire) -> None:
    wire.read_request()
    wire.close()


def _garbage(wire: Wire) -> None:
    wire.read_request()
    wire.send_frame(GARBAGE)
    wire.hold()


def _http(wire: Wire) -> None:
    wire.read_frame()  # the SETUP
    wire.send_raw(HTTP)
    wire.hold()


def _rsio(wire: Wire) -> None:
    wire.read_frame()
    wire.send(RSIO_REFUSAL)
    wire.hold()


def _close_after_error(wire: Wire) -> None:
    wire.read_request()
    wire.send_frame(error_frame(0, REJECTED_SETUP, SAID))
    wire.ws_close(1000, "bye")
    wire.hold()


#: name -> (script, transports it applies to)
RSOCKET_PEERS: dict[str, tuple[Callable[[Wire], None], tuple[str, ...]]] = {
    "error-rejected-setup-keeps-socket": (_error(REJECTED_SETUP), ("tcp", "ws")),
    "error-connection-error-keeps-socket": (_error(CONNECTION_ERROR), ("tcp", "ws")),
    "error-connection-close-keeps-socket": (_error(CONNECTION_CLOSE), ("tcp", "ws")),
    "never-answers": (_silent, ("tcp", "ws")),
    "silent-mid-stream": (_silent_mid_stream, ("tcp", "ws")),
    "half-open": (_half_open, ("tcp", "ws")),
    "reset-inside-a-frame": (_reset_in_frame, ("tcp", "ws")),
    "close-without-error": (_close, ("tcp", "ws")),
    "garbage": (_garbage, ("tcp", "ws")),
    "http-where-frames-expected": (_http, ("tcp",)),
    "rsio-where-rsocket-expected": (_rsio, ("tcp", "ws")),
    "websocket-close-after-error": (_close_after_error, ("ws",)),
}

RSOCKET_CALLS = ["request_response", "request_response_no_timeout", "stream", "channel", "close"]


def rsocket_expectation(peer: str, call: str, transport: str) -> Expect:
    if call == "close":
        return Expect(error=None, words=(), within=PROMPT)  # a close never waits on the peer
    if peer == "error-connection-close-keeps-socket":
        # Its open streams may still finish: given close_timeout.
        return Expect(error=ConnectionClosed, words=(SAID,), within=CLOSE_TIMEOUT + PROMPT)
    if peer.startswith("error-") or peer == "websocket-close-after-error":
        return prompt(ConnectionClosed, SAID)
    if peer in ("never-answers", "silent-mid-stream"):
        if call == "request_response_no_timeout":
            return lifetime("keepalive")
        return timed_out()
    if peer in ("half-open", "close-without-error"):
        return prompt(ConnectionClosed, "closed")
    if peer == "reset-inside-a-frame":
        return prompt(ConnectionClosed, "lost")
    if peer == "garbage":
        return prompt(ConnectionClosed, "protocol error")
    if peer == "http-where-frames-expected":
        return prompt(ConnectionClosed, "HTTP")
    assert peer == "rsio-where-rsocket-expected"
    if transport == "ws":  # a message is a whole frame: its header is wrong at once
        return prompt(ConnectionClosed, "rsio")
    if call == "request_response_no_timeout":
        return lifetime("rsio")
    if call == "request_response":
        return timed_out("rsio")
    return timed_out()  # a stream's wait knows nothing of the connection


def _sync_rsocket_call(client: Any, call: str, timeout: float) -> None:
    if call == "request_response":
        client.request_response(b"question", timeout=timeout)
    elif call == "request_response_no_timeout":
        client.request_response(b"question")
    elif call == "stream":
        for _ in client.request_stream(b"question", timeout=timeout):
            pass
    elif call == "channel":
        for _ in client.request_channel([b"first", b"second"], timeout=timeout):
            pass
    else:
        with contextlib.suppress(ConnectionClosed):  # (gone already: fine)
            client.fire_and_forget(b"news")
        client.close(LONG)
        assert client.closed


async def _async_rsocket_call(client: Any, call: str, timeout: float) -> None:
    if call == "request_response":
        await client.request_response(b"question", timeout=timeout)
    elif call == "request_response_no_timeout":
        await client.request_response(b"question")
    elif call == "stream":
        async for _ in client.request_stream(b"question", timeout=timeout):
            pass
    elif call == "channel":
        async for _ in client.request_channel([b"first", b"second"], timeout=timeout):
            pass
    else:
        with contextlib.suppress(ConnectionClosed):  # (gone already: fine)
            await client.fire_and_forget(b"news")
        await client.close()
        assert client.closed


def _check(expect: Expect, run: Callable[[], None]) -> None:
    started = time.monotonic()
    if expect.error is None:
        run()
    else:
        with pytest.raises(expect.error) as raised:
            run()
        message = str(raised.value)
        for word in expect.words:
            assert word in message, f"{message!r} does not name {word!r}"
        # Durations said sanely: never a 16-digit float, never "0.0 s".
        assert "0.0 s" not in message and "0000" not in message, message
    elapsed = time.monotonic() - started
    assert expect.at_least <= elapsed < expect.within, f"ended after {elapsed:.3f} s"


def _run_async(coro: Coroutine[Any, Any, None]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(coro, LONG + SLACK)

    asyncio.run(bounded())


@pytest.mark.timeout(8)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("peer", list(RSOCKET_PEERS))
@pytest.mark.parametrize("call", RSOCKET_CALLS)
def test_rsocket_client_call_against_a_misbehaving_peer_ends_within_its_bound(
    call: str, peer: str, driver: str, transport: str, selector_loop: Loop
) -> None:
    script, transports = RSOCKET_PEERS[peer]
    if transport not in transports:
        pytest.skip(f"{peer} is a {'/'.join(transports)} misbehaviour")
    expect = rsocket_expectation(peer, call, transport)
    timeout = TIMEOUT if expect.error is TimeoutError else LONG
    with scripted_peer(script, websocket=transport == "ws") as server:
        if driver == "asyncio":

            async def cell() -> None:
                client = await rsocket_aio.connect(server.url, loop_config=CONFIG, **KEEPALIVE)
                try:
                    await _async_rsocket_call(client, call, timeout)
                finally:
                    await client.close()

            _check(expect, lambda: _run_async(cell()))
        else:
            loop: Any = selector_loop if driver == "selector" else "thread"
            config = None if driver == "selector" else CONFIG
            with rsocket.connect(server.url, loop=loop, loop_config=config, **KEEPALIVE) as client:
                _check(expect, lambda: _sync_rsocket_call(client, call, timeout))
    assert server.failure is None, server.failure
