"""The whole-record fast paths of the WebSocket transport (runs.frame_record,
FrameSplitter.record, KeySource.spread) against the general paths and
wsproto: the same frames out, the same records in, fresh keys that never
reuse a random byte, and ``None`` (the general path) for anything else."""

from __future__ import annotations

import contextlib
import random
from itertools import accumulate, pairwise
from unittest.mock import patch

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sansrs.adapters.drive import Loop, LoopConnection
from sansrs.adapters.transport.websocket import WebSocketOptions
from sansrs.adapters.transport.websocket import transport as ws_transport
from sansrs.adapters.transport.websocket.frames import KeySource, encode_data_frame
from sansrs.adapters.transport.websocket.messages import (
    CloseCode,
    MessageKind,
    MessageReader,
    encode_close,
    encode_lines,
    encode_ping,
    encode_record,
)
from sansrs.adapters.transport.websocket.messages import encode_run as encode_record_run
from sansrs.adapters.transport.websocket.runs import (
    MIN_BATCH,
    SHAPED,
    encode_run,
    frame_record,
    prefix,
    shape_of,
)
from sansrs.adapters.transport.websocket.splitter import FrameSplitter
from sansrs.adapters.transport.websocket.transport import WebSocketTransport
from wsproto import WSConnection
from wsproto.connection import ConnectionType
from wsproto.events import AcceptConnection, Ping, Request

from fuzz.fuzz_websocket import FakeStream
from tests.adapters.drive.test_latency_path import Echo
from tests.adapters.transport.masking_paths import BOTH, masking
from tests.adapters.transport.test_websocket_frames import Collector, wsproto_messages


def run_of(messages: list[bytes]) -> bytes:
    return b"".join(prefix(len(m)) + m for m in messages)


def batch(n: int, count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(n) for _ in range(count)]


def splitter(masked: bool, max_payload: int = 1 << 20) -> FrameSplitter:
    def refuse(*args: object) -> None:
        raise AssertionError(f"the record path handed something on: {args!r}")

    return FrameSplitter(
        masked=masked, max_payload=max_payload, on_record=refuse, on_message=refuse,
        to_wsproto=refuse,
    )


def unique_windows(size: int, seed: int) -> bytes:
    """Random bytes in which every 4-byte window occurs once (so a key says
    where in the stream it came from): a window seen before gets its last
    byte drawn again."""
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(size))
    seen: set[bytes] = set()
    i = 0
    while i <= size - 4:
        window = bytes(data[i : i + 4])
        if window in seen:
            data[i + 3] = rng.randrange(256)  # only windows not yet seen change
            continue
        seen.add(window)
        i += 1
    return bytes(data)


class Recorded:
    """A random source handing out ``stream`` in order."""

    def __init__(self, stream: bytes) -> None:
        self.stream = stream
        self.used = 0

    def __call__(self, size: int) -> bytes:
        start, self.used = self.used, self.used + size
        assert self.used <= len(self.stream), "the test's stream is too short"
        return self.stream[start : self.used]


SHAPES = st.tuples(st.integers(4, 125), st.integers(MIN_BATCH, SHAPED))


@settings(max_examples=150, deadline=None)
@given(SHAPES, st.integers(0, 2**32), st.booleans())
def test_frame_record_frames_a_shaped_batch_as_the_general_path(
    shape: tuple[int, int], seed: int, client: bool
) -> None:
    n, count = shape
    messages = batch(n, count, seed)
    record = encode_record_run(run_of(messages))
    for data in (record, bytearray(record)):
        frames = frame_record(data, KeySource() if client else None)
        assert frames is not None
        if client:
            assert len(frames) == count * (n + 6)
            assert wsproto_messages(ConnectionType.SERVER, frames) == [(2, m) for m in messages]
        else:  # byte for byte the general path's (and wsproto's) frames
            assert frames == encode_run(run_of(messages), None)[0]
            assert frames == b"".join(encode_data_frame(2, m, None) for m in messages)


