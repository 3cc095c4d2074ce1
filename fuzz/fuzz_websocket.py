"""Fuzz target: the WebSocket transport's receive path (``adapters/websocket.py``:
the data-frame fast path of ``ws_frames`` plus wsproto), on an open
connection, as a server (frames from a client) or a client.

Rule: ``recv`` raises nothing but ``BlockingIOError`` (nothing ready yet) and
returns whole message records only; no message above ``max_message_size``
reaches the engine; text is valid UTF-8; at most one CLOSE record, and
nothing after it; while no 1009 applies, the messages delivered are exactly
those wsproto alone finds in the same bytes before its first Close (a
differential test of the fast path); everything the transport writes (pongs,
Close) parses cleanly for the peer.
Input: byte 0: bit 0 role (0 server, 1 client), bits 1-3 chunk size seed,
bit 4 ``text_lines`` (text runs as TEXT_LINES records, as Ditto reads them),
bit 5 ``binary_spans`` (a client's batches as BINARY_SPAN records, as
RSocket reads them), bit 6 the pure-Python masking paths instead of the C
extension (when it was built);
byte 1: ``max_message_size`` (0: 16 MiB, else 4·b); rest: the peer's bytes
after the upgrade. Seeds: ``python fuzz/fuzz_websocket.py --make-corpus``.
"""

from __future__ import annotations

import contextlib
import sys

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs.adapters.transport.websocket import WebSocketOptions, frames
    from sansrs.adapters.transport.websocket.messages import (
        CloseCode,
        MessageKind,
        MessageReader,
        decode_close,
    )
    from sansrs.adapters.transport.websocket.transport import WebSocketTransport
    from wsproto import ConnectionType, WSConnection
    from wsproto.connection import Connection
    from wsproto.events import (
        AcceptConnection,
        CloseConnection,
        Event,
        Message,
        Request,
        TextMessage,
    )


