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
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sansrs.adapters import rsio, rsocket
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConfig
from sansrs.adapters.rsio import aio as rsio_aio
from sansrs.adapters.rsocket import aio as rsocket_aio

from .scripted import (
    REQUEST_CHANNEL,
    REQUEST_STREAM,
    RSIO_ON_NEXT,
    RSIO_ON_NEXT_PACKED,
    RSIO_ON_SUBSCRIBE,
    RSIO_SERVER_HELLO,
    Wire,
    error_frame,
    payload_frame,
    scripted_peer,
)

#: A call's own timeout in the cells that wait for it (a silent peer).
TIMEOUT = 0.2
#: The keepalive of every RSocket client here: a silent peer is given up
#: after MAX_LIFETIME (the bound of a call without a timeout).
KEEPALIVE = {"keepalive_interval": 0.05, "max_lifetime": 0.4}
#: The drivers' limits here: the streams a peer's CONNECTION_CLOSE left
#: open are given CLOSE_TIMEOUT to finish.
CLOSE_TIMEOUT = 0.2
CONFIG = LoopConfig(close_timeout=CLOSE_TIMEOUT)
#: A call's timeout where the peer's doing must end it first, well before.
LONG = 5.0
#: "At once": far below LONG; what a connection-level ending may take.
PROMPT = 1.0
#: Slack beyond a timeout or a lifetime (a loaded 2-core machine).
SLACK = 1.0
DRIVERS = ["thread", "selector", "asyncio"]
TRANSPORTS = ["tcp", "ws"]


@pytest.fixture(scope="module")
def selector_loop() -> Iterator[Loop]:
    """One selector loop for the module's cells (``loop="selector"``)."""
    loop = Loop(CONFIG, name="peers-test").start()
    yield loop
    loop.stop(LONG)


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
    """The call's own timeout, said as such ("within 0.2 s") and why."""
    said = f"within {TIMEOUT:g} s"
    bound = TIMEOUT + SLACK
    return Expect(error=TimeoutError, words=(said, *words), within=bound, at_least=TIMEOUT)


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


Answer = Callable[[Wire, int, int], None]  # (wire, stream ID, request frame type)


def _on_request(answer: Answer | None, ending: Callable[[Wire], None]) -> Callable[[Wire], None]:
    """A peer that reads up to the client's request, ``answer``s it (or
    not), then ends as ``ending`` says (hold the socket, close, reset...)."""

    def script(wire: Wire) -> None:
        sid, kind = wire.read_request()
        if answer is not None:
            answer(wire, sid, kind)
        ending(wire)

    return script


def _on_setup(data: bytes, *, raw: bool) -> Callable[[Wire], None]:
    """A peer that answers the SETUP with ``data`` (``raw``: outside any
    WebSocket framing) and keeps the socket open."""

    def script(wire: Wire) -> None:
        wire.read_frame()
        (wire.send_raw if raw else wire.send)(data)
        wire.hold()

    return script


def _error(code: int) -> Answer:
    return lambda wire, sid, kind: wire.send_frame(error_frame(0, code, SAID))


def _partial_answer(wire: Wire, sid: int, kind: int) -> None:
    wire.send_partial_frame(payload_frame(sid, b"answer", complete=True))


def _one_item(wire: Wire, sid: int, kind: int) -> None:
    if kind in (REQUEST_STREAM, REQUEST_CHANNEL):
        wire.send_frame(payload_frame(sid, b"first"))  # one item, then nothing
    else:  # a request-response: the start of its answer, then nothing
        _partial_answer(wire, sid, kind)


def _error_then_close(wire: Wire, sid: int, kind: int) -> None:
    wire.send_frame(error_frame(0, REJECTED_SETUP, SAID))
    wire.ws_close(1000, "bye")


