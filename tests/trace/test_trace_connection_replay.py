"""The rsocket-py client side of every recorded trace, replayed into a sansrs
server ``Connection`` chunk by chunk: the same events a real server sees, and
no protocol error. The application mirrors what the recorded rsocket-py
server did (accepts SETUP, grants channel credit 2 then 1 per item), so the
recorded client's frames are all legal for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sansrs.rsocket import Connection, FrameReader, KeepaliveFrame, Role
from sansrs.rsocket import events as ev
from sansrs.trace import Direction, read_trace, replay

TRACES = Path(__file__).resolve().parent.parent / "traces"
C2S = Direction.CLIENT_TO_SERVER

EXPECTED_EVENTS: dict[str, list[type]] = {
    "request_response": [ev.SetupReceived, ev.RequestResponseReceived],
    "fire_and_forget": [ev.SetupReceived, ev.FireAndForgetReceived],
    "request_stream": [
        ev.SetupReceived,
        ev.RequestStreamReceived,
        ev.RequestNReceived,
        ev.RequestNReceived,
    ],
    "request_channel": [
        ev.SetupReceived,
        ev.RequestChannelReceived,
        ev.PayloadReceived,
        ev.PayloadReceived,
        ev.RequestNReceived,
    ],
    "metadata_push": [ev.SetupReceived, ev.MetadataPushReceived],
    "application_error": [ev.SetupReceived, ev.RequestResponseReceived],
    "fragmented": [ev.SetupReceived, ev.RequestResponseReceived],
    "cancel": [
        ev.SetupReceived,
        ev.RequestStreamReceived,
        ev.CancelReceived,
        ev.RequestResponseReceived,
    ],
    "keepalive": [ev.SetupReceived, ev.KeepaliveReceived, ev.KeepaliveReceived],
}


def _react(conn: Connection) -> list[Any]:
    # Accepting SETUP releases the requests that arrived with it: drain again.
    events: list[Any] = []
    while batch := conn.events():
        # A stream whose inbound completes in this batch takes no more credit.
        done = {e.stream_id for e in batch if isinstance(e, ev.PayloadReceived) and e.complete}
        for event in batch:
            if isinstance(event, ev.SetupReceived):
                conn.accept_setup()
            elif isinstance(event, ev.RequestChannelReceived):
                conn.request_n(event.stream_id, 2)
            elif isinstance(event, ev.PayloadReceived) and event.stream_id not in done:
                conn.request_n(event.stream_id, 1)
        events.extend(batch)
    return events


@pytest.mark.parametrize("name", sorted(EXPECTED_EVENTS))
def test_trace_client_side_replays_into_a_sansrs_server(name: str) -> None:
    trace = read_trace(TRACES / f"{name}.rstrace")
    conn = Connection(Role.SERVER)
    out = replay(trace, {C2S: conn}, drain=_react, stop_on_error=True)
    events = [r.item for r in out]
    assert isinstance(events[-1], ev.ConnectionLost)  # the recorded client closed
    assert [type(e) for e in events[:-1]] == EXPECTED_EVENTS[name]
    if name == "fragmented":
        request = events[1]
        assert request.data == bytes(range(256)) * 2 + b"tail"
        assert request.metadata == b"m" * 100
    if name == "keepalive":
        sent = FrameReader().feed(conn.data_to_send())
        answers = [f for f in sent if isinstance(f, KeepaliveFrame)]
        assert len(answers) == 2 and not any(f.respond for f in answers)


def test_trace_names_match_the_replay_table() -> None:
    assert {p.stem for p in TRACES.glob("*.rstrace")} == set(EXPECTED_EVENTS)