@BOTH
@pytest.mark.parametrize("fill", [b"\xff", b"\x00", b"\x80\x7f", b"\xff\xff\xff\x00"])
def test_masked_batches_are_exact_whatever_the_keys(path: str, fill: bytes) -> None:
    """Keys of all-ones bytes (the carries a tiling by multiplication must
    never make) and other fixed patterns: every length class of the tile
    (a payload 0-3 bytes short of whole keys), both the record path out
    and the splitter's record path back."""
    keys = KeySource(lambda size: (fill * size)[:size])
    with masking(path):
        _masked_batches_both_ways(keys)


def _masked_batches_both_ways(keys: KeySource) -> None:
    for n in (4, 5, 6, 7, 21, 22, 23, 24, 25, 124, 125):
        for count in (MIN_BATCH, 17, SHAPED):
            messages = batch(n, count, n * count)
            run = run_of(messages)
            frames = frame_record(encode_record_run(run), keys)
            assert frames is not None
            assert wsproto_messages(ConnectionType.SERVER, frames) == [(2, m) for m in messages]
            assert splitter(masked=True).record(frames) == encode_record_run(run)


@settings(max_examples=150, deadline=None)
@given(SHAPES, st.integers(0, 2**32), st.booleans())
def test_splitter_record_reads_a_shaped_batch_as_the_general_path(
    shape: tuple[int, int], seed: int, masked: bool
) -> None:
    n, count = shape
    messages = batch(n, count, seed)
    wire, _ = encode_run(run_of(messages), KeySource() if masked else None)
    record = splitter(masked).record(wire)
    assert record == encode_record_run(run_of(messages))
    expected = [(MessageKind.BINARY_RUN, run_of(messages))]
    assert MessageReader(keep_runs=True).feed(record) == expected
    receiver = ConnectionType.SERVER if masked else ConnectionType.CLIENT
    general = Collector(receiver)
    general.splitter.feed(wire)
    assert general.got == [(2, m) for m in messages]


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=125), st.booleans())
def test_one_message_takes_the_record_paths_both_ways(message: bytes, client: bool) -> None:
    """A sequential exchange writes and reads one message at a time: one
    record, one frame, as the general path and wsproto make them."""
    record = encode_record_run(prefix(len(message)) + message)
    frame = frame_record(bytearray(record), KeySource() if client else None)
    assert frame is not None
    receiver = ConnectionType.SERVER if client else ConnectionType.CLIENT
    assert wsproto_messages(receiver, frame) == [(2, message)]
    if not client:
        assert frame == encode_data_frame(2, message, None)
    assert splitter(masked=client).record(frame) == record
    if message:  # over the limit: left to feed, which fails it with 1009
        assert splitter(masked=client, max_payload=len(message) - 1).record(frame) is None
    assert frame_record(record[:-1], None) is None  # a record cut short
    assert frame_record(record + b"\x02", None) is None  # not alone


def test_frame_record_leaves_everything_else_to_the_general_path() -> None:
    messages = [b"q" * 22] * 16
    good = encode_record_run(run_of(messages))
    assert frame_record(good, None) is not None
    bad = [
        good[:-1],  # the record's length says more than there is
        good + encode_record_run(run_of(messages)),  # not alone
        bytes((MessageKind.TEXT_RUN,)) + good[1:],  # text
        bytes((MessageKind.BINARY,)) + good[1:],  # not a run
        encode_record_run(run_of([b"q" * 22] * (MIN_BATCH - 1))),  # too few
        encode_record_run(run_of([b"q" * 22] * (SHAPED + 1))),  # too many
        encode_record_run(run_of([b"q" * 3] * 16)),  # too short
        encode_record_run(run_of([b"q" * 126] * 16)),  # a 16-bit frame length
        encode_record_run(run_of([b"q" * 21, b"q" * 23] + [b"q" * 22] * 14)),
        b"",
        b"\x12",
    ]
    for column in range(3):  # one length of the batch unlike the others
        for index in (1, 8, 15):
            changed = bytearray(good)
            changed[5 + index * 25 + column] ^= 0x01
            bad.append(bytes(changed))
    for data in bad:
        assert frame_record(data, None) is None
        assert frame_record(data, KeySource()) is None


