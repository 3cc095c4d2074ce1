"""The WebSocket transport itself: wsproto (which runs h11 for the HTTP
upgrade) over a TCP or TLS byte stream, speaking message records
(:mod:`.messages`) to engines. :class:`WebSocketTransport` serves both roles;
on a server it reads and answers the upgrade inside ``recv``
(:class:`WebSocketListener` accepts without blocking; what the server
answers to the upgrade is in :mod:`.upgrade`). The client's upgrade
is in :mod:`.handshake`; the package docstring has the contract."""

from __future__ import annotations

import contextlib
import ssl
from bisect import bisect_left
from itertools import accumulate

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError as WsLocalProtocolError
from wsproto.utilities import RemoteProtocolError as WsRemoteProtocolError

from ..base import Transport
from ..tcp import MAX_PIECES, TcpListener
from ..tls import TlsListener
from ..urls import Endpoint
from . import upgrade
from .frames import KeySource, encode_data_frame
from .messages import (
    CloseCode,
    MessageKind,
    RecordError,
    decode_close,
    encode_close,
    encode_record,
    encode_span,
    frames_fields,
    span_fields,
)
from .options import HandshakeRequest, WebSocketOptions
from .runs import encode_batch, frame_lines, frame_record
from .runs import encode_run as frame_run
from .splitter import FrameSplitter
from .upgrade import MAX_REQUEST_HEAD

__all__ = ["MAX_REQUEST_HEAD", "SEND_BATCH", "WebSocketListener", "WebSocketTransport"]

#: Records framed into WebSocket bytes per ``send`` call (at least one record),
#: so the socket-side buffer stays bounded whatever the driver hands over.
SEND_BATCH = 256 * 1024
#: Most bytes read from the socket at once (a driver may ask for more)
#: while the messages read are of 126 bytes or more: a read becomes a
#: record, and the engine's run copied out of it, buffers as big as the
#: read, and with the messages' own buffers beside them, those over ~128
#: KiB went back to the system once freed and the next ones page-faulted,
#: every page of them (~0.2-0.3 faults per 1 KiB item on 256 KiB reads, ~0
#: at this size: the client of stream1k, stream1kb of bench_tcp.py). Small
#: messages take what the driver asks: fewer turns (stream16).
RECV_MAX = 120 * 1024
#: The same for reads that become BINARY_SPAN records
#: (``WebSocketOptions.binary_spans``): the read and its span are the only
#: buffers of its size (no run is copied out), and a fresh client process
#: of 1 KiB items took 0.006 faults per item reading 256 KiB at once, 0.005
#: at 120 KiB, for 10 % less CPU per item (``bench_websocket.py --faults``;
#: docs/performance.md, "WebSocket ends in process"): fewer reads, each a
#: core call, an event and a wake-up of the consumer.
SPAN_RECV_MAX = 256 * 1024
_NO_MAX = 1 << 62
#: Records an engine may queue on a server connection before its upgrade is
#: complete (an engine normally sends nothing before the peer spoke).
MAX_EARLY_OUTPUT = 1024 * 1024
#: Unsent bytes above which a Ping is no longer answered at once: only the
#: latest one is kept and answered once they drain (RFC 6455, 5.5.3 allows
#: answering only the most recent Ping), so a peer that sends Pings and
#: reads nothing cannot make us queue Pongs without bound.
MAX_CONTROL_BACKLOG = 64 * 1024
_BINARY_RUN = MessageKind.BINARY_RUN.value
_FRAMED = bytes((MessageKind.FRAMED.value,))
_SPAN = MessageKind.BINARY_SPAN.value
_FRAMES = MessageKind.BINARY_FRAMES.value
#: The record kinds :meth:`WebSocketTransport._send_run` frames directly.
_RUNS = tuple(bytes((kind,)) for kind in (0x12, 0x11, 0x13))  # BINARY_RUN, TEXT_RUN, TEXT_LINES



