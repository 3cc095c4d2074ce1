"""The RSocket 1.0 connection: a sans-IO state machine for either role.

Bytes (or frames) in -> events out; intent calls in -> bytes out. No
sockets, threads or clocks: time enters as ``now`` (monotonic seconds) through
``handle_timeout`` and, optionally, ``receive_data``. docs/rsocket.md
describes the API, the state tables and every choice the spec leaves open.

``Connection`` is the public face and the intents; it is composed of parts,
each a class of its own (docs/rsocket.md, "How the connection is built"):

- ``Context`` (``_context.py``): the plumbing they share: the connection
  state machine, the clock, events, the bytes each way (``Output``);
- ``StreamTable`` (``_streams.py``): the open streams and their state table;
- ``Receiver`` (``_receive.py``): bytes in, frames dispatched;
  ``StreamFrames`` (``_receive_streams.py``): the frames of a stream;
- ``Fragmenter`` (``_fragmentation.py``): fragmentation and reassembly limits;
- ``Establishment`` (``_establish.py``): SETUP sent, accepted or refused;
- ``Keepalive`` (``_keepalive.py``), ``Leases`` (``_lease.py``);
- ``Resumption`` (``_resume.py``): a session that outlives its transport;
- ``LatencyPath`` (``_latency.py``): a sequential request-response's
  request written whole and its answer (or request) taken whole.
"""

from __future__ import annotations

from collections import deque
from typing import NoReturn

from .._errors import LocalProtocolError
from . import _frames as fr
from ._config import ConnectionConfig, Role
from ._context import Context
from ._establish import Establishment
from ._fast import (
    PAYLOAD_ITEM,
    PAYLOAD_LAST_ITEM,
    T_REQUEST_FNF,
    T_REQUEST_RESPONSE,
    pack_prefix_header,
    queue_fnf_run,
    queue_payload_run,
)
from ._fragmentation import Fragmenter
from ._frames import (
    FLAG_METADATA,
    MAX_REQUEST_N,
    STREAM_ERROR_CODES,
    ErrorCode,
    is_application_error_code,
)
from ._keepalive import Keepalive
from ._latency import LatencyPath
from ._lease import Leases
from ._receive import Receiver
from ._receive_streams import StreamFrames
from ._resume import Resumption
from ._session_store import SessionStore, StoredSession
from ._state import ConnectionInput, ConnectionState
from ._streams import (
    UNBOUNDED,
    Stream,
    StreamInput,
    StreamKind,
    StreamState,
    StreamTable,
    add_credit,
)
from .events import Event

__all__ = ["Connection"]

_CI = ConnectionInput
_I = StreamInput
_ESTABLISHED = ConnectionState.ESTABLISHED
_CLOSED = ConnectionState.CLOSED
_RR = StreamKind.REQUEST_RESPONSE


def _check_n(name: str, n: int) -> None:
    if type(n) is not int or n < 1:
        raise LocalProtocolError(f"{name} must be an int >= 1, got {n!r}")


