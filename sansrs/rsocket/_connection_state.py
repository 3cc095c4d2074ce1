"""The :class:`~._connection.Connection` as the modules of its intents see
it: :mod:`._connection_requests` (the requests that open streams),
:mod:`._connection_streams` (what is sent on an open stream) and
:mod:`._connection_intents` (the connection's own frames and its close).
Their functions are the connection's methods (bound in its class, so the
calls stay the calls they were: the hot paths run the same bytecode); this
protocol is the connection they are typed against, without importing it
(no cycle)."""

from __future__ import annotations

from collections import deque
from typing import NoReturn, Protocol

from .._errors import LocalProtocolError
from ._config import ConnectionConfig
from ._context import Context
from ._fragmentation import Fragmenter
from ._keepalive import Keepalive
from ._latency import LatencyPath
from ._lease import Leases
from ._output import Output
from ._resume import Resumption
from ._streams import Stream, StreamTable
from .events import Event

__all__ = ["ConnectionParts", "check_n"]


def check_n(name: str, n: int) -> None:
    if type(n) is not int or n < 1:
        raise LocalProtocolError(f"{name} must be an int >= 1, got {n!r}")


class ConnectionParts(Protocol):
    """The :class:`~._connection.Connection` as its intents see it: its
    parts, and the intents' helpers that are its methods too."""

    config: ConnectionConfig
    _client: bool
    _ctx: Context
    _out: Output
    _prefixed: bool
    _fragments: Fragmenter
    _streams: StreamTable
    _by_id: dict[int, Stream]
    _keepalive: Keepalive
    _leases: Leases
    _resume: Resumption
    _event_queue: deque[Event]
    _latency: LatencyPath

    def _next_stream_id(self, what: str) -> int: ...
    def _queue_whole_request(
        self, sid: int, type_flags: int, data: bytes, metadata: bytes | None
    ) -> bool: ...
    def _payload_refused(self, stream_id: int, s: Stream | None) -> NoReturn: ...
