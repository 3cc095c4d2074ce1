"""The latency path of a sequential request-response: a lone request written
whole, and reads that are exactly one answer or one request taken whole.

``LatencyPath`` is the part of ``Connection`` behind ``request_response_frame``,
``take_answer`` and ``take_request``. Each does what the general calls
(``request_response`` + ``data_to_send``, ``receive_data`` + the event)
would do in its one case, without the output queue, the parse loop, the
event and the dispatch; for anything else it returns None and changes
nothing, and the caller takes the general path. Differential tests
(``tests/rsocket/test_take_whole_reads.py``) hold each to the general path.

Why a path of its own: a round trip one at a time is a few dozen
microseconds, and each side's share of it is its bytecode
(``benchmarks/bench_opcodes.py``; docs/performance.md, "Request-response,
one at a time"): these three cut the core's share of a round trip from
about 490 instructions to about 150 on the client and 330 to 150 on the
server.
"""

from __future__ import annotations

from collections import deque

from ._context import Context
from ._fast import (
    PAYLOAD_ITEM,
    PAYLOAD_ITEM_MASK,
    PAYLOAD_LAST_ITEM,
    REQUEST_FNF_BIT,
    T_REQUEST_RESPONSE,
    WHOLE_REQUEST_MASK,
    pack_prefix_header,
    unpack_prefix_header,
)
from ._frames import FLAG_METADATA, MAX_STREAM_ID
from ._keepalive import Keepalive
from ._lease import Leases
from ._output import Output
from ._state import ConnectionState
from ._streams import (
    OPENING_STATES,
    STREAM_TRANSITIONS,
    Stream,
    StreamInput,
    StreamKind,
    StreamState,
    StreamTable,
)
from .events import Event

__all__ = ["LatencyPath"]

_ESTABLISHED = ConnectionState.ESTABLISHED
_CLOSING = ConnectionState.CLOSING
_RR = StreamKind.REQUEST_RESPONSE
_REQUESTED = OPENING_STATES[_RR, True]
_RR_RESPONDER = OPENING_STATES[_RR, False]
#: What the stream table makes of our request-response's answer (PAYLOAD
#: with N, C or not: the answer completes it, spec 5): looked up once here,
#: the state a taken answer leaves. The table closes the stream with it, so
#: the take forgets the stream as ``StreamTable.step`` would.
_ANSWERED = STREAM_TRANSITIONS[_REQUESTED, StreamInput.RECV_COMPLETE]
#: The same for the answer we send to the peer's request-response.
_SERVED = STREAM_TRANSITIONS[_RR_RESPONDER, StreamInput.SEND_COMPLETE]
if _ANSWERED is not StreamState.CLOSED or _SERVED is not StreamState.CLOSED:  # pragma: no cover
    raise ImportError("an answer must close a request-response stream")


