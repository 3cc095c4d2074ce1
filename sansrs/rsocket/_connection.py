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

Its intents apart (their functions bound here as its methods, so the calls
stay the calls they were): :mod:`._connection_requests` (the requests that
open streams), :mod:`._connection_streams` (what is sent on an open stream:
items, completion, ERROR, REQUEST_N, CANCEL), :mod:`._connection_intents`
(the connection's own frames and its close), :mod:`._connection_state` (the
connection as they see it). This module keeps the inspection, the bytes and
events each way, the timers and the establishment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .._errors import LocalProtocolError
from . import _connection_intents as intents
from . import _connection_requests as requests
from . import _connection_streams as streams
from . import _frames as fr
from ._config import ConnectionConfig, Role
from ._context import Context
from ._establish import Establishment
from ._fragmentation import Fragmenter
from ._frames import ErrorCode
from ._keepalive import Keepalive
from ._latency import LatencyPath
from ._lease import Leases
from ._receive import Receiver
from ._receive_streams import StreamFrames
from ._resume import Resumption
from ._session_store import SessionStore, StoredSession
from ._state import ConnectionInput, ConnectionState
from ._streams import StreamState, StreamTable
from .events import Event

__all__ = ["Connection"]

_CI = ConnectionInput
_ESTABLISHED = ConnectionState.ESTABLISHED
_CLOSED = ConnectionState.CLOSED


_FRAMED = "take them with framed_pieces_to_send"


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

    def receive_span(
        self,
        buf: bytes,
        off: int,
        count: int,
        size: int,
        skip: int,
        now: float | None = None,
    ) -> None:
        """Feed ``count`` frames of ``size`` bytes each, without length
        prefixes, each behind ``skip`` bytes that are the transport's own (a
        message transport's header, not the core's business), from
        ``buf[off]`` on: what ``receive_data`` would make of the same frames
        length-prefixed, at the same point of the input (between whole
        frames). A message transport that delivers runs of equal messages
        (a WebSocket client's reads of a stream's items) hands them over as
        they lie, not re-headed into a copy first: a stream's items become
        one ``PayloadRunReceived`` by C calls alone (anything else takes the
        byte-stream path). Raises as ``receive_data`` does."""
        if not self._prefixed:
            raise LocalProtocolError("receive_span: this connection uses message framing")
        if count < 1 or size < 0 or skip < 0 or off < 0 or off + count * (skip + size) > len(buf):
            raise LocalProtocolError(
                f"receive_span: {count} frames of {size} bytes behind {skip} from {off} "
                f"do not lie within the {len(buf)} bytes given"
            )
        if not self._input_allowed(now):
            return
        self._keepalive.on_receive(now)
        self._receiver.receive_span(buf, off, count, size, skip)

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
        if out.framed_head is not None or out.framed:
            raise LocalProtocolError(f"data_to_send: runs are framed (frame_runs): {_FRAMED}")
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
        if out.framed_head is not None or out.framed:
            raise LocalProtocolError(f"pieces_to_send: runs are framed (frame_runs): {_FRAMED}")
        if out.retained is not None:
            self._resume.before_send()
        return out.take_pieces()

    def frame_runs(self, head: Callable[[int], bytes] | None) -> None:
        """Queue a stream's runs of items (``send_payloads``' batches of one
        length) already framed for a message transport that carries our
        output as runs of length-prefixed messages (a WebSocket server's):
        each frame behind ``head(length)``, the transport's header of a
        message of ``length`` bytes, instead of its length prefix, so the
        transport writes the run as it is. ``framed_pieces_to_send`` then
        says which pieces those are; ``data_to_send`` and ``pieces_to_send``
        are refused (they would mix the two framings). ``None``: back to
        length prefixes for what is queued next (runs framed before still
        go by ``framed_pieces_to_send``). Nothing changes while frames are
        retained (a resumable session): its items take ``send_payload``'s
        second path."""
        if not self._prefixed:
            raise LocalProtocolError("frame_runs: this connection uses message framing")
        self._out.framed_head = head

    def framed_pieces_to_send(self) -> tuple[list[bytes], list[int]]:
        """``pieces_to_send()`` with ``frame_runs``: the pieces, and the index
        of each framed run among them (two pieces whose concatenation is its
        frames, each behind the transport's header); every other piece is
        length-prefixed output as ``pieces_to_send`` gives it."""
        if not self._prefixed:
            raise LocalProtocolError("framed_pieces_to_send: this connection uses message framing")
        out = self._out
        if out.retained is not None:
            self._resume.before_send()
        return out.take_framed_pieces()

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
    # request intents (_connection_requests.py)

    _next_stream_id = requests.next_stream_id
    _queue_whole_request = requests.queue_whole_request
    request_response = requests.request_response
    request_response_frame = requests.request_response_frame
    request_fnf = requests.request_fnf
    request_fnf_many = requests.request_fnf_many
    request_stream = requests.request_stream
    request_channel = requests.request_channel

    # ------------------------------------------------------------------
    # stream intents (_connection_streams.py)

    send_payload = streams.send_payload
    send_payloads = streams.send_payloads
    _payload_refused = streams.payload_refused
    send_complete = streams.send_complete
    send_error = streams.send_error
    request_n = streams.request_n
    cancel = streams.cancel

    # ------------------------------------------------------------------
    # connection intents (_connection_intents.py)

    metadata_push = intents.metadata_push
    send_lease = intents.send_lease
    send_keepalive = intents.send_keepalive
    send_extension = intents.send_extension
    close = intents.close


def _resumption_of(session: StoredSession) -> Resumption | None:
    """The resume part of a session the store returned."""
    return session._resume if isinstance(session, Connection) else None