def test_splitter_record_leaves_everything_else_to_feed() -> None:
    messages = [b"r" * 22] * 16
    masked, _ = encode_run(run_of(messages), KeySource())
    plain, _ = encode_run(run_of(messages), None)
    assert splitter(True).record(masked) is not None
    assert splitter(False).record(plain) is not None
    assert splitter(True).record(plain) is None  # the mask bit the wrong way
    assert splitter(False).record(masked) is None
    assert splitter(True, max_payload=21).record(masked) is None  # over the limit: feed fails it
    for wire, is_masked in ((masked, True), (plain, False)):
        stride = len(wire) // 16
        assert splitter(is_masked).record(wire[:-1]) is None  # a frame cut off
        assert splitter(is_masked).record(wire[: 3 * stride]) is None  # too few
        for at, value in ((0, 0x02), (0, 0x81), (0, 0xC2), (1, 0x15)):
            for index in (1, 8, 15):  # a fragment, text, RSV1, another length
                changed = bytearray(wire)
                changed[index * stride + at] = value ^ (0x80 if at and is_masked else 0)
                assert splitter(is_masked).record(bytes(changed)) is None
        # Something buffered or passed through: the bytes are not a whole read.
        held = splitter(is_masked)
        held._buffer += b"\x82"
        assert held.record(wire) is None
        held = splitter(is_masked)
        held.passthrough = True
        assert held.record(wire) is None


def test_websocket_5_3_every_key_is_fresh_random_bytes_never_reused() -> None:
    """RFC 6455, 5.3: each frame's key is new random bytes. Keys spread from
    random windows (several batches of one shape per window, shifted) and
    keys taken one by one, shapes taking turns: every key is 4 bytes of
    the source's output, and no byte of it is in two keys."""
    source = Recorded(unique_windows(1 << 19, 5))
    where = {source.stream[i : i + 4]: i for i in range(len(source.stream) - 3)}
    keys = KeySource(source)
    used: list[int] = []
    rng = random.Random(7)
    for _ in range(80):
        if rng.random() < 0.2:
            found = [keys.next() for _ in range(rng.randint(1, 5))]
            used += [where[key] for key in found]
            continue
        # One shape several batches in a row (its window used up, or not).
        shape = shape_of(rng.choice((4, 5, 22, 23, 61)), rng.choice((MIN_BATCH, 16, SHAPED)))
        for _ in range(rng.randint(1, 2 * shape.stride // 4 + 1)):
            keyed = keys.spread(shape.key_fields, shape.stride, shape.frames)
            assert keyed & ~shape.key_fields == 0  # keys only where the fields are
            frames = keyed.to_bytes(shape.masked_size, "little")
            found = [frames[i + 2 : i + 6] for i in range(0, shape.masked_size, shape.stride)]
            used += [where[key] for key in found]  # from the source, at one place
    assert source.used > 0
    used.sort()
    for a, b in pairwise(used):
        assert a + 4 <= b, "a random byte in two keys"


def test_key_windows_serve_one_shape_then_a_fresh_one() -> None:
    """A window (random bytes as long as the frames) serves stride // 4
    batches of its shape, each shifted 4 bytes; then, or for another
    shape, the keys come from random bytes further on."""
    source = Recorded(unique_windows(1 << 14, 1))
    keys = KeySource(source)

    def places(n: int, count: int) -> list[int]:
        shape = shape_of(n, count)
        frames = keys.spread(shape.key_fields, shape.stride, count).to_bytes(
            count * shape.stride, "little"
        )
        stream = source.stream
        return [stream.index(frames[i * shape.stride + 2 : i * shape.stride + 6])
                for i in range(count)]

    window = 16 * 28 + 2  # 16 frames of 22-byte payloads
    first = [places(22, 16) for _ in range(7)]  # stride 28: 7 phases
    for phase, at in enumerate(first):
        assert at == [28 * i + 2 + 4 * phase for i in range(16)]
    assert min(places(22, 16)) >= window  # the window used up: a new one
    assert min(places(23, 16)) >= 2 * window  # another shape: a new one


def open_pair(
    options: WebSocketOptions | None = None,
) -> tuple[WebSocketTransport, FakeStream, WebSocketTransport, FakeStream]:
    """A client and a server transport, upgraded in memory (the fuzz
    target's stream below each: ``chunk`` is the next read, writes kept)."""
    options = options or WebSocketOptions()
    client_stream, server_stream = FakeStream(), FakeStream()
    ours = WSConnection(ConnectionType.CLIENT)
    server = WebSocketTransport(server_stream, WSConnection(ConnectionType.SERVER), scheme="ws",
                                path="/", options=options, is_open=False)
    server_stream.chunk = ours.send(Request(host="memory", target="/"))
    with pytest.raises(BlockingIOError):  # the upgrade gives the engine nothing
        server.recv()
    ours.receive_data(bytes(server_stream.written))
    assert isinstance(next(ours.events()), AcceptConnection)
    server_stream.written.clear()
    client = WebSocketTransport(client_stream, ours, scheme="ws", path="/",
                                options=options, is_open=True)
    return client, client_stream, server, server_stream


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(max_size=40) | st.integers(100, 70000).map(lambda n: "\u00e9" * n),
             min_size=1, max_size=6),
    st.booleans(),
)
def test_text_lines_cross_a_transport_pair_both_ways(texts: list[str], behind: bool) -> None:
    """A TEXT_LINES record sent (alone: the direct path; ``behind`` another
    record: the general one; also bigger than a send batch) arrives as the
    same TEXT_LINES record with ``text_lines``, and as the same messages
    without it."""
    lines = b"".join(t.encode() + b"\xff" for t in texts)
    record = encode_lines(lines)
    ping = encode_ping(b"p")
    for text_lines in (True, False):
        client, client_stream, server, server_stream = open_pair(
            WebSocketOptions(text_lines=text_lines)
        )
        for sender, sent, receiver, received in (
            (client, client_stream, server, server_stream),
            (server, server_stream, client, client_stream),
        ):
            offered = bytearray(ping + record if behind else record)
            while offered:  # what the driver does: offer the rest again
                taken = sender.send(offered)
                del offered[:taken]
            received.chunk = bytes(sent.written)
            sent.written.clear()
            got = MessageReader(keep_runs=True).feed(receiver.recv())
            received.written.clear()  # the Pong answering the Ping
            kinds = {kind for kind, _ in got}
            if text_lines:
                assert kinds == {MessageKind.TEXT_LINES}
                assert b"".join(p for _, p in got) == lines
            else:
                assert MessageKind.TEXT_LINES not in kinds
                assert [p for _, p in MessageReader().feed(b"".join(
                    encode_record_run(p, text=True) if k == MessageKind.TEXT_RUN
                    else encode_record(k, p) for k, p in got
                ))] == [t.encode() for t in texts]


