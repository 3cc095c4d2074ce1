"""Per-stream state machine (a table) and stream ID allocation.

A stream has two flows: the one this end sends (out) and the one it receives
(in). Its state says which are still open. The table below is the whole
lifetime logic of "Stream Sequences and Lifetimes"; the connection picks the
input, applies the table, and does credit and framing around it.

CANCEL is asymmetric. The requester's CANCEL terminates the stream on both
ends ("Upon sending a CANCEL, the stream is terminated on the Requester";
"upon receiving a CANCEL, the stream is terminated on the Responder"). A
channel responder may also cancel the requester's flow alone (as rsocket-java
does when the responder stops consuming): that closes only that flow.
"""

from __future__ import annotations

import enum

from ._fragmentation import Reassembly
from ._frames import MAX_REQUEST_N, MAX_STREAM_ID

__all__ = [
    "TRANSITIONS",
    "UNBOUNDED",
    "Stream",
    "StreamIdAllocator",
    "StreamInput",
    "StreamKind",
    "StreamState",
    "add_credit",
]

#: Credit at or beyond 2**31-1 means "unbounded", as 1.0 peers treat it. The
#: sentinel is so large that decrementing it never brings it back in range.
UNBOUNDED = 1 << 62


def add_credit(credit: int, n: int) -> int:
    total = credit + n
    return UNBOUNDED if total >= MAX_REQUEST_N else total


class StreamKind(enum.IntEnum):
    REQUEST_RESPONSE = 1
    REQUEST_STREAM = 2
    REQUEST_CHANNEL = 3
    FIRE_AND_FORGET = 4  # only while a fragmented FNF is reassembled


class StreamState(enum.Enum):
    # Identity hash (members are singletons, compared by identity): Enum's
    # own __hash__ is Python code, run on every transition-table lookup.
    __hash__ = object.__hash__

    BOTH_OPEN = "both-open"
    OUT_ONLY = "out-only"  # this end still sends; receives nothing more
    IN_ONLY = "in-only"  # this end still receives; sends nothing more
    CLOSED = "closed"


class StreamInput(enum.Enum):
    # Identity hash (members are singletons, compared by identity): Enum's
    # own __hash__ is Python code, run on every transition-table lookup.
    __hash__ = object.__hash__

    SEND_PAYLOAD = "send-payload"
    SEND_COMPLETE = "send-complete"
    SEND_ERROR = "send-error"
    SEND_CANCEL = "send-cancel"  # by the requester: terminates the stream
    SEND_CANCEL_INBOUND = "send-cancel-inbound"  # by a channel responder
    SEND_REQUEST_N = "send-request-n"
    RECV_PAYLOAD = "recv-payload"
    RECV_COMPLETE = "recv-complete"
    RECV_ERROR = "recv-error"
    RECV_CANCEL = "recv-cancel"  # at the responder: terminates the stream
    RECV_CANCEL_OUTBOUND = "recv-cancel-outbound"  # at a channel requester
    RECV_REQUEST_N = "recv-request-n"


_S = StreamState
_I = StreamInput