class WebSocketTransport:
    """One WebSocket connection as a driver-loop transport of message records."""

    message_framed = True

    def __init__(
        self,
        stream: Transport,
        ws: WSConnection,
        *,
        scheme: str,
        path: str,
        options: WebSocketOptions,
        is_open: bool,
    ) -> None:
        self._stream = stream
        self._ws = ws
        self.scheme = scheme
        self.path = path
        self.options = options
        self.peer = stream.peer
        #: The negotiated subprotocol (None: none).
        self.subprotocol: str | None = None
        #: The upgrade request (server side, once received).
        self.request: HandshakeRequest | None = None
        #: The Close received from the peer (code, reason), if any.
        self.close_received: tuple[int, str] | None = None
        #: The Close this end sent (code, reason), if any.
        self.close_sent: tuple[int, str] | None = None
        self._open = False
        self._max = options.max_message_size
        #: Data path once open (frames.py): fast for whole data frames,
        #: wsproto for the rest. Before that, the server's request head.
        self._splitter: FrameSplitter | None = None
        self._head = bytearray()
        self._key_ok = True  # the upgrade's Sec-WebSocket-Key (RFC 6455, 4.2.1)
        self._keys = KeySource() if ws.client else None
        # Incoming message being reassembled.
        self._parts: list[bytes] = []
        self._size = 0
        self._dropping = False  # a too-big message is being skipped
        self._recv_max = _NO_MAX  # RECV_MAX while the messages read are large
        #: Bytes per frame while a span's equal frames arrive (0: none):
        #: reads are sized to end where a frame does (BINARY_FRAMES).
        self._stride = 0
        # Records ready for the engine (whole records only).
        self._ready: list[bytes] = []
        # WebSocket bytes for the socket; the first ``_framed`` bytes of what
        # the caller offers to ``send`` are in here and not yet acknowledged.
        self._out = bytearray()
        self._framed = 0
        #: Bytes of the BINARY_RUN record being framed that are still to go
        #: (a run is framed a batch at a time, at message boundaries).
        self._run_left = 0
        self._run_text = False
        self._early: list[bytes] = []  # server: records queued before the upgrade
        self._early_size = 0
        self._pings = 0  # engine pings awaiting their pong
        self._pong: bytes | None = None  # the latest Ping's payload, not yet answered
        self._close_delivered = False
        if is_open:
            self._set_open()
        self._eof = False
        self._closed = False

    # -- driver-facing interface ---------------------------------------------
    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def handshaken(self) -> bool:
        """True once the upgrade (and TLS under wss://) is done. Until then
        the driver's ``LoopConfig.handshake_timeout`` applies, so a client
        that never finishes its upgrade is dropped."""
        return self._open and bool(getattr(self._stream, "handshaken", True))

    @property
    def buffered(self) -> int:
        """WebSocket bytes framed but not yet taken by the socket: at most one
        ``send`` batch (SEND_BATCH of records, or one bigger record) plus
        control frames."""
        return len(self._out)

    def recv(self, max_bytes: int = 256 * 1024) -> bytes:
        """Whole records from the peer; ``b""`` once the connection ended.

        Raises ``BlockingIOError`` when nothing is ready for the engine."""
        if self._ready:
            return self._take_ready()
        if self._eof:
            return b""
        size = min(max_bytes, self._recv_max)
        stride = self._stride
        if stride and self._splitter is not None:
            # Reads of whole frames while a span's frames arrive: a read
            # that ends where a frame does goes to the engine as it is
            # (BINARY_FRAMES), not copied behind a record head (stream1k,
            # stream1kb over ws://: the client's end). A frame the last
            # read cut is completed by this one's head.
            lead = self._splitter.wanted()
            if lead is not None and size - lead >= stride:
                size -= (size - lead) % stride
        data = self._stream.recv(size)
        if not data:
            self._eof = True
            if self._ready:
                return self._take_ready()
            return b""
        splitter = self._splitter
        if splitter is not None:
            if not self._out and self.close_sent is None:
                # The commonest read (one frame, or the frames of a shaped
                # batch) as one record. A Close received was answered at
                # once: while none was sent, messages are delivered.
                record = splitter.record(data)
                if record is not None:
                    return record
            splitter.feed(data)
        else:
            self._receive_head(data)
        # Answers (pong, the Close echo) go now if they can; a failed write
        # must not lose what was just read (a Close saying why the peer is
        # going): the next send reports it.
        if self._out:
            self._flush_quietly()
        if self._ready:
            return self._take_ready()
        if self._eof:
            return b""
        raise BlockingIOError("no complete message yet")

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Write records; returns how many bytes of ``data`` are fully written.

        The caller offers the rest again (with more behind it) later."""
        if self._out:
            self._flush()
            if self._out:
                return 0
        acked, self._framed = self._framed, 0
        if (
            type(data) is not memoryview
            and self._pong is None
            and self.close_sent is None
            and self._open
        ):
            sent = -1
            if not acked and not self._run_left:
                sent = self._send_framed(data, 0) if data[:1] == _FRAMED else self._send_run(data)
            if sent < 0:
                sent = self._send_long_run(data, acked)
            if sent >= 0:
                # Whole records written, all taken: the records behind them
                # go in this call too (a server engine's output is a FRAMED
                # run, then a BINARY_RUN of the rest: one call a record
                # would leave the rest to the driver's buffer, copied).
                while 0 < sent < len(data) and not self._out:
                    kind = data[sent]
                    if kind == _FRAMED[0]:
                        more = self._send_framed(data, sent)
                    elif kind == _RUNS[0][0] or kind == _RUNS[1][0]:
                        more = self._send_long_run(data, sent)
                    else:
                        break
                    if more <= sent:
                        break  # (the general path next call, or the rest is in ``_out``)
                    sent = more
                return sent
        # Released on the way out, raising or not: a failed write's error
        # (which the driver keeps) must not hold a view of the caller's
        # buffer, or the caller could never resize it (BufferError).
        with memoryview(data) as view:
            if acked < len(view):
                self._framed = self._frame(view[acked:])
                if self._framed:
                    self._flush()
                    if not self._out:
                        acked += self._framed
                        self._framed = 0
        return acked

    def send_pieces(self, pieces: list[bytes]) -> int:
        """:meth:`send` of the records that are the concatenation of the
        first ``MAX_PIECES`` of ``pieces``. One FRAMED record, its head a
        piece of its own and its frames the pieces after it (a server
        engine's stream runs: ``RSocketEngine.pieces_to_send``), goes to the
        socket as those pieces (``send_pieces`` of the stream below: one
        ``sendmsg`` over TCP), not joined first: a join copied every byte of
        a stream's output once more (bench_tcp.py stream1k, stream1kb over
        ws://: the server's end). What follows such records, or anything
        else, goes as :meth:`send` of those pieces joined."""
        if len(pieces) > MAX_PIECES:
            pieces = pieces[:MAX_PIECES]
        if self._out:
            self._flush()
            if self._out:
                return 0
        done = 0
        if self._framed:
            # Offered again after the socket took part of a record: the
            # rest of it has left from ``_out`` since, so it is written.
            ends = list(accumulate(map(len, pieces)))
            whole = bisect_left(ends, self._framed)
            if whole == len(ends) or ends[whole] != self._framed:
                return self.send(b"".join(pieces))  # (cut inside a piece: as ``send`` does)
            done, self._framed = self._framed, 0
            pieces = pieces[whole + 1 :]
            if not pieces:
                return done
        while pieces:
            head = pieces[0]
            if (
                len(head) == 5
                and head[0] == _FRAMED[0]
                and not self._run_left
                and self._pong is None
                and self.close_sent is None
                and self._open
                and self._keys is None
                and self._ws.state is ConnectionState.OPEN
            ):
                length = int.from_bytes(head[1:5], "big")
                ends = list(accumulate(map(len, pieces[1:])))
                last = bisect_left(ends, length)
                if last < len(ends) and ends[last] == length:  # its frames end with a piece
                    sent = self._send_frames(pieces[1 : last + 2], length)
                    if not sent:
                        return done
                    done += sent
                    pieces = pieces[last + 2 :]
                    continue
            return done + self.send(b"".join(pieces))
        return done

    def _send_frames(self, frames: list[bytes], length: int) -> int:
        """:meth:`send_pieces` of a FRAMED record of ``length`` bytes of
        frames, nothing older queued: what the socket does not take waits
        in ``_out`` (the record counts as written once that left, as in
        :meth:`_send_framed`)."""
        stream = self._stream
        gather = getattr(stream, "send_pieces", None)
        sent: int = gather(frames) if gather is not None else stream.send(b"".join(frames))
        if sent == length:
            return length + 5
        out = self._out
        for piece in frames:
            if sent >= len(piece):
                sent -= len(piece)
                continue
            out += memoryview(piece)[sent:] if sent else piece
            sent = 0
        self._framed = length + 5
        return 0

    def _send_framed(self, data: bytes | bytearray, start: int) -> int:
        """:meth:`send` of the FRAMED record at ``data[start]`` (a server
        engine's stream run: its frames made by the engine) written as it
        is, no framing pass (stream1k, stream1kb of bench_tcp.py over
        WebSocket: the server's end). Returns what ``send`` returns: the
        record's end once the socket took it whole, else ``start`` with the
        rest in ``_out`` (the record counts as written once that left); -1
        when the general path must take it (closing)."""
        length = int.from_bytes(data[start + 1 : start + 5], "big")
        stop = start + 5 + length
        if self._keys is not None or stop > len(data) or self._ws.state is not ConnectionState.OPEN:
            return -1  # (the general path says what is wrong, or drops it)
        with memoryview(data) as view:
            frames = view[start + 5 : stop]
            sent = self._stream.send(frames)
            if sent < length:
                self._out += frames[sent:]
                self._framed = stop - start
                return start
        return stop

    def _send_run(self, data: bytes | bytearray) -> int:
        """The common case of :meth:`send` (what an engine hands over is one
        BINARY_RUN or TEXT_RUN record, nothing is pending): framed from
        ``data`` as it is and written at once, without the record loop or the
        ``_out`` buffer. Returns what ``send`` returns, or -1 when the record
        is not alone or too long for one batch (the general path then takes it)."""
        total = len(data)
        # The commonest write (a request-response exchange's): one record of
        # one message or a shaped batch, checked and framed in one call.
        # wsproto is OPEN here: no Close was sent (send checked), and one
        # received is answered at once.
        frames = frame_record(data, self._keys)
        if frames is None:
            if (
                data[:1] not in _RUNS
                or int.from_bytes(data[1:5], "big") + 5 != total
                or total > SEND_BATCH
                or self._ws.state is not ConnectionState.OPEN
            ):
                return -1
            if data[0] == MessageKind.TEXT_LINES:
                frames = frame_lines(bytes(data[5:]), self._keys)
                text = True
            else:
                text = data[0] == MessageKind.TEXT_RUN
                frames = None if text else encode_batch(data, 5, self._keys)
            if frames is None:
                frames, used = frame_run(data, self._keys, text=text, start=5)
                if used + 5 != total:
                    raise RecordError("a run's message overruns its record")
        if not frames:
            return total
        sent = self._stream.send(frames)
        if sent == len(frames):
            return total
        # The rest waits in ``_out``; the record counts as written once it left.
        self._out += memoryview(frames)[sent:]
        self._framed = total
        return 0

    def _send_long_run(self, data: bytes | bytearray, start: int) -> int:
        """:meth:`send` of a run longer than a batch (a stream's output: the
        whole credit's items in one record): from ``data[start:]``, the
        start of a BINARY_RUN or TEXT_RUN record or of the rest of the run
        being sent, SEND_BATCH bytes of whole messages at a time framed from
        ``data`` as it is and written at once, until the run is done or the
        socket takes less (as TCP: the driver keeps the rest only when the
        socket is full), without the copies of the general path (the
        messages cut out to a chunk, the frames through ``_out``; stream1k
        of bench_tcp.py). Returns what ``send`` returns, or -1 when the
        general path must take it (another record, a message longer than a
        batch, a broken run)."""
        left = self._run_left
        body = start
        if left:
            text = self._run_text
        else:
            kind = data[start : start + 1]
            if kind != _RUNS[0] and kind != _RUNS[1]:
                return -1
            left = int.from_bytes(data[start + 1 : start + 5], "big")
            body = start + 5
            text = kind == _RUNS[1]
        if body + left > len(data) or self._ws.state is not ConnectionState.OPEN:
            return -1  # (a driver offers whole records: the general path says what broke)
        keys = self._keys
        write = self._stream.send
        first = body
        # What is written: up to the batches the socket took whole (the
        # driver then keeps only the rest of ``data``, not all of it).
        written = start
        while True:
            stop = min(body + left, body + SEND_BATCH)
            frames, used = frame_run(data, keys, text=text, start=body, stop=stop)
            if not used:  # the general path frames a longer message, or says what broke
                return -1 if body == first else body
            left -= used
            body += used
            self._run_left = left
            self._run_text = text
            sent = write(frames)
            if sent < len(frames):
                # The rest waits in ``_out``; the messages count as written once it left.
                self._out += memoryview(frames)[sent:]
                self._framed = body - written
                return written
            if not left:
                return body
            written = body

    def shutdown_write(self) -> None:
        """Graceful end: Close 1000 (unless a Close was sent), then FIN."""
        if self._open and self.close_sent is None:
            self._send_close(CloseCode.NORMAL, "")
        self._flush_quietly()
        self._stream.shutdown_write()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._stream.close()

    def abort(self) -> None:
        """Fail the connection (RFC 6455, 7.1.7), dropping unsent messages:
        Close 1011 if it can be written at once (at a frame boundary, without
        blocking), then the TCP connection closes; otherwise a reset (the
        peer sees 1006)."""
        if self._closed:
            return
        self._closed = True
        if self._open and self.close_sent is None and not self._out:
            self._send_close(CloseCode.INTERNAL_ERROR, "connection aborted")
            self._flush_quietly()
            if not self._out:
                self._stream.shutdown_write()
                self._stream.close()
                return
        self._stream.abort()

    # -- receiving ---------------------------------------------------------
    def _receive_head(self, data: bytes) -> None:
        """Server: collect the upgrade request head; wsproto gets exactly the
        head, and the bytes behind it (a client may pipeline its first
        messages) go to the data path once the upgrade is accepted."""
        head = self._head
        start = max(0, len(head) - 3)  # only the new bytes can complete the end
        head += data
        end = head.find(upgrade.HEADER_END, start)
        if end < 0 or end + 4 > MAX_REQUEST_HEAD:
            # The limit holds however the head arrives: whole in one read too.
            if len(head) > MAX_REQUEST_HEAD:
                self._reject(431, "request head too large")
            return
        self._key_ok = upgrade.valid_key(head[: end + 4])
        rest = bytes(head[end + 4 :])
        self._receive(bytes(head[: end + 4]))
        head.clear()
        if self._splitter is not None and rest:
            self._splitter.feed(rest)

    def _on_request(self, event: Request) -> None:
        """Server: the upgrade request (:func:`.upgrade.answer`), accepted
        or refused; records queued before it are framed once accepted."""
        self.request, status, why, chosen = upgrade.answer(
            event, key_ok=self._key_ok, path=self.path, options=self.options, peer=self.peer
        )
        if status is not None:
            self._reject(status, why)
            return
        self.subprotocol = chosen
        self._out += upgrade.acceptance(self._ws, chosen, self.options)
        self._set_open()
        if self._early:
            early, self._early = self._early, []
            self._early_size = 0
            view = memoryview(b"".join(early))
            while view:
                taken = self._frame(view)
                if not taken:
                    break
                view = view[taken:]

    def _reject(self, status: int, message: str) -> None:
        self._out += upgrade.rejection(self._ws, status, message)
        self._eof = True
        self._flush_quietly()
        self._stream.shutdown_write()

    def _take_ready(self) -> bytes:
        ready = self._ready
        data = ready[0] if len(ready) == 1 else b"".join(ready)
        ready.clear()
        return data

    def _set_open(self) -> None:
        self._open = True
        self._splitter = FrameSplitter(
            masked=not self._ws.client,
            max_payload=self._max,
            on_record=self._on_record,
            on_message=self._on_message,
            to_wsproto=self._receive,
            on_oversized=self._on_oversized,
            text_lines=self.options.text_lines,
            binary_spans=self.options.binary_spans,
        )

    def _on_record(self, record: bytes) -> None:
        """Messages from the fast path, as one record (sizes checked, text valid)."""
        if self.close_sent is None and self.close_received is None:
            if record[0] == _FRAMES and self._ready:
                # (a BINARY_FRAMES chunk is a ``recv()`` result of its own)
                _, size, skip = frames_fields(record)
                record = encode_span(record, skip, size)
            self._ready.append(record)
            if record[0] == _BINARY_RUN and len(record) > 7:  # its first message's length
                large = record[5] or record[6] or record[7] >= 126
                self._recv_max = RECV_MAX if large else _NO_MAX
                self._stride = 0
            elif record[0] == _SPAN:  # (a header of 2 bytes: a length under 126)
                _, size, skip = span_fields(record, 5)
                self._recv_max = SPAN_RECV_MAX if skip > 2 else _NO_MAX
                self._stride = skip + size
            elif record[0] == _FRAMES:
                _, size, skip = frames_fields(record)
                self._recv_max = SPAN_RECV_MAX if skip > 2 else _NO_MAX
                self._stride = skip + size
            else:
                self._stride = 0

    def _on_message(self, opcode: int, payload: bytes) -> None:
        """A whole data message from the fast path (size already checked)."""
        if self.close_sent is None and self.close_received is None:
            self._ready.append(encode_record(opcode, payload))

    def _receive(self, data: bytes) -> None:
        ws = self._ws
        try:
            ws.receive_data(data)
            for event in ws.events():
                self._on_event(event)
        except WsRemoteProtocolError as exc:
            # Only the server's upgrade parsing raises (bad HTTP): answer with
            # wsproto's suggested rejection (400) and end.
            hint = exc.event_hint
            status = hint.status_code if isinstance(hint, RejectConnection) else 400
            self._reject(status, f"bad upgrade request: {exc}")
        except WsLocalProtocolError:
            # Data after the WebSocket closed: nothing more to read.
            self._eof = True

    def _on_event(self, event: Event) -> None:
        if isinstance(event, BytesMessage):
            self._on_data(bytes(event.data), event.message_finished, MessageKind.BINARY)
        elif isinstance(event, TextMessage):
            self._on_data(event.data.encode("utf-8"), event.message_finished, MessageKind.TEXT)
        elif isinstance(event, Ping):
            if self._ws.state is ConnectionState.OPEN:
                self._pong = bytes(event.payload)
                self._answer_ping()
        elif isinstance(event, Pong):
            if self._pings:
                self._pings -= 1
                self._ready.append(encode_record(MessageKind.PONG, bytes(event.payload)))
        elif isinstance(event, CloseConnection):
            self._on_close(event)
        elif isinstance(event, Request):
            self._on_request(event)

    def _on_oversized(self, length: int) -> None:
        """A data frame says it is longer than a message may be: fail the
        connection with 1009 now (its bytes would only be thrown away)."""
        reason = f"message bigger than {self._max} bytes"
        self._parts.clear()
        self._send_close(CloseCode.MESSAGE_TOO_BIG, reason)
        self._deliver_close(CloseCode.MESSAGE_TOO_BIG, reason)

    def _on_data(self, chunk: bytes, finished: bool, kind: int) -> None:
        if self.close_sent is not None:
            return  # closing: the peer's data is no longer delivered
        if not self._dropping:
            self._size += len(chunk)
            if self._size > self._max:
                self._parts.clear()
                self._dropping = True
                reason = f"message bigger than {self._max} bytes"
                self._send_close(CloseCode.MESSAGE_TOO_BIG, reason)
                self._deliver_close(CloseCode.MESSAGE_TOO_BIG, reason)
                return
            if chunk:
                self._parts.append(chunk)
        if finished:
            parts = self._parts
            if not self._dropping:
                body = parts[0] if len(parts) == 1 else b"".join(parts)
                self._ready.append(encode_record(kind, body))
            parts.clear()
            self._size = 0
            self._dropping = False

    def _on_close(self, event: CloseConnection) -> None:
        code, reason = int(event.code), event.reason or ""
        state = self._ws.state
        if state is ConnectionState.REMOTE_CLOSING:
            # The peer's Close: answer with its code (RFC 6455, 5.5.1).
            self.close_received = (code, reason)
            self._send_close(code, reason)
        elif state is ConnectionState.OPEN:
            # wsproto could not parse the stream (bad framing: 1002, invalid
            # UTF-8: 1007) and reports the code to fail the connection with.
            self._send_close(code, reason)
        else:
            # CLOSED: the answer to our own Close; the handshake is complete.
            self.close_received = (code, reason)
        self._deliver_close(code, reason)
        if not self._ws.client:
            # The server closes the TCP connection first (RFC 6455, 7.1.1); a
            # client reads on to the end of the stream.
            self._flush_quietly()
            self._stream.shutdown_write()

    def _deliver_close(self, code: int, reason: str) -> None:
        # One CLOSE record per connection: the engine learns the WebSocket is
        # closing once (a later echo of a Close we sent adds nothing).
        if not self._close_delivered:
            self._close_delivered = True
            self._ready.append(encode_close(code, reason))

    # -- sending -----------------------------------------------------------
    def _frame(self, view: memoryview) -> int:
        """Turn whole records from ``view`` into WebSocket bytes in ``_out``;
        returns how many bytes of ``view`` were taken (whole records, or
        whole messages of a run: ``_run_left`` says how much of it is left)."""
        end = len(view)
        off = 0
        limit = SEND_BATCH
        ws = self._ws
        out = self._out
        while True:
            if self._run_left:
                off = self._frame_run(view, off, limit)
                if self._run_left or off >= limit:
                    break
                continue
            if end - off < 5:
                break
            kind = view[off]
            length = int.from_bytes(view[off + 1 : off + 5], "big")
            stop = off + 5 + length
            if stop > end:
                break
            if not self._open:
                if self._early_size + stop - off > MAX_EARLY_OUTPUT:
                    break
                self._early.append(bytes(view[off:stop]))
                self._early_size += stop - off
                off = stop
                continue
            if self.close_sent is not None or ws.state is not ConnectionState.OPEN:
                off = stop  # closing: later records are dropped
                continue
            if kind == 0x12 or kind == 0x11:  # BINARY_RUN / TEXT_RUN: messages follow
                self._run_left = length
                self._run_text = kind == 0x11
                off += 5
                continue
            body = view[off + 5 : stop]
            if kind == 0x15:  # FRAMED: a server engine's frames, as they are
                if self._keys is not None:
                    raise ValueError("a client masks each frame: FRAMED records cannot be sent")
                out += body
            elif kind == 0x13:  # TEXT_LINES: framed whole (a batch of a turn's messages)
                out += frame_lines(bytes(body), self._keys)
            elif kind == 2 or kind == 1:
                # Built here rather than by wsproto (frames.py): the same bytes,
                # several times faster. Text is checked: a bad engine must not
                # make us send invalid UTF-8.
                payload = bytes(body)
                if kind == 1:
                    payload.decode("utf-8")
                keys = self._keys
                out += encode_data_frame(kind, payload, keys.next() if keys else None)
            elif kind == 8:
                code, reason = decode_close(bytes(body))
                self._send_close(code, reason)
            elif kind == 9:
                out += ws.send(Ping(payload=bytes(body)))
                self._pings += 1
            else:
                raise ValueError(f"record kind {kind:#x} cannot be sent")
            off = stop
            if off >= limit:
                break
        return off

    def _frame_run(self, view: memoryview, off: int, limit: int) -> int:
        """Frame the messages of the run being sent from ``off`` (a message
        boundary): up to ``limit`` bytes of ``view``, at least one message.
        Returns the offset after the last message framed."""
        stop = off + self._run_left
        if self.close_sent is not None or self._ws.state is not ConnectionState.OPEN:
            self._run_left = 0  # closing: the rest of the run is dropped
            return stop
        if stop - off < 3:
            raise RecordError("a run ends inside a message length")
        first = 3 + (view[off] << 16 | view[off + 1] << 8 | view[off + 2])
        want = min(stop, off + max(limit - off, first))
        chunk = bytes(view[off:want])
        frames, used = frame_run(chunk, self._keys, text=self._run_text)
        if not used or (want == stop and used < len(chunk)):
            raise RecordError("a run's message overruns its record")
        self._out += frames
        self._run_left -= used
        return off + used

    def _send_close(self, code: int, reason: str) -> None:
        if self.close_sent is not None:
            return
        if code in (CloseCode.NO_STATUS, CloseCode.ABNORMAL):
            code = CloseCode.NORMAL  # local-only codes never go on the wire
        with contextlib.suppress(WsLocalProtocolError):
            self._out += self._ws.send(CloseConnection(code=code, reason=reason or None))
            self.close_sent = (code, reason)

    def _answer_ping(self) -> None:
        """Queue the Pong of the latest Ping if the backlog allows (``_out``
        holds whole frames, so it goes behind them)."""
        payload = self._pong
        if payload is None or len(self._out) > MAX_CONTROL_BACKLOG:
            return
        self._pong = None
        if self._ws.state is ConnectionState.OPEN and self.close_sent is None:
            self._out += self._ws.send(Pong(payload=payload))

    def _flush(self) -> None:
        out = self._out
        if out:
            sent = self._stream.send(out)
            if sent:
                del out[:sent]
        if self._pong is not None:
            self._answer_ping()

    def _flush_quietly(self) -> None:
        with contextlib.suppress(OSError):
            self._flush()


class WebSocketListener:
    """Listens on ``endpoint``; accepted connections do their upgrade (and, for
    ``wss://``, their TLS handshake) inside the loop, in ``recv``."""

    def __init__(
        self,
        endpoint: Endpoint,
        options: WebSocketOptions | None = None,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.options = options if options is not None else WebSocketOptions()
        self._tcp: TcpListener | TlsListener
        if endpoint.scheme == "wss":
            if ssl_context is None:
                raise ValueError(
                    "a wss:// server needs ssl_context (see transport.tls.server_context)"
                )
            self._tcp = TlsListener(endpoint, ssl_context)
        else:
            if ssl_context is not None:
                raise ValueError(f"ssl_context applies to wss:// URLs, not {endpoint}")
            self._tcp = TcpListener(endpoint)
        self.endpoint = self._tcp.endpoint
        self._path = (endpoint.path or "/").partition("?")[0]

    def fileno(self) -> int:
        return self._tcp.fileno()

    def accept(self) -> WebSocketTransport | None:
        """A pending connection (its upgrade still to come), or ``None``."""
        stream = self._tcp.accept()
        if stream is None:
            return None
        return WebSocketTransport(
            stream,
            WSConnection(ConnectionType.SERVER),
            scheme=self.endpoint.scheme,
            path=self._path,
            options=self.options,
            is_open=False,
        )

    def close(self) -> None:
        self._tcp.close()