def test_shaped_records_cross_a_transport_pair_both_ways() -> None:
    client, client_stream, server, server_stream = open_pair()
    for count in (1, MIN_BATCH, 16, SHAPED):
        run = run_of(batch(22, count, count))
        record = encode_record_run(run)
        assert client.send(bytearray(record)) == len(record)
        server_stream.chunk = bytes(client_stream.written)
        client_stream.written.clear()
        assert server.recv() == record  # the masked frames, one record
        assert server.send(bytearray(record)) == len(record)
        assert bytes(server_stream.written) == encode_run(run, None)[0]
        client_stream.chunk = bytes(server_stream.written)
        server_stream.written.clear()
        assert client.recv() == record


def test_a_closing_transport_leaves_shaped_records_to_the_general_path() -> None:
    """Once a Close was sent, what the peer still sends is not delivered and
    what the engine still hands over is not sent (RFC 6455, 5.5.1: no data
    after a Close): as before the record paths."""
    client, client_stream, server, server_stream = open_pair()
    record = encode_record_run(run_of(batch(22, 16, 1)))
    client.send(encode_close(CloseCode.NORMAL, "done"))
    assert client.close_sent == (CloseCode.NORMAL, "done")
    closing = bytes(client_stream.written)
    client_stream.written.clear()
    assert client.send(bytearray(record)) == len(record)  # dropped
    assert client_stream.written == b""
    server.send(bytearray(record))  # the server's data, then it reads the Close
    client_stream.chunk = bytes(server_stream.written)
    with pytest.raises(BlockingIOError):
        client.recv()  # not delivered: this end is closing
    server_stream.written.clear()
    server_stream.chunk = closing
    got = server.recv()
    assert got.startswith(bytes((MessageKind.CLOSE,)))  # the Close, answered
    assert server.close_received is not None and server.close_sent is not None
    server_stream.written.clear()
    client_masked = frame_record(record, KeySource())
    assert client_masked is not None
    server_stream.chunk = client_masked
    with pytest.raises(BlockingIOError):
        server.recv()  # data after the Close: not delivered
    assert server.send(bytearray(record)) == len(record)
    assert server_stream.written == b""


