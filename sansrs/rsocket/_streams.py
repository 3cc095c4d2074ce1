"""The streams of a connection: the per-stream state machine (a table),
stream ID allocation and ``StreamTable``, the part of ``Connection`` that
holds the open streams and runs the table.

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

from .._errors import LocalProtocolError
from ._context import Context
from ._fast import identity_hash
from ._fragmentation import Reassembly, ReassemblyBudget
from ._frames import (
    MAX_REQUEST_N,
    MAX_STREAM_ID,
    PayloadFrame,
    RequestChannelFrame,
    RequestFrame,
    RequestResponseFrame,
    RequestStreamFrame,
)
from ._state import ConnectionState

__all__ = [
    "STREAM_TRANSITIONS",
    "UNBOUNDED",
    "Stream",
    "StreamIdAllocator",
    "StreamInput",
    "StreamKind",
    "StreamState",
    "StreamTable",
    "add_credit",
    "pending_request",
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


# State machine as data, alike in shape by design (the duplicates scan lists
# it with the connection's and rsio's): states, inputs, then the table.


@identity_hash  # table lookups (_fast.py)
class StreamState(enum.Enum):
    BOTH_OPEN = "both-open"
    OUT_ONLY = "out-only"  # this end still sends; receives nothing more
    IN_ONLY = "in-only"  # this end still receives; sends nothing more
    CLOSED = "closed"


@identity_hash  # table lookups (_fast.py)
class StreamInput(enum.Enum):
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
STREAM_TRANSITIONS: dict[tuple[StreamState, StreamInput], StreamState] = {
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


#: A new stream's state: (kind, this end is the requester) -> state. A
#: REQUEST_CHANNEL with C then takes SEND_COMPLETE (requester) or
#: RECV_COMPLETE (responder) through the table.
OPENING_STATES: dict[tuple[StreamKind, bool], StreamState] = {
    (StreamKind.REQUEST_RESPONSE, True): _S.IN_ONLY,
    (StreamKind.REQUEST_RESPONSE, False): _S.OUT_ONLY,
    (StreamKind.REQUEST_STREAM, True): _S.IN_ONLY,
    (StreamKind.REQUEST_STREAM, False): _S.OUT_ONLY,
    (StreamKind.REQUEST_CHANNEL, True): _S.BOTH_OPEN,
    (StreamKind.REQUEST_CHANNEL, False): _S.BOTH_OPEN,
    (StreamKind.FIRE_AND_FORGET, False): _S.IN_ONLY,  # a fragmented FNF, reassembled
}

# The hot paths (send_payload, the receive loop) do not look the table up:
# they test credit. ``StreamTable.step`` zeroes a flow's credit whenever the
# table closes that flow, and SEND_PAYLOAD / RECV_PAYLOAD never change the
# state, so credit > 0 means exactly "the table allows this PAYLOAD, and it
# leaves the state as it is" (tests/rsocket/test_connection_tables.py checks
# both halves of that claim).


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
        """This end may still send items (the table allows SEND_PAYLOAD)."""
        return (self.state, _I.SEND_PAYLOAD) in STREAM_TRANSITIONS

    @property
    def in_open(self) -> bool:
        """The peer may still send items (the table allows RECV_PAYLOAD)."""
        return (self.state, _I.RECV_PAYLOAD) in STREAM_TRANSITIONS

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

    def take_run(self, n: int) -> range | None:
        """``n`` consecutive IDs (what ``n`` calls of :meth:`next_id` give
        before IDs wrap), or None once they would wrap (use ``next_id``)."""
        first = self._next
        if self._wrapped or first + 2 * (n - 1) > MAX_STREAM_ID:
            return None
        self._next = first + 2 * n
        return range(first, first + 2 * n, 2)

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


def pending_request(s: Stream) -> bool:
    """A responder stream whose request is still being reassembled (the
    application has not seen it)."""
    r = s.reassembly
    return r is not None and type(r.first) is not PayloadFrame


_OUT_ONLY = _S.OUT_ONLY
_IN_ONLY = _S.IN_ONLY
_CLOSED = _S.CLOSED
_CLOSING = ConnectionState.CLOSING


class StreamTable:
    """The open streams of one connection (a part of ``Connection``).

    - ``by_id``: the streams by ID (the hot paths read it directly);
    - ``step(s, inp)``: the stream state machine: every change of a
      stream's state goes through it (``STREAM_TRANSITIONS``), and a stream
      it closes is forgotten;
    - ``open_requester`` / ``open_responder``: a new stream, in its
      ``OPENING_STATES`` state;
    - ``peer_count``: streams the peer opened (``max_concurrent_streams``);
    - ``ids``: our next stream ID.

    When the last stream of a closing connection goes, the close completes
    (``Context.finish_close``). A closed connection forgets every stream.
    """

    __slots__ = ("by_id", "ctx", "ids", "peer_count", "peer_parity", "reassemblies")

    def __init__(self, ctx: Context, reassemblies: ReassemblyBudget) -> None:
        self.ctx = ctx
        #: What fragments in progress hold: a stream that goes frees its share.
        self.reassemblies = reassemblies
        self.by_id: dict[int, Stream] = {}
        self.peer_count = 0
        self.ids = StreamIdAllocator(ctx.client, ctx.config.reuse_stream_ids)
        self.peer_parity = 0 if ctx.client else 1  # the low bit of the peer's IDs
        ctx.on_closed.append(self.clear)

    def clear(self) -> None:
        self.by_id.clear()
        self.peer_count = 0
        self.reassemblies.clear()

    # ------------------------------------------------------------------
    # inspection

    def state_of(self, stream_id: int) -> StreamState | None:
        """The state of an open stream, None if not open (or not announced)."""
        s = self.by_id.get(stream_id)
        return None if s is None or pending_request(s) else s.state

    def send_credit(self, stream_id: int) -> int:
        s = self.by_id.get(stream_id)
        if s is None or not s.out_open:
            return 0
        return min(s.out_credit, MAX_REQUEST_N)

    def open_ids(self) -> list[int]:
        return [sid for sid, s in self.by_id.items() if s.kind is not StreamKind.FIRE_AND_FORGET]

    def for_intent(self, what: str, stream_id: int) -> Stream:
        """The stream an intent names; ``LocalProtocolError`` if not open."""
        s = self.by_id.get(stream_id)
        if s is None or pending_request(s):
            self.ctx.check_open(what)
            raise LocalProtocolError(f"{what}: stream {stream_id} is not open")
        return s

    # ------------------------------------------------------------------
    # changes

    def step(self, s: Stream, inp: StreamInput) -> bool:
        """Apply the stream table; False when the pair is not allowed."""
        nxt = STREAM_TRANSITIONS.get((s.state, inp))
        if nxt is None:
            return False
        s.state = nxt
        # A closed flow has no credit: the hot paths test credit alone.
        if nxt is _CLOSED:
            s.out_credit = s.in_credit = 0
            self._forget(s)
        elif nxt is _IN_ONLY:
            s.out_credit = 0
        elif nxt is _OUT_ONLY:
            s.in_credit = 0
        return True

    def allows(self, s: Stream, inp: StreamInput) -> bool:
        return (s.state, inp) in STREAM_TRANSITIONS

    def open_requester(
        self, sid: int, kind: StreamKind, in_credit: int, *, complete: bool = False
    ) -> None:
        """A stream we requested (our credit out: 0 until the peer's
        REQUEST_N); ``complete``: our channel flow ended with the request."""
        s = self.by_id[sid] = Stream(sid, kind, True, OPENING_STATES[kind, True], 0, in_credit)
        if complete:
            self.step(s, _I.SEND_COMPLETE)

    def open_responder(self, f: RequestFrame) -> Stream:
        """The stream of a request from the peer (counted against its limit)."""
        t = type(f)
        out_credit = 0
        if t is RequestResponseFrame:
            kind = StreamKind.REQUEST_RESPONSE
            out_credit = 1
        elif t is RequestStreamFrame or t is RequestChannelFrame:
            kind = (
                StreamKind.REQUEST_STREAM if t is RequestStreamFrame else StreamKind.REQUEST_CHANNEL
            )
            out_credit = add_credit(0, f.initial_request_n)  # type: ignore[union-attr]
        else:
            kind = StreamKind.FIRE_AND_FORGET
        sid = f.stream_id
        s = self.by_id[sid] = Stream(sid, kind, False, OPENING_STATES[kind, False], out_credit, 0)
        self.peer_count += 1
        if getattr(f, "complete", False):
            self.step(s, _I.RECV_COMPLETE)  # the requester's channel flow ended with it
        return s

    def _forget(self, s: Stream) -> None:
        """A stream the table closed: it leaves the table."""
        if self.by_id.pop(s.stream_id, None) is not None and not s.requester:
            self.peer_count -= 1
        r = s.reassembly
        if r is not None:  # fragments in progress die with their stream
            s.reassembly = None
            self.reassemblies.end(r)
        ctx = self.ctx
        if ctx.state is _CLOSING and not self.by_id:
            ctx.finish_close()
