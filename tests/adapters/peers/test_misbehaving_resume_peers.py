"""Every blocking or awaiting call of a resumable RSocket client
(``connect_resumable``) against a peer that goes wrong around resumption,
under every driver, over TCP (docs/adapters.md, "When the peer misbehaves";
docs/resumption.md): a peer that never answers the SETUP, one that cuts the
connection and then answers the client's RESUME with nothing, with
ERROR[REJECTED_RESUME] (keeping the socket), with garbage, or with the start
of a RESUME_OK and a reset. A scripted peer (:mod:`.scripted`) plays every
connection the client opens; each cell asserts the error's type, that its
message names the cause, and that the call ended within its bound: at once
for a rejection, within ``reconnect_timeout`` of the loss otherwise (the
loss itself comes at once for a cut, after ``max_lifetime`` for silence).

Over TCP only: resumption over WebSocket has its own fault tests
(tests/adapters/rsocket/test_resume_websocket.py); its cells here are to
come."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed, Loop
from sansrs.adapters.rsocket import ResumeOptions, SessionLost, connect_resumable
from sansrs.adapters.rsocket.resume import aio as resume_aio

from .scripted import RESUME, RESUME_OK, SETUP, Wire, error_frame, frame_type, scripted_peer
from .test_misbehaving_peers import (
    CONFIG,
    DRIVERS,
    GARBAGE,
    KEEPALIVE,
    LONG,
    PROMPT,
    SAID,
    SLACK,
    Expect,
    _async_rsocket_call,
    _check,
    _run_async,
    _sync_rsocket_call,
)

#: The whole outage a client waits out before its session ends.
RECONNECT = 0.3
REJECTED_RESUME = 0x004
#: Connections a peer takes (a client retries within RECONNECT, backoff
#: from 0.05 s doubling to 0.1 s: far fewer).
CONNECTIONS = 40


@pytest.fixture(scope="module")
def selector_loop() -> Any:
    loop = Loop(CONFIG, name="resume-peers-test").start()
    yield loop
    loop.stop(LONG)


def _options(lost: threading.Event) -> ResumeOptions:
    return ResumeOptions(
        reconnect_timeout=RECONNECT,
        reconnect_initial=0.05,
        reconnect_max=0.1,
        on_disconnected=lambda reason: lost.set(),
    )


def _first_then(after_cut: Callable[[Wire], None]) -> Callable[[Wire], None]:
    """The first connection takes the SETUP and the client's request (or
    fire-and-forget), then resets; every later one reads the RESUME and
    plays ``after_cut``."""

    def script(wire: Wire) -> None:
        if wire.index == 0:
            assert frame_type(wire.read_frame()) == SETUP
            wire.read_request()
            wire.reset()
            return
        assert frame_type(wire.read_frame()) == RESUME
        after_cut(wire)

    return script


def _reject_resume(wire: Wire) -> None:
    wire.send_frame(error_frame(0, REJECTED_RESUME, SAID))
    wire.hold()


def _garbage(wire: Wire) -> None:
    wire.send_frame(GARBAGE)
    wire.hold()


def _reset_inside_resume_ok(wire: Wire) -> None:
    # RESUME_OK: stream 0, its type, the client's last received position.
    wire.send_partial_frame(bytes(4) + (RESUME_OK << 10).to_bytes(2, "big") + bytes(8))
    wire.reset()


PEERS: dict[str, Callable[[Wire], None]] = {
    "never-answers-setup": Wire.hold,
    "resume-answered-with-nothing": _first_then(Wire.hold),
    "resume-rejected-keeps-socket": _first_then(_reject_resume),
    "garbage-after-cut": _first_then(_garbage),
    "reset-inside-resume-ok": _first_then(_reset_inside_resume_ok),
}
CALLS = ["request_response", "stream", "channel", "close"]


def expectation(peer: str, call: str) -> Expect:
    # The loss: at once when the peer cuts, after max_lifetime when it is silent.
    loss = KEEPALIVE["max_lifetime"] if peer == "never-answers-setup" else 0.0
    if call == "close":
        # A close in the outage (after the loss) returns at once, saying
        # what the ended session lost: the unconfirmed fire-and-forget.
        return Expect(error=SessionLost, words=("1 fire-and-forget",), within=loss + PROMPT + SLACK)
    if peer == "resume-rejected-keeps-socket":
        return Expect(error=ConnectionClosed, words=("REJECTED_RESUME", SAID), within=PROMPT)
    if peer == "garbage-after-cut":  # the peer broke the protocol: no retry
        return Expect(error=ConnectionClosed, words=("protocol error", "RESUME_OK"), within=PROMPT)
    last = {
        "never-answers-setup": "RESUME not answered",
        "resume-answered-with-nothing": "RESUME not answered",
        # Each attempt cut (its last one may still be waiting when the
        # outage runs out): the attempts are counted.
        "reset-inside-resume-ok": "attempt(s)",
    }[peer]
    said = f"not resumed within {RECONNECT:g} s"
    return Expect(
        error=ConnectionClosed,
        words=(said, last),
        within=loss + RECONNECT + SLACK,
        at_least=loss / 2 + RECONNECT,
    )


#: The plain client's calls (test_misbehaving_peers), a request-response
#: without a timeout of its own: the session's end must end it.
PLAIN_CALL = {"request_response": "request_response_no_timeout"}


def _sync_call(client: Any, call: str, lost: threading.Event) -> None:
    if call != "close":
        _sync_rsocket_call(client, PLAIN_CALL.get(call, call), LONG)
        return
    client.fire_and_forget(b"news")
    assert lost.wait(LONG)
    client.close(LONG)


async def _async_call(client: Any, call: str, lost: threading.Event) -> None:
    if call != "close":
        await _async_rsocket_call(client, PLAIN_CALL.get(call, call), LONG)
        return
    await client.fire_and_forget(b"news")
    assert await asyncio.to_thread(lost.wait, LONG)
    await client.close()


@pytest.mark.timeout(8)
@pytest.mark.parametrize(
    ("call", "peer", "driver"),
    [
        pytest.param(call, peer, driver, id=f"{call}-{peer}-{driver}-tcp")
        for call in CALLS
        for peer in PEERS
        for driver in DRIVERS
    ],
)
def test_resumable_client_call_against_a_misbehaving_peer_ends_within_reconnect_timeout(
    call: str, peer: str, driver: str, selector_loop: Loop
) -> None:
    expect = expectation(peer, call)
    lost = threading.Event()
    with scripted_peer(PEERS[peer], connections=CONNECTIONS) as server:
        if driver == "asyncio":

            async def cell() -> None:
                client = await resume_aio.connect_resumable(
                    server.url, loop_config=CONFIG, resume=_options(lost), **KEEPALIVE
                )
                try:
                    await _async_call(client, call, lost)
                finally:
                    with contextlib.suppress(ConnectionClosed):
                        await client.close()

            _check(expect, lambda: _run_async(cell()))
        else:
            loop: Any = selector_loop if driver == "selector" else "thread"
            client = connect_resumable(
                server.url,
                loop=loop,
                loop_config=None if driver == "selector" else CONFIG,
                resume=_options(lost),
                **KEEPALIVE,
            )
            try:
                _check(expect, lambda: _sync_call(client, call, lost))
            finally:
                with contextlib.suppress(ConnectionClosed):
                    client.close(LONG)
    assert server.failure is None, server.failure