class TrickleStream(FakeStream):
    """A socket that takes at most the next of ``rooms`` bytes per write, in turn."""

    def __init__(self, rooms: list[int]) -> None:
        super().__init__()
        self.rooms = rooms
        self.turn = 0

    def send(self, data: bytes | bytearray | memoryview) -> int:
        room = self.rooms[self.turn % len(self.rooms)]
        self.turn += 1
        taken = bytes(data[:room])
        self.written += taken
        return len(taken)


#: Messages of a long run: batches of one length (both header sizes, one
#: longer than a send batch) and lone ones.
LONG_RUNS = st.lists(
    st.tuples(st.sampled_from([0, 5, 22, 125, 126, 1030, 3000]), st.integers(1, 90)),
    min_size=1,
    max_size=5,
)


@settings(max_examples=80, deadline=None)
@given(
    LONG_RUNS,
    st.lists(st.integers(1, 4000), min_size=1, max_size=4),
    st.booleans(),
    st.booleans(),
)
def test_a_long_run_goes_out_as_the_plain_path_frames_it(
    groups: list[tuple[int, int]], rooms: list[int], client: bool, behind: bool
) -> None:
    """The differential of the send side: a run longer than a send batch
    (framed from the offered bytes a batch at a time, written at once),
    then maybe more records, through a socket that takes a little at a
    time: acknowledged part by part, never more than a batch waiting, and
    on the wire what one frame per message gives (byte for byte unmasked;
    masked, what wsproto reads)."""
    batch_size = 700  # SEND_BATCH, small: every run here is longer
    messages = [bytes([(7 * i + j) % 251]) * n for i, (n, count) in enumerate(groups)
                for j in range(count)]
    record = encode_record_run(run_of(messages))
    more = [b"after", b"and the next run"]
    if behind:
        record += encode_record(MessageKind.BINARY, more[0]) + encode_record_run(run_of(more[1:]))
        messages += more
    assume(len(record) > batch_size)
    transports = open_pair()
    t = transports[0] if client else transports[2]
    stream = TrickleStream(rooms)
    t._stream = stream  # (past the upgrade)
    out = bytearray(record)
    with patch.object(ws_transport, "SEND_BATCH", batch_size):
        while out:
            sent = t.send(out)
            del out[:sent]
            # (a shaped record, 64 short messages at most, is framed whole)
            assert t.buffered <= max(batch_size, SHAPED * (125 + 6)) + 3000 + 14
    wire = bytes(stream.written)
    if client:
        assert wsproto_messages(ConnectionType.SERVER, wire) == [(2, m) for m in messages]
    else:
        assert wire == b"".join(encode_data_frame(2, m, None) for m in messages)


def test_a_driver_hands_a_long_run_over_as_it_is_and_keeps_only_what_the_socket_left() -> None:
    """A server's stream write through the driver (stream1k of
    bench_tcp.py): the record goes to the transport as it is (no copy into
    the driver's buffer first), the batches the socket took whole count as
    written at once, so the driver keeps only the rest of the record; then
    everything drains, on the wire exactly one frame per message."""
    server = open_pair()[2]
    trickle = TrickleStream([10**6, 10**6, 100])  # two batches whole, then a little
    server._stream = trickle
    offered: list[object] = []
    send = server.send

    def recording(data: bytes | bytearray | memoryview) -> int:
        offered.append(data)
        return send(data)

    messages = [bytes([i % 251]) * 22 for i in range(200)]
    record = encode_record_run(run_of(messages))
    loop = Loop(name="ws-driver-write")
    try:
        # (Echo reads nothing here, so writes nothing: the writes are the test's.)
        conn = LoopConnection(loop, server, Echo())  # type: ignore[arg-type]
        with patch.object(ws_transport, "SEND_BATCH", 700), patch.object(server, "send", recording):
            conn.write_bytes(record)
            assert offered[0] is record
            assert len(conn._out) == len(record) - 5 - 2 * 700  # (700: 28 whole messages)
            trickle.rooms = [10**6]
            while conn.buffered:
                conn.write_now()
        assert trickle.written == b"".join(encode_data_frame(2, m, None) for m in messages)
    finally:
        loop.stop(5)


