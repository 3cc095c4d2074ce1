"""The RSocket 1.0 connection: a sans-IO state machine for either role.

Bytes (or frames) in -> events out; intent calls in -> bytes out. No
sockets, threads or clocks: time enters as ``now`` (monotonic seconds) through
``handle_timeout`` and, optionally, ``receive_data``. docs/rsocket.md
describes the API, the state tables and every choice the spec leaves open.
"""

from __future__ import annotations

from typing import NoReturn

from .._errors import LocalProtocolError
from . import _core as _core_module
from ._core import (
    _BOTH_OPEN,
    _CI,
    _ESTABLISHED,
    _I,
    _IN_ONLY,
    _OUT_ONLY,
    _PAYLOAD_NEXT,
    _PAYLOAD_NEXT_COMPLETE,
    _REJECT_SETUP_CODES,
    _RR,
    _STREAM_ERROR_CODES,
    CONNECTION_TRANSITIONS,
    ConnectionInput,
    ConnectionState,
    _check_n,
    _is_app_error_code,
)
from ._fragmentation import fragment_payload, fragment_request
from ._frames import (
    FLAG_METADATA,
    MAJOR_VERSION,
    MAX_METADATA_LENGTH,
    MAX_REQUEST_N,
    MAX_U31,
    MINOR_VERSION,
    CancelFrame,
    ErrorCode,
    ExtFrame,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    SetupFrame,
)
from ._keepalive import Keepalive
from ._resume import Resumable
from ._streams import (
    TRANSITIONS,
    UNBOUNDED,
    Stream,
    StreamKind,
    add_credit,
)
from .events import (
    ConnectionClosed,
    ConnectionLost,
)

# Bound by assignment, not import: CPython 3.11 compiles ``name.method(...)``
# without its fast method call when ``name`` comes from an import (hot path).
_PREFIX_HEADER = _core_module._PREFIX_HEADER

__all__ = ["CONNECTION_TRANSITIONS", "Connection", "ConnectionInput", "ConnectionState"]

_REQUEST_RESPONSE = 0x04 << 10  # frame type in the type/flags field, no flags
_REQUEST_FNF = 0x05 << 10


