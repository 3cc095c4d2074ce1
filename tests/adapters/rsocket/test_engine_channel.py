"""The RSocket engine's responder side of REQUEST_CHANNEL, driven without a
socket: bytes in with ``receive_data``, bytes out with ``data_to_send``.

The requester may complete its side in the very read that opens the channel
(REQUEST_CHANNEL then PAYLOAD+COMPLETE in one chunk): the core has already
seen the COMPLETE when the engine hands the channel to the handler, so there
is nothing left to request (``request_n`` is a LocalProtocolError for the
core) and the engine must neither raise nor send REQUEST_N, and the handler
must see its inbound end after the items that came with it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sansrs.adapters.rsocket.engine import RSocketEngine
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.rsocket.peer import RSocketPeer
from sansrs.adapters.rsocket.responder import CHANNEL_PREFETCH
from sansrs.adapters.rsocket.types import Payload

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    ErrorFrame,
    PayloadFrame,
    RequestNFrame,
    Role,
    decode_frame,
)


class Recorder:
    """A channel handler that records its request and keeps its inbound."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.inbounds: list[Iterator[Payload]] = []

    def request_channel(self, request: Any, inbound: Iterator[Payload]) -> bytes:
        # Called on the connection's thread while the read is being
        # dispatched: the inbound is consumed later (a worker would). One
        # bytes value is one item, pulled on the connection's thread.
        self.requests.append(request.data)
        self.inbounds.append(inbound)
        return b"ack"


def _frames(data: bytes) -> list[Any]:
    """Length-prefixed frames (the TCP framing) decoded."""
    frames = []
    while data:
        end = 3 + int.from_bytes(data[:3], "big")
        frames.append(decode_frame(data[3:end]))
        data = data[end:]
    return frames


def _requester() -> Connection:
    conn = Connection(Role.CLIENT, ConnectionConfig())
    conn.setup()
    return conn


class FakeDriver:
    """Stands in for the connection's thread: calls handed to it queue up
    until the test runs them (as the loop would, after the current read)."""

    is_owner = True

    def __init__(self) -> None:
        self.calls: list[Callable[[], object]] = []

    def call_soon(self, fn: Callable[[], object]) -> None:
        self.calls.append(fn)

    def wake(self) -> None:
        pass

    def run_calls(self) -> None:
        while self.calls:
            self.calls.pop(0)()


def _server(handler: object) -> tuple[RSocketEngine, FakeDriver]:
    server = RSocketEngine.server(EngineOptions())
    driver = FakeDriver()
    server.attach(driver, RSocketPeer(driver, server), handler)  # type: ignore[arg-type]
    return server, driver


def test_rsocket_channel_completed_in_the_same_read_requests_nothing() -> None:
    requester = _requester()
    sid = requester.request_channel(b"open", initial_n=4)
    requester.send_complete(sid)  # PAYLOAD(COMPLETE) right behind REQUEST_CHANNEL
    chunk = requester.data_to_send()  # SETUP, REQUEST_CHANNEL, COMPLETE: one read
    handler = Recorder()
    server, driver = _server(handler)

    server.receive_data(chunk, 0.0)  # raised LocalProtocolError before the fix
    driver.run_calls()
    server.pump()

    assert handler.requests == [b"open"]
    # the requester's COMPLETE reached the inbound: it ends with no items
    # (the stream is finished, so this does not block)
    assert list(handler.inbounds[0]) == []
    out = _frames(server.data_to_send())
    assert not [f for f in out if isinstance(f, RequestNFrame)]
    assert not [f for f in out if isinstance(f, ErrorFrame)]
    assert [(f.stream_id, f.data, f.complete) for f in out if isinstance(f, PayloadFrame)] == [
        (sid, b"ack", True)
    ]
    # the connection goes on: a second channel on it is served the same way
    sid2 = requester.request_channel(b"again", initial_n=1, complete=True)
    server.receive_data(requester.data_to_send(), 0.0)
    driver.run_calls()
    server.pump()
    assert handler.requests == [b"open", b"again"]
    out = _frames(server.data_to_send())
    assert [(f.stream_id, f.data) for f in out if isinstance(f, PayloadFrame)] == [(sid2, b"ack")]


def test_rsocket_channel_left_open_gets_its_prefetch_requested() -> None:
    # The control case: without the COMPLETE in the same read the responder
    # asks for its window at once.
    requester = _requester()
    sid = requester.request_channel(b"open", initial_n=4)
    server, driver = _server(_Waiting())
    server.receive_data(requester.data_to_send(), 0.0)
    driver.run_calls()
    out = _frames(server.data_to_send())
    assert [(f.stream_id, f.request_n) for f in out if isinstance(f, RequestNFrame)] == [
        (sid, CHANNEL_PREFETCH)
    ]


class _Waiting:
    """A handler that does not consume its inbound (the stream stays open)."""

    def request_channel(self, request: Any, inbound: Iterator[Payload]) -> None:
        return None