class TricklePieces(TrickleStream):
    """:class:`TrickleStream` with ``send_pieces`` (a socket's ``sendmsg``):
    the pieces each call was handed kept, as they were."""

    def __init__(self, rooms: list[int]) -> None:
        super().__init__(rooms)
        self.calls: list[list[bytes]] = []

    def send_pieces(self, pieces: list[bytes]) -> int:
        self.calls.append(list(pieces))
        return self.send(b"".join(pieces))


def _cut(pieces: list[bytes], sent: int) -> list[bytes]:
    """What a driver keeps of ``pieces`` once ``sent`` bytes were taken."""
    while pieces and sent >= len(pieces[0]):
        sent -= len(pieces[0])
        pieces = pieces[1:]
    if sent:
        pieces = [bytes(pieces[0][sent:]), *pieces[1:]]
    return pieces


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0, 5, 126, 1030]), st.integers(1, 40)),
             min_size=1, max_size=4),
    st.lists(st.integers(1, 5000), min_size=1, max_size=4),
    st.integers(0, 2),
    st.booleans(),
)
def test_a_framed_record_as_pieces_goes_out_as_they_are_whatever_the_socket_takes(
    groups: list[tuple[int, int]], rooms: list[int], behind: int, ping: bool
) -> None:
    """``send_pieces`` of a FRAMED record whose frames are the pieces after
    its head (a server engine's stream runs, not joined): the pieces reach
    the socket's ``send_pieces`` as they are when nothing waits; through a
    socket that takes a little at a time, offered again as a driver does
    (what it did not take, then more records), the wire carries every
    frame once, in order, then what followed; a Ping answered meanwhile
    goes between frames, never inside one."""
    messages = [bytes([(5 * i + j) % 251]) * n for i, (n, count) in enumerate(groups)
                for j in range(count)]
    frames = [encode_data_frame(2, m, None) for m in messages]
    runs = [b"".join(frames[i : i + 7]) for i in range(0, len(frames), 7)]
    length = sum(map(len, runs))
    pieces = [bytes((MessageKind.FRAMED, *length.to_bytes(4, "big"))), *runs]
    more = [b"after", b"and more"][:behind]
    transports = open_pair()
    server, server_stream = transports[2], transports[3]
    stream = TricklePieces(rooms)
    server._stream = stream  # (past the upgrade)
    offered = pieces + [encode_record(MessageKind.BINARY, m) for m in more]
    turn = 0
    pinged = False
    while offered:
        if ping and turn == 1:
            pinged = True
            # A Ping read while what the socket left of a frame may wait:
            # the Pong goes behind it (the read flushes through the stream
            # it reads from, all of it taken).
            server_stream.chunk = transports[0]._ws.send(Ping(payload=b"p"))
            server._stream = server_stream
            with pytest.raises(BlockingIOError):
                server.recv()
            server._stream = stream
            stream.written += server_stream.written
        sent = server.send_pieces(offered)
        if not turn:
            assert stream.calls and stream.calls[0] == runs
            assert all(a is b for a, b in zip(stream.calls[0], runs, strict=True))
        turn += 1
        offered = _cut(offered, sent)
        assert server.buffered <= length + 64  # (the records behind, a Pong)
    while server.buffered:
        assert server.send_pieces([]) == 0
    frames += [encode_data_frame(2, m, None) for m in more]
    wire = bytes(stream.written)
    if pinged:
        pong = encode_data_frame(0xA, b"p", None)
        at = wire.find(pong)
        assert at in {0, *accumulate(map(len, frames))}, "the Pong inside a frame"
        wire = wire[:at] + wire[at + len(pong) :]
    assert wire == b"".join(frames)


