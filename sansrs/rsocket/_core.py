"""Shared state of an RSocket connection: the connection state table,
output queue, events, stream bookkeeping. ``Receiver`` (frames in) and
``Connection`` (intents, timers) build on it."""

from __future__ import annotations

import enum
from collections import deque
from struct import Struct
from typing import NoReturn

from .._errors import LocalProtocolError, RemoteProtocolError
from ._config import ConnectionConfig, Framing, Role
from ._encode import encode_frame
from ._fragmentation import ReassemblyBudget
from ._frames import (
    MAX_REQUEST_N,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    Frame,
    KeepaliveFrame,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    SetupFrame,
)
from ._keepalive import Keepalive
from ._lease import Lease
from ._retained import RetainedFrames
from ._streams import (
    TRANSITIONS,
    Stream,
    StreamIdAllocator,
    StreamInput,
    StreamKind,
    StreamState,
)
from .events import (
    ConnectionClosed,
    ConnectionLost,
    Event,
)

__all__ = ["CONNECTION_TRANSITIONS", "ConnectionCore", "ConnectionInput", "ConnectionState"]


class ConnectionState(enum.Enum):
    # Identity hash (members are singletons, compared by identity): Enum's
    # own __hash__ is Python code, run on every transition-table lookup.
    __hash__ = object.__hash__

    AWAITING_SETUP = "awaiting-setup"  # client: setup() not called; server: no SETUP yet
    SETUP_RECEIVED = "setup-received"  # server: the application must accept or reject
    ESTABLISHED = "established"
    CLOSING = "closing"  # CONNECTION_CLOSE sent or received: draining
    CLOSED = "closed"
    DISCONNECTED = "disconnected"  # resumable session without a transport
    RESUMING = "resuming"  # client: RESUME sent, waiting for RESUME_OK


class ConnectionInput(enum.Enum):
    # Identity hash (members are singletons, compared by identity): Enum's
    # own __hash__ is Python code, run on every transition-table lookup.
    __hash__ = object.__hash__

    SEND_SETUP = "send-setup"
    RECV_SETUP = "recv-setup"
    ACCEPT = "accept"
    REJECT = "reject"
    CLOSE = "close"  # CONNECTION_CLOSE sent or received
    DRAINED = "drained"  # the last stream terminated while closing
    FATAL = "fatal"  # a connection error, either way, or keepalive timeout
    EOF = "eof"  # the transport ended
    DETACH = "detach"  # a resumable session lost its transport
    SEND_RESUME = "send-resume"  # client: RESUME on a new transport
    RESUMED = "resumed"  # RESUME_OK received (client) / RESUME accepted (server)
    HANDOFF = "handoff"  # server: a first-frame RESUME went to its session


_C = ConnectionState
_CI = ConnectionInput

#: (state, input) -> next state; a missing pair is not allowed.
CONNECTION_TRANSITIONS: dict[tuple[ConnectionState, ConnectionInput], ConnectionState] = {
    (_C.AWAITING_SETUP, _CI.SEND_SETUP): _C.ESTABLISHED,
    (_C.AWAITING_SETUP, _CI.RECV_SETUP): _C.SETUP_RECEIVED,
    (_C.AWAITING_SETUP, _CI.REJECT): _C.CLOSED,
    (_C.AWAITING_SETUP, _CI.FATAL): _C.CLOSED,
    (_C.AWAITING_SETUP, _CI.EOF): _C.CLOSED,
    (_C.SETUP_RECEIVED, _CI.ACCEPT): _C.ESTABLISHED,
    (_C.SETUP_RECEIVED, _CI.REJECT): _C.CLOSED,
    (_C.SETUP_RECEIVED, _CI.FATAL): _C.CLOSED,
    (_C.SETUP_RECEIVED, _CI.EOF): _C.CLOSED,
    (_C.ESTABLISHED, _CI.CLOSE): _C.CLOSING,
    (_C.ESTABLISHED, _CI.REJECT): _C.CLOSED,  # client: the server rejected SETUP
    (_C.ESTABLISHED, _CI.FATAL): _C.CLOSED,
    (_C.ESTABLISHED, _CI.EOF): _C.CLOSED,
    (_C.CLOSING, _CI.CLOSE): _C.CLOSING,
    (_C.CLOSING, _CI.DRAINED): _C.CLOSED,
    (_C.CLOSING, _CI.FATAL): _C.CLOSED,
    (_C.CLOSING, _CI.EOF): _C.CLOSED,
    # Resumption (spec: Resuming Operation); docs/rsocket.md.
    (_C.AWAITING_SETUP, _CI.HANDOFF): _C.CLOSED,
    (_C.ESTABLISHED, _CI.DETACH): _C.DISCONNECTED,
    (_C.DISCONNECTED, _CI.SEND_RESUME): _C.RESUMING,
    (_C.DISCONNECTED, _CI.RESUMED): _C.ESTABLISHED,
    (_C.DISCONNECTED, _CI.FATAL): _C.CLOSED,
    (_C.RESUMING, _CI.RESUMED): _C.ESTABLISHED,
    (_C.RESUMING, _CI.DETACH): _C.DISCONNECTED,
    (_C.RESUMING, _CI.REJECT): _C.CLOSED,
    (_C.RESUMING, _CI.FATAL): _C.CLOSED,
}

