"""``replay``: traces into receivers, chunk by chunk, per direction."""

from __future__ import annotations

from typing import Any

import pytest

from sansrs import RemoteProtocolError
from sansrs.rsocket import ErrorCode, PayloadFrame, encode_frame_prefixed
from sansrs.trace import (
    DataRecord,
    Direction,
    EndRecord,
    Record,
    RSocketFrameReceiver,
    replay,
)

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
FRAME = encode_frame_prefixed(PayloadFrame(1, b"abc", next=True))


def _records(*chunks: tuple[Direction, bytes | None]) -> list[Record]:
    out: list[Record] = []
    for i, (direction, data) in enumerate(chunks):
        if data is None:
            out.append(EndRecord(direction=direction, timestamp=float(i)))
        else:
            out.append(DataRecord(direction=direction, timestamp=float(i), data=data))
    return out


def test_replay_feeds_each_direction_its_own_chunks() -> None:
    records = _records((C2S, FRAME[:4]), (S2C, FRAME), (C2S, FRAME[4:] + FRAME), (C2S, None))
    out = replay(records, {d: RSocketFrameReceiver() for d in Direction})
    assert [(p.direction, p.timestamp) for p in out] == [(S2C, 1.0), (C2S, 2.0), (C2S, 2.0)]
    assert all(p.item == PayloadFrame(1, b"abc", next=True) for p in out)


def test_replay_end_inside_a_frame_is_an_error_and_stops_the_direction() -> None:
    records = _records((C2S, FRAME[:-1]), (C2S, None), (S2C, FRAME))
    out = replay(records, {d: RSocketFrameReceiver() for d in Direction})
    (error,) = [p for p in out if p.error is not None]
    assert error.direction == C2S and error.error.error_code == ErrorCode.CONNECTION_ERROR  # type: ignore[union-attr]
    assert [p.direction for p in out if p.error is None] == [S2C]
    # without feed_end, the partial frame is just left pending
    assert replay(records, {C2S: RSocketFrameReceiver()}, feed_end=False) == []


def test_replay_bad_frame_delivers_the_frames_before_it_then_the_error() -> None:
    bad = b"\x00\x00\x02"
    records = _records((C2S, FRAME + bad), (C2S, FRAME))
    out = replay(records, {C2S: RSocketFrameReceiver()})
    assert out[0].item == PayloadFrame(1, b"abc", next=True)
    assert out[1].error is not None and len(out) == 2
    with pytest.raises(RemoteProtocolError):
        replay(records, {C2S: RSocketFrameReceiver()}, stop_on_error=True)


class _FakeConnection:
    """A connection-shaped receiver: receive_data returns None, events() drains."""

    def __init__(self) -> None:
        self.pending: list[Any] = []
        self.closed = False

    def receive_data(self, data: bytes) -> None:
        if data:
            self.pending.append(len(data))
        else:
            self.closed = True
            self.pending.append("closed")

    def events(self) -> list[Any]:
        out, self.pending = self.pending, []
        return out


def test_replay_drains_connection_style_receivers() -> None:
    conn = _FakeConnection()
    records = _records((C2S, b"xy"), (S2C, b"ignored"), (C2S, b"z"), (C2S, None))
    out = replay(records, {C2S: conn}, drain=lambda c: c.events())
    assert [p.item for p in out] == [2, 1, "closed"]
    assert conn.closed