BOTH = ("tcp", "ws")
#: name -> (script, transports it applies to)
RSOCKET_PEERS: dict[str, tuple[Callable[[Wire], None], tuple[str, ...]]] = {
    "error-rejected-setup-keeps-socket": (_on_request(_error(REJECTED_SETUP), Wire.hold), BOTH),
    "error-connection-error-keeps-socket": (_on_request(_error(CONNECTION_ERROR), Wire.hold), BOTH),
    "error-connection-close-keeps-socket": (_on_request(_error(CONNECTION_CLOSE), Wire.hold), BOTH),
    "never-answers": (Wire.hold, BOTH),
    "silent-mid-stream": (_on_request(_one_item, Wire.hold), BOTH),
    "half-open": (_on_request(None, Wire.half_close), BOTH),
    "reset-inside-a-frame": (_on_request(_partial_answer, Wire.reset), BOTH),
    "close-without-error": (_on_request(None, Wire.close), BOTH),
    "garbage": (_on_request(lambda wire, sid, kind: wire.send_frame(GARBAGE), Wire.hold), BOTH),
    "http-where-frames-expected": (_on_setup(HTTP, raw=True), ("tcp",)),
    "rsio-where-rsocket-expected": (_on_setup(RSIO_REFUSAL, raw=False), BOTH),
    "websocket-close-after-error": (_on_request(_error_then_close, Wire.hold), ("ws",)),
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
        return timed_out("sent nothing") if peer == "never-answers" else timed_out()
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
    return timed_out("rsio")


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


def cells(calls: list[str], peers: dict[str, tuple[str, ...]]) -> list[Any]:
    """Every (call, peer, driver, transport) that applies, its id saying which."""
    return [
        pytest.param(call, peer, driver, transport, id=f"{call}-{peer}-{driver}-{transport}")
        for call in calls
        for peer, transports in peers.items()
        for driver in DRIVERS
        for transport in TRANSPORTS
        if transport in transports
    ]


@pytest.mark.timeout(8)
@pytest.mark.parametrize(
    ("call", "peer", "driver", "transport"),
    cells(RSOCKET_CALLS, {peer: t for peer, (_, t) in RSOCKET_PEERS.items()}),
)
def test_rsocket_client_call_against_a_misbehaving_peer_ends_within_its_bound(
    call: str, peer: str, driver: str, transport: str, selector_loop: Loop
) -> None:
    script, _ = RSOCKET_PEERS[peer]
    _play(
        rsocket_expectation(peer, call, transport),
        script,
        driver,
        transport,
        selector_loop,
        lambda url, loop, config: rsocket.connect(url, loop=loop, loop_config=config, **KEEPALIVE),
        lambda url: rsocket_aio.connect(url, loop_config=CONFIG, **KEEPALIVE),
        lambda client, timeout: _sync_rsocket_call(client, call, timeout),
        lambda client, timeout: _async_rsocket_call(client, call, timeout),
    )


def _play(
    expect: Expect,
    script: Callable[[Wire], None],
    driver: str,
    transport: str,
    selector_loop: Loop,
    connect: Callable[[str, Any, LoopConfig | None], Any],
    connect_async: Callable[[str], Awaitable[Any]],
    call: Callable[[Any, float], None],
    call_async: Callable[[Any, float], Awaitable[None]],
) -> None:
    """One cell: ``script`` plays the server; the client (``connect`` or,
    under asyncio, ``connect_async``) makes its ``call``; ``_check`` judges."""
    timeout = TIMEOUT if expect.error is TimeoutError else LONG
    with scripted_peer(script, websocket=transport == "ws") as server:
        if driver == "asyncio":

            async def cell() -> None:
                client = await connect_async(server.url)
                try:
                    await call_async(client, timeout)
                finally:
                    await client.close()

            _check(expect, lambda: _run_async(cell()))
        else:
            loop: Any = selector_loop if driver == "selector" else "thread"
            with connect(server.url, loop, None if driver == "selector" else CONFIG) as client:
                _check(expect, lambda: call(client, timeout))
    assert server.failure is None, server.failure


# -- rsio: the peers ----------------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _rsio_goodbye(reason: str) -> bytes:
    text = reason.encode()
    return b"\x03" + _varint(len(text)) + text


def _rsio_opened(wire: Wire, packed: bool) -> int:
    """Hello both ways, the subscribe taken, onSubscribe sent: the subscriber id."""
    wire.send(RSIO_SERVER_HELLO)
    sid = wire.read_rsio_subscribe()
    wire.send(bytes([RSIO_ON_SUBSCRIBE]) + _varint(sid) + _varint(4 if packed else 0))
    return sid


def _rsio_item(sid: int, packed: bool) -> bytes:
    if packed:
        return bytes([RSIO_ON_NEXT_PACKED]) + _varint(sid) + _varint(1) + b"abcd"
    return bytes([RSIO_ON_NEXT]) + _varint(sid) + _varint(4) + b"abcd"


def _rsio_script(peer: str, packed: bool) -> Callable[[Wire], None]:
    def script(wire: Wire) -> None:
        if peer == "never-answers":
            wire.hold()
            return
        if peer == "http-where-frames-expected":
            wire.read_bytes(3)  # the client's hello
            wire.send_raw(HTTP)
            wire.hold()
            return
        if peer == "rsocket-where-rsio-expected":
            wire.read_bytes(3)
            frame = error_frame(0, 0x001, "INVALID_SETUP: not a SETUP frame")
            wire.send_frame(frame)
            wire.hold()
            return
        sid = _rsio_opened(wire, packed)
        if peer == "goodbye-keeps-socket":
            wire.send(_rsio_goodbye(SAID))
            wire.hold()
        elif peer == "silent-mid-stream":
            wire.send(_rsio_item(sid, packed))
            wire.hold()
        elif peer == "half-open":
            wire.half_close()
        elif peer == "reset-inside-a-frame":
            wire.send_partial_message(_rsio_item(sid, packed))
            wire.reset()
        elif peer == "close-without-error":
            wire.close()
        elif peer == "garbage":
            wire.send(b"\x7f\x7f\x7f\x7f")
            wire.hold()
        else:
            assert peer == "websocket-close-after-error"
            wire.send(_rsio_goodbye(SAID))
            wire.ws_close(1000, "bye")
            wire.hold()

    return script


RSIO_PEERS: dict[str, tuple[str, ...]] = {
    "goodbye-keeps-socket": ("tcp", "ws"),
    "never-answers": ("tcp", "ws"),
    "silent-mid-stream": ("tcp", "ws"),
    "half-open": ("tcp", "ws"),
    "reset-inside-a-frame": ("tcp", "ws"),
    "close-without-error": ("tcp", "ws"),
    "garbage": ("tcp", "ws"),
    "http-where-frames-expected": ("tcp",),
    "rsocket-where-rsio-expected": ("tcp", "ws"),
    "websocket-close-after-error": ("ws",),
}
RSIO_CALLS = ["subscribe", "subscribe_packed"]


def rsio_expectation(peer: str) -> Expect:
    if peer in ("goodbye-keeps-socket", "websocket-close-after-error"):
        return prompt(ConnectionClosed, SAID)
    # rsio has no keepalive: a call's timeout is its bound.
    if peer == "never-answers":
        return timed_out("sent nothing")
    if peer == "silent-mid-stream":
        return timed_out()
    if peer in ("half-open", "close-without-error", "reset-inside-a-frame"):
        return prompt(ConnectionClosed, "lost")
    if peer == "garbage":
        return prompt(ConnectionClosed, "protocol error")
    if peer == "http-where-frames-expected":
        return prompt(ConnectionClosed, "HTTP")
    assert peer == "rsocket-where-rsio-expected"
    return prompt(ConnectionClosed, "RSocket", "not a SETUP frame")


def _sync_rsio_call(client: Any, call: str, timeout: float) -> None:
    subscribe = client.subscribe_packed if call == "subscribe_packed" else client.subscribe
    for _ in subscribe("numbers", timeout=timeout):
        pass


async def _async_rsio_call(client: Any, call: str, timeout: float) -> None:
    subscribe = client.subscribe_packed if call == "subscribe_packed" else client.subscribe
    async for _ in subscribe("numbers", timeout=timeout):
        pass


@pytest.mark.timeout(8)
@pytest.mark.parametrize(("call", "peer", "driver", "transport"), cells(RSIO_CALLS, RSIO_PEERS))
def test_rsio_client_call_against_a_misbehaving_peer_ends_within_its_bound(
    call: str, peer: str, driver: str, transport: str, selector_loop: Loop
) -> None:
    _play(
        rsio_expectation(peer),
        _rsio_script(peer, call == "subscribe_packed"),
        driver,
        transport,
        selector_loop,
        lambda url, loop, config: rsio.connect(url, loop=loop, loop_config=config),
        lambda url: rsio_aio.connect(url, loop_config=CONFIG),
        lambda client, timeout: _sync_rsio_call(client, call, timeout),
        lambda client, timeout: _async_rsio_call(client, call, timeout),
    )
