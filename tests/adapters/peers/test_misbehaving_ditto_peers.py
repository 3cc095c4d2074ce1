"""Every blocking or awaiting call of the Ditto client (subscribe and
iterate a history, item by item or in batches; the connect itself) against
every way a Ditto endpoint can go wrong, under every driver, over WebSocket
(Ditto's only transport; docs/adapters.md, "When the peer misbehaves";
docs/protocols/ditto.md). A scripted WebSocket peer (:mod:`.scripted`,
Ditto's messages from :mod:`..ditto.fake_ditto`) plays Ditto: it accepts
the upgrade and says nothing, goes silent after ``created``, closes mid
history without a Close, sends a Close with an error code, garbage text, an
error without a correlation-id, closes after an error, resets inside a message, or refuses the
upgrade (HTTP 401, 404, 500). Each cell asserts the error's type, that its
message names the cause, and that the call ended within its bound: at once
when Ditto said or did something final, after the call's ``timeout`` when
it only went silent (Ditto has no keepalive of its own: without
``timeout=`` a silent live endpoint is waited for)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from sansrs.adapters import ditto
from sansrs.adapters.ditto import aio as ditto_aio
from sansrs.adapters.drive import ConnectionClosed, Loop
from sansrs.adapters.transport.websocket import WebSocketHandshakeError

from sansrs.ditto import DittoRemoteError

from ..ditto.fake_ditto import UNKNOWN_ERRORS_TOPIC, compact, error_response, internal_error
from .scripted import Wire, scripted_peer
from .test_misbehaving_peers import (
    CLOSE_TIMEOUT,
    CONFIG,
    DRIVERS,
    LONG,
    PROMPT,
    TIMEOUT,
    Expect,
    _check,
    _run_async,
    prompt,
    timed_out,
)

THING = "org.eclipse.ditto:thing-2"
EVENT = {
    "topic": "org.eclipse.ditto/thing-2/things/twin/events/modified",
    "headers": {},
    "path": "/attributes/counter",
    "value": 5,
    "revision": 6,
    "timestamp": "2022-10-25T14:03:12.417Z",
}


@pytest.fixture(scope="module")
def selector_loop() -> Any:
    loop = Loop(CONFIG, name="ditto-peers-test").start()
    yield loop
    loop.stop(LONG)


def _subscribed(wire: Wire) -> tuple[str, dict[str, Any]]:
    """Reads the client's subscribe: its topic's base (``.../streaming/``)
    and the headers Ditto echoes (the correlation-id)."""
    message = json.loads(wire.read_text())
    assert message["topic"].endswith("/streaming/subscribeForPersistedEvents"), message
    base = message["topic"].rsplit("/", 1)[0] + "/"
    return base, {"correlation-id": message["headers"]["correlation-id"]}


def _event(base: str, headers: dict[str, Any], action: str, value: Any) -> str:
    return compact({"topic": base + action, "headers": headers, "path": "/", "value": value})


def _created(wire: Wire) -> tuple[str, dict[str, Any]]:
    """Subscribe read, ``created`` sent, the client's first ``request`` read."""
    base, headers = _subscribed(wire)
    wire.send_text(_event(base, headers, "created", {"subscriptionId": "0"}))
    request = json.loads(wire.read_text())
    assert request["topic"].endswith("/streaming/request"), request
    return base, headers


def _one_event(wire: Wire) -> None:
    base, headers = _created(wire)
    wire.send_text(_event(base, headers, "next", {"subscriptionId": "0", "item": EVENT}))


