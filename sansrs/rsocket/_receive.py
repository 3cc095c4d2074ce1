"""The receiving side of an RSocket connection: frames in, events out."""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from typing import Any

from .._errors import LocalProtocolError, RemoteProtocolError
from ._codec import decode_frame
from ._config import ConnectionConfig, Role
from ._core import (
    _CI,
    _CONNECTION_ONLY_ERROR_CODES,
    _ESTABLISHED,
    _I,
    _OUT_ONLY,
    _PREFIX_HEADER,
    _RR,
    _SETUP_ERROR_CODES,
    _U24,
    ConnectionState,
    _pending_request,
)
from ._frames import (
    MAJOR_VERSION,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    ExtFrame,
    Frame,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    UnknownFrame,
)
from ._receive_streams import StreamFrames
from ._streams import (
    Stream,
)
from .events import (
    ConnectionClosed,
    ConnectionClosing,
    ErrorReceived,
    ExtensionReceived,
    KeepaliveReceived,
    LeaseReceived,
    MetadataPushReceived,
    PayloadReceived,
    SetupReceived,
    _fast_fnf,
    _fast_payload,
    _fast_rr,
    _PayloadBuilder,
)

__all__ = ["Receiver"]

_FRAME_HEADER = Struct(">IH")  # stream ID + type/flags, without a length prefix