def test_a_framed_record_as_pieces_takes_the_plain_path_when_it_cannot_go_as_it_is() -> None:
    """Pieces that are not one FRAMED record made of the pieces after its
    head, or a transport that must not write frames as they are (a Close
    sent, a client's: every frame masked), go as ``send`` of them joined:
    the same as ``send`` gives."""
    frame = encode_data_frame(2, b"x" * 200, None)
    head = bytes((MessageKind.FRAMED, *len(frame).to_bytes(4, "big")))
    short_head = bytes((MessageKind.FRAMED, *(len(frame) + 1).to_bytes(4, "big")))
    for pieces in ([head + frame], [short_head, frame, b"?"]):
        server, stream = open_pair()[2:]
        sent = server.send_pieces(pieces)
        joined = b"".join(pieces)
        plain, plain_stream = open_pair()[2:]
        assert sent == plain.send(joined)
        assert stream.written == plain_stream.written
    server, stream = open_pair()[2:]
    server.send(encode_close(CloseCode.NORMAL, ""))
    stream.written.clear()
    assert server.send_pieces([head, frame]) == len(head) + len(frame)
    assert stream.written == b""  # closing: dropped, as ``send`` drops it
    client = open_pair()[0]
    with pytest.raises(ValueError, match="masks each frame"):
        client.send_pieces([head, frame])


class FramedRuns(Echo):
    """An engine whose output is a WebSocket server's stream runs, taken as
    pieces (as ``RSocketEngine.pieces_to_send``: one FRAMED record head,
    then the runs) from ``GATHER_AT`` queued, else joined."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[bytes] = []

    @property
    def queued_output(self) -> int:
        return sum(map(len, self.runs))

    def pieces_to_send(self, at_least: int) -> list[bytes] | None:
        if self.queued_output < at_least:
            return None
        runs, self.runs = self.runs, []
        return [bytes((MessageKind.FRAMED,)) + sum(map(len, runs)).to_bytes(4, "big"), *runs]

    def data_to_send(self) -> bytes:
        if not self.runs:
            return b""
        return b"".join(self.pieces_to_send(0) or [])


def test_a_driver_writes_a_servers_runs_as_pieces_and_leaves_the_rest_in_the_engine() -> None:
    """A WebSocket server's stream runs through the driver: handed to the
    socket's ``sendmsg`` as the engine's pieces (not joined); what the
    socket leaves waits in the transport, and while it waits the engine's
    newer output stays in the engine (counted by the driver), as over TCP;
    then everything drains, every frame once, in order."""
    server = open_pair()[2]
    trickle = TricklePieces([50_000])
    server._stream = trickle
    frames = [encode_data_frame(2, bytes((i % 251,)) * 1024, None) for i in range(400)]
    runs = [b"".join(frames[i : i + 100]) for i in range(0, 400, 100)]
    engine = FramedRuns()
    loop = Loop(name="ws-driver-pieces")
    try:
        conn = LoopConnection(loop, server, engine)  # type: ignore[arg-type]
        engine.runs = runs[:2]
        conn.write_now(pieces=True)
        assert trickle.calls[0] == runs[:2]
        assert all(a is b for a, b in zip(trickle.calls[0], runs[:2], strict=True))
        assert server.buffered == len(runs[0]) + len(runs[1]) - 50_000
        trickle.rooms = [0]  # the socket is full
        engine.runs = runs[2:]
        conn.write_now(pieces=True)
        assert engine.queued_output == len(runs[2]) + len(runs[3])  # left in the engine
        assert conn._engine_queued is not None and conn._engine_queued() == engine.queued_output
        trickle.rooms = [10**6]
        while conn.buffered or engine.queued_output:
            conn.write_now(pieces=True)
        assert trickle.written == b"".join(frames)
    finally:
        loop.stop(5)


class _MeteredStream(FakeStream):
    """A stream that gives at most what each read asks for, and notes it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def recv(self, max_bytes: int = 0) -> bytes:
        self.asked.append(max_bytes)
        chunk, self.chunk = self.chunk[:max_bytes], self.chunk[max_bytes:]
        return chunk


