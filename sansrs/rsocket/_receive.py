"""The receiving side of an RSocket connection: bytes in, frames dispatched,
events out.

``Receiver`` is the part of ``Connection`` that parses what the transport
delivers and dispatches every frame: connection frames (SETUP, LEASE,
KEEPALIVE, ERROR on stream 0, METADATA_PUSH, EXT, RESUME) here, stream
frames to ``StreamFrames``, resumption to ``Resumption``. Handling the
Unexpected (spec) says what is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from typing import Any

from .._errors import RemoteProtocolError
from . import _frames as fr
from ._codec import decode_frame
from ._context import Context
from ._fast import (
    PAYLOAD_ITEM,
    PAYLOAD_ITEM_MASK,
    PAYLOAD_PLAIN_ITEM_MASK,
    REQUEST_FNF_BIT,
    T_REQUEST_RESPONSE,
    WHOLE_REQUEST_MASK,
    fnf_event,
    fnf_run,
    payload_event,
    payload_run,
    payload_run_data,
    rr_event,
    span_items,
    unpack_frame_header,
    unpack_prefix_header,
)
from ._frames import (
    FLAG_COMPLETE,
    FLAG_METADATA,
    MAJOR_VERSION,
    MAX_STREAM_ID,
    SETUP_ERROR_CODES,
    ErrorCode,
)
from ._lease import Leases
from ._receive_streams import StreamFrames
from ._resume import Resumption
from ._state import ConnectionInput, ConnectionState
from ._streams import OPENING_STATES, Stream, StreamInput, StreamKind, StreamTable
from .events import (
    ExtensionReceived,
    FireAndForgetRunReceived,
    KeepaliveReceived,
    LeaseReceived,
    MetadataPushReceived,
    PayloadRunReceived,
    SetupReceived,
)

__all__ = ["Receiver"]

_U24 = Struct(">BH")

_CI = ConnectionInput
_I = StreamInput
_ESTABLISHED = ConnectionState.ESTABLISHED
_CLOSED = ConnectionState.CLOSED
_RR = StreamKind.REQUEST_RESPONSE
_RR_RESPONDER = OPENING_STATES[_RR, False]


class Receiver:
    """Bytes (or frames) in, dispatched to the part that handles them.

    - ``receive_prefixed(data)``: bytes of a byte-stream transport;
    - ``receive_message(frame)``: one frame of a message transport;
    - ``process(frames)``: frames decoded already (the ones a server held
      between SETUP and ``accept_setup``: ``take_early()``).
    """

    __slots__ = (
        "_ctx",
        "_handlers",
        "_leases",
        "_max_frame",
        "_on_stream_error",
        "_resume",
        "_streams",
        "early",
    )

    def __init__(
        self,
        ctx: Context,
        streams: StreamTable,
        leases: Leases,
        resume: Resumption,
        stream_frames: StreamFrames,
    ) -> None:
        self._ctx = ctx
        self._streams = streams
        self._leases = leases
        self._resume = resume
        self._max_frame = ctx.config.max_frame_size
        self.early: list[fr.Frame] = []  # server: frames after SETUP, before accept
        ctx.on_closed.append(self.early.clear)
        self._handlers: dict[type, Callable[[Any], None]] = {
            fr.SetupFrame: self._on_setup,
            fr.LeaseFrame: self._on_lease,
            fr.KeepaliveFrame: self._on_keepalive,
            fr.RequestResponseFrame: stream_frames.on_request,
            fr.RequestFnfFrame: stream_frames.on_request,
            fr.RequestStreamFrame: stream_frames.on_request,
            fr.RequestChannelFrame: stream_frames.on_request,
            fr.RequestNFrame: stream_frames.on_request_n,
            fr.CancelFrame: stream_frames.on_cancel,
            fr.PayloadFrame: stream_frames.on_payload,
            fr.ErrorFrame: self._on_error,
            fr.MetadataPushFrame: self._on_metadata_push,
            fr.ResumeFrame: resume.on_resume,
            fr.ResumeOkFrame: self._ignore,  # only expected while RESUMING (pre_resumed)
            fr.ExtFrame: self._on_ext,
            fr.UnknownFrame: self._on_unknown,
        }
        self._on_stream_error = stream_frames.on_error

    # ------------------------------------------------------------------
    # bytes in

    def receive_prefixed(self, data: bytes) -> None:
        """Parse every complete frame of the input so far (see
        ``Connection.receive_data``)."""
        ctx = self._ctx
        buf = ctx.inbuf
        start = 0
        if buf:
            have = len(buf)
            if have + len(data) < ctx.need:
                buf += data
                return
            if ctx.need == 3:
                # The length prefix itself was cut (rare): this read behind it.
                data = b"".join((buf, data))
                buf.clear()
            else:
                # The frame begun before, completed from the head of this
                # read and parsed alone: one frame copied, not the whole
                # read (most reads of a stream end inside a frame;
                # bench_tcp.py stream1k, stream1kb).
                start = ctx.need - have
                frame = b"".join((buf, memoryview(data)[:start]))
                buf.clear()
                self._parse(frame, 0)
                if ctx.state is _CLOSED:
                    self._hand_over(data, start)
                    return
        elif len(data) < ctx.need:
            self._keep(data, 0)
            return
        self._parse(data, start)

    def receive_span(self, buf: bytes, off: int, count: int, size: int, skip: int) -> None:
        """``count`` frames of ``size`` bytes, each behind ``skip`` bytes of
        the transport's (see ``Connection.receive_span``)."""
        ctx = self._ctx
        if (
            ctx.state is _ESTABLISHED
            and not ctx.inbuf
            and ctx.config.payload_runs
            and 6 <= size <= self._max_frame
        ):
            # A stream's items (the common span): one event, as the
            # byte-stream path's run (``_parse``) makes of the same frames.
            items = span_items(buf, off, count, size, skip)
            if items is not None:
                sid, data = items
                s = self._streams.by_id.get(sid)
                if (
                    s is not None
                    and s.in_credit >= count
                    and s.reassembly is None
                    and s.kind is not _RR
                ):
                    s.in_credit -= count
                    ctx.setup_confirmed = True
                    ctx.events.append(PayloadRunReceived(stream_id=sid, data=data))
                    ctx.received_position += count * size
                    return
        # Anything else: the same frames length-prefixed, by the byte-stream
        # path (which says what is wrong with them, if anything).
        stride = skip + size
        at = off + skip
        with memoryview(buf) as view:
            frames = [view[i : i + size] for i in range(at, at + count * stride, stride)]
            run = size.to_bytes(3, "big").join((b"", *frames)) if size < 1 << 24 else None
            del frames
        if run is None:
            self._check_length(size)  # (too long: fails the connection)
            return
        self.receive_prefixed(run)

    def _hand_over(self, data: bytes, off: int) -> None:
        """The connection closed at ``off`` of ``data``: bytes behind a
        RESUME that handed it over belong to the resumed session."""
        handoff = self._resume.handoff
        if handoff is not None and off < len(data):
            handoff.take_input(memoryview(data)[off:])

    def _keep(self, data: bytes, offset: int) -> None:
        """Buffer an incomplete frame; fail at once on a bad length prefix."""
        ctx = self._ctx
        rest = len(data) - offset
        ctx.need = 3
        if rest:
            ctx.inbuf += memoryview(data)[offset:]
            if rest >= 3:
                hi, lo = _U24.unpack_from(data, offset)
                self._check_length(hi << 16 | lo)
                ctx.need = 3 + (hi << 16 | lo)

    def _check_length(self, length: int) -> None:
        if length > self._max_frame or length < 6:
            ctx = self._ctx
            ctx.inbuf.clear()
            if length < 6:
                ctx.fail(
                    ErrorCode.CONNECTION_ERROR,
                    f"frame length {length} is shorter than the 6-byte frame header",
                )
            ctx.fail(
                ErrorCode.CONNECTION_ERROR,
                f"frame length {length} exceeds the maximum frame size {self._max_frame}",
            )

    def _parse(self, buf: bytes, off: int) -> None:
        """Process every complete frame of ``buf`` (prefixed) from ``off``
        on, keep the rest.

        The hot path (``_fast.py``) turns a run of PAYLOADs with N on a stream
        with credit straight into their events: no frame object, no dispatch;
        likewise a request-response's answer, and a REQUEST_FNF or
        REQUEST_RESPONSE (metadata or not, no fragments) on a new stream ID
        of the peer's parity (no lease, room for the stream); with
        ``fnf_runs``, a REQUEST_FNF and the ones right behind it become one
        event (``_fast.fnf_run``). Everything else is
        decoded by ``decode_frame`` and dispatched. The stream table is not
        looked up on the hot path: credit stands for it (see ``_streams.py``).
        """
        ctx = self._ctx
        table = self._streams
        leases = self._leases
        end = len(buf)
        position = 0
        limit = self._max_frame
        unpack = unpack_prefix_header
        streams = table.by_id
        get_stream = streams.get
        append = ctx.events.append
        rr = _RR
        parity = table.peer_parity
        max_streams = ctx.config.max_concurrent_streams
        fast = ctx.state is _ESTABLISHED
        fast_requests = fast and not leases.enabled
        runs = ctx.config.payload_runs
        fnf_runs = ctx.config.fnf_runs
        while end - off >= 9:
            hi, lo, sid, tf = unpack(buf, off)
            length = hi << 16 | lo
            if length > limit or length < 6:
                ctx.received_position += position
                self._check_length(length)
            stop = off + 3 + length
            if stop > end:
                break
            if fast and tf & PAYLOAD_ITEM_MASK == PAYLOAD_ITEM and sid <= MAX_STREAM_ID:
                # One item, whole, without metadata (undefined bits ignored).
                s = get_stream(sid)
                if s is not None and s.in_credit > 0 and s.reassembly is None:
                    if s.kind is not rr:
                        if not tf & FLAG_COMPLETE:
                            # A run of such items on this stream, checked
                            # once: each further frame need only be another
                            # whole PAYLOAD(N) on the same ID within credit.
                            # Items answer a request: the SETUP was accepted.
                            ctx.setup_confirmed = True
                            if runs:  # one event for the run (payload_runs)
                                off, s.in_credit, run, data = payload_run_data(
                                    buf, off, stop, length, end, limit, sid, s.in_credit
                                )
                                append(PayloadRunReceived(stream_id=sid, data=data))
                            else:
                                off, s.in_credit, run = payload_run(
                                    buf, off, stop, length, end, limit, sid, s.in_credit, append
                                )
                            position += run
                            continue
                    elif s.requester:
                        # The answer to our request-response: it completes the
                        # stream, C or not (spec 5), as on_payload does.
                        s.in_credit -= 1
                        ctx.setup_confirmed = True
                        append(payload_event(sid, buf[off + 9 : stop], None, True, True))
                        table.step(s, _I.RECV_COMPLETE)
                        position += length
                        off = stop
                        continue
            elif (
                fast_requests
                and tf & WHOLE_REQUEST_MASK == T_REQUEST_RESPONSE  # or REQUEST_FNF
                and sid & 1 == parity
                and 0 < sid <= MAX_STREAM_ID
                and sid not in streams  # else spec 9.1: ignored, by the slow path
            ):
                start = off + 9
                metadata = None
                if tf & FLAG_METADATA:  # a 24-bit metadata length, then the metadata
                    room = length - 9  # after the header and the length field
                    if room < 0:
                        start = -1  # malformed: the slow path reports it
                    else:
                        md_len = buf[start] << 16 | buf[start + 1] << 8 | buf[start + 2]
                        if md_len > room:
                            start = -1
                        else:
                            metadata = buf[start + 3 : start + 3 + md_len]
                            start += 3 + md_len
                if start >= 0:
                    if tf & REQUEST_FNF_BIT:
                        ctx.setup_confirmed = True
                        if fnf_runs:  # this one and those behind it: one event
                            off, run, ids, data, mds = fnf_run(
                                buf, off, end, limit, parity, streams
                            )
                            append(
                                FireAndForgetRunReceived(stream_ids=ids, data=data, metadata=mds)
                            )
                            position += run
                            continue
                        append(fnf_event(sid, buf[start:stop], metadata))
                        position += length
                        off = stop
                        continue
                    if table.peer_count < max_streams:
                        ctx.setup_confirmed = True
                        streams[sid] = Stream(sid, rr, False, _RR_RESPONDER, 1, 0)
                        table.peer_count += 1
                        append(rr_event(sid, buf[start:stop], metadata))
                        position += length
                        off = stop
                        continue
            ctx.received_position += position
            position = 0
            try:
                frame = decode_frame(buf[off + 3 : stop])
            except RemoteProtocolError as exc:
                ctx.fail(self._decode_error_code(exc), exc.message)
            off = stop
            self._process_one(frame)
            state = ctx.state
            if state is not _ESTABLISHED:
                if state is _CLOSED:
                    self._hand_over(buf, off)
                    return
                fast = fast_requests = False
            else:
                fast = True
                fast_requests = not leases.enabled
            append = ctx.events.append
        ctx.received_position += position
        self._keep(buf, off)

    def receive_message(self, frame: bytes) -> None:
        """One frame from a message transport (see ``Connection.receive_frame``)."""
        ctx = self._ctx
        length = len(frame)
        if length > self._max_frame:
            ctx.fail(
                ErrorCode.CONNECTION_ERROR,
                f"frame of {length} bytes exceeds the maximum frame size",
            )
        if length >= 6 and ctx.state is _ESTABLISHED:
            # The hot path of _parse, for one frame: a PAYLOAD with N only, on a
            # stream with credit, becomes its event directly.
            sid, tf = unpack_frame_header(frame)
            if tf & PAYLOAD_PLAIN_ITEM_MASK == PAYLOAD_ITEM and sid <= MAX_STREAM_ID:
                s = self._streams.by_id.get(sid)
                if s is not None and s.in_credit > 0 and s.reassembly is None and s.kind is not _RR:
                    s.in_credit -= 1
                    ctx.events.append(payload_event(sid, frame[6:], None, False, True))
                    ctx.received_position += length
                    return
        try:
            decoded = decode_frame(frame)
        except RemoteProtocolError as exc:
            ctx.fail(self._decode_error_code(exc), exc.message)
        self.process([decoded])

    def _decode_error_code(self, exc: RemoteProtocolError) -> int:
        # A server's first frame that is not a valid SETUP gets INVALID_SETUP
        # (spec: Connection Establishment), whatever broke it.
        ctx = self._ctx
        if not ctx.client and ctx.state is ConnectionState.AWAITING_SETUP:
            return ErrorCode.INVALID_SETUP
        return exc.error_code

    # ------------------------------------------------------------------
    # dispatch

    def process(self, frames: list[fr.Frame]) -> None:
        for f in frames:
            if self._ctx.state is _CLOSED:
                return
            self._process_one(f)

    def take_early(self) -> list[fr.Frame]:
        """The frames held while SETUP awaited acceptance (and forget them)."""
        early = self.early
        self.early = []
        return early

    def _process_one(self, f: fr.Frame) -> None:
        state = self._ctx.state
        if state is not _ESTABLISHED:
            if state is _CLOSED:
                return
            if not self._pre_established(f):
                return
        self._handlers[type(f)](f)

    def _pre_established(self, f: fr.Frame) -> bool:
        """Handle states before ESTABLISHED; True to process ``f`` normally."""
        ctx = self._ctx
        state = ctx.state
        if state is ConnectionState.CLOSING:
            return True
        if self._resume.detached:
            self._resume.pre_resumed(f)
            return False
        if ctx.client:
            # Nothing is expected before our SETUP (spec: 9, ignore).
            return state is not ConnectionState.AWAITING_SETUP
        if state is ConnectionState.AWAITING_SETUP:
            if type(f) is fr.SetupFrame or type(f) is fr.ResumeFrame:
                return True
            ctx.fail(
                ErrorCode.INVALID_SETUP,
                f"the first frame must be SETUP or RESUME, got {type(f).__name__}",
            )
        # SETUP_RECEIVED: hold frames until the application decides.
        if type(f) is fr.SetupFrame:
            return False  # spec 9.6
        if len(self.early) >= ctx.config.max_early_frames:
            ctx.fail(ErrorCode.CONNECTION_ERROR, "too many frames before SETUP was accepted")
        self.early.append(f)
        return False

    def _ignore(self, f: fr.Frame) -> None:
        """Spec: Handling the Unexpected, 9."""

    # ------------------------------------------------------------------
    # connection frames

    def _on_setup(self, f: fr.SetupFrame) -> None:
        ctx = self._ctx
        if ctx.client or ctx.state is not ConnectionState.AWAITING_SETUP:
            return  # spec 9.9 (client), 9.6 (second SETUP)
        if f.major_version != MAJOR_VERSION:
            ctx.refuse(
                ErrorCode.INVALID_SETUP,
                f"unsupported version {f.major_version}.{f.minor_version}",
            )
            return
        if f.resume_token is not None and not self._resume.reserve(f):
            return
        ctx.setup = f
        self._leases.enabled = f.lease
        ctx.transition(_CI.RECV_SETUP)
        # An event from a frame, field by field (as _on_ext): alike on purpose.
        ctx.events.append(
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

    def _on_lease(self, f: fr.LeaseFrame) -> None:
        ctx = self._ctx
        leases = self._leases
        if not leases.enabled:
            return  # lease not negotiated: unexpected, ignored (9)
        ctx.setup_confirmed = True
        leases.peer.grant(ctx.now, f.ttl, f.number_of_requests)
        ctx.events.append(
            LeaseReceived(ttl=f.ttl, number_of_requests=f.number_of_requests, metadata=f.metadata)
        )

    def _on_keepalive(self, f: fr.KeepaliveFrame) -> None:
        ctx = self._ctx
        self._resume.peer_position(f.last_received_position)
        if f.respond:
            ctx.output.queue(fr.KeepaliveFrame(False, ctx.received_position, f.data))
        ctx.events.append(
            KeepaliveReceived(
                respond=f.respond, data=f.data, last_received_position=f.last_received_position
            )
        )

    def _on_metadata_push(self, f: fr.MetadataPushFrame) -> None:
        if f.stream_id != 0:
            return  # spec 9.5
        self._ctx.events.append(MetadataPushReceived(metadata=f.metadata))

    def _on_ext(self, f: fr.ExtFrame) -> None:
        # EXT has no implied position (spec: Implied Position).
        self._ctx.events.append(
            ExtensionReceived(
                stream_id=f.stream_id,
                extended_type=f.extended_type,
                data=f.data,
                metadata=f.metadata,
                ignore=f.ignore,
            )
        )

    def _on_unknown(self, f: fr.UnknownFrame) -> None:
        if f.ignore:
            return  # spec: Handling Ignore Flag
        self._ctx.fail(ErrorCode.CONNECTION_ERROR, f"frame type {f.frame_type:#x} not understood")

    def _on_error(self, f: fr.ErrorFrame) -> None:
        if f.stream_id:
            self._on_stream_error(f)
            return
        ctx = self._ctx
        code = f.error_code
        if code in SETUP_ERROR_CODES:
            if not ctx.client or ctx.setup_confirmed:
                return  # spec 9.7 (server), 9.8 (client after establishment)
            ctx.end(_CI.REJECT, code, f.message, by_peer=True)
            return
        if code == ErrorCode.CONNECTION_CLOSE:
            ctx.begin_close(f.message, True, drained=not self._streams.by_id)
            return
        ctx.end(_CI.FATAL, code, f.message, by_peer=True)