class Receiver(StreamFrames):
    """Frame handlers (spec: Handling the Unexpected for what is ignored)."""

    def __init__(self, role: Role, config: ConnectionConfig | None = None) -> None:
        super().__init__(role, config)
        self._handlers: dict[type, Callable[[Any], None]] = {
            SetupFrame: self._on_setup,
            LeaseFrame: self._on_lease,
            KeepaliveFrame: self._on_keepalive,
            RequestResponseFrame: self._on_request,
            RequestFnfFrame: self._on_request,
            RequestStreamFrame: self._on_request,
            RequestChannelFrame: self._on_request,
            RequestNFrame: self._on_request_n,
            CancelFrame: self._on_cancel,
            PayloadFrame: self._on_payload,
            ErrorFrame: self._on_error,
            MetadataPushFrame: self._on_metadata_push,
            ResumeFrame: self._on_resume,
            ResumeOkFrame: self._ignore,  # only expected while RESUMING (_pre_established)
            ExtFrame: self._on_ext,
            UnknownFrame: self._on_unknown,
        }

    def receive_data(self, data: bytes, now: float | None = None) -> None:
        """Feed bytes from a byte-stream transport; ``b""`` means it ended.

        Parses every complete frame. Raises ``RemoteProtocolError`` when the
        peer broke the protocol (the ERROR frame is queued, the connection is
        closed, and the events of the frames before the bad one are kept).
        """
        if not self._prefixed:
            raise LocalProtocolError("receive_data: this connection uses message framing")
        if self._state is ConnectionState.CLOSED:
            self._closed_input()
            return
        if now is not None:
            self._observe(now)
        if not data:
            self._on_eof()
            return
        if self._keepalive is not None:
            self._keepalive.on_receive(now)
        buf = self._inbuf
        if buf:
            buf += data
            if len(buf) < self._need:
                return
            data = bytes(buf)
            buf.clear()
        elif len(data) < self._need:
            self._keep(data, 0)
            return
        self._parse(data)

    def _keep(self, data: bytes, offset: int) -> None:
        """Buffer an incomplete frame; fail at once on a bad length prefix."""
        rest = len(data) - offset
        self._need = 3
        if rest:
            self._inbuf += memoryview(data)[offset:]
            if rest >= 3:
                hi, lo = _U24.unpack_from(data, offset)
                self._check_length(hi << 16 | lo)
                self._need = 3 + (hi << 16 | lo)

    def _check_length(self, length: int) -> None:
        if length > self._max_frame or length < 6:
            self._inbuf.clear()
            if length < 6:
                self._fail(
                    ErrorCode.CONNECTION_ERROR,
                    f"frame length {length} is shorter than the 6-byte frame header",
                )
            self._fail(
                ErrorCode.CONNECTION_ERROR,
                f"frame length {length} exceeds the maximum frame size {self._max_frame}",
            )

    def _parse(self, buf: bytes) -> None:
        """Process every complete frame of ``buf`` (prefixed), keep the rest.

        The hot path turns a PAYLOAD with only N, on a stream with credit,
        straight into its event: no frame object, no dispatch; likewise a
        REQUEST_FNF or REQUEST_RESPONSE (metadata or not, no fragments) on a new
        stream ID of the peer's parity (no lease, room for the stream). Everything
        else is decoded by ``decode_frame`` and dispatched.
        """
        end = len(buf)
        off = 0
        position = 0
        limit = self._max_frame
        unpack = _PREFIX_HEADER.unpack_from
        get_stream = self._streams.get
        append = self._events.append
        new = object.__new__
        builder = _PayloadBuilder
        event = PayloadReceived
        rr = _RR
        streams = self._streams
        parity = self._peer_parity
        max_streams = self.config.max_concurrent_streams
        fast = self._state is _ESTABLISHED
        fast_requests = fast and not self._lease_enabled
        while end - off >= 9:
            hi, lo, sid, tf = unpack(buf, off)
            length = hi << 16 | lo
            if length > limit or length < 6:
                self.received_position += position
                self._check_length(length)
            stop = off + 3 + length
            if stop > end:
                break
            if fast and tf & 0xFDA0 == 0x2820 and sid < 0x80000000:
                # PAYLOAD with N (M, F clear; undefined bits ignored).
                s = get_stream(sid)
                if s is not None and s.in_credit > 0 and s.reassembly is None:
                    if s.kind is not rr:
                        if not tf & 0x40:  # C clear
                            # A run of such items on this stream, checked
                            # once: each further frame need only be another
                            # whole PAYLOAD(N) on the same ID within credit.
                            credit = s.in_credit
                            while True:
                                credit -= 1
                                ev = new(builder)  # see events._builder
                                ev.stream_id = sid
                                ev.data = buf[off + 9 : stop]
                                ev.metadata = None
                                ev.complete = False
                                ev.next = True
                                ev.__class__ = event
                                append(ev)
                                position += length
                                off = stop
                                if not credit or end - off < 9:
                                    break
                                hi, lo, next_sid, tf = unpack(buf, off)
                                length = hi << 16 | lo
                                stop = off + 3 + length
                                if (
                                    next_sid != sid
                                    or tf & 0xFDE0 != 0x2820
                                    or stop > end
                                    or length > limit
                                    or length < 6
                                ):
                                    break  # the outer loop takes this frame
                            s.in_credit = credit
                            continue
                    elif s.requester:
                        # The answer to our request-response: it completes the
                        # stream, C or not (spec 5), as _on_payload does.
                        s.in_credit -= 1
                        self._setup_confirmed = True
                        append(_fast_payload(sid, buf[off + 9 : stop], None, True, True))
                        self._stream_step(s, _I.RECV_COMPLETE)
                        position += length
                        off = stop
                        continue
            elif (
                fast_requests
                and tf & 0xF8E0 == 0x1000  # REQUEST_RESPONSE or _FNF, F clear
                and sid & 1 == parity
                and 0 < sid < 0x80000000
                and sid not in streams  # else spec 9.1: ignored, by the slow path
            ):
                start = off + 9
                metadata = None
                if tf & 0x100:  # M: a 24-bit metadata length, then the metadata
                    m = length - 9  # room for metadata after its length field
                    if m < 0:
                        start = -1  # malformed: the slow path reports it
                    else:
                        md_len = buf[start] << 16 | buf[start + 1] << 8 | buf[start + 2]
                        if md_len > m:
                            start = -1
                        else:
                            metadata = buf[start + 3 : start + 3 + md_len]
                            start += 3 + md_len
                if start >= 0:
                    if tf & 0x400:  # REQUEST_FNF
                        self._setup_confirmed = True
                        append(_fast_fnf(sid, buf[start:stop], metadata))
                        position += length
                        off = stop
                        continue
                    if self._peer_stream_count < max_streams:
                        self._setup_confirmed = True
                        streams[sid] = Stream(sid, rr, False, _OUT_ONLY, 1, 0)
                        self._peer_stream_count += 1
                        append(_fast_rr(sid, buf[start:stop], metadata))
                        position += length
                        off = stop
                        continue
            self.received_position += position
            position = 0
            try:
                frame = decode_frame(buf[off + 3 : stop])
            except RemoteProtocolError as exc:
                self._fail(self._decode_error_code(exc), exc.message)
            off = stop
            self._process_one(frame)
            state = self._state
            if state is not _ESTABLISHED:
                if state is ConnectionState.CLOSED:
                    if self._handoff is not None and off < end:
                        # Bytes behind a RESUME belong to the resumed session:
                        # it parses them with its next input (errors are its).
                        self._handoff._inbuf += memoryview(buf)[off:]
                    return
                fast = fast_requests = False
            else:
                fast = True
                fast_requests = not self._lease_enabled
            append = self._events.append
        self.received_position += position
        self._keep(buf, off)

    def receive_frame(self, frame: bytes, now: float | None = None) -> None:
        """Feed one frame (one message) from a message transport."""
        if self._prefixed:
            raise LocalProtocolError("receive_frame: this connection uses length-prefixed framing")
        if self._state is ConnectionState.CLOSED:
            self._closed_input()
            return
        if now is not None:
            self._observe(now)
        if self._keepalive is not None:
            self._keepalive.on_receive(now)
        length = len(frame)
        if length > self.config.max_frame_size:
            self._fail(
                ErrorCode.CONNECTION_ERROR,
                f"frame of {length} bytes exceeds the maximum frame size",
            )
        if length >= 6 and self._state is _ESTABLISHED:
            # The hot path of _parse, for one frame: a PAYLOAD with N only, on a
            # stream with credit, becomes its event directly.
            sid, tf = _FRAME_HEADER.unpack_from(frame)
            if tf & 0xFDE0 == 0x2820 and sid < 0x80000000:
                s = self._streams.get(sid)
                if s is not None and s.in_credit > 0 and s.reassembly is None and s.kind is not _RR:
                    s.in_credit -= 1
                    self._events.append(_fast_payload(sid, frame[6:], None, False, True))
                    self.received_position += length
                    return
        try:
            decoded = decode_frame(frame)
        except RemoteProtocolError as exc:
            self._fail(self._decode_error_code(exc), exc.message)
        self._process([decoded])

    def _decode_error_code(self, exc: RemoteProtocolError) -> int:
        # A server's first frame that is not a valid SETUP gets INVALID_SETUP
        # (spec: Connection Establishment), whatever broke it.
        if not self._client and self._state is ConnectionState.AWAITING_SETUP:
            return ErrorCode.INVALID_SETUP
        return exc.error_code

    def _process(self, frames: list[Frame]) -> None:
        for f in frames:
            if self._state is ConnectionState.CLOSED:
                return
            self._process_one(f)

    def _process_one(self, f: Frame) -> None:
        state = self._state
        if state is not _ESTABLISHED:
            if state is ConnectionState.CLOSED:
                return
            if not self._pre_established(f):
                return
        self._handlers[type(f)](f)

    def _pre_established(self, f: Frame) -> bool:
        """Handle states before ESTABLISHED; True to process ``f`` normally."""
        state = self._state
        if state is ConnectionState.CLOSING:
            return True
        if self._detached:
            self._pre_resumed(f)
            return False
        if self._client:
            # Nothing is expected before our SETUP (spec: 9, ignore).
            return state is not ConnectionState.AWAITING_SETUP
        if state is ConnectionState.AWAITING_SETUP:
            if type(f) is SetupFrame or type(f) is ResumeFrame:
                return True
            self._fail(
                ErrorCode.INVALID_SETUP,
                f"the first frame must be SETUP or RESUME, got {type(f).__name__}",
            )
        # SETUP_RECEIVED: hold frames until the application decides.
        if type(f) is SetupFrame:
            return False  # spec 9.6
        if len(self._early) >= self.config.max_early_frames:
            self._fail(ErrorCode.CONNECTION_ERROR, "too many frames before SETUP was accepted")
        self._early.append(f)
        return False

    def _ignore(self, f: Frame) -> None:
        """Spec: Handling the Unexpected, 9."""

    # Resumption hooks (``_resume.Resumable``).
    _handoff: Receiver | None = None

    def _pre_resumed(self, f: Frame) -> None:
        raise NotImplementedError  # pragma: no cover - defined by Resumable

    def _reserve_session(self, f: SetupFrame) -> bool:
        # Spec: SETUP Frame, NOTE: no resumption without a session store.
        self._refuse_setup(ErrorCode.REJECTED_SETUP, "resumption is not supported")
        return False

    # --- connection frames -------------------------------------------

    def _on_setup(self, f: SetupFrame) -> None:
        if self._client or self._state is not ConnectionState.AWAITING_SETUP:
            return  # spec 9.9 (client), 9.6 (second SETUP)
        if f.major_version != MAJOR_VERSION:
            self._refuse_setup(
                ErrorCode.INVALID_SETUP,
                f"unsupported version {f.major_version}.{f.minor_version}",
            )
            return
        if f.resume_token is not None and not self._reserve_session(f):
            return
        self._setup = f
        self._lease_enabled = f.lease
        self._transition(_CI.RECV_SETUP)
        self._events.append(
            SetupReceived(
                keepalive_interval=f.keepalive_interval,
                max_lifetime=f.max_lifetime,
                metadata_mime_type=f.metadata_mime_type,
                data_mime_type=f.data_mime_type,
                metadata=f.metadata,
                data=f.data,
                lease=f.lease,
                major_version=f.major_version,
                minor_version=f.minor_version,
            )
        )

    def _refuse_setup(self, code: int, message: str) -> None:
        self._queue_error(0, code, message)
        self._transition(_CI.REJECT)
        self._events.append(ConnectionClosed(error_code=code, message=message, by_peer=False))

    def _on_resume(self, f: ResumeFrame) -> None:
        if self._client:
            return
        if self._state is ConnectionState.AWAITING_SETUP:
            self._refuse_setup(ErrorCode.REJECTED_RESUME, "resumption is not supported")
            return
        # Spec: a RESUME after a SETUP SHOULD get ERROR[CONNECTION_ERROR].
        self._fail(ErrorCode.CONNECTION_ERROR, "RESUME after SETUP")

    def _on_lease(self, f: LeaseFrame) -> None:
        if not self._lease_enabled:
            return  # lease not negotiated: unexpected, ignored (9)
        self._setup_confirmed = True
        self._peer_lease.grant(self._now, f.ttl, f.number_of_requests)
        self._events.append(
            LeaseReceived(ttl=f.ttl, number_of_requests=f.number_of_requests, metadata=f.metadata)
        )

    def _on_keepalive(self, f: KeepaliveFrame) -> None:
        r = self._retained
        if r is not None:
            # Spec: Keepalive Position Field: the peer has every frame up to it.
            r.answered()
            self._retain_trim(f.last_received_position)
        if f.respond:
            self._queue(KeepaliveFrame(False, self.received_position, f.data))
        self._events.append(
            KeepaliveReceived(
                respond=f.respond, data=f.data, last_received_position=f.last_received_position
            )
        )

    def _on_metadata_push(self, f: MetadataPushFrame) -> None:
        if f.stream_id != 0:
            return  # spec 9.5
        self._events.append(MetadataPushReceived(metadata=f.metadata))

    def _on_ext(self, f: ExtFrame) -> None:
        # EXT has no implied position (spec: Implied Position).
        self._events.append(
            ExtensionReceived(
                stream_id=f.stream_id,
                extended_type=f.extended_type,
                data=f.data,
                metadata=f.metadata,
                ignore=f.ignore,
            )
        )

    def _on_unknown(self, f: UnknownFrame) -> None:
        if f.ignore:
            return  # spec: Handling Ignore Flag
        self._fail(ErrorCode.CONNECTION_ERROR, f"frame type {f.frame_type:#x} not understood")

    def _on_error(self, f: ErrorFrame) -> None:
        sid = f.stream_id
        if sid == 0:
            self._on_connection_error(f)
            return
        self.received_position += 10 + len(f.data)
        s = self._streams.get(sid)
        if s is None or f.error_code in _CONNECTION_ONLY_ERROR_CODES:
            return  # spec 9.3; a stream-0-only code on a stream: spec 9 (not accounted for)
        if _pending_request(s):
            self._remove(s)  # a request still being reassembled: never announced
            return
        self._setup_confirmed = True
        self._events.append(
            ErrorReceived(stream_id=sid, error_code=f.error_code, message=f.message)
        )
        self._stream_step(s, _I.RECV_ERROR)

    def _on_connection_error(self, f: ErrorFrame) -> None:
        code = f.error_code
        if code in _SETUP_ERROR_CODES:
            if not self._client or self._setup_confirmed:
                return  # spec 9.7 (server), 9.8 (client after establishment)
            self._transition(_CI.REJECT)
            self._events.append(ConnectionClosed(error_code=code, message=f.message, by_peer=True))
            return
        if code == ErrorCode.CONNECTION_CLOSE:
            self._close_message = f.message
            self._close_by_peer = True
            self._transition(_CI.CLOSE)
            self._events.append(ConnectionClosing(message=f.message))
            if not self._streams:
                self._finish_close()
            return
        self._transition(_CI.FATAL)
        self._events.append(ConnectionClosed(error_code=code, message=f.message, by_peer=True))