class LatencyPath:
    """``Connection.request_response_frame`` / ``take_answer`` /
    ``take_request``, and ``send_payload``'s answer to a request-response."""

    __slots__ = (
        "_by_id",
        "_ctx",
        "_events",
        "_keepalive",
        "_leases",
        "_max_frame",
        "_max_streams",
        "_out",
        "_peer_parity",
        "_prefixed",
        "_streams",
    )

    def __init__(
        self,
        ctx: Context,
        streams: StreamTable,
        keepalive: Keepalive,
        leases: Leases,
        events: deque[Event],
    ) -> None:
        self._ctx = ctx
        self._out: Output = ctx.output
        self._streams = streams
        self._keepalive = keepalive
        self._leases = leases
        self._events = events  # the connection's queue for next_event
        # What the checks read, fixed for the connection's life (the table
        # is cleared, never replaced).
        self._by_id = streams.by_id
        self._max_frame = ctx.config.max_frame_size
        self._max_streams = ctx.config.max_concurrent_streams
        self._peer_parity = streams.peer_parity
        self._prefixed = ctx.output.prefixed

    def request_frame(self, data: bytes, metadata: bytes | None) -> tuple[int, bytes] | None:
        """``Connection.request_response_frame``."""
        out = self._out
        if (
            out.pieces
            or self._ctx.state is not _ESTABLISHED
            or out.retained is not None  # resumable: every frame is retained
            or self._leases.enabled
            or type(data) is not bytes
        ):
            return None  # (message framing: fast_request_max is -1)
        if metadata is None:
            if len(data) > out.fast_request_max:
                return None
            n = 6 + len(data)
            tf = T_REQUEST_RESPONSE
            head = b""
        else:
            if type(metadata) is not bytes:
                return None
            m = len(metadata)
            if m + len(data) > out.fast_request_max:
                return None
            n = 9 + m + len(data)
            tf = T_REQUEST_RESPONSE | FLAG_METADATA
            head = m.to_bytes(3, "big") + metadata
        by_id = self._by_id
        sid = self._streams.ids.next_id(by_id)
        if sid is None:
            return None  # the general path says why
        by_id[sid] = Stream(sid, _RR, True, _REQUESTED, 0, 1)
        out.sent_position += n
        return sid, pack_prefix_header(n >> 16, n & 0xFFFF, sid, tf) + head + data

    def take_answer(self, data: bytes, sid: int, now: float | None) -> bytes | None:
        """``Connection.take_answer``."""
        n = len(data)
        ctx = self._ctx
        # The general path's conditions: established, a byte stream, no
        # event waiting (the answer's would follow it), no partial frame.
        if n < 9 or ctx.state is not _ESTABLISHED or ctx.events or self._events or ctx.inbuf:
            return None
        if not self._prefixed:
            return None
        hi, lo, got, tf = unpack_prefix_header(data, 0)
        length = hi << 16 | lo
        if (
            got != sid
            or tf & PAYLOAD_ITEM_MASK != PAYLOAD_ITEM
            or length + 3 != n
            or length > self._max_frame  # (receive_data reports it)
        ):
            return None
        by_id = self._by_id
        s = by_id.get(sid)
        # (A request-response we requested is in _REQUESTED, its credit 1,
        # until its answer closes it.)
        if s is None or s.state is not _REQUESTED or s.kind is not _RR or s.reassembly is not None:
            return None
        # The stream table's step for the answer (_ANSWERED closes the
        # stream, which leaves the table; the connection is established, so
        # no close waits for it).
        s.state = _ANSWERED
        s.in_credit = s.out_credit = 0
        del by_id[sid]
        self._received(length, now)
        return data[9:]

    def take_request(
        self, data: bytes, now: float | None
    ) -> tuple[int, bytes, bytes | None] | None:
        """``Connection.take_request``."""
        n = len(data)
        ctx = self._ctx
        if n < 9 or ctx.state is not _ESTABLISHED or ctx.events or self._events or ctx.inbuf:
            return None  # (as take_answer)
        if self._leases.enabled or not self._prefixed:
            return None
        hi, lo, sid, tf = unpack_prefix_header(data, 0)
        length = hi << 16 | lo
        if (
            length + 3 != n
            or length > self._max_frame
            or tf & WHOLE_REQUEST_MASK != T_REQUEST_RESPONSE
            or tf & REQUEST_FNF_BIT
        ):
            return None
        table = self._streams
        streams = self._by_id
        if (
            sid & 1 != self._peer_parity
            or not 0 < sid <= MAX_STREAM_ID
            or sid in streams  # spec 9.1: ignored, by receive_data
            or table.peer_count >= self._max_streams
        ):
            return None
        start = 9
        metadata = None
        if tf & FLAG_METADATA:  # a 24-bit metadata length, then the metadata
            if length < 9:
                return None  # malformed: receive_data reports it
            md_len = data[9] << 16 | data[10] << 8 | data[11]
            if md_len > length - 9:
                return None
            metadata = data[12 : 12 + md_len]
            start = 12 + md_len
        streams[sid] = Stream(sid, _RR, False, _RR_RESPONDER, 1, 0)
        table.peer_count += 1
        self._received(length, now)
        return sid, data[start:], metadata

    def answer(self, s: Stream, data: bytes) -> bool:
        """``Connection.send_payload(sid, data, complete=True)`` answering the
        peer's request-response ``s``, once ``send_payload`` has checked what
        its first path checks (credit, no metadata, the size of one frame,
        room in the output): the PAYLOAD (N, C) queued and the stream closed
        and forgotten, as the stream table's step would. False: the general
        path (a resumable session retains the frame, fragments, ...)."""
        out = self._out
        if (
            s.state is not _RR_RESPONDER
            or s.requester
            or s.reassembly is not None
            or out.retain is not None
        ):
            return False
        n = len(data) + 6
        sid = s.stream_id
        out.pieces += (pack_prefix_header(n >> 16, n & 0xFFFF, sid, PAYLOAD_LAST_ITEM), data)
        out.size += n + 3
        out.sent_position += n
        s.state = _SERVED
        s.out_credit = s.in_credit = 0
        table = self._streams
        by_id = self._by_id
        del by_id[sid]
        table.peer_count -= 1
        ctx = self._ctx
        if ctx.state is _CLOSING and not by_id:
            ctx.finish_close()
        return True

    def _received(self, length: int, now: float | None) -> None:
        """What ``receive_data`` records for a frame taken: its position, the
        SETUP confirmed, the clock and the keepalive."""
        ctx = self._ctx
        ctx.setup_confirmed = True
        ctx.received_position += length
        if now is not None:
            ctx.observe(now)
        self._keepalive.on_receive(now)