#: (state, input) -> next state. A missing pair is not allowed: a local
#: intent raises LocalProtocolError, a received frame is ignored (spec:
#: Handling the Unexpected, 9).
TRANSITIONS: dict[tuple[StreamState, StreamInput], StreamState] = {
    (_S.BOTH_OPEN, _I.SEND_PAYLOAD): _S.BOTH_OPEN,
    (_S.BOTH_OPEN, _I.SEND_COMPLETE): _S.IN_ONLY,
    (_S.BOTH_OPEN, _I.SEND_ERROR): _S.CLOSED,
    (_S.BOTH_OPEN, _I.SEND_CANCEL): _S.CLOSED,
    (_S.BOTH_OPEN, _I.SEND_CANCEL_INBOUND): _S.OUT_ONLY,
    (_S.BOTH_OPEN, _I.SEND_REQUEST_N): _S.BOTH_OPEN,
    (_S.BOTH_OPEN, _I.RECV_PAYLOAD): _S.BOTH_OPEN,
    (_S.BOTH_OPEN, _I.RECV_COMPLETE): _S.OUT_ONLY,
    (_S.BOTH_OPEN, _I.RECV_ERROR): _S.CLOSED,
    (_S.BOTH_OPEN, _I.RECV_CANCEL): _S.CLOSED,
    (_S.BOTH_OPEN, _I.RECV_CANCEL_OUTBOUND): _S.IN_ONLY,
    (_S.BOTH_OPEN, _I.RECV_REQUEST_N): _S.BOTH_OPEN,
    (_S.OUT_ONLY, _I.SEND_PAYLOAD): _S.OUT_ONLY,
    (_S.OUT_ONLY, _I.SEND_COMPLETE): _S.CLOSED,
    (_S.OUT_ONLY, _I.SEND_ERROR): _S.CLOSED,
    (_S.OUT_ONLY, _I.SEND_CANCEL): _S.CLOSED,
    (_S.OUT_ONLY, _I.RECV_ERROR): _S.CLOSED,
    (_S.OUT_ONLY, _I.RECV_CANCEL): _S.CLOSED,
    (_S.OUT_ONLY, _I.RECV_CANCEL_OUTBOUND): _S.CLOSED,
    (_S.OUT_ONLY, _I.RECV_REQUEST_N): _S.OUT_ONLY,
    (_S.IN_ONLY, _I.SEND_ERROR): _S.CLOSED,
    (_S.IN_ONLY, _I.SEND_CANCEL): _S.CLOSED,
    (_S.IN_ONLY, _I.SEND_CANCEL_INBOUND): _S.CLOSED,
    (_S.IN_ONLY, _I.SEND_REQUEST_N): _S.IN_ONLY,
    (_S.IN_ONLY, _I.RECV_PAYLOAD): _S.IN_ONLY,
    (_S.IN_ONLY, _I.RECV_COMPLETE): _S.CLOSED,
    (_S.IN_ONLY, _I.RECV_ERROR): _S.CLOSED,
    (_S.IN_ONLY, _I.RECV_CANCEL): _S.CLOSED,
}


class Stream:
    """One open stream. ``out_credit``: PAYLOADs the peer lets us send;
    ``in_credit``: PAYLOADs we let the peer send (both may be ``UNBOUNDED``)."""

    __slots__ = (
        "in_credit",
        "kind",
        "out_credit",
        "reassembly",
        "requester",
        "state",
        "stream_id",
    )

    def __init__(
        self,
        stream_id: int,
        kind: StreamKind,
        requester: bool,
        state: StreamState,
        out_credit: int,
        in_credit: int,
    ) -> None:
        self.stream_id = stream_id
        self.kind = kind
        self.requester = requester  # this end is the stream's requester
        self.state = state
        self.out_credit = out_credit
        self.in_credit = in_credit
        self.reassembly: Reassembly | None = None  # fragments received so far

    @property
    def out_open(self) -> bool:
        return self.state is StreamState.BOTH_OPEN or self.state is StreamState.OUT_ONLY

    @property
    def in_open(self) -> bool:
        return self.state is StreamState.BOTH_OPEN or self.state is StreamState.IN_ONLY

    def __repr__(self) -> str:
        return (
            f"Stream({self.stream_id}, {self.kind.name}, "
            f"{'requester' if self.requester else 'responder'}, {self.state.value}, "
            f"out={self.out_credit}, in={self.in_credit})"
        )


class StreamIdAllocator:
    """Client IDs 1, 3, 5...; server IDs 2, 4, 6...; wrap after 2**31-1
    (when ``reuse``), skipping IDs still in use."""

    __slots__ = ("_first", "_next", "_reuse", "_wrapped")

    def __init__(self, client: bool, reuse: bool = True) -> None:
        self._first = 1 if client else 2
        self._next = self._first
        self._reuse = reuse
        self._wrapped = False

    def next_id(self, in_use: dict[int, Stream] | set[int]) -> int | None:
        """The next ID, or None when none is free (a new connection is needed)."""
        sid = self._next
        if sid > MAX_STREAM_ID:
            if not self._reuse:
                return None
            sid = self._first
            self._wrapped = True
        if self._wrapped:
            start = sid
            while sid in in_use:
                sid += 2
                if sid > MAX_STREAM_ID:
                    sid = self._first
                if sid == start:
                    return None
        self._next = sid + 2
        return sid