class Connection(Resumable):
    """One RSocket connection, client or server role. See docs/rsocket.md.

    ``Connection(role, config=None, *, sessions=None)``: a server given a
    ``SessionStore`` accepts resumable sessions (SETUP with R, RESUME).
    """

    # ------------------------------------------------------------------
    # timers

    def handle_timeout(self, now: float) -> None:
        """Advance the clock: send due KEEPALIVEs, detect a silent peer,
        expire the lease."""
        self._observe(now)
        if self._state is ConnectionState.CLOSED:
            return
        if self._detached:
            self._expire_detached(now)  # server: waited too long for RESUME
            return
        self._peer_lease.expire(now)
        ka = self._keepalive
        if ka is None:
            return
        send, lost = ka.tick(now)
        if lost:
            message = f"no frame from the peer for more than {ka.max_lifetime:g} s"
            if self.resumable and self._state is _ESTABLISHED:
                self._detach(message, timed_out=True)  # maybe only the transport died
                return
            self._queue_error(0, ErrorCode.CONNECTION_ERROR, message)
            self._transition(_CI.FATAL)
            self._events.append(ConnectionLost(reason=message, timed_out=True))
        elif send:
            self._queue(KeepaliveFrame(True, self.received_position))

    def next_deadline(self) -> float | None:
        """When ``handle_timeout`` must next be called (None: no timer).

        0.0 before the clock is known: call it at once to anchor the timers.
        """
        if self._state is ConnectionState.CLOSED:
            return None
        if self._detached:
            store = self._sessions
            if store is None or self._state is not ConnectionState.DISCONNECTED:
                return None
            return self._detached_at + store.keep_detached
        deadline = self._keepalive.deadline() if self._keepalive is not None else None
        if self._lease_enabled:
            lease = self._peer_lease.deadline()
            if lease is not None and lease != float("inf"):
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
        if not self._client:
            raise LocalProtocolError("setup: only a client sends SETUP")
        if self._state is not ConnectionState.AWAITING_SETUP:
            raise LocalProtocolError("setup: SETUP was already sent")
        for name, value in (
            ("keepalive_interval", keepalive_interval),
            ("max_lifetime", max_lifetime),
        ):
            if type(value) is not int or not 1 <= value <= MAX_U31:
                raise LocalProtocolError(f"setup: {name} must be in 1..2**31-1 ms, got {value!r}")
        token = None
        if resume:
            token = self.config.resume_token_source()
            if type(token) is not bytes or not 1 <= len(token) <= 0xFFFF:
                raise LocalProtocolError("setup: resume_token_source must return 1..65535 bytes")
        frame = SetupFrame(
            keepalive_interval,
            max_lifetime,
            metadata_mime_type,
            data_mime_type,
            metadata,
            data,
            token,
            lease,
            MAJOR_VERSION,
            MINOR_VERSION,
        )
        self._queue(frame)  # encoding validates the MIME types and sizes
        self._setup = frame
        if token is not None:
            self._start_retaining(token)
        self._lease_enabled = lease
        self._keepalive = Keepalive(keepalive_interval, max_lifetime, sends=True)
        self._transition(_CI.SEND_SETUP)

    def accept_setup(
        self, *, lease_ttl: int | None = None, lease_number: int | None = None
    ) -> None:
        """Server: accept the SETUP. With the L flag the first LEASE is
        mandatory (spec: Connection Establishment): pass ``lease_ttl`` (ms)
        and ``lease_number``."""
        if self._state is not ConnectionState.SETUP_RECEIVED:
            raise LocalProtocolError("accept_setup: no SETUP awaits acceptance")
        setup = self._setup
        assert setup is not None
        if setup.lease and (lease_ttl is None or lease_number is None):
            raise LocalProtocolError(
                "accept_setup: the client asked for leases; lease_ttl and lease_number are required"
            )
        self._transition(_CI.ACCEPT)
        self._keepalive = Keepalive(setup.keepalive_interval, setup.max_lifetime, sends=False)
        if setup.lease:
            assert lease_ttl is not None and lease_number is not None
            self.send_lease(lease_ttl, lease_number)
        early = self._early
        self._early = []
        self._process(early)

    def reject_setup(self, error_code: int = ErrorCode.REJECTED_SETUP, message: str = "") -> None:
        """Server: refuse the SETUP with INVALID_SETUP, UNSUPPORTED_SETUP or
        REJECTED_SETUP; the connection closes."""
        if self._state is not ConnectionState.SETUP_RECEIVED:
            raise LocalProtocolError("reject_setup: no SETUP awaits acceptance")
        if error_code not in _REJECT_SETUP_CODES:
            raise LocalProtocolError(f"reject_setup: {error_code:#x} is not a SETUP rejection code")
        self._refuse_setup(error_code, message)

    # ------------------------------------------------------------------
    # request intents

    def _next_stream_id(self, what: str) -> int:
        if not self._detached:  # detached: requests go out after resumption
            self._check_can_request(what)
        if self._lease_enabled and self._peer_lease.available(self._now) <= 0:
            raise LocalProtocolError(
                f"{what}: no lease allows a request now (spec: Lease Semantics)"
            )
        sid = self._ids.next_id(self._streams)
        if sid is None:
            raise LocalProtocolError(f"{what}: no stream ID left; open a new connection")
        if self._lease_enabled:
            self._peer_lease.use(self._now)
        return sid

    def _send_request(
        self,
        frame: RequestResponseFrame | RequestFnfFrame | RequestStreamFrame | RequestChannelFrame,
    ) -> None:
        limit = self.config.fragment_size
        md = frame.metadata
        if md is not None and len(md) > MAX_METADATA_LENGTH:
            raise LocalProtocolError("metadata exceeds 16 MiB - 1")
        if 13 + len(frame.data) + (0 if md is None else len(md)) <= limit:
            self._queue(frame)
            return
        for part in fragment_request(frame, limit):
            self._queue(part)

    def _queue_plain_request(
        self, sid: int, type_flags: int, data: bytes, metadata: bytes | None = None
    ) -> None:
        """Hot path of a REQUEST_RESPONSE / REQUEST_FNF that fits one frame:
        the header packed directly, no frame object. With metadata (a routed
        request's composite metadata): the M flag and the 24-bit length."""
        if metadata is None:
            n = 6 + len(data)
            pieces: tuple[bytes, ...] = (
                _PREFIX_HEADER.pack(n >> 16, n & 0xFFFF, sid, type_flags),
                data,
            )
        else:
            m = len(metadata)
            n = 9 + m + len(data)
            head = _PREFIX_HEADER.pack(n >> 16, n & 0xFFFF, sid, type_flags | FLAG_METADATA)
            pieces = (head + m.to_bytes(3, "big"), metadata, data)
        self._out += pieces
        self._out_size += n + 3
        self.sent_position += n
        keep = self._retain_list
        if keep is not None:  # resumable: retain the frame (spec: Resuming Operation)
            keep.extend(pieces)
            if self.sent_position > self._retain_at:
                self._retain_check()

    def request_response(self, data: bytes, metadata: bytes | None = None) -> int:
        sid = self._next_stream_id("request_response")
        if metadata is None and type(data) is bytes and len(data) <= self._fast_request_max:
            self._queue_plain_request(sid, _REQUEST_RESPONSE, data)
        elif (
            type(metadata) is bytes
            and type(data) is bytes
            and len(data) + len(metadata) <= self._fast_request_max
        ):
            self._queue_plain_request(sid, _REQUEST_RESPONSE, data, metadata)
        else:
            self._send_request(RequestResponseFrame(sid, data, metadata))
        self._streams[sid] = Stream(sid, _RR, True, _IN_ONLY, 0, 1)
        return sid

    def request_fnf(self, data: bytes, metadata: bytes | None = None) -> int:
        sid = self._next_stream_id("request_fnf")
        if metadata is None and type(data) is bytes and len(data) <= self._fast_request_max:
            self._queue_plain_request(sid, _REQUEST_FNF, data)
        elif (
            type(metadata) is bytes
            and type(data) is bytes
            and len(data) + len(metadata) <= self._fast_request_max
        ):
            self._queue_plain_request(sid, _REQUEST_FNF, data, metadata)
        else:
            self._send_request(RequestFnfFrame(sid, data, metadata))
        return sid

    def request_stream(self, data: bytes, metadata: bytes | None = None, *, initial_n: int) -> int:
        _check_n("request_stream: initial_n", initial_n)
        sid = self._next_stream_id("request_stream")
        self._send_request(RequestStreamFrame(sid, min(initial_n, MAX_REQUEST_N), data, metadata))
        self._streams[sid] = Stream(
            sid, StreamKind.REQUEST_STREAM, True, _IN_ONLY, 0, add_credit(0, initial_n)
        )
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
        frame = RequestChannelFrame(
            sid, min(initial_n, MAX_REQUEST_N), data, metadata, complete=complete
        )
        self._send_request(frame)
        state = _IN_ONLY if complete else _BOTH_OPEN
        self._streams[sid] = Stream(
            sid, StreamKind.REQUEST_CHANNEL, True, state, 0, add_credit(0, initial_n)
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
        s = self._streams.get(stream_id)
        if (
            s is not None
            and metadata is None
            and not complete
            and s.out_credit > 0  # credit > 0 also means the flow is open
            and len(data) <= self._fast_payload_max
            and self._out_size < self._max_out
            and s.kind is not _RR
        ):
            # Hot path: header packed directly, no frame object.
            s.out_credit -= 1
            n = len(data) + 6
            self._out += (_PREFIX_HEADER.pack(n >> 16, n & 0xFFFF, stream_id, _PAYLOAD_NEXT), data)
            self._out_size += n + 3
            self.sent_position += n
            return
        if s is None or s.out_credit <= 0 or self._out_size >= self._max_out:
            self._payload_refused(stream_id, s)
        st = s.state
        if st is not _BOTH_OPEN and st is not _OUT_ONLY:
            raise LocalProtocolError(f"send_payload: stream {stream_id} is closed for sending")
        if s.kind is _RR:
            complete = True
        n = 6 + len(data)
        if metadata is None and n + 3 <= self.config.fragment_size and self._prefixed:
            # Hot path: header packed directly, no frame object.
            s.out_credit -= 1
            header = _PREFIX_HEADER.pack(
                n >> 16,
                n & 0xFFFF,
                stream_id,
                _PAYLOAD_NEXT_COMPLETE if complete else _PAYLOAD_NEXT,
            )
            pieces = (header, data)
            self._out += pieces
            self._out_size += n + 3
            self.sent_position += n
            keep = self._retain_list
            if keep is not None:  # resumable: retain the frame (spec: Resuming Operation)
                keep.extend(pieces)
                if self.sent_position > self._retain_at:
                    self._retain_check()
        else:
            s.out_credit -= 1
            self._send_payload_frames(stream_id, data, metadata, complete, True)
        if complete:
            self._stream_step(s, _I.SEND_COMPLETE)

    def _payload_refused(self, stream_id: int, s: Stream | None) -> NoReturn:
        if s is None:
            self._stream("send_payload", stream_id)
            raise AssertionError  # pragma: no cover - _stream raised
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

    def _send_payload_frames(
        self, sid: int, data: bytes, metadata: bytes | None, complete: bool, nxt: bool
    ) -> None:
        if metadata is not None and len(metadata) > MAX_METADATA_LENGTH:
            raise LocalProtocolError("metadata exceeds 16 MiB - 1")
        size = 9 + len(data) + (0 if metadata is None else len(metadata))
        if size <= self.config.fragment_size:
            self._queue(PayloadFrame(sid, data, metadata, False, complete, nxt))
            return
        for part in fragment_payload(sid, data, metadata, complete, nxt, self.config.fragment_size):
            self._queue(part)

    def send_complete(self, stream_id: int) -> None:
        """Complete our side of the stream (PAYLOAD with C, no item)."""
        s = self._stream("send_complete", stream_id)
        if TRANSITIONS.get((s.state, _I.SEND_COMPLETE)) is None:
            raise LocalProtocolError(f"send_complete: stream {stream_id} is closed for sending")
        self._queue(PayloadFrame(stream_id, b"", None, False, True, False))
        self._stream_step(s, _I.SEND_COMPLETE)

    def send_error(self, stream_id: int, error_code: int, message: str = "") -> None:
        """Terminate the stream with ERROR (both sides).

        A responder may use APPLICATION_ERROR, REJECTED, CANCELED, INVALID or
        an application code (0x301..0xFFFFFFFE); a requester only ends its
        own channel flow with APPLICATION_ERROR (or an application code) and
        otherwise cancels.
        """
        s = self._stream("send_error", stream_id)
        if s.requester:
            if s.kind is not StreamKind.REQUEST_CHANNEL or not s.out_open:
                raise LocalProtocolError(
                    "send_error: a requester cancels; it sends ERROR only on its open channel flow"
                )
            if error_code != ErrorCode.APPLICATION_ERROR and not _is_app_error_code(error_code):
                raise LocalProtocolError(
                    f"send_error: a requester may not send code {error_code:#x}"
                )
        elif error_code not in _STREAM_ERROR_CODES and not _is_app_error_code(error_code):
            raise LocalProtocolError(f"send_error: {error_code:#x} is not a stream error code")
        self._queue_error(stream_id, error_code, message)
        self._stream_step(s, _I.SEND_ERROR)

    def request_n(self, stream_id: int, n: int) -> None:
        """Grant ``n`` more items (cumulative; 2**31-1 or more is unbounded)."""
        _check_n("request_n: n", n)
        s = self._stream("request_n", stream_id)
        if s.kind is _RR or TRANSITIONS.get((s.state, _I.SEND_REQUEST_N)) is None:
            raise LocalProtocolError(f"request_n: stream {stream_id} is not receiving items")
        if s.in_credit >= UNBOUNDED // 2:
            return  # already unbounded: nothing to say
        s.in_credit = add_credit(s.in_credit, n)
        self._queue(RequestNFrame(stream_id, min(n, MAX_REQUEST_N)))

    def cancel(self, stream_id: int) -> None:
        """Requester: cancel the stream. Channel responder: stop the
        requester's flow (its own flow continues)."""
        s = self._stream("cancel", stream_id)
        inp = _I.SEND_CANCEL if s.requester else _I.SEND_CANCEL_INBOUND
        if TRANSITIONS.get((s.state, inp)) is None:
            raise LocalProtocolError(f"cancel: stream {stream_id} has nothing to cancel")
        self._queue(CancelFrame(stream_id))
        self._stream_step(s, inp)

    # ------------------------------------------------------------------
    # connection intents

    def metadata_push(self, metadata: bytes) -> None:
        self._check_can_request("metadata_push")
        if len(metadata) + 6 > self.config.fragment_size:
            raise LocalProtocolError(
                "metadata_push: metadata exceeds the frame size (not fragmentable)"
            )
        self._queue(MetadataPushFrame(metadata))

    def send_lease(self, ttl: int, number_of_requests: int, metadata: bytes | None = None) -> None:
        """Grant the peer's requester ``number_of_requests`` requests for ``ttl`` ms."""
        if not self._lease_enabled:
            raise LocalProtocolError("send_lease: leases were not negotiated in SETUP")
        self._check_can_request("send_lease")
        frame = LeaseFrame(ttl, number_of_requests, metadata)
        self._queue(frame)  # encoding validates the ranges
        self._our_lease.grant(self._now, ttl, number_of_requests)
        self._lease_grant = (ttl, number_of_requests, metadata)  # sent again on resumption

    def send_keepalive(self, data: bytes = b"") -> None:
        """KEEPALIVE with R (the client's timer sends them; a server may too)."""
        self._check_can_request("send_keepalive")
        self._queue(KeepaliveFrame(True, self.received_position, data))

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
        self._check_can_request("send_extension")
        self._queue(ExtFrame(stream_id, extended_type, data, metadata, ignore))

    def close(self, message: str = "", *, error_code: int = ErrorCode.CONNECTION_CLOSE) -> None:
        """Close the connection.

        CONNECTION_CLOSE (default): graceful; no new streams, open ones drain,
        then ``ConnectionClosed``. CONNECTION_ERROR: at once.
        """
        self._check_open("close")
        if self._detached:
            # No transport (or not resumed yet): nothing can drain.
            self._out.clear()
            self._out_size = 0
            self._detached = False
            self._hold = 0
            error_code = ErrorCode.CONNECTION_ERROR
        if error_code == ErrorCode.CONNECTION_CLOSE and self._state in (
            _ESTABLISHED,
            ConnectionState.CLOSING,
        ):
            if self._state is ConnectionState.CLOSING:
                return
            self._queue_error(0, ErrorCode.CONNECTION_CLOSE, message)
            self._close_message = message
            self._close_by_peer = False
            self._transition(_CI.CLOSE)
            if not self._streams:
                self._finish_close()
            return
        if error_code not in (ErrorCode.CONNECTION_CLOSE, ErrorCode.CONNECTION_ERROR):
            raise LocalProtocolError(f"close: {error_code:#x} is not a connection error code")
        if not (self._client and self._state is ConnectionState.AWAITING_SETUP):
            # (A client that never sent SETUP has nothing to tell the server.)
            self._queue_error(0, ErrorCode.CONNECTION_ERROR, message)
        self._transition(_CI.FATAL)
        self._events.append(
            ConnectionClosed(error_code=ErrorCode.CONNECTION_ERROR, message=message, by_peer=False)
        )
