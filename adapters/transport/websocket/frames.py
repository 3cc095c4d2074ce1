"""Fast paths for WebSocket data frames, beside wsproto.

wsproto handles a frame in ~10-15 us of Python (generators, events, copies),
which caps a WebSocket transport far below what the RSocket core does over
TCP. The common case is simple: a complete, unfragmented BINARY or TEXT
frame. :class:`FrameSplitter` finds frame boundaries in the received bytes,
handles that case itself, and hands everything else to wsproto *as whole
frames*, so wsproto always sits at a frame boundary and its state stays
right:

* a complete control frame (ping, pong, close; at most 125 bytes) goes to
  wsproto, which answers and reports it as usual;
* anything unusual (a fragment or continuation, reserved bits or opcodes, a
  mask bit the wrong way round, a non-minimal or oversized length, text that
  is not UTF-8, a frame bigger than the message limit) switches the splitter
  to *passthrough*: that frame's bytes and everything after go to wsproto
  untouched, which then applies every rule of RFC 6455 as without this
  module.

Sending: :func:`encode_data_frame` builds the frame wsproto would (FIN set,
no extensions), masked with a fresh random key on the client side (RFC 6455,
5.3: keys from a strong source, here ``os.urandom``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from struct import Struct

__all__ = ["FrameSplitter", "KeySource", "encode_data_frame", "mask"]

_U16 = Struct(">H")
_U64 = Struct(">Q")
_MAX_CONTROL = 125


def mask(key: bytes, payload: bytes) -> bytes:
    """``payload`` XOR the 4-byte ``key`` repeated (masking and unmasking)."""
    n = len(payload)
    if not n:
        return b""
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(stream, "little")).to_bytes(
        n, "little"
    )


class KeySource:
    """Masking keys from ``os.urandom``, fetched 1024 at a time."""

    __slots__ = ("_keys", "_off")

    def __init__(self) -> None:
        self._keys = b""
        self._off = 0

    def next(self) -> bytes:
        off = self._off
        if off >= len(self._keys):
            self._keys = os.urandom(4096)
            off = 0
        self._off = off + 4
        return self._keys[off : off + 4]


def encode_data_frame(opcode: int, payload: bytes, key: bytes | None) -> bytes:
    """One unfragmented data frame (``opcode`` 1 text, 2 binary); masked with
    ``key`` (a client) or not (``None``, a server)."""
    n = len(payload)
    first = 0x80 | opcode
    bit = 0x80 if key is not None else 0
    if n < 126:
        header = bytes((first, bit | n))
    elif n < 0x10000:
        header = bytes((first, bit | 126)) + _U16.pack(n)
    else:
        header = bytes((first, bit | 127)) + _U64.pack(n)
    if key is None:
        return header + payload
    return header + key + mask(key, payload)


# Receiving ------------------------------------------------------------------------

#: What the splitter calls: a whole data message (opcode, payload), and whole
#: frames or raw bytes for wsproto.
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
        "_masked",
        "_max",
        "_need",
        "_on_message",
        "_on_oversized",
        "_to_wsproto",
        "passthrough",
    )

    def __init__(
        self,
        *,
        masked: bool,
        max_payload: int,
        on_message: OnMessage,
        to_wsproto: OnWsproto,
        on_oversized: OnOversized | None = None,
    ) -> None:
        self._masked = 0x80 if masked else 0
        self._max = max_payload
        self._on_message = on_message
        self._on_oversized = on_oversized
        self._to_wsproto = to_wsproto
        self._buffer = bytearray()
        self._need = 2  # bytes the buffer must hold before anything can complete
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
        self._split(data)

    def _split(self, data: bytes) -> None:
        end = len(data)
        off = 0
        expect_mask = self._masked
        limit = self._max
        on_message = self._on_message
        while end - off >= 2:
            b0 = data[off]
            b1 = data[off + 1]
            length = b1 & 0x7F
            head = off + 2
            if length == 126:
                if end - head < 2:
                    break
                (length,) = _U16.unpack_from(data, head)
                head += 2
                if length < 126:
                    return self._pass(data, off)  # non-minimal length (RFC 6455, 5.2)
            elif length == 127:
                if end - head < 8:
                    break
                (length,) = _U64.unpack_from(data, head)
                head += 8
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
                self.passthrough = True
                self._buffer.clear()
                self._to_wsproto = _discard  # the connection is failing: ignore the rest
                self._on_oversized(length)
                return None
            elif opcode not in (1, 2) or length > limit:
                return self._pass(data, off)
            key_at = head
            if expect_mask:
                head += 4
            stop = head + length
            if stop > end:
                self._buffer += memoryview(data)[off:]
                self._need = stop - off
                return None
            if control:
                self._to_wsproto(data[off:stop])
            else:
                payload = data[head:stop]
                if expect_mask:
                    payload = mask(data[key_at:head], payload)
                if opcode == 1:
                    try:
                        payload.decode("utf-8")
                    except UnicodeDecodeError:
                        return self._pass(data, off)  # wsproto fails it with 1007
                on_message(opcode, payload)
            off = stop
        if off < end:
            self._buffer += memoryview(data)[off:]
        self._need = 2 if end - off < 2 else end - off + 1
        return None

    def _pass(self, data: bytes, off: int) -> None:
        """Hand everything from ``off`` on to wsproto, now and later."""
        self.passthrough = True
        self._buffer.clear()
        if off < len(data):
            self._to_wsproto(data[off:])


def _discard(data: bytes) -> None:
    pass
