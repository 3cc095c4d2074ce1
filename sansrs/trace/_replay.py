"""Replay a trace into sans-IO receivers, chunk by chunk, per direction.

A receiver is anything with ``receive_data(data)``: a connection (whose
output is then drained with ``drain``, e.g. ``lambda c: c.events()``) or a
decoder that returns what each chunk completed (``RSocketFrameReceiver``).
End records are fed as ``receive_data(b"")`` (the sans-IO "peer closed").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .._errors import RemoteProtocolError
from ..rsocket import MAX_FRAME_LENGTH, PREFIX_LENGTH, ErrorCode, Frame, FrameReader
from ._format import DataRecord, Direction, EndRecord, Record, Trace

__all__ = ["RSocketFrameReceiver", "Receiver", "Replayed", "replay"]


class Receiver(Protocol):
    def receive_data(self, data: bytes) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Replayed:
    """One thing a receiver produced (or the error it raised) for one chunk."""

    direction: Direction
    timestamp: float
    item: Any = None
    error: RemoteProtocolError | None = None


class RSocketFrameReceiver:
    """``FrameReader`` behind the ``receive_data`` interface.

    Returns the frames each chunk completed; ``b""`` (end of the direction)
    raises ``RemoteProtocolError(CONNECTION_ERROR)`` when a partial frame is
    still buffered, since the peer closed in the middle of a frame.
    """

    def __init__(self, max_frame_size: int = MAX_FRAME_LENGTH) -> None:
        self._reader = FrameReader(max_frame_size)

    def receive_data(self, data: bytes) -> list[Frame]:
        if not data:
            pending = self._reader.pending
            if pending:
                what = "length prefix" if pending < PREFIX_LENGTH else "frame"
                raise RemoteProtocolError(
                    f"stream ended inside a {what} ({pending} bytes pending)",
                    ErrorCode.CONNECTION_ERROR,
                )
            return []
        return self._reader.feed(data)


def replay(
    records: Trace | Iterable[Record],
    receivers: Mapping[Direction, Receiver],
    *,
    drain: Callable[[Any], Iterable[Any] | None] | None = None,
    feed_end: bool = True,
    stop_on_error: bool = False,
) -> list[Replayed]:
    """Feed each chunk of ``records`` to the receiver of its direction.

    What a call produces is its return value when it is iterable, then
    whatever ``drain(receiver)`` yields; each item becomes one ``Replayed``.
    A ``RemoteProtocolError`` becomes a ``Replayed`` with ``error`` set and
    the direction is fed no more (``stop_on_error=True`` re-raises instead).
    Directions without a receiver are skipped.
    """
    if isinstance(records, Trace):
        records = records.records
    out: list[Replayed] = []
    failed: set[Direction] = set()
    for record in records:
        direction = record.direction
        receiver = receivers.get(direction)
        if receiver is None or direction in failed:
            continue
        if isinstance(record, DataRecord):
            data = record.data
        elif isinstance(record, EndRecord) and feed_end:
            data = b""
        else:
            continue
        try:
            produced = receiver.receive_data(data)
            items: list[Any] = list(produced) if produced is not None else []
            if drain is not None:
                drained = drain(receiver)
                if drained is not None:
                    items.extend(drained)
        except RemoteProtocolError as exc:
            if stop_on_error:
                raise
            failed.add(direction)
            frames = getattr(exc, "frames", None) or []
            out.extend(
                Replayed(direction=direction, timestamp=record.timestamp, item=f) for f in frames
            )
            out.append(Replayed(direction=direction, timestamp=record.timestamp, error=exc))
            continue
        out.extend(Replayed(direction=direction, timestamp=record.timestamp, item=i) for i in items)
    return out