_SETUP_ERROR_CODES = frozenset(
    {
        ErrorCode.INVALID_SETUP,
        ErrorCode.UNSUPPORTED_SETUP,
        ErrorCode.REJECTED_SETUP,
        ErrorCode.REJECTED_RESUME,
    }
)
# Codes whose "Stream ID MUST be 0": on a stream they are a frame "not accounted
# for" and ignored (Handling the Unexpected 9), never a stream error.
_CONNECTION_ONLY_ERROR_CODES = _SETUP_ERROR_CODES | {
    ErrorCode.RESERVED,
    ErrorCode.CONNECTION_ERROR,
    ErrorCode.CONNECTION_CLOSE,
}
_STREAM_ERROR_CODES = frozenset(
    {ErrorCode.APPLICATION_ERROR, ErrorCode.REJECTED, ErrorCode.CANCELED, ErrorCode.INVALID}
)
_REJECT_SETUP_CODES = frozenset(
    {ErrorCode.INVALID_SETUP, ErrorCode.UNSUPPORTED_SETUP, ErrorCode.REJECTED_SETUP}
)

_S = StreamState
_I = StreamInput
_BOTH_OPEN = _S.BOTH_OPEN
_OUT_ONLY = _S.OUT_ONLY
_IN_ONLY = _S.IN_ONLY
_CLOSED = _S.CLOSED
_RR = StreamKind.REQUEST_RESPONSE
_ESTABLISHED = _C.ESTABLISHED

_U24 = Struct(">BH")
_PREFIX_HEADER = Struct(">BHIH")  # 24-bit length + stream ID + type/flags
_PAYLOAD_NEXT = 0x2800 | 0x20  # PAYLOAD type with N
_PAYLOAD_NEXT_COMPLETE = 0x2800 | 0x20 | 0x40

#: Frame types with an implied position (spec: Implied Position: REQUEST,
#: CANCEL, ERROR and PAYLOAD; REQUEST_N counted with the requests, as
#: rsocket-java does, since losing one would stall a flow), on streams > 0.
POSITIONED = frozenset(
    {
        RequestResponseFrame,
        RequestFnfFrame,
        RequestStreamFrame,
        RequestChannelFrame,
        RequestNFrame,
        CancelFrame,
        ErrorFrame,
        PayloadFrame,
    }
)


def _is_app_error_code(code: int) -> bool:
    return 0x301 <= code <= 0xFFFFFFFE


def _pending_request(s: Stream) -> bool:
    """A responder stream whose request is still being reassembled (the
    application has not seen it)."""
    r = s.reassembly
    return r is not None and type(r.first) is not PayloadFrame


def _check_n(name: str, n: int) -> None:
    if type(n) is not int or n < 1:
        raise LocalProtocolError(f"{name} must be an int >= 1, got {n!r}")


