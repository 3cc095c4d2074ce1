"""What both Ditto engines share (:class:`RecordEngine`, their base): the
WebSocket's message records in and out (:mod:`..transport.websocket.messages`:
TEXT, TEXT_LINES and runs in; TEXT_LINES out), the close handshake and the
close reason. The roles (:mod:`.engine`'s client, :mod:`.server_engine`'s
server) turn text messages into core calls and core output into records."""

from __future__ import annotations

import abc
from typing import Final

from ..drive.errors import ConnectionClosed
from ..transport.websocket import messages as ws

__all__ = ["RecordEngine"]

_CLOSE: Final = ws.MessageKind.CLOSE.value
_TEXT_RUN: Final = ws.MessageKind.TEXT_RUN.value
_TEXT_LINES: Final = ws.MessageKind.TEXT_LINES.value
_BINARY_RUN: Final = ws.MessageKind.BINARY_RUN.value


class RecordEngine(abc.ABC):
    """Records in and out, the WebSocket close handshake, the close reason.
    The roles supply ``_message`` (one text message in), ``_after_messages``
    (the core's events of a read out) and ``_flush_core`` (the core's queued
    messages out)."""

    def __init__(self) -> None:
        self._reader = ws.MessageReader(keep_runs=True)
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._closing: BaseException | None = None
        self._close_sent = False
        self._now = 0.0

    # -- Engine protocol (shared) ---------------------------------------------
    def receive_data(self, data: bytes, now: float) -> None:
        self._now = now
        if not data:
            if self._closing is None:
                self._closing = ConnectionClosed("connection closed by peer (no close message)")
            return
        for kind, payload in self._reader.feed(data):
            if self._closing is not None:
                break
            if kind == _CLOSE:
                code, reason = ws.decode_close(payload)
                self._closing = ConnectionClosed(f"connection closed by peer: {code} {reason}")
                break
            if kind == _TEXT_LINES:  # messages each followed by 0xFF (the common read)
                self._lines(ws.split_lines(payload), now)
            elif kind in (_TEXT_RUN, _BINARY_RUN):  # messages behind their lengths
                self._run(payload, now)
            else:
                self._text(payload, now)
        self._after_messages()
        self._flush_core()

    def _run(self, payload: bytes, now: float) -> None:
        off, end = 0, len(payload)
        parts = []
        while off < end:
            stop = off + 3 + int.from_bytes(payload[off : off + 3], "big")
            parts.append(payload[off + 3 : stop])
            off = stop
        self._lines(parts, now)

    def _lines(self, parts: list[bytes], now: float) -> None:
        """The messages of a run, in order (UTF-8 bytes each)."""
        for part in parts:
            if self._closing is not None:
                break
            self._text(part, now)

    def _text(self, payload: bytes, now: float) -> None:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:  # a BINARY message that is not text
            self._fail(ws.CloseCode.INVALID_DATA, "Ditto messages are UTF-8 JSON text")
            return
        self._message(text, now)

    def data_to_send(self) -> bytes:
        self._flush_core()
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        self._out_bytes = 0
        return data

    def begin_close(self) -> None:
        self._send_close(ws.CloseCode.NORMAL, "closed by the application")
        if self._closing is None:
            self._closing = ConnectionClosed("connection closed locally")

    def wants_close(self) -> bool:
        return self._closing is not None

    def close_reason(self) -> BaseException | None:
        return self._closing

    # -- helpers --------------------------------------------------------------
    def _send_close(self, code: int, reason: str) -> None:
        if not self._close_sent:
            self._flush_core()
            self._close_sent = True
            self._out.append(ws.encode_close(code, reason))

    def _fail(self, code: int, reason: str) -> None:
        """Close the WebSocket because of the peer; everything outstanding fails."""
        self._send_close(code, reason)
        if self._closing is None:
            self._closing = ConnectionClosed(f"protocol error from peer: {reason}")

    def _queue_messages(self, messages: list[str]) -> None:
        if messages and not self._close_sent:
            # One TEXT_LINES record (each message followed by 0xFF, which
            # UTF-8 never contains): the transport frames each message. One
            # join, no Python step per message here or in the transport: a
            # history stream sends hundreds per turn (docs/performance.md).
            if all(map(str.isascii, messages)):  # ASCII: Latin-1 is its UTF-8
                lines = "\xff".join([*messages, ""]).encode("latin-1")
            else:
                lines = b"\xff".join([*map(str.encode, messages), b""])
            record = ws.encode_lines(lines)
            self._out.append(record)
            self._out_bytes += len(record)

    @abc.abstractmethod
    def _message(self, text: str, now: float) -> None: ...

    @abc.abstractmethod
    def _after_messages(self) -> None:
        """Every message of one read is in: hand on what they caused, as one
        batch (a read's items reach a sink with one ``put_many``)."""

    @abc.abstractmethod
    def _flush_core(self) -> None: ...