class Connection:
    """One RSocket connection, client or server role. See docs/rsocket.md.

    ``Connection(role, config=None, *, sessions=None)``: a server given a
    ``SessionStore`` accepts resumable sessions (SETUP with R, RESUME).
    """

    def __init__(
        self,
        role: Role,
        config: ConnectionConfig | None = None,
        *,
        sessions: SessionStore | None = None,
    ) -> None:
        if sessions is not None and role is not Role.SERVER:
            raise LocalProtocolError("sessions: only a server keeps a session store")
        self.role = role
        self.config = config = config if config is not None else ConnectionConfig()
        self._client = role is Role.CLIENT
        self._ctx = ctx = Context(role, config)
        self._out = ctx.output
        self._prefixed = ctx.output.prefixed
        self._fragments = fragments = Fragmenter(config, ctx.output)
        self._streams = streams = StreamTable(ctx, fragments.reassemblies)
        self._by_id = streams.by_id  # the hot paths look streams up here
        self._keepalive = Keepalive()
        ctx.on_closed.append(self._keepalive.stop)
        self._leases = leases = Leases()
        ctx.on_clock.append(leases.anchor)
        self._resume = Resumption(ctx, self._keepalive, leases, sessions, self, _resumption_of)
        self._receiver = Receiver(
            ctx, streams, leases, self._resume, StreamFrames(ctx, streams, leases, fragments)
        )
        self._establish = Establishment(ctx, self._keepalive, leases, self._resume, self._receiver)
        self._event_queue: deque[Event] = deque()  # taken one by one by next_event
        self._latency = LatencyPath(ctx, streams, self._keepalive, leases, self._event_queue)

    # ------------------------------------------------------------------
    # inspection

    @property
    def state(self) -> ConnectionState:
        return self._ctx.state

    @property
    def setup_confirmed(self) -> bool:
        """Client: a frame from the server has shown it took our SETUP."""
        return self._ctx.setup_confirmed

    @property
    def pending_input(self) -> bytes:
        """The bytes of an incomplete frame received so far (what an
        adapter shows when a peer's opening was not RSocket)."""
        return bytes(self._ctx.inbuf)

    @property
    def lease_enabled(self) -> bool:
        return self._leases.enabled

    @property
    def setup_frame(self) -> fr.SetupFrame | None:
        """The SETUP this connection sent (client) or received (server)."""
        return self._ctx.setup

    @property
    def output_blocked(self) -> bool:
        """More than ``max_queued_output`` bytes wait in ``data_to_send``:
        ``send_payload`` refuses until the adapter drains it."""
        return self._out.size >= self.config.max_queued_output

    @property
    def queued_output(self) -> int:
        return self._out.size

    @property
    def sent_position(self) -> int:
        """Implied position (spec: Resuming Operation): bytes of the
        positioned frames with a stream ID > 0 sent."""
        return self._out.sent_position

    @property
    def received_position(self) -> int:
        """The same for the frames received."""
        return self._ctx.received_position

    def stream_state(self, stream_id: int) -> StreamState | None:
        """The state of an open stream, None if not open (or forgotten)."""
        return self._streams.state_of(stream_id)

    def send_credit(self, stream_id: int) -> int:
        """PAYLOADs we may still send on ``stream_id`` (0 if none, 2**31-1 if unbounded)."""
        return self._streams.send_credit(stream_id)

    def lease_available(self) -> int | None:
        """Requests the peer's lease still allows (None: lease not in use)."""
        leases = self._leases
        return leases.peer.available(self._ctx.now) if leases.enabled else None

    @property
    def open_streams(self) -> list[int]:
        return self._streams.open_ids()

    @property
    def resumable(self) -> bool:
        """True while the session could survive a transport loss."""
        return self._resume.resumable

    @property
    def retained_bytes(self) -> int:
        """Bytes of sent frames kept for a resumption (0 when not resumable)."""
        return self._resume.retained_bytes

    @property
    def resume_token(self) -> bytes | None:
        """The session's resume identification token (keep it secret)."""
        return self._resume.token

    # ------------------------------------------------------------------
    # bytes in, bytes out, events

    def receive_data(self, data: bytes, now: float | None = None) -> None:
        """Feed bytes from a byte-stream transport; ``b""`` means it ended.

        Parses every complete frame. Raises ``RemoteProtocolError`` when the
        peer broke the protocol (the ERROR frame is queued, the connection is
        closed, and the events of the frames before the bad one are kept).
        """
        if not self._prefixed:
            raise LocalProtocolError("receive_data: this connection uses message framing")
        if not self._input_allowed(now):
            return
        if not data:
            self._on_eof()
            return
        self._keepalive.on_receive(now)
        self._receiver.receive_prefixed(data)

    def take_answer(self, data: bytes, stream_id: int, now: float | None = None) -> bytes | None:
        """``receive_data(data, now)`` for a read that is exactly the answer to
        our request-response ``stream_id``: one whole PAYLOAD with NEXT,
        without metadata, and nothing else (no partial frame before it).
        The connection's state moves as ``receive_data`` would move it (the
        stream completes, the clock and the keepalive see the input) and the
        answer's data is returned instead of a ``PayloadReceived`` event.

        For anything else (another frame, more than one, an ERROR, metadata,
        a fragment, a closed connection, events not taken yet...) it returns
        None and changes nothing: feed ``data`` to ``receive_data``. The
        latency path of a blocking request-response uses it (``_latency.py``).
        """
        return self._latency.take_answer(data, stream_id, now)

    def take_request(
        self, data: bytes, now: float | None = None
    ) -> tuple[int, bytes, bytes | None] | None:
        """``receive_data(data, now)`` for a read that is exactly one whole
        REQUEST_RESPONSE from the peer, its stream accepted (a new ID of the
        peer's parity, room for it, no lease in force), and nothing else:
        the same state changes (the stream opens, the clock and the
        keepalive see the input) and ``(stream ID, data, metadata)``
        returned instead of a ``RequestResponseReceived`` event; answer it
        as that event's request.

        For anything else it returns None and changes nothing: feed ``data``
        to ``receive_data``. The server's side of the latency path of a
        sequential request-response (``_latency.py``).
        """
        return self._latency.take_request(data, now)

    def receive_frame(self, frame: bytes, now: float | None = None) -> None:
        """Feed one frame (one message) from a message transport."""
        if self._prefixed:
            raise LocalProtocolError("receive_frame: this connection uses length-prefixed framing")
        if not self._input_allowed(now):
            return
        self._keepalive.on_receive(now)
        self._receiver.receive_message(frame)

    def _input_allowed(self, now: float | None) -> bool:
        """Input after the end: the protocol error again (if any), else
        nothing (False). Otherwise the clock is advanced (True)."""
        ctx = self._ctx
        if ctx.state is _CLOSED:
            ctx.raise_after_failure()
            return False
        if now is not None:
            ctx.observe(now)
        return True

    def connection_lost(self) -> None:
        """The transport ended (same as ``receive_data(b"")``)."""
        if self._ctx.state is not _CLOSED:
            self._on_eof()

    def _on_eof(self) -> None:
        if self._resume.on_transport_end():
            return  # a resumable session lives on
        self._ctx.lose(_CI.EOF, "the transport closed", timed_out=False)

    def data_to_send(self) -> bytes:
        """Bytes to write to a byte-stream transport (empty when none)."""
        if not self._prefixed:
            raise LocalProtocolError("data_to_send: this connection uses message framing")
        out = self._out
        if out.retained is not None:
            self._resume.before_send()
        return out.take_bytes()

    def pieces_to_send(self) -> list[bytes]:
        """``data_to_send()`` not joined: pieces whose concatenation is those
        bytes, for a transport that writes several buffers in one call
        (``sendmsg``), so a large output is not copied once more to be
        joined (empty when none)."""
        if not self._prefixed:
            raise LocalProtocolError("pieces_to_send: this connection uses message framing")
        out = self._out
        if out.retained is not None:
            self._resume.before_send()
        return out.take_pieces()

    def frames_to_send(self) -> list[bytes]:
        """Frames to send on a message transport, one message each."""
        if self._prefixed:
            raise LocalProtocolError("frames_to_send: this connection uses length-prefixed framing")
        out = self._out
        if out.retained is not None:
            self._resume.before_send()
        return out.take_frames()

    def events(self) -> list[Event]:
        """Every event produced so far, oldest first (and forget them)."""
        ctx = self._ctx
        ev = ctx.events
        if self._event_queue:
            ev = [*self._event_queue, *ev]
            self._event_queue.clear()
        elif not ev:
            return []
        ctx.events = []
        return ev

    def next_event(self) -> Event | None:
        """The oldest event not yet taken, or None."""
        ctx = self._ctx
        queue = self._event_queue
        if ctx.events:
            queue.extend(ctx.events)
            ctx.events = []
        return queue.popleft() if queue else None

    # ------------------------------------------------------------------
    # timers

    def handle_timeout(self, now: float) -> None:
        """Advance the clock: send due KEEPALIVEs, detect a silent peer,
        expire the lease."""
        ctx = self._ctx
        ctx.observe(now)
        if ctx.state is _CLOSED:
            return
        resume = self._resume
        if resume.detached:
            # client: RESUME unanswered too long; server: waited too long for RESUME
            if not resume.resume_timed_out(now):
                resume.expire(now)
            return
        self._leases.peer.expire(now)
        ka = self._keepalive
        if not ka.running:
            return
        send, lost = ka.tick(now)
        if lost:
            message = f"no frame from the peer for more than {ka.max_lifetime:g} s"
            if self._resume.resumable and ctx.state is _ESTABLISHED:
                self._resume.detach(message, timed_out=True)  # maybe only the transport died
                return
            self._out.queue_error(0, ErrorCode.CONNECTION_ERROR, message)
            ctx.lose(_CI.FATAL, message, timed_out=True)
        elif send:
            ctx.queue_keepalive_request()

    def next_deadline(self) -> float | None:
        """When ``handle_timeout`` must next be called (None: no timer).

        0.0 before the clock is known: call it at once to anchor the timers.
        """
        if self._ctx.state is _CLOSED:
            return None
        if self._resume.detached:
            return self._resume.deadline()
        ka = self._keepalive
        deadline = ka.deadline() if ka.running else None
        lease = self._leases.deadline()
        if lease is not None:
            deadline = lease if deadline is None else min(deadline, lease)
        return deadline

    # ------------------------------------------------------------------
    # establishment intents

    def setup(
        self,
        *,
        keepalive_interval: int = 20_000,
        max_lifetime: int = 90_000,
        metadata_mime_type: str = "application/octet-stream",
        data_mime_type: str = "application/octet-stream",
        data: bytes = b"",
        metadata: bytes | None = None,
        lease: bool = False,
        resume: bool = False,
    ) -> None:
        """Client: send SETUP (intervals in ms). Requests may follow at once
        (spec: Connection Establishment, "TLS False Start"). ``resume``: ask
        for a resumable session (R flag, a token from
        ``config.resume_token_source``)."""
        self._establish.setup(
            keepalive_interval,
            max_lifetime,
            metadata_mime_type,
            data_mime_type,
            data,
            metadata,
            lease=lease,
            resume=resume,
        )

    def accept_setup(
        self, *, lease_ttl: int | None = None, lease_number: int | None = None
    ) -> None:
        """Server: accept the SETUP. With the L flag the first LEASE is
        mandatory (spec: Connection Establishment): pass ``lease_ttl`` (ms)
        and ``lease_number``."""
        self._establish.accept(lease_ttl, lease_number, self.send_lease)

    def reject_setup(self, error_code: int = ErrorCode.REJECTED_SETUP, message: str = "") -> None:
        """Server: refuse the SETUP with INVALID_SETUP, UNSUPPORTED_SETUP or
        REJECTED_SETUP; the connection closes."""
        self._establish.reject(error_code, message)

    def resume(self) -> None:
        """Client: after ``Disconnected``, queue RESUME for a new transport
        (write ``data_to_send()`` to it). Until RESUME_OK nothing else is
        sent; requests and payloads made meanwhile go out after it."""
        self._resume.resume()

    # ------------------------------------------------------------------
    # request intents

    def _next_stream_id(self, what: str) -> int:
        ctx = self._ctx
        if not self._resume.detached:  # detached: requests go out after resumption
            ctx.check_can_request(what)
        leases = self._leases
        if leases.enabled and leases.peer.available(ctx.now) <= 0:
            raise LocalProtocolError(
                f"{what}: no lease allows a request now (spec: Lease Semantics)"
            )
        sid = self._streams.ids.next_id(self._by_id)
        if sid is None:
            raise LocalProtocolError(f"{what}: no stream ID left; open a new connection")
        if leases.enabled:
            leases.peer.use(ctx.now)
        return sid

    def _queue_whole_request(
        self, sid: int, type_flags: int, data: bytes, metadata: bytes | None
    ) -> bool:
        """Hot path of a REQUEST_RESPONSE / REQUEST_FNF that fits one frame
        (with metadata: a routed request's composite metadata): the header
        packed directly, no frame object. False: not such a request."""
        if type(data) is not bytes:
            return False
        if metadata is None:
            if len(data) > self._out.fast_request_max:
                return False
            n = 6 + len(data)
            head = pack_prefix_header(n >> 16, n & 0xFFFF, sid, type_flags)
        else:
            if type(metadata) is not bytes:
                return False
            m = len(metadata)
            if m + len(data) > self._out.fast_request_max:
                return False
            n = 9 + m + len(data)
            # Header, metadata length and metadata in one piece: retained
            # frames are two pieces each (_retained.py).
            tf = type_flags | FLAG_METADATA
            head = (
                pack_prefix_header(n >> 16, n & 0xFFFF, sid, tf) + m.to_bytes(3, "big") + metadata
            )
        self._out.queue_pieces((head, data), n)
        return True

    def request_response(self, data: bytes, metadata: bytes | None = None) -> int:
        sid = self._next_stream_id("request_response")
        if not self._queue_whole_request(sid, T_REQUEST_RESPONSE, data, metadata):
            self._fragments.queue_request(fr.RequestResponseFrame(sid, data, metadata))
        self._streams.open_requester(sid, _RR, 1)
        return sid

    def request_response_frame(
        self, data: bytes, metadata: bytes | None = None
    ) -> tuple[int, bytes] | None:
        """``request_response`` then ``data_to_send``, in one call, while the
        request is the only output: ``(stream ID, the bytes to write)``; write
        them before anything ``data_to_send`` returns later. None (nothing
        changed) when the request would not be one whole frame alone (too
        large, output queued, a resumable session, leases, not established,
        data or metadata not bytes): use ``request_response``. The
        latency path of a blocking request-response (``_latency.py``).
        """
        return self._latency.request_frame(data, metadata)

    def request_fnf(self, data: bytes, metadata: bytes | None = None) -> int:
        sid = self._next_stream_id("request_fnf")
        if not self._queue_whole_request(sid, T_REQUEST_FNF, data, metadata):
            self._fragments.queue_request(fr.RequestFnfFrame(sid, data, metadata))
        return sid

    def request_fnf_many(self, items: list[bytes]) -> int:
        """``request_fnf`` for each of ``items`` (data, no metadata), the
        same frames on the same stream IDs, or nothing: returns how many
        were queued, ``len(items)`` or 0 where the one-by-one path is needed
        (an item not ``bytes`` or too large for one frame, leases, a
        resumable session, stream IDs about to wrap); the caller then sends
        them with ``request_fnf``. Raises as ``request_fnf`` would for the
        first item when no request can be made. The batch form of
        ``request_fnf``'s first path: ``_fast.queue_fnf_run``."""
        if not items:
            return 0
        out = self._out
        if (
            self._resume.detached
            or self._leases.enabled
            or out.retain is not None
            or set(map(type, items)) != {bytes}
            or max(map(len, items)) > out.fast_request_max
        ):
            return 0
        self._ctx.check_can_request("request_fnf")
        stream_ids = self._streams.ids.take_run(len(items))
        if stream_ids is None:
            return 0
        queue_fnf_run(out, stream_ids, items)
        return len(items)

    def request_stream(self, data: bytes, metadata: bytes | None = None, *, initial_n: int) -> int:
        _check_n("request_stream: initial_n", initial_n)
        sid = self._next_stream_id("request_stream")
        self._fragments.queue_request(
            fr.RequestStreamFrame(sid, min(initial_n, MAX_REQUEST_N), data, metadata)
        )
        self._streams.open_requester(sid, StreamKind.REQUEST_STREAM, add_credit(0, initial_n))
        return sid

    def request_channel(
        self,
        data: bytes,
        metadata: bytes | None = None,
        *,
        initial_n: int,
        complete: bool = False,
    ) -> int:
        """Open a channel; ``data`` is our first item. Further items need the
        responder's REQUEST_N; ``complete`` ends our side at once."""
        _check_n("request_channel: initial_n", initial_n)
        sid = self._next_stream_id("request_channel")
        frame = fr.RequestChannelFrame(
            sid, min(initial_n, MAX_REQUEST_N), data, metadata, complete=complete
        )
        self._fragments.queue_request(frame)
        self._streams.open_requester(
            sid, StreamKind.REQUEST_CHANNEL, add_credit(0, initial_n), complete=complete
        )
        return sid

    # ------------------------------------------------------------------
    # stream intents

    def send_payload(
        self,
        stream_id: int,
        data: bytes,
        metadata: bytes | None = None,
        complete: bool = False,
    ) -> None:
        """Send one item (PAYLOAD with N; with C too when ``complete``).

        Needs credit from the peer (Reactive Streams rule 1.1): otherwise
        ``LocalProtocolError``. On a request-response stream the response
        always completes it.
        """
        s = self._by_id.get(stream_id)
        out = self._out
        if (
            s is not None
            and metadata is None
            and s.out_credit > 0  # credit > 0 also means the flow is open
            and len(data) <= out.fast_payload_max
            and out.size < out.limit
        ):
            if s.kind is not _RR:
                if not complete:
                    # Hot path: header packed directly, no frame object. The
                    # stream table is not looked up: credit stands for it
                    # (see _streams.py).
                    s.out_credit -= 1
                    n = len(data) + 6
                    out.pieces += (
                        pack_prefix_header(n >> 16, n & 0xFFFF, stream_id, PAYLOAD_ITEM),
                        data,
                    )
                    out.size += n + 3
                    out.sent_position += n
                    return
            elif self._latency.answer(s, data):
                return
        if s is None or s.out_credit <= 0 or out.size >= out.limit:
            self._payload_refused(stream_id, s)
        # (credit > 0: the table allows SEND_PAYLOAD here; see _streams.py)
        if s.kind is _RR:
            complete = True
        n = 6 + len(data)
        s.out_credit -= 1
        if metadata is None and n + 3 <= out.fragment_size and out.prefixed:
            # Header packed directly, no frame object; retained if resumable.
            tf = PAYLOAD_LAST_ITEM if complete else PAYLOAD_ITEM
            out.queue_pieces((pack_prefix_header(n >> 16, n & 0xFFFF, stream_id, tf), data), n)
        else:
            self._fragments.queue_payload(stream_id, data, metadata, complete, True)
        if complete:
            self._streams.step(s, _I.SEND_COMPLETE)

    def send_payloads(self, stream_id: int, items: list[bytes]) -> int:
        """Send a leading run of ``items`` (``bytes``, no metadata, none
        completing) as PAYLOAD frames, exactly as ``send_payload`` would one
        by one on its first path; stop where that path would not take the
        next one (credit, output room, size, a resumable session) and return
        how many went: the caller sends the rest with ``send_payload``. The
        batch form of the first path: ``_fast.queue_payload_run``."""
        s = self._by_id.get(stream_id)
        if s is None or s.kind is _RR or s.out_credit <= 0:
            return 0
        sent = queue_payload_run(self._out, stream_id, items, s.out_credit)
        s.out_credit -= sent
        return sent

    def _payload_refused(self, stream_id: int, s: Stream | None) -> NoReturn:
        if s is None:
            self._streams.for_intent("send_payload", stream_id)
            raise AssertionError  # pragma: no cover - for_intent raised
        if not s.out_open:
            raise LocalProtocolError(f"send_payload: stream {stream_id} is closed for sending")
        if s.out_credit <= 0:
            raise LocalProtocolError(
                f"send_payload: no credit on stream {stream_id} "
                "(the peer has not requested more; Reactive Streams rule 1.1)"
            )
        raise LocalProtocolError(
            "send_payload: output is blocked (max_queued_output); send data_to_send() first"
        )

    def send_complete(self, stream_id: int) -> None:
        """Complete our side of the stream (PAYLOAD with C, no item)."""
        s = self._streams.for_intent("send_complete", stream_id)
        if not self._streams.allows(s, _I.SEND_COMPLETE):
            raise LocalProtocolError(f"send_complete: stream {stream_id} is closed for sending")
        self._out.queue(fr.PayloadFrame(stream_id, b"", None, False, True, False))
        self._streams.step(s, _I.SEND_COMPLETE)

    def send_error(self, stream_id: int, error_code: int, message: str = "") -> None:
        """Terminate the stream with ERROR (both sides).

        A responder may use APPLICATION_ERROR, REJECTED, CANCELED, INVALID or
        an application code (0x301..0xFFFFFFFE); a requester only ends its
        own channel flow with APPLICATION_ERROR (or an application code) and
        otherwise cancels.
        """
        s = self._streams.for_intent("send_error", stream_id)
        if s.requester:
            if s.kind is not StreamKind.REQUEST_CHANNEL or not s.out_open:
                raise LocalProtocolError(
                    "send_error: a requester cancels; it sends ERROR only on its open channel flow"
                )
            if error_code != ErrorCode.APPLICATION_ERROR and not is_application_error_code(
                error_code
            ):
                raise LocalProtocolError(
                    f"send_error: a requester may not send code {error_code:#x}"
                )
        elif error_code not in STREAM_ERROR_CODES and not is_application_error_code(error_code):
            raise LocalProtocolError(f"send_error: {error_code:#x} is not a stream error code")
        self._out.queue_error(stream_id, error_code, message)
        self._streams.step(s, _I.SEND_ERROR)

    def request_n(self, stream_id: int, n: int) -> None:
        """Grant ``n`` more items (cumulative; 2**31-1 or more is unbounded)."""
        _check_n("request_n: n", n)
        s = self._streams.for_intent("request_n", stream_id)
        if s.kind is _RR or not self._streams.allows(s, _I.SEND_REQUEST_N):
            raise LocalProtocolError(f"request_n: stream {stream_id} is not receiving items")
        if s.in_credit >= UNBOUNDED // 2:
            return  # already unbounded: nothing to say
        s.in_credit = add_credit(s.in_credit, n)
        self._out.queue(fr.RequestNFrame(stream_id, min(n, MAX_REQUEST_N)))

    def cancel(self, stream_id: int) -> None:
        """Requester: cancel the stream. Channel responder: stop the
        requester's flow (its own flow continues)."""
        s = self._streams.for_intent("cancel", stream_id)
        inp = _I.SEND_CANCEL if s.requester else _I.SEND_CANCEL_INBOUND
        if not self._streams.allows(s, inp):
            raise LocalProtocolError(f"cancel: stream {stream_id} has nothing to cancel")
        self._out.queue(fr.CancelFrame(stream_id))
        self._streams.step(s, inp)

    # ------------------------------------------------------------------
    # connection intents

    def metadata_push(self, metadata: bytes) -> None:
        self._ctx.check_can_request("metadata_push")
        if len(metadata) + 6 > self.config.fragment_size:
            raise LocalProtocolError(
                "metadata_push: metadata exceeds the frame size (not fragmentable)"
            )
        self._out.queue(fr.MetadataPushFrame(metadata))

    def send_lease(self, ttl: int, number_of_requests: int, metadata: bytes | None = None) -> None:
        """Grant the peer's requester ``number_of_requests`` requests for ``ttl`` ms."""
        leases = self._leases
        if not leases.enabled:
            raise LocalProtocolError("send_lease: leases were not negotiated in SETUP")
        self._ctx.check_can_request("send_lease")
        self._out.queue(fr.LeaseFrame(ttl, number_of_requests, metadata))  # validates the ranges
        leases.ours.grant(self._ctx.now, ttl, number_of_requests)
        leases.last_grant = (ttl, number_of_requests, metadata)  # sent again on resumption

    def send_keepalive(self, data: bytes = b"") -> None:
        """KEEPALIVE with R (the client's timer sends them; a server may too)."""
        self._ctx.check_can_request("send_keepalive")
        self._ctx.queue_keepalive_request(data)

    def send_extension(
        self,
        extended_type: int,
        data: bytes = b"",
        metadata: bytes | None = None,
        *,
        stream_id: int = 0,
        ignore: bool = True,
    ) -> None:
        """Send an EXT frame (by default with I, so peers that do not know it skip it)."""
        self._ctx.check_can_request("send_extension")
        self._out.queue(fr.ExtFrame(stream_id, extended_type, data, metadata, ignore))

    def close(self, message: str = "", *, error_code: int = ErrorCode.CONNECTION_CLOSE) -> None:
        """Close the connection.

        CONNECTION_CLOSE (default): graceful; no new streams, open ones drain,
        then ``ConnectionTerminated``. CONNECTION_ERROR: at once.
        """
        ctx = self._ctx
        ctx.check_open("close")
        if self._resume.close_detached():
            # No transport (or not resumed yet): nothing can drain.
            error_code = ErrorCode.CONNECTION_ERROR
        state = ctx.state
        if error_code == ErrorCode.CONNECTION_CLOSE and (
            state is _ESTABLISHED or state is ConnectionState.CLOSING
        ):
            if state is ConnectionState.CLOSING:
                return
            self._out.queue_error(0, ErrorCode.CONNECTION_CLOSE, message)
            ctx.begin_close(message, False, drained=not self._by_id)
            return
        if error_code not in (ErrorCode.CONNECTION_CLOSE, ErrorCode.CONNECTION_ERROR):
            raise LocalProtocolError(f"close: {error_code:#x} is not a connection error code")
        if not (self._client and state is ConnectionState.AWAITING_SETUP):
            # (A client that never sent SETUP has nothing to tell the server.)
            self._out.queue_error(0, ErrorCode.CONNECTION_ERROR, message)
        ctx.end(_CI.FATAL, ErrorCode.CONNECTION_ERROR, message, by_peer=False)


def _resumption_of(session: StoredSession) -> Resumption | None:
    """The resume part of a session the store returned."""
    return session._resume if isinstance(session, Connection) else None
