"""The :class:`~.engine.RSocketEngine`'s input before and beside its frames
(its methods, bound in the engine's class): a server's first frame (SETUP)
fed to the core alone; a client's check that the peer speaks RSocket at
all, and what a timeout says when it did not; WebSocket message records
turned into frames, and the peer's broken mapping refused."""

from __future__ import annotations

import contextlib

from sansrs.rsocket import MAX_FRAME_LENGTH, ErrorCode

from ..drive.errors import ConnectionClosed, seconds
from ..transport.sniff import describe_bytes, looks_like_http
from ..transport.websocket import messages as ws
from . import core
from .engine_state import EngineState

_RUN = ws.MessageKind.BINARY_RUN.value
_TEXT_RUN = ws.MessageKind.TEXT_RUN.value
_BINARY = ws.MessageKind.BINARY.value
_TEXT = ws.MessageKind.TEXT.value
_CLOSE = ws.MessageKind.CLOSE.value
_SPAN = ws.MessageKind.BINARY_SPAN.value
_FRAMES = ws.MessageKind.BINARY_FRAMES.value


def protocol_error(self: EngineState, exc: core.RemoteProtocolError, data: bytes = b"") -> None:
    message = f"protocol error from peer: {exc.message}"
    conn = self.conn
    if data and conn.role is core.Role.CLIENT and not conn.setup_confirmed:
        # The peer's very first frame was wrong: maybe no RSocket at all.
        first = data[3:] if self._records is not None else data  # (no length on the wire)
        message = f"{message}; its first bytes: {describe_bytes(first, _guess)}"
    self._closing = ConnectionClosed(message)
    if self._records is not None:
        self._ws_close = (ws.CloseCode.PROTOCOL_ERROR, exc.message)


def first_read(self: EngineState, data: bytes, now: float) -> bytes:
    """The first bytes: a server's SETUP goes in alone; a client whose
    peer answers in HTTP (a WebSocket or HTTP server on a tcp:// URL)
    stops at once, naming it, rather than waiting for a frame that
    never completes. Returns what is left to feed."""
    if self._before_setup is not None:
        data = self._feed_setup_first(data, now)
        self._opening = self._before_setup is not None
        return data
    self._opening = False
    if self.conn.role is core.Role.CLIENT and looks_like_http(data):
        self.conn.connection_lost()
        self._dispatch_events()
        self._closing = ConnectionClosed(
            f"the peer does not speak RSocket: it sent {describe_bytes(data, _guess)}"
        )
        return b""
    return data


def unexpected_input(self: EngineState) -> str:
    """Client: why nothing came, for a timeout's message: the peer sent
    nothing at all, or bytes that are no whole RSocket frame (what
    they look like); empty when frames did come."""
    conn = self.conn
    if (
        conn.role is not core.Role.CLIENT
        or conn.setup_confirmed
        or self._peer_close
        or self._closing is not None  # (it says why)
    ):
        return ""
    pending = conn.pending_input
    if not pending:
        return (
            "the peer has sent nothing since the connection opened"
            " (an RSocket server? a WebSocket one needs a ws:// URL)"
        )
    return f"the peer sent no whole RSocket frame, only {describe_bytes(pending, _guess)}"


def no_answer(self: EngineState, timeout: float) -> str:
    """A request's timeout message: the whole ``timeout`` (not what
    was left of it at the last wait), and :meth:`unexpected_input`."""
    why = self.unexpected_input()
    return f"no answer within {seconds(timeout)}" + (f": {why}" if why else "")


def feed_setup_first(self: EngineState, data: bytes, now: float) -> bytes:
    """Server: hand the core the first frame (SETUP) alone and accept it
    before the frames behind it. A client may pipeline thousands of
    requests right after SETUP, and the core holds at most
    ``max_early_frames`` of them while a SETUP awaits acceptance. The
    frame's bytes go to the core as they arrive (it buffers a partial
    frame, in linear time): a SETUP trickled in small pieces costs what
    it weighs. Returns what follows the first frame."""
    head = self._before_setup
    assert head is not None
    if len(head) < 3:  # the 24-bit length of the first frame
        head = self._before_setup = head + data[: 3 - len(head)]
        if len(head) == 3:
            self._setup_left = 3 + int.from_bytes(head, "big") - self._setup_fed
    if len(head) < 3 or len(data) < self._setup_left:
        self._setup_fed += len(data)
        if len(head) == 3:
            self._setup_left -= len(data)
        self._receive_partial(data, now)
        return b""
    first, rest = data[: self._setup_left], data[self._setup_left :]
    self._before_setup = None
    self._receive_partial(first, now)
    self._dispatch_events()
    return rest if self._closing is None else b""