@pytest.mark.parametrize("n", [16, 125, 126, 1030])
def test_reads_of_large_messages_as_spans_are_of_span_recv_max(n: int) -> None:
    """With ``binary_spans`` a read of large messages becomes a span (no
    run copied out of it): reads of SPAN_RECV_MAX once the transport saw
    them; small messages, what the driver asks; either cut to end where a
    frame does, so that the reads after the one that completes a cut frame
    reach the engine as they arrived (BINARY_FRAMES, not copied behind a
    record head). Every message arrives."""
    options = WebSocketOptions(binary_spans=True)
    client, _, server, server_stream = open_pair(options)
    metered = _MeteredStream()
    client._stream = metered
    messages = batch(n, 2 * 1024 * 1024 // n, 3)
    offered = bytearray(encode_record_run(run_of(messages)))
    while offered:
        del offered[: server.send(offered)]
    metered.chunk = bytes(server_stream.written)
    got: list[tuple[int, bytes]] = []
    chunks: list[bytes] = []
    while metered.chunk:
        with contextlib.suppress(BlockingIOError):
            chunks.append(client.recv(512 * 1024))
            got += MessageReader().feed(chunks[-1])
    assert got == [(2, m) for m in messages]
    limit = ws_transport.SPAN_RECV_MAX if n >= 126 else 512 * 1024
    stride = n + (4 if n >= 126 else 2)
    assert all(limit - stride < asked <= limit for asked in metered.asked[1:])
    assert all(asked % stride == 0 for asked in metered.asked[3:])
    frames = [c for c in chunks if c[0] == MessageKind.BINARY_FRAMES]
    assert frames and len(frames) >= len(chunks) - 3


def test_a_read_of_whole_frames_behind_other_records_goes_as_a_span() -> None:
    """A BINARY_FRAMES chunk is a ``recv()`` result of its own (it has no
    length field to be joined behind other records by): one that found
    records already waiting goes as a BINARY_SPAN record behind them."""
    client = open_pair(WebSocketOptions(binary_spans=True))[0]
    messages = [bytes((i,)) * 1030 for i in range(5)]
    chunk = b"".join(encode_data_frame(2, m, None) for m in messages)
    client._on_record(encode_record(MessageKind.BINARY, b"first"))
    client._on_record(chunk)
    data = client.recv()
    kinds = [kind for kind, _, _ in MessageReader(keep_runs=True).feed_whole(data)[1]]
    assert kinds == [MessageKind.BINARY, MessageKind.BINARY_SPAN]
    assert MessageReader().feed(data) == [(2, b"first")] + [(2, m) for m in messages]


@pytest.mark.parametrize("n", [16, 125, 126, 1030])
def test_reads_of_large_messages_stay_below_the_size_whose_buffers_page_fault(n: int) -> None:
    """A driver asking for 256 KiB reads a stream of messages of 126 bytes
    or more (1 KiB items) at most RECV_MAX at a time once it saw them (each
    read's record and run are buffers of its size: bigger ones page-faulted
    on every read); one of smaller messages, what the driver asks (fewer
    turns). Every message arrives, in order, every byte of it."""
    client, _, server, server_stream = open_pair()
    metered = _MeteredStream()
    client._stream = metered
    run = run_of(batch(n, 400 * 1024 // n, 7))  # ~400 KiB of frames
    offered = bytearray(encode_record_run(run))
    while offered:
        del offered[: server.send(offered)]
    metered.chunk = bytes(server_stream.written)
    got = bytearray()
    while metered.chunk:
        with contextlib.suppress(BlockingIOError):
            for kind, payload in MessageReader(keep_runs=True).feed(client.recv(256 * 1024)):
                assert kind == MessageKind.BINARY_RUN
                got += payload
    assert bytes(got) == run
    later = set(metered.asked[1:])
    assert later == ({ws_transport.RECV_MAX} if n >= 126 else {256 * 1024})
    assert ws_transport.RECV_MAX < 128 * 1024