class ConnectionCore:
    """State and plumbing shared by the receiving and the intent side."""

    def __init__(self, role: Role, config: ConnectionConfig | None = None) -> None:
        self.role = role
        self.config = config = config if config is not None else ConnectionConfig()
        self._client = role is Role.CLIENT
        self._prefixed = config.framing is Framing.LENGTH_PREFIXED
        # Partial frame received so far, and the bytes it needs to complete.
        self._inbuf = bytearray()
        self._need = 3
        # Hot-path limits, looked up once.
        self._max_out = config.max_queued_output
        self._max_frame = config.max_frame_size
        self._fast_payload_max = config.fragment_size - 9 if self._prefixed else -1
        # The same for a request without metadata (the limit _send_request uses).
        self._fast_request_max = config.fragment_size - 13 if self._prefixed else -1
        self._state = ConnectionState.AWAITING_SETUP
        self._events: list[Event] = []
        self._event_queue: deque[Event] = deque()  # taken one by one by next_event
        self._out: list[bytes] = []
        self._out_size = 0
        self._streams: dict[int, Stream] = {}
        self._peer_stream_count = 0  # streams the peer opened (max_concurrent_streams)
        # What the streams' fragments in progress may hold (_receive_streams).
        self._reassemblies = ReassemblyBudget(
            max_size=config.max_reassembly_size,
            max_fragments=config.max_fragments,
            max_active=config.max_reassemblies,
            max_total=config.max_reassembly_total,
        )
        self._ids = StreamIdAllocator(self._client, config.reuse_stream_ids)
        self._peer_parity = 0 if self._client else 1
        self._keepalive: Keepalive | None = None
        self._lease_enabled = False
        self._peer_lease = Lease()  # what the peer's responder granted us
        self._our_lease = Lease()  # what our responder granted the peer
        self._now = 0.0
        self._clock_known = False
        self._setup: SetupFrame | None = None
        self._setup_confirmed = False  # client: the server showed it accepted SETUP
        self._early: list[Frame] = []  # server: frames after SETUP, before accept
        self._error: RemoteProtocolError | None = None
        self._close_message = ""
        self._close_by_peer = False
        #: Implied positions (spec: Resuming Operation): bytes of the
        #: ``POSITIONED`` frames with a stream ID > 0, each direction.
        self.sent_position = 0
        self.received_position = 0
        # Resumable sessions only: the sent frames the peer may still lack.
        self._retained: RetainedFrames | None = None
        # Its ``frames`` while frames are retained (None: not resumable, or
        # past the limit), and the sent position that calls for a check.
        self._retain_list: list[bytes] | None = None
        self._retain_at: float = 0.0
        # DISCONNECTED / RESUMING: only the first ``_hold`` output items (the
        # RESUME) may reach the transport; the rest is retained anyway.
        self._detached = False
        self._hold = 0

    # ------------------------------------------------------------------
    # state

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def lease_enabled(self) -> bool:
        return self._lease_enabled

    @property
    def setup_frame(self) -> SetupFrame | None:
        """The SETUP this connection sent (client) or received (server)."""
        return self._setup

    @property
    def output_blocked(self) -> bool:
        """More than ``max_queued_output`` bytes wait in ``data_to_send``:
        ``send_payload`` refuses until the adapter drains it."""
        return self._out_size >= self.config.max_queued_output

    @property
    def queued_output(self) -> int:
        return self._out_size

    def stream_state(self, stream_id: int) -> StreamState | None:
        """The state of an open stream, None if not open (or forgotten)."""
        s = self._streams.get(stream_id)
        return None if s is None or _pending_request(s) else s.state

    def send_credit(self, stream_id: int) -> int:
        """PAYLOADs we may still send on ``stream_id`` (0 if none, 2**31-1 if unbounded)."""
        s = self._streams.get(stream_id)
        if s is None or not s.out_open:
            return 0
        return min(s.out_credit, MAX_REQUEST_N)

    def lease_available(self) -> int | None:
        """Requests the peer's lease still allows (None: lease not in use)."""
        return self._peer_lease.available(self._now) if self._lease_enabled else None

    @property
    def open_streams(self) -> list[int]:
        return [sid for sid, s in self._streams.items() if s.kind is not StreamKind.FIRE_AND_FORGET]

    # ------------------------------------------------------------------
    # transitions

    def _transition(self, inp: ConnectionInput) -> None:
        nxt = CONNECTION_TRANSITIONS.get((self._state, inp))
        if nxt is None:  # pragma: no cover - guarded by every caller
            raise LocalProtocolError(f"{inp.value} not allowed in state {self._state.value}")
        self._state = nxt
        if nxt is ConnectionState.CLOSED:
            if self._retained is not None:
                self._end_resumption()
            self._streams.clear()
            self._peer_stream_count = 0
            self._reassemblies.clear()
            self._early.clear()
            self._keepalive = None

    def _closed(self) -> bool:
        return self._state is ConnectionState.CLOSED

    def _check_open(self, what: str) -> None:
        state = self._state
        if state is ConnectionState.CLOSED:
            raise LocalProtocolError(f"{what}: the connection is closed")

    def _check_can_request(self, what: str) -> None:
        state = self._state
        if state is not _ESTABLISHED:
            if state is ConnectionState.CLOSING:
                raise LocalProtocolError(f"{what}: the connection is closing")
            if state is ConnectionState.CLOSED:
                raise LocalProtocolError(f"{what}: the connection is closed")
            raise LocalProtocolError(f"{what}: the connection is not established yet")

    def _stream_step(self, s: Stream, inp: StreamInput) -> bool:
        """Apply the stream table; False when the pair is not allowed."""
        nxt = TRANSITIONS.get((s.state, inp))
        if nxt is None:
            return False
        s.state = nxt
        # A closed flow has no credit: the hot paths test credit alone.
        if nxt is _CLOSED:
            s.out_credit = s.in_credit = 0
            self._remove(s)
        elif nxt is _IN_ONLY:
            s.out_credit = 0
        elif nxt is _OUT_ONLY:
            s.in_credit = 0
        return True

    def _end_resumption(self) -> None:
        """The session is over: free the retained frames (and, on a server,
        the session store entry)."""
        if self._retained is not None:
            self._retained.give_up()  # gives its share of the server's budget back
        self._retained = None
        self._retain_list = None
        self._detached = False
        self._hold = 0

    def _remove(self, s: Stream) -> None:
        if self._streams.pop(s.stream_id, None) is not None and not s.requester:
            self._peer_stream_count -= 1
        r = s.reassembly
        if r is not None:  # fragments in progress die with their stream
            s.reassembly = None
            self._reassemblies.end(r)
        s.state = _CLOSED
        if self._state is ConnectionState.CLOSING and not self._streams:
            self._finish_close()

    def _finish_close(self) -> None:
        self._transition(_CI.DRAINED)
        self._events.append(
            ConnectionClosed(
                error_code=ErrorCode.CONNECTION_CLOSE,
                message=self._close_message,
                by_peer=self._close_by_peer,
            )
        )

    # ------------------------------------------------------------------
    # output

    def _queue(self, frame: Frame) -> None:
        body = encode_frame(frame)
        n = len(body)
        if self._prefixed:
            pieces: tuple[bytes, ...] = (_U24.pack(n >> 16, n & 0xFFFF), body)
            self._out_size += n + 3
        else:
            pieces = (body,)
            self._out_size += n
        self._out += pieces
        if frame.stream_id and type(frame) in POSITIONED:
            self.sent_position += n
            keep = self._retain_list
            if keep is not None:
                keep.extend(pieces)
                if self.sent_position > self._retain_at:
                    self._retain_check()

    def _queue_error(self, stream_id: int, code: int, message: str) -> None:
        data = message.encode("utf-8")
        room = self.config.fragment_size - 10
        if len(data) > room:
            data = data[:room]
        self._queue(ErrorFrame(stream_id, code, data))

    def data_to_send(self) -> bytes:
        """Bytes to write to a byte-stream transport (empty when none)."""
        if not self._prefixed:
            raise LocalProtocolError("data_to_send: this connection uses message framing")
        out = self._out
        if self._retained is not None:
            self._resume_flush()
        if not out:
            return b""
        data = b"".join(out)
        out.clear()
        self._out_size = 0
        return data

    def frames_to_send(self) -> list[bytes]:
        """Frames to send on a message transport, one message each."""
        if self._prefixed:
            raise LocalProtocolError("frames_to_send: this connection uses length-prefixed framing")
        if self._retained is not None:
            self._resume_flush()
        out = self._out
        self._out = []
        self._out_size = 0
        return out

    # ------------------------------------------------------------------
    # events

    def _resume_flush(self) -> None:
        """Before output leaves: while detached only the held RESUME may go;
        when retained frames pile up, ask the peer for its position."""
        if self._detached:
            out = self._out
            del out[self._hold :]
            self._hold = 0
            self._out_size = sum(map(len, out))
            return
        r = self._retained
        if r is not None and r.ask and self._state is _ESTABLISHED:
            # KEEPALIVE with R: the peer's answer carries its received
            # position, which trims the retained frames (spec: Keepalive
            # Position Field); one question outstanding at a time.
            r.ask = False
            r.asked = True
            self._queue_keepalive_request()

    def _retain_start(self) -> None:
        store = getattr(self, "_sessions", None)  # a server's sessions share a budget
        r = self._retained = RetainedFrames(
            self.config.resume_buffer_size,
            self._prefixed,
            self.sent_position,
            None if store is None else store.retained,
        )
        self._retain_list = r.frames
        self._retain_at = r.check_at
        # Resumable PAYLOADs take send_payload's second path, which retains
        # them: the first stays free of any resumption cost.
        self._fast_payload_max = -1

    def _retain_check(self) -> None:
        r = self._retained
        assert r is not None
        r.check(self.sent_position)
        self._retain_sync(r)

    def _retain_trim(self, position: int) -> None:
        """The peer has every frame up to ``position``."""
        r = self._retained
        if r is not None:
            r.trim(position)
            self._retain_sync(r)

    def _retain_sync(self, r: RetainedFrames) -> None:
        self._retain_at = r.check_at
        if r.overflowed:
            self._retain_list = None
            if self._prefixed:  # nothing is retained any more: the fast path again
                self._fast_payload_max = self.config.fragment_size - 9

    def _queue_keepalive_request(self) -> None:
        self._queue(KeepaliveFrame(True, self.received_position))

    def events(self) -> list[Event]:
        """Every event produced so far, oldest first (and forget them)."""
        ev = self._events
        if self._event_queue:
            ev = [*self._event_queue, *ev]
            self._event_queue.clear()
        elif not ev:
            return []
        self._events = []
        return ev

    def next_event(self) -> Event | None:
        """The oldest event not yet taken, or None."""
        queue = self._event_queue
        if self._events:
            queue.extend(self._events)
            self._events = []
        return queue.popleft() if queue else None

    # ------------------------------------------------------------------
    # input

    def _observe(self, now: float) -> None:
        if not self._clock_known:
            # Leases granted before the clock was known count from now.
            self._clock_known = True
            for lease in (self._peer_lease, self._our_lease):
                if lease.remaining:
                    lease.expires += now
        if now > self._now:
            self._now = now

    def _closed_input(self) -> None:
        if self._error is not None:
            raise RemoteProtocolError(self._error.message, self._error.error_code)

    def connection_lost(self) -> None:
        """The transport ended (same as ``receive_data(b"")``)."""
        if self._state is not ConnectionState.CLOSED:
            self._on_eof()

    def _on_eof(self) -> None:
        self._transition(_CI.EOF)
        self._events.append(ConnectionLost(reason="the transport closed", timed_out=False))

    def _fail(self, code: int, message: str) -> NoReturn:
        """The peer broke the protocol: queue ERROR, close, raise."""
        self._queue_error(0, code, message)
        self._transition(_CI.FATAL)
        self._events.append(ConnectionClosed(error_code=code, message=message, by_peer=False))
        self._error = RemoteProtocolError(message, code)
        raise RemoteProtocolError(message, code)

    def _stream(self, what: str, stream_id: int) -> Stream:
        s = self._streams.get(stream_id)
        if s is None or _pending_request(s):
            self._check_open(what)
            raise LocalProtocolError(f"{what}: stream {stream_id} is not open")
        return s