class FakeStream:
    """The byte stream below the transport: chunks in, writes collected."""

    peer = "fuzz"

    def __init__(self) -> None:
        self.chunk = b""
        self.written = bytearray()

    def fileno(self) -> int:
        return -1

    def recv(self, max_bytes: int = 0) -> bytes:
        chunk, self.chunk = self.chunk, b""
        return chunk

    def send(self, data: bytes | bytearray | memoryview) -> int:
        self.written += data
        return len(data)

    def shutdown_write(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _open(
    client: bool, max_size: int, lines: bool = False, spans: bool = False
) -> tuple[WebSocketTransport, FakeStream]:
    """An open transport of the given role, upgraded in memory."""
    stream = FakeStream()
    options = WebSocketOptions(max_message_size=max_size, text_lines=lines, binary_spans=spans)
    ours = WSConnection(ConnectionType.CLIENT if client else ConnectionType.SERVER)
    if client:
        peer = WSConnection(ConnectionType.SERVER)
        peer.receive_data(ours.send(Request(host="fuzz", target="/")))
        request = next(peer.events())
        assert isinstance(request, Request)
        ours.receive_data(peer.send(AcceptConnection()))
        assert isinstance(next(ours.events()), AcceptConnection)
        transport = WebSocketTransport(
            stream, ours, scheme="ws", path="/", options=options, is_open=True
        )
        return transport, stream
    transport = WebSocketTransport(
        stream, ours, scheme="ws", path="/", options=options, is_open=False
    )
    head = b"GET / HTTP/1.1\r\nHost: fuzz\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    head += b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    stream.chunk = head
    with contextlib.suppress(BlockingIOError):  # the upgrade gives the engine nothing
        transport.recv()
    assert stream.written.startswith(b"HTTP/1.1 101 "), bytes(stream.written[:40])
    stream.written.clear()
    return transport, stream


def _wsproto_messages(client: bool, data: bytes) -> list[tuple[int, bytes]]:
    """Whole messages wsproto alone finds before its first Close."""
    conn = Connection(ConnectionType.CLIENT if client else ConnectionType.SERVER)
    conn.receive_data(data)
    out: list[tuple[int, bytes]] = []
    parts: list[bytes] = []
    for ev in conn.events():
        if isinstance(ev, CloseConnection):
            break
        if isinstance(ev, Message):
            parts.append(ev.data.encode() if isinstance(ev.data, str) else bytes(ev.data))
            if ev.message_finished:
                out.append((1 if isinstance(ev, TextMessage) else 2, b"".join(parts)))
                parts = []
    return out


def _peer_events(client: bool, written: bytes) -> list[Event]:
    """What the peer makes of our output (after the upgrade)."""
    peer = Connection(ConnectionType.SERVER if client else ConnectionType.CLIENT)
    peer.receive_data(written)
    return list(peer.events())


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    client = bool(data[0] & 1)
    chunk = 1 + ((data[0] >> 1) & 7) * 37
    max_size = 4 * data[1] if data[1] else 16 * 1024 * 1024
    wire = data[2:]
    frames.C_MASKING = None if data[0] & 0x40 else frames.C_EXTENSION
    transport, stream = _open(client, max_size, bool(data[0] & 0x10), bool(data[0] & 0x20))
    reader = MessageReader()  # runs, lines and spans come out one message per record
    records: list[tuple[int, bytes]] = []
    for i in range(0, len(wire), chunk):
        stream.chunk = wire[i : i + chunk]
        try:
            got = transport.recv()
        except BlockingIOError:
            continue
        if not got:
            break
        records += reader.feed(got)
        if reader.pending:
            raise AssertionError("recv returned a partial record")
    closes = [i for i, (kind, _) in enumerate(records) if kind == MessageKind.CLOSE]
    if len(closes) > 1 or (closes and closes[0] != len(records) - 1):
        raise AssertionError(f"CLOSE not last and single: {records!r}")
    messages = [(k, p) for k, p in records if k != MessageKind.CLOSE]
    for kind, payload in messages:
        if kind not in (MessageKind.TEXT, MessageKind.BINARY):
            raise AssertionError(f"unexpected record kind {kind}")
        if len(payload) > max_size:
            raise AssertionError(f"{len(payload)}-byte message over the {max_size} limit")
        if kind == MessageKind.TEXT:
            payload.decode("utf-8")
    too_big = closes and decode_close(records[-1][1])[0] == CloseCode.MESSAGE_TOO_BIG
    if not too_big and messages != _wsproto_messages(client, wire):
        raise AssertionError("the fast path and wsproto disagree")
    # Our output parses for the peer: the only Close it sees is the one we sent.
    sent = transport.close_sent
    for ev in _peer_events(client, bytes(stream.written)):
        if isinstance(ev, CloseConnection):
            if sent is None or ev.code != sent[0]:
                raise AssertionError(f"our output does not parse: {ev!r}, sent {sent!r}")
            if len(sent[1].encode()) <= 123 and (ev.reason or "") != sent[1]:
                raise AssertionError(f"Close reason changed: {ev!r}, sent {sent!r}")


def make_corpus() -> None:
    import hashlib
    from pathlib import Path

    from sansrs.adapters.transport.websocket.frames import KeySource, encode_data_frame
    from wsproto.frame_protocol import FrameProtocol

    folder = Path(__file__).resolve().parent / "corpus" / "websocket"
    folder.mkdir(parents=True, exist_ok=True)
    keys = KeySource()
    seeds: list[bytes] = []
    for client in (0, 1):
        # Frames the peer sends: masked towards a server (client == 0).
        proto = FrameProtocol(client=not client, extensions=[])
        key = None if client else keys.next()
        binary = encode_data_frame(2, b"\x00\x00\x00\x01\x28\x20abc", key)
        text = encode_data_frame(1, "h\u00e9llo".encode(), key)
        fragmented = bytes(proto.send_data(b"ab", False) + proto.send_data(b"cd", True))
        ping = bytes(proto.ping(b"p"))
        close = bytes(proto.close(1000, "bye"))
        big = encode_data_frame(2, b"x" * 300, key)
        seeds += [
            bytes([client, 0]) + binary + text + ping + binary,
            bytes([client | 6, 0]) + fragmented + binary + close + binary,
            bytes([client, 50]) + big + binary,
            bytes([client | 2, 0]) + text[:-1] + b"\xff" + binary,
            bytes([client, 0]) + b"\x82\x7f" + (1 << 40).to_bytes(8, "big"),
        ]
    # A client's text frames of mixed lengths (the splitter's text path):
    # short, 16-bit lengths, non-ASCII, then one that is not UTF-8.
    texts = b"".join(encode_data_frame(1, t.encode(), None)
                     for t in ("a" * 5, "b" * 200, "\u00e9" * 70, "c" * 126))
    seeds += [bytes([1, 0]) + texts, bytes([5, 0]) + texts + b"\x81\x02\xc3(" + texts]
    # The same as TEXT_LINES (bit 4), with an empty text message, and a
    # server's mixed masked text and binary frames.
    empty = encode_data_frame(1, b"", None)
    seeds += [bytes([0x11, 0]) + texts + empty + texts,
              bytes([0x15, 0]) + texts + b"\x81\x02\xc3(" + texts]
    masked_texts = b"".join(encode_data_frame(1, t.encode(), keys.next())
                            for t in ("", "x" * 130, "\u00e9" * 3))
    seeds += [bytes([0x10, 0]) + masked_texts + encode_data_frame(2, b"bin", keys.next())
              + masked_texts]
    # Reads that are whole shaped batches (the transport's record path):
    # chunks of 112 bytes are 4 masked 22-byte frames (a server's reads),
    # of 260 bytes 10 unmasked 24-byte frames (a client's); then the same
    # with one frame unlike the others, and a Close in the middle.
    def frames(n: int, count: int, masked: bool, odd: int = -1) -> bytes:
        return b"".join(
            encode_data_frame(1 if i == odd else 2, bytes([65 + i % 26]) * n,
                              keys.next() if masked else None)
            for i in range(count)
        )

    for client, role, n in ((0, 3 << 1, 22), (1, 1 | 7 << 1, 24)):
        count = 16 if not client else 20
        seeds += [
            bytes([role, 0]) + frames(n, count, not client),
            bytes([role, 0]) + frames(n, count, not client, odd=5),
            bytes([role, 0]) + frames(n, count // 2, not client)
            + bytes(FrameProtocol(client=not client, extensions=[]).close(1000, "x"))
            + frames(n, count // 2, not client),
        ]
    # A server's reads of masked batches unmasked by the pure-Python paths
    # (bit 6), beside the C extension's above.
    seeds += [bytes([0x40 | 3 << 1, 0]) + frames(22, 3000, True),
              bytes([0x40 | 7 << 1, 0]) + frames(125, 70, True, odd=40)]
    # A client's stream read as spans (bit 5): batches of 1 KiB and 22-byte
    # items in reads that cut frames, one frame unlike the others, a ping.
    stream = frames(1030, 12, False) + frames(22, 40, False, odd=30) + bytes(
        FrameProtocol(client=False, extensions=[]).ping(b"p")) + frames(1030, 6, False)
    seeds += [bytes([0x21 | 3 << 1, 0]) + stream, bytes([0x21 | 7 << 1, 0]) + stream]
    for raw in seeds:
        (folder / hashlib.sha1(raw).hexdigest()[:16]).write_bytes(raw)


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-corpus"]:
        make_corpus()
    else:
        run(test_one_input)
