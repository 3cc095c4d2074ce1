"""The receive fast path beside wsproto: :class:`FrameSplitter`.

The common case is simple: complete, unfragmented BINARY or TEXT frames.
The splitter finds frame boundaries in the received bytes, handles that case
itself, and hands everything else to wsproto *as whole frames*, so wsproto
always sits at a frame boundary and its state stays right:

* consecutive binary messages become one *run* (:mod:`.runs`: each message
  behind its 3-byte length), same-length frames a batch at a time;
  consecutive text messages (each checked UTF-8) another kind of run (or,
  with ``text_lines``, lines: each message followed by 0xFF); a
  client's text frames (unmasked, under 64 KiB, of any lengths) are cut by a
  loop of their own and checked all at once (``_texts``); each run goes out
  as one record (:mod:`.messages`), the first batch of a record cut
  straight into it, and a frame that a read cut off is completed from the
  head of the next read alone (the rest of that read is split where it
  lies, not copied behind it);
* a message too big for a run (16 MiB and more) is handed over alone, in
  order;
* a complete control frame (ping, pong, close; at most 125 bytes) goes to
  wsproto, which answers and reports it as usual;
* anything unusual (a fragment or continuation, reserved bits or opcodes, a
  mask bit the wrong way round, a non-minimal or oversized length, text that
  is not UTF-8, a frame bigger than the message limit) switches the splitter
  to *passthrough*: that frame's bytes and everything after go to wsproto
  untouched, which then applies every rule of RFC 6455 as without this
  module.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, repeat
from struct import Struct

from .frames import mask
from .messages import MessageKind, encode_span, record_head
from .runs import (
    MAX_BATCH,
    MAX_RUN_MESSAGE,
    MIN_BATCH,
    SHAPED,
    SINGLE_HEADS,
    all_alike,
    count_uniform,
    frames_to_run,
    most_at_once,
    prefix,
    record_of_frames,
    shape_of,
)

__all__ = ["FrameSplitter", "OnMessage", "OnOversized", "OnRecord", "OnWsproto"]

_U16 = Struct(">H")
_U64 = Struct(">Q")
_MAX_CONTROL = 125
_BINARY_FIN = 0x82
_TEXT_FIN = 0x81
_BINARY_RUN = MessageKind.BINARY_RUN

#: What the splitter calls: consecutive messages of one kind as one record
#: (:mod:`.messages`: a BINARY_RUN or TEXT_RUN, each message behind its
#: 3-byte length, or with ``text_lines`` a TEXT_LINES, each text message
#: followed by 0xFF), a whole message too big for a run (opcode, payload),
#: and whole frames or raw bytes for wsproto. Each in the order the frames
#: arrived.
OnRecord = Callable[[bytes], None]
OnMessage = Callable[[int, bytes], None]
OnWsproto = Callable[[bytes], None]
OnOversized = Callable[[int], None]


class FrameSplitter:
    """Splits received bytes at frame boundaries (see the module notes).

    ``masked``: frames from the peer must be masked (we are the server).
    ``max_payload``: a data frame that says it is longer is reported to
    ``on_oversized(length)`` as soon as its header arrives (the connection
    fails with 1009 without waiting for bytes that could only be thrown
    away), and nothing more is split; without ``on_oversized`` it goes to
    wsproto (passthrough), whose message-size check then closes with 1009.
    """

    __slots__ = (
        "_before",
        "_buffer",
        "_exact",
        "_lines",
        "_masked",
        "_max",
        "_need",
        "_on_message",
        "_on_oversized",
        "_on_record",
        "_pending",
        "_run",
        "_run_kind",
        "_spans",
        "_to_wsproto",
        "passthrough",
    )

    def __init__(
        self,
        *,
        masked: bool,
        max_payload: int,
        on_record: OnRecord,
        on_message: OnMessage,
        to_wsproto: OnWsproto,
        on_oversized: OnOversized | None = None,
        text_lines: bool = False,
        binary_spans: bool = False,
    ) -> None:
        self._masked = 0x80 if masked else 0
        #: Batches of equal unmasked binary frames go out as BINARY_SPAN
        #: records, as they arrived (``WebSocketOptions.binary_spans``).
        self._spans = binary_spans and not masked
        #: Text runs as lines (each message followed by 0xFF) instead of
        #: each message behind its length (``WebSocketOptions.text_lines``).
        self._lines = text_lines
        self._max = max_payload
        self._on_record = on_record
        self._on_message = on_message
        self._to_wsproto = to_wsproto
        self._on_oversized = on_oversized
        self._buffer = bytearray()
        self._need = 2  # bytes the buffer must hold before anything can complete
        self._exact = False  # ``_need`` is the whole length of the frame buffered
        self._run = bytearray()  # messages of one kind, each behind its length
        self._run_kind = 2  # their opcode: 2 binary, 1 text
        #: The first batch of same-length binary frames of the record being
        #: built, (data, offset, count, length), cut out of ``data`` only
        #: when the record is handed over, straight into it; ``_before``
        #: holds the messages that came before it, ``_run`` those after.
        self._pending: tuple[bytes, int, int, int] | None = None
        self._before = bytearray()
        #: True once anything unusual was seen: wsproto gets every byte.
        self.passthrough = False

    def feed(self, data: bytes) -> None:
        if self.passthrough:
            self._to_wsproto(data)
            return
        buffer = self._buffer
        start = 0
        if buffer:
            if len(buffer) + len(data) < self._need:
                buffer += data
                return
            if self._exact:
                # The buffered frame is completed alone from the head of
                # ``data``, and the rest is split where it lies: a stream's
                # every read ends inside a frame, and joining the read to it
                # would copy the whole read twice (stream1k of bench_tcp.py).
                start = self._need - len(buffer)
                buffer += memoryview(data)[:start]
                frame = bytes(buffer)
                buffer.clear()
                try:
                    if self._spans and self._span_led_by(frame, data, start):
                        return  # (the frame and a batch behind it: one span, the rest split)
                    self._split(frame)
                    if self.passthrough:  # that frame was unusual: the rest follows it
                        if start < len(data):
                            self._to_wsproto(data[start:])
                        return
                    self._split(data, start)
                finally:
                    self._flush()
                return
            buffer += data
            data = bytes(buffer)
            buffer.clear()
        elif self._whole_batch(data):
            return
        try:
            self._split(data)
        finally:
            self._flush()

    def record(self, data: bytes) -> bytes | None:
        """``data`` as one BINARY_RUN record (:mod:`.messages`) when it is the
        commonest read: nothing buffered, and nothing but one short FIN
        binary frame or the frames of a shaped batch (:func:`.runs.shape_of`:
        4-64 FIN binary frames of one length, 4-125 bytes), the mask bit
        right. ``None``: anything else,
        for :meth:`feed` (which this leaves untouched)."""
        if self.passthrough or self._buffer or len(data) < 2 or data[0] != _BINARY_FIN:
            return None
        expect_mask = self._masked
        n = data[1] ^ expect_mask
        stride = n + (6 if expect_mask else 2)
        count, rest = divmod(len(data), stride)
        if rest or n >= 126 or n > self._max:
            return None
        if count == 1:  # one frame (a sequential exchange's read)
            payload = mask(data[2:6], data[6:]) if expect_mask else data[2:]
            return SINGLE_HEADS[n] + payload
        if not MIN_BATCH <= count <= SHAPED or n < 4:
            return None
        # Both header bytes of every frame checked a column at a time
        # against the cached column they must equal.
        shape = shape_of(n, count)
        second = shape.masked_lengths if expect_mask else shape.lengths
        if data[0::stride] != shape.fins or data[1::stride] != second:
            return None
        return record_of_frames(data, shape, bool(expect_mask))

    def _whole_batch(self, data: bytes) -> bool:
        """The common read, handled without the frame loop: nothing
        buffered, and ``data`` is nothing but short FIN binary frames of one
        length (one, or a batch); they go out as one record (with
        ``binary_spans``, frames of any one length as the read itself, a
        BINARY_FRAMES chunk). False: anything else, left to :meth:`_split`."""
        record = self.record(data)
        if record is None:
            if self._spans and self._frames_alike(data):
                self._on_record(data)  # BINARY_FRAMES: the read as it is, no copy
                return True
            end = len(data)
            if end < 2 or data[0] != _BINARY_FIN:
                return False
            expect_mask = self._masked
            n = data[1] ^ expect_mask
            stride = n + (6 if expect_mask else 2)
            count, rest = divmod(end, stride)
            if (
                rest
                or not 4 <= n < 126
                or n > self._max
                or count <= SHAPED  # (record() took those it could)
                or count > most_at_once(bool(expect_mask))
                or not all_alike(data, 0, end, stride, 2)
            ):
                return False
            head = record_head(_BINARY_RUN, count * (n + 3))
            record = frames_to_run(data, 0, count, n, bool(expect_mask), head)
        self._on_record(record)
        return True

    def _frames_alike(self, data: bytes) -> bool:
        """``data`` is nothing but equal FIN binary frames, unmasked (a
        client's read with ``binary_spans``), at least a batch of them, each
        within the message limit: a BINARY_FRAMES chunk (a stream's read
        whose size the transport made a multiple of its frames': stream1k,
        stream1kb of bench_tcp.py over ws://, the client's end)."""
        end = len(data)
        if end < 4 or data[0] != _BINARY_FIN:
            return False
        n = data[1]
        skip = 2
        if n == 126:
            n = data[2] << 8 | data[3]
            skip = 4
            if n < 126:
                return False  # (non-minimal: the general path fails it)
        elif not 4 <= n < 126:  # (a mask bit, a 64-bit length, or too short)
            return False
        stride = skip + n
        count, rest = divmod(end, stride)
        return (
            not rest
            and count >= MIN_BATCH
            and n <= self._max
            and count_uniform(data, 0, end, stride, data[:skip]) == count
        )

    def wanted(self) -> int | None:
        """Bytes that complete the frame a read cut off (0: none is
        buffered; None: its header was cut, its length not known yet)."""
        if not self._buffer:
            return 0
        return self._need - len(self._buffer) if self._exact else None

    def _span_led_by(self, frame: bytes, data: bytes, start: int) -> bool:
        """With ``binary_spans``: when ``frame`` (completed from the head of
        ``data``) and a batch at ``data[start]`` are FIN binary frames of
        one header, hand them over as one span and split the rest of
        ``data``; True if so. A stream's reads: the frame cut by the last
        read leads this read's span, not a record (and an event) of its own."""
        if frame[0] != _BINARY_FIN:
            return False
        n = frame[1]
        if n == 126:
            n = len(frame) - 4
            ok = 126 <= n <= MAX_BATCH and frame[2:4] == _U16.pack(n)
        else:
            ok = 4 <= n < 126 and len(frame) == 2 + n
        if not ok or n > self._max:
            return False
        head = frame[: len(frame) - n]
        if data[start : start + len(head)] != head:
            return False
        stride = len(frame)
        count = count_uniform(data, start, len(data), stride, head)
        if count < MIN_BATCH:
            return False
        self._batch(data, start, count, n, frame)
        self._split(data, start + count * stride)
        return True

    def _batch(self, data: bytes, off: int, count: int, n: int, lead: bytes = b"") -> bytearray:
        """Take ``count`` FIN binary frames of ``n`` bytes at ``off`` (checked
        by the caller) into the record being built; returns the run to
        append what follows to. The first batch of a record is only noted
        (:meth:`_flush` cuts it straight into the record: no copy of the
        messages into the run and out again, stream16 / stream1k of
        bench_tcp.py); any other joins the run now. With ``binary_spans``
        the batch is a BINARY_SPAN record of its own, the frames as they
        lie: no re-heading at all (the engine's core cuts them as they are;
        stream1k, stream1kb over WebSocket)."""
        if self._spans:
            # The messages before it go first, in the same record stream
            # (joined once with the span: one copy of the read, and the
            # transport hands the read over as one piece).
            before = self._run_record() if self._run else b""
            skip = 2 if n < 126 else 4
            with memoryview(data) as view:
                frames = view[off : off + count * (skip + n)]
                self._on_record(encode_span(frames, skip, n, before, lead))
            return self._run
        if self._pending is None:
            self._pending = (data, off, count, n)
            self._before, self._run = self._run, self._before
            return self._run
        self._run += frames_to_run(data, off, count, n, bool(self._masked))
        return self._run

    def _flush(self) -> None:
        """Hand over the record being built (its messages came before what follows)."""
        run = self._run
        pending = self._pending
        if pending is not None:
            self._pending = None
            data, off, count, n = pending
            before = self._before
            head = record_head(_BINARY_RUN, len(before) + count * (n + 3) + len(run))
            if before:
                head += before
                before.clear()
            record = frames_to_run(data, off, count, n, bool(self._masked), head)
            if run:
                record += run
                run.clear()
            self._on_record(record)
        elif run:
            self._on_record(self._run_record())

    def _run_record(self) -> bytes:
        """The messages of ``_run`` (not empty) as one record; the run is emptied."""
        run = self._run
        kind = self._run_kind
        if kind == 1:
            kind = MessageKind.TEXT_LINES if self._lines else MessageKind.TEXT_RUN
        else:
            kind = _BINARY_RUN
        record = record_head(kind, len(run)) + run
        run.clear()
        return record

    def _split(self, data: bytes, start: int = 0) -> None:
        """The frames of ``data[start:]`` (``start``: a frame boundary)."""
        end = len(data)
        off = start
        expect_mask = self._masked
        head = 6 if expect_mask else 2
        limit = self._max
        most = most_at_once(bool(expect_mask))  # frames converted at once
        last = -1  # the previous binary frame's length: a batch is tried when it repeats
        tried = start  # no batch before this offset (a try found too few)
        run = self._run
        while end - off >= 2:
            b0 = data[off]
            b1 = data[off + 1]
            n = b1 ^ expect_mask
            if b0 == _BINARY_FIN and n < 126 and n <= limit:
                # The hot path: a short FIN binary frame, mask bit right.
                if self._run_kind != 2:
                    self._flush()
                    run = self._run
                    self._run_kind = 2
                stride = head + n
                if (
                    (n == last or off == start)  # a length repeats (or a chunk starts)
                    and off >= tried
                    and n >= 4
                    and end - off >= MIN_BATCH * stride
                ):
                    # Mirrors runs.encode_run's scan (frames -> records): alike by choice.
                    count = count_uniform(data, off, end, stride, data[off : off + 2], most)
                    if count >= MIN_BATCH:
                        run = self._batch(data, off, count, n)
                        off += count * stride
                        last = n
                        continue
                    tried = off + count * stride
                last = n
                stop = off + stride
                if stop > end:
                    self._buffer += memoryview(data)[off:]
                    self._need = stop - off
                    self._exact = True
                    return
                run += prefix(n)
                if expect_mask:
                    run += mask(data[off + 2 : off + 6], data[off + 6 : stop])
                else:
                    run += memoryview(data)[off + 2 : stop]
                off = stop
                continue
            if b0 == _TEXT_FIN and not expect_mask:
                # A client's hot path: short text frames of mixed lengths.
                after = self._texts(data, off, end)
                if after > off:
                    run = self._run
                    off = after
                    last = -1
                    continue
            length = b1 & 0x7F
            at = off + 2
            if length == 126:
                if end - at < 2:
                    break
                (length,) = _U16.unpack_from(data, at)
                at += 2
                if length < 126:
                    return self._pass(data, off)  # non-minimal length (RFC 6455, 5.2)
            elif length == 127:
                if end - at < 8:
                    break
                (length,) = _U64.unpack_from(data, at)
                at += 8
                if length < 0x10000 or length >> 63:
                    return self._pass(data, off)
            if b1 & 0x80 != expect_mask:
                return self._pass(data, off)
            opcode = b0 & 0x0F
            control = opcode & 0x08
            if b0 & 0x70 or not b0 & 0x80:
                return self._pass(data, off)  # reserved bits, or a fragment
            if control:
                if length > _MAX_CONTROL or opcode > 0xA:
                    return self._pass(data, off)
            elif length > limit and self._on_oversized is not None:
                self._flush()  # the messages before it still count
                self.passthrough = True
                self._buffer.clear()
                self._to_wsproto = _discard  # the connection is failing: ignore the rest
                self._on_oversized(length)
                return
            elif opcode not in (1, 2) or length > limit:
                return self._pass(data, off)
            key_at = at
            if expect_mask:
                at += 4
            stop = at + length
            if stop > end:
                self._buffer += memoryview(data)[off:]
                self._need = stop - off
                self._exact = True
                return
            if (  # unmasked, 126..65535 bytes, the length of the frame before
                opcode == 2
                and not expect_mask
                and (length == last or off == start)
                and off >= tried
                and length <= MAX_BATCH
                and end - off >= MIN_BATCH * (stop - off)
            ):
                count = count_uniform(data, off, end, stop - off, data[off:at])
                if count >= MIN_BATCH:
                    if self._run_kind != 2:
                        self._flush()
                        run = self._run
                        self._run_kind = 2
                    run = self._batch(data, off, count, length)
                    off += count * (stop - off)
                    continue
                tried = off + count * (stop - off)
            last = length if opcode == 2 else -1
            payload = data[at:stop]
            if expect_mask:
                payload = mask(data[key_at:at], payload)
            if opcode == 1:
                try:
                    payload.decode("utf-8")
                except UnicodeDecodeError:
                    return self._pass(data, off)  # wsproto fails it with 1007
            if control or length > MAX_RUN_MESSAGE:
                self._flush()  # what came before goes first
                run = self._run
                if control:
                    self._to_wsproto(data[off:stop])
                else:
                    self._on_message(opcode, payload)
            else:
                if self._run_kind != opcode:
                    self._flush()
                    run = self._run
                    self._run_kind = opcode
                if opcode == 1 and self._lines:
                    run += payload
                    run += b"\xff"
                else:
                    run += prefix(length)
                    run += payload
            off = stop
        if off < end:
            self._buffer += memoryview(data)[off:]
        self._need = 2 if end - off < 2 else end - off + 1
        self._exact = False  # (a header cut off: its frame's length is not known yet)

    def _texts(self, data: bytes, off: int, end: int) -> int:
        """Consecutive whole FIN text frames from ``off`` (unmasked, shorter
        than 64 KiB, lengths minimal, within the limit) as run messages,
        without the general path's checks per frame: one loop that only cuts
        payloads, one UTF-8 check of them all (ASCII is valid UTF-8;
        otherwise each is checked alone, and the frames from the first bad
        one on are left to the general path, which passes them to wsproto).
        Returns the offset after the frames taken (``off``: none)."""
        payloads: list[bytes] = []
        take = payloads.append
        limit = self._max
        start = off
        while end - off >= 2 and data[off] == _TEXT_FIN:
            n = data[off + 1]
            if n < 126:
                at = off + 2
            elif n == 126 and end - off >= 4:
                n = data[off + 2] << 8 | data[off + 3]
                if n < 126:
                    break  # non-minimal: the general path passes it
                at = off + 4
            else:
                break  # a 64-bit length, a mask bit, a header cut off
            stop = at + n
            if stop > end or n > limit:
                break
            take(data[at:stop])
            off = stop
        if not payloads:
            return start
        if not b"".join(payloads).isascii():
            off = start
            for i, payload in enumerate(payloads):
                try:
                    payload.decode("utf-8")
                except UnicodeDecodeError:
                    del payloads[i:]
                    break
                off += (2 if len(payload) < 126 else 4) + len(payload)
            if not payloads:
                return start
        if self._run_kind != 1:
            self._flush()
            self._run_kind = 1
        if self._lines:  # each followed by 0xFF: one join here, one split in the engine
            payloads.append(b"")
            self._run += b"\xff".join(payloads)
            return off
        lengths = map(int.to_bytes, map(len, payloads), repeat(3))  # big-endian
        self._run += b"".join(chain.from_iterable(zip(lengths, payloads, strict=True)))
        return off

    def _pass(self, data: bytes, off: int) -> None:
        """Hand everything from ``off`` on to wsproto, now and later."""
        self._flush()  # the messages before the unusual frame still count
        self.passthrough = True
        self._buffer.clear()
        if off < len(data):
            self._to_wsproto(data[off:])


def _discard(data: bytes) -> None:
    pass
