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
  loop of their own and checked all at once (``_texts``);
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
from .messages import HEADER_LENGTH
from .runs import (
    MAX_BATCH,
    MAX_MASKED_COUNT,
    MAX_RUN_MESSAGE,
    MIN_BATCH,
    SHAPED,
    SINGLE_HEADS,
    all_alike,
    count_uniform,
    frames_to_run,
    prefix,
    record_of_frames,
    shape_of,
)

__all__ = ["FrameSplitter", "OnMessage", "OnOversized", "OnRun", "OnWsproto"]

_U16 = Struct(">H")
_U64 = Struct(">Q")
_MAX_CONTROL = 125
_BINARY_FIN = 0x82
_TEXT_FIN = 0x81

#: What the splitter calls: consecutive messages of one kind as a run
#: (opcode 2 binary or 1 text; their bytes, each behind its 3-byte length,
#: or for text with ``text_lines`` each followed by 0xFF),
#: a whole message too big for a run (opcode, payload), and whole frames or
#: raw bytes for wsproto. Each in the order the frames arrived.
OnRun = Callable[[int, bytes | bytearray], None]
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
        "_buffer",
        "_lines",
        "_masked",
        "_max",
        "_need",
        "_on_message",
        "_on_oversized",
        "_on_run",
        "_run",
        "_run_kind",
        "_to_wsproto",
        "passthrough",
    )

    def __init__(
        self,
        *,
        masked: bool,
        max_payload: int,
        on_run: OnRun,
        on_message: OnMessage,
        to_wsproto: OnWsproto,
        on_oversized: OnOversized | None = None,
        text_lines: bool = False,
    ) -> None:
        self._masked = 0x80 if masked else 0
        #: Text runs as lines (each message followed by 0xFF) instead of
        #: each message behind its length (``WebSocketOptions.text_lines``).
        self._lines = text_lines
        self._max = max_payload
        self._on_run = on_run
        self._on_message = on_message
        self._to_wsproto = to_wsproto
        self._on_oversized = on_oversized
        self._buffer = bytearray()
        self._need = 2  # bytes the buffer must hold before anything can complete
        self._run = bytearray()  # messages of one kind, each behind its length
        self._run_kind = 2  # their opcode: 2 binary, 1 text
        #: True once anything unusual was seen: wsproto gets every byte.
        self.passthrough = False

    def feed(self, data: bytes) -> None:
        if self.passthrough:
            self._to_wsproto(data)
            return
        buffer = self._buffer
        if buffer:
            buffer += data
            if len(buffer) < self._need:
                return
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
        length (one, or a batch); they go out as one run. False: anything
        else, left to :meth:`_split`."""
        end = len(data)
        if end < 2 or data[0] != _BINARY_FIN:
            return False
        expect_mask = self._masked
        n = data[1] ^ expect_mask
        if n >= 126 or n > self._max:
            return False
        stride = n + (6 if expect_mask else 2)
        if end == stride:  # one frame
            payload = mask(data[2:6], data[6:]) if expect_mask else data[2:]
            run = prefix(n) + payload
        else:
            count, rest = divmod(end, stride)
            if rest or n < 4 or count < MIN_BATCH:
                return False
            if count <= SHAPED:
                record = self.record(data)
                if record is None:
                    return False
                run = record[HEADER_LENGTH:]
            elif (
                count > (MAX_MASKED_COUNT if expect_mask else count)
                or not all_alike(data, 0, end, stride, 2)
            ):
                return False
            else:
                run = frames_to_run(data, 0, count, n, bool(expect_mask))
        self._on_run(2, run)
        return True

    def _flush(self) -> None:
        """Hand over the run being built (its messages came before what follows)."""
        run = self._run
        if run:
            self._run = bytearray()
            self._on_run(self._run_kind, run)

    def _split(self, data: bytes) -> None:
        end = len(data)
        off = 0
        expect_mask = self._masked
        head = 6 if expect_mask else 2
        limit = self._max
        most = MAX_MASKED_COUNT if expect_mask else 1 << 62  # frames unmasked at once
        last = -1  # the previous binary frame's length: a batch is tried when it repeats
        tried = 0  # no batch before this offset (a try found too few)
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
                    (n == last or not off)  # a length repeats (or a chunk starts)
                    and off >= tried
                    and n >= 4
                    and end - off >= MIN_BATCH * stride
                ):
                    # Mirrors runs.encode_run's scan (frames -> records): alike by choice.
                    count = count_uniform(data, off, end, stride, data[off : off + 2], most)
                    if count >= MIN_BATCH:
                        run += frames_to_run(data, off, count, n, bool(expect_mask))
                        off += count * stride
                        last = n
                        continue
                    tried = off + count * stride
                last = n
                stop = off + stride
                if stop > end:
                    self._buffer += memoryview(data)[off:]
                    self._need = stop - off
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
                return
            if (  # unmasked, 126..65535 bytes, the length of the frame before
                opcode == 2
                and not expect_mask
                and (length == last or not off)
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
                    run += frames_to_run(data, off, count, length, False)
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