def _refuse(status: bytes) -> Callable[[Wire], None]:
    def script(wire: Wire) -> None:
        wire.read_http_request()
        wire.send_raw(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
        wire.hold()

    return script


def _then(first: Callable[[Wire], Any], ending: Callable[[Wire], None]) -> Callable[[Wire], None]:
    def script(wire: Wire) -> None:
        first(wire)
        ending(wire)

    return script


def _close_with_error(wire: Wire) -> None:
    wire.ws_close(1011, "internal server error")
    wire.hold()


def _garbage_text(wire: Wire) -> None:
    wire.send_text("{not json")
    wire.hold()


def _uncorrelated_error(wire: Wire) -> None:
    wire.send_text(error_response(UNKNOWN_ERRORS_TOPIC, {}, internal_error()))
    wire.hold()


def _close_after_error(wire: Wire) -> None:
    wire.send_text(error_response(UNKNOWN_ERRORS_TOPIC, {}, internal_error()))
    wire.ws_close(1000, "bye")
    wire.hold()


def _reset_inside_a_message(wire: Wire) -> None:
    base, headers = _created(wire)
    wire.send_partial_text(_event(base, headers, "next", {"subscriptionId": "0", "item": EVENT}))
    wire.reset()


#: name -> (script, whether the upgrade is taken before it)
PEERS: dict[str, tuple[Callable[[Wire], None], bool]] = {
    "silent-after-upgrade": (Wire.hold, True),
    "silent-after-created": (_then(_created, Wire.hold), True),
    "closes-mid-history-without-close": (_then(_one_event, Wire.close), True),
    "websocket-close-with-error-code": (_then(_subscribed, _close_with_error), True),
    "garbage-text": (_then(_subscribed, _garbage_text), True),
    "error-without-correlation-id": (_then(_subscribed, _uncorrelated_error), True),
    "websocket-close-after-error": (_then(_subscribed, _close_after_error), True),
    "reset-inside-a-message": (_reset_inside_a_message, True),
    "refuses-upgrade-401": (_refuse(b"401 Unauthorized"), False),
    "refuses-upgrade-404": (_refuse(b"404 Not Found"), False),
    "refuses-upgrade-500": (_refuse(b"500 Internal Server Error"), False),
}
CALLS = ["subscribe", "batches", "close"]


def expectation(peer: str, call: str) -> Expect:
    if peer.startswith("refuses-upgrade-"):
        return prompt(WebSocketHandshakeError, peer.rsplit("-", 1)[1])
    if call == "close":
        # A close whose Close the endpoint never answers waits close_timeout.
        return Expect(error=None, words=(), within=CLOSE_TIMEOUT + PROMPT)
    if peer == "silent-after-upgrade":
        return timed_out("no item", "Ditto has not answered the subscribe (no 'created')")
    if peer == "silent-after-created":
        return timed_out("no item")
    if peer == "closes-mid-history-without-close":
        return prompt(ConnectionClosed, "closed by peer", "no close message")
    if peer == "reset-inside-a-message":
        return prompt(ConnectionClosed, "lost")
    if peer == "websocket-close-with-error-code":
        return prompt(ConnectionClosed, "1011", "internal server error")
    if peer == "garbage-text":  # nothing on the connection can be trusted any more
        return prompt(ConnectionClosed, "protocol error from Ditto", "JSON")
    # It may answer this subscribe: it fails it (a Close after it changes nothing).
    assert peer in ("error-without-correlation-id", "websocket-close-after-error")
    return prompt(DittoRemoteError, "gateway:internalerror", "unexpected internal error")


def _sync_call(conn: Any, call: str, timeout: float) -> None:
    if call == "close":  # with a subscription open, whatever the endpoint did
        conn.subscribe_for_persisted_events(THING, timeout=timeout)
        conn.close(LONG)
        assert conn.closed
    elif call == "subscribe":
        for _ in conn.subscribe_for_persisted_events(THING, timeout=timeout):
            pass
    else:
        for _ in conn.persisted_event_batches(THING, timeout=timeout):
            pass


async def _async_call(conn: Any, call: str, timeout: float) -> None:
    if call == "close":
        conn.subscribe_for_persisted_events(THING, timeout=timeout)
        await conn.close()
        assert conn.closed
        return
    async for _ in conn.subscribe_for_persisted_events(THING, timeout=timeout):
        pass


@pytest.mark.timeout(8)
@pytest.mark.parametrize(
    ("call", "peer", "driver"),
    [
        pytest.param(call, peer, driver, id=f"{call}-{peer}-{driver}-ws")
        for call in CALLS
        for peer in PEERS
        for driver in DRIVERS
        # A refused upgrade fails the connect: one call is enough. Batches
        # are the synchronous API's (the Spark reader's).
        if call == "subscribe"
        or not (peer.startswith("refuses-upgrade-") or (call, driver) == ("batches", "asyncio"))
    ],
)
def test_ditto_client_call_against_a_misbehaving_endpoint_ends_within_its_bound(
    call: str, peer: str, driver: str, selector_loop: Loop
) -> None:
    script, upgrade = PEERS[peer]
    expect = expectation(peer, call)
    timeout = TIMEOUT if expect.error is TimeoutError else LONG
    with scripted_peer(script, websocket=True, upgrade=upgrade) as server:
        url = server.url + "ws/2"
        if driver == "asyncio":

            async def cell() -> None:
                conn = await ditto_aio.connect(url, loop_config=CONFIG, connect_timeout=LONG)
                try:
                    await _async_call(conn, call, timeout)
                finally:
                    await conn.close()

            _check(expect, lambda: _run_async(cell()))
        else:
            loop: Any = selector_loop if driver == "selector" else "thread"
            config = None if driver == "selector" else CONFIG

            def run() -> None:
                with ditto.connect(
                    url, loop=loop, loop_config=config, connect_timeout=LONG
                ) as conn:
                    _sync_call(conn, call, timeout)

            _check(expect, run)
    assert server.failure is None, server.failure