def receive_partial(self: EngineState, data: bytes, now: float) -> None:
    try:
        self.conn.receive_data(data, now)
    except core.RemoteProtocolError as exc:
        self._protocol_error(exc)
        self._dispatch_events()


def receive_records(self: EngineState, data: bytes, now: float) -> None:
    """Message transport: each binary message is one frame. The core reads
    length-prefixed frames, as over TCP: a run of binary messages
    (``BINARY_RUN``) is exactly that, so it goes in as it is (the fast
    paths of the core apply; docs/performance.md, "WebSocket near TCP").
    A text message breaks the transport mapping (spec: Framing Protocol
    Usage): ERROR [CONNECTION_ERROR], then Close 1003 (unsupported data)."""
    assert self._records is not None
    conn = self.conn
    if not data:
        conn.connection_lost()
        self._dispatch_events()
        return
    # A bad message ends the connection: what follows it is ignored.
    buf, records = self._records.feed_whole(data)
    for kind, start, stop in records:
        if kind in (_SPAN, _FRAMES):
            self._receive_span(buf, start, stop, now, kind == _FRAMES)
            if self._closing is not None:
                break
            continue
        payload = buf[start:stop]
        if kind == _RUN:
            self._receive_stream(payload, now)
        elif kind == _BINARY:  # a message that came alone (e.g. fragmented)
            if len(payload) > MAX_FRAME_LENGTH:
                self._refuse(
                    f"frame of {len(payload)} bytes exceeds the maximum frame size",
                    ws.CloseCode.PROTOCOL_ERROR,
                )
                break
            self._receive_stream(len(payload).to_bytes(3, "big") + payload, now)
        elif kind in (_TEXT, _TEXT_RUN):
            message = "RSocket over WebSocket takes binary messages, got a text message"
            self._refuse(message, ws.CloseCode.UNSUPPORTED_DATA)
            break
        elif kind == _CLOSE:
            self._ws_closed(*ws.decode_close(payload))
            break
        if self._closing is not None:
            break
    self._dispatch_events()


def receive_span(
    self: EngineState, buf: bytes, start: int, stop: int, now: float, frames: bool = False
) -> None:
    """A BINARY_SPAN record (``buf[start:stop]``, the transport's
    ``binary_spans``; ``frames``: a BINARY_FRAMES chunk, the read as it
    arrived): equal messages, each behind its WebSocket header, cut by the
    core where they lie (``Connection.receive_span``)."""
    if frames:
        count, size, skip = ws.frames_fields(buf, start, stop)
        first = start
    else:
        count, size, skip = ws.span_fields(buf, start, stop)
        first = start + 5  # (behind the record's fields)
    # Spans reach clients only (a server's reads are masked), whose first
    # read is looked at for an HTTP answer: WebSocket messages are none.
    self._opening = False
    try:
        self.conn.receive_span(buf, first, count, size, skip, now)
    except core.RemoteProtocolError as exc:
        self._protocol_error(exc)
    self._dispatch_events()


def ws_closed(self: EngineState, code: int, reason: str) -> None:
    """The WebSocket is closing (the peer's Close, or ours for its broken
    framing): the transport is lost, and with it the connection."""
    # The first reason stays: a Close that follows an ERROR (a rejected
    # SETUP) must not hide the ERROR's text.
    first = self._closing
    self.conn.connection_lost()
    self._dispatch_events()
    detail = f" ({reason})" if reason else ""
    self._closing = first or ConnectionClosed(f"connection closed: WebSocket {code}{detail}")


def refuse(self: EngineState, message: str, close_code: int) -> None:
    """The peer broke the WebSocket mapping: ERROR [CONNECTION_ERROR],
    then the WebSocket closes with ``close_code``."""
    with contextlib.suppress(core.LocalProtocolError):
        self.conn.close(message, error_code=ErrorCode.CONNECTION_ERROR)
    self._dispatch_events()
    self._closing = ConnectionClosed(f"protocol error from peer: {message}")
    self._ws_close = (close_code, message)


def _guess(data: bytes) -> str | None:
    """Another wire protocol's opening where RSocket frames were expected."""
    if data[:3] == b"\x02\x00\x00":  # (docs/protocols/rsio.md: serverHello, version 0)
        return "an rsio server hello: an rsio server? (sansrs.adapters.rsio)"
    return None
