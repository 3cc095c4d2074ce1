"""Byte traces of real rsio sessions over TCP (tests/traces/rsio_*.trace,
recorded by record_rsio_traces.py), replayed chunk by chunk into fresh
sans-IO connections: every message parses, no protocol error, the same
elements come out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sansrs.adapters.rsio.demo import blob

from sansrs.rsio import MAX_VARINT, Connection, Role
from sansrs.rsio import events as ev
from sansrs.trace import Direction, read_trace, replay

TRACES = Path(__file__).resolve().parent.parent / "traces"
C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT

#: The recorded client's subscriptions, in Id order.
SUBSCRIPTIONS = {
    "rsio_counter_packed": ["counter/1000"],
    "rsio_blobs_split": ["blobs"],
    "rsio_cancel_error": ["counter", "missing"],
}


def test_every_trace_is_listed() -> None:
    assert {p.stem for p in TRACES.glob("rsio_*.trace")} == set(SUBSCRIPTIONS)


class _ClosingClient:
    """The recorded client said goodbye once done: say it too before the
    chunk that carries the server's goodbyeAck (it arrives on its own)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def receive_data(self, data: bytes) -> None:
        if data[:1] == b"\x04" and self.conn.state.value == "open":
            self.conn.close()
        self.conn.receive_data(data)


def _events(name: str, direction: Direction, conn: Connection) -> list[Any]:
    receiver: Any = conn if direction is C2S else _ClosingClient(conn)
    trace = read_trace(TRACES / f"{name}.trace")
    out = replay(trace, {direction: receiver}, drain=lambda r: conn.events())
    assert all(r.error is None for r in out), [r.error for r in out if r.error]
    return [r.item for r in out]


@pytest.mark.parametrize("name", sorted(SUBSCRIPTIONS))
def test_client_bytes_replayed_into_a_server(name: str) -> None:
    events = _events(name, C2S, Connection(Role.SERVER))
    subscribes = [e for e in events if isinstance(e, ev.SubscribeReceived)]
    assert [e.publisher for e in subscribes] == SUBSCRIPTIONS[name]
    assert isinstance(events[0], ev.HelloReceived)
    assert isinstance(events[-1], ev.ConnectionTerminated | ev.ConnectionLost)


def _client(name: str) -> Connection:
    client = Connection(Role.CLIENT)
    for publisher in SUBSCRIPTIONS[name]:
        client.subscribe(publisher, MAX_VARINT)  # the recorded demand, and more
    return client


def _elements(events: list[Any], sid: int) -> list[bytes]:
    out: list[bytes] = []
    for e in events:
        if isinstance(e, ev.NextPackedReceived) and e.subscriber_id == sid:
            out += e.split()
        elif isinstance(e, ev.NextReceived) and e.subscriber_id == sid:
            out.append(e.element)
    return out


def test_counter_packed_replayed_into_a_client() -> None:
    events = _events("rsio_counter_packed", S2C, _client("rsio_counter_packed"))
    assert ev.OnSubscribeReceived(subscriber_id=1, element_size=8) in events
    assert any(isinstance(e, ev.NextPackedReceived) for e in events)
    assert _elements(events, 1) == [i.to_bytes(8, "big") for i in range(1000)]
    assert ev.CompleteReceived(subscriber_id=1) in events


def test_blobs_split_replayed_into_a_client() -> None:
    events = _events("rsio_blobs_split", S2C, _client("rsio_blobs_split"))
    assert _elements(events, 1) == [blob(0, 3000), blob(1, 3000)]


def test_cancel_and_error_replayed_into_a_client() -> None:
    events = _events("rsio_cancel_error", S2C, _client("rsio_cancel_error"))
    counted = _elements(events, 1)
    assert counted[:20] == [i.to_bytes(8, "big") for i in range(20)]
    assert ev.ErrorReceived(subscriber_id=2, error="no publisher named 'missing'") in events
