"""The WebSocket data-frame fast paths (websocket/frames.py, runs.py,
splitter.py) against wsproto: the same bytes out, and the same messages in,
whatever the mix of frames and however the bytes are chunked, a batch of
same-length messages as one at a time; anything unusual goes to wsproto."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sansrs.adapters.transport.websocket.frames import (
    TRANSLATE_FROM,
    KeySource,
    encode_data_frame,
    mask,
)
from sansrs.adapters.transport.websocket.messages import (
    MessageKind,
    MessageReader,
    RecordError,
    frames_fields,
    split_frames,
    split_lines,
    split_run,
    split_span,
)
from sansrs.adapters.transport.websocket.runs import (
    MAX_MASKED_COUNT,
    MIN_BATCH,
    SHAPED,
    encode_batch,
    encode_run,
    frame_lines,
    prefix,
)
from sansrs.adapters.transport.websocket.splitter import FrameSplitter
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Event, Message, Ping, TextMessage
from wsproto.frame_protocol import FrameProtocol


def wsproto_messages(role: ConnectionType, data: bytes) -> list[tuple[int, bytes]]:
    """What wsproto alone makes of ``data``: whole messages, (opcode, payload)."""
    conn = Connection(role)
    conn.receive_data(data)
    return _messages(list(conn.events()))


def _messages(events: list[Event], parts: list[bytes] | None = None) -> list[tuple[int, bytes]]:
    """Whole messages of ``events``; ``parts``: those of a message not
    finished yet, kept across calls (a message wsproto reports in pieces)."""
    out: list[tuple[int, bytes]] = []
    parts = [] if parts is None else parts
    for ev in events:
        if isinstance(ev, Message):
            chunk = ev.data.encode() if isinstance(ev.data, str) else bytes(ev.data)
            parts.append(chunk)
            if ev.message_finished:
                out.append((1 if isinstance(ev, TextMessage) else 2, b"".join(parts)))
                parts.clear()
        elif isinstance(ev, Ping):
            out.append((9, bytes(ev.payload)))
        elif isinstance(ev, CloseConnection):  # wsproto's verdict (1002, 1007, ...) or a Close
            out.append((8, int(ev.code).to_bytes(2, "big")))
    return out


class Collector:
    """A splitter whose wsproto side is a real wsproto connection."""

    def __init__(
        self,
        role: ConnectionType,
        max_payload: int = 1 << 20,
        *,
        lines: bool = False,
        spans: bool = False,
    ) -> None:
        self.conn = Connection(role)
        self.got: list[tuple[int, bytes]] = []
        self.handed: list[bytes] = []
        self.parts: list[bytes] = []  # of a message wsproto reported in part so far
        self.runs = 0
        self.lines = lines
        self.splitter = FrameSplitter(
            masked=role is ConnectionType.SERVER,
            max_payload=max_payload,
            on_record=self._on_record,
            on_message=lambda op, p: self.got.append((op, p)),
            to_wsproto=self._to_wsproto,
            text_lines=lines,
            binary_spans=spans,
        )
        self.spans = 0  # BINARY_SPAN records seen
        self.frames = 0  # BINARY_FRAMES chunks seen
        self.handed_records: list[bytes] = []

    def _on_record(self, record: bytes) -> None:
        assert type(record) is bytes  # what an engine reads
        self.handed_records.append(record)
        reader = MessageReader()
        _, records = reader.feed_whole(record)
        assert not reader.pending and records, "whole records only"
        for kind, start, stop in records:
            if kind == MessageKind.BINARY_FRAMES:  # a read of whole frames, as it arrived
                assert (start, stop) == (0, len(record))
                self.frames += 1
                self.got += split_frames(record)
                continue
            self._take_record(kind, record[start - 5 : stop])

    def _take_record(self, kind: int, record: bytes) -> None:
        if kind == MessageKind.BINARY_SPAN:  # binary_spans: equal messages as they arrived
            self.spans += 1
            self.got += split_span(record, 5)
            return
        length = int.from_bytes(record[1:5], "big")
        assert length == len(record) - 5 and length, "one whole record, no empty runs"
        self.runs += 1
        if kind == MessageKind.TEXT_LINES:  # text_lines: each message followed by 0xFF
            assert self.lines
            self.got += [(1, line) for line in split_lines(record[5:])]
        else:
            text = kind == MessageKind.TEXT_RUN and not self.lines
            assert kind == MessageKind.BINARY_RUN or text
            self.got += split_run(record, 5, len(record), kind & 0x0F)

    def _to_wsproto(self, data: bytes) -> None:
        self.handed.append(data)
        self.conn.receive_data(data)
        self.got += _messages(list(self.conn.events()), self.parts)


def fed_in_chunks(
    receiver: ConnectionType,
    wire: bytes,
    data: st.DataObject,
    max_cuts: int,
    *,
    lines: bool = False,
    spans: bool = False,
) -> Collector:
    """A splitter fed ``wire`` cut at up to ``max_cuts`` drawn places."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=max_cuts), label="cuts"))
    collector = Collector(receiver, lines=lines, spans=spans)
    last = 0
    for cut in [*cuts, len(wire)]:
        collector.splitter.feed(wire[last:cut])
        last = cut
    return collector


def frames_from(role_sending: ConnectionType, events: list[Event]) -> bytes:
    proto = FrameProtocol(client=role_sending is ConnectionType.CLIENT, extensions=[])
    out = bytearray()
    for ev in events:
        if isinstance(ev, BytesMessage | TextMessage):
            out += proto.send_data(ev.data, ev.message_finished)
        elif isinstance(ev, Ping):
            out += proto.ping(ev.payload)
    return bytes(out)


EVENTS = st.lists(
    st.one_of(
        st.builds(BytesMessage, data=st.binary(max_size=300)),
        # 64-bit lengths: one big message, cheap to draw
        st.integers(65536, 65600).map(lambda n: BytesMessage(data=b"\xa5" * n)),
        st.builds(TextMessage, data=st.text(max_size=50)),
        st.builds(Ping, payload=st.binary(max_size=125)),
    ),
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(
    EVENTS,
    st.data(),
    st.sampled_from([ConnectionType.CLIENT, ConnectionType.SERVER]),
    st.booleans(),
    st.booleans(),
)
def test_splitter_gives_the_messages_wsproto_gives_in_any_chunking(
    events: list[Event], data: st.DataObject, receiver: ConnectionType, lines: bool, spans: bool
) -> None:
    """Also with ``text_lines`` (text runs as lines) and ``binary_spans``
    (a client's batches as they arrived): the same messages."""
    sender = ConnectionType.SERVER if receiver is ConnectionType.CLIENT else ConnectionType.CLIENT
    wire = frames_from(sender, events)
    expected = wsproto_messages(receiver, wire)
    collector = fed_in_chunks(receiver, wire, data, 6, lines=lines, spans=spans)
    assert collector.got == expected
    assert not collector.splitter.passthrough  # nothing unusual in there
    # wsproto saw only the control frames, each one whole
    assert all(chunk[0] & 0x0F == 0x9 for chunk in collector.handed)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(BytesMessage, data=st.binary(max_size=50), message_finished=st.booleans()),
            st.builds(Ping, payload=st.binary(max_size=10)),
        ),
        max_size=10,
    ),
)
def test_fragmented_messages_pass_through_to_wsproto_unchanged(events: list[Event]) -> None:
    if events and isinstance(events[-1], BytesMessage):
        events[-1] = BytesMessage(data=events[-1].data, message_finished=True)
    wire = frames_from(ConnectionType.CLIENT, events)
    collector = Collector(ConnectionType.SERVER)
    collector.splitter.feed(wire)
    assert collector.got == wsproto_messages(ConnectionType.SERVER, wire)


def test_unusual_frames_switch_to_passthrough() -> None:
    cases = {
        "rsv bit": b"\xc2\x00",
        "continuation": b"\x80\x00",
        "reserved opcode": b"\x83\x00",
        "unmasked from a client": b"\x82\x00",
        "non-minimal length": b"\x82\xfe\x00\x05" + b"k" * 4 + b"x" * 5,
        "control too long": b"\x89\xfe\x00\x80" + b"k" * 4 + b"x" * 128,
        "bad utf-8": b"\x81\x82" + b"\x00" * 4 + b"\xff\xfe",
    }
    for name, frame in cases.items():
        collector = Collector(ConnectionType.SERVER)
        collector.splitter.feed(frame)
        assert collector.splitter.passthrough, name
        assert collector.handed == [frame], name
        collector.splitter.feed(b"more")  # everything after goes to wsproto too
        assert collector.handed == [frame, b"more"], name


def test_frame_over_the_limit_goes_to_wsproto_at_once() -> None:
    collector = Collector(ConnectionType.CLIENT, max_payload=100)
    header = b"\x82\x7f" + (1 << 40).to_bytes(8, "big")  # a 1 TiB frame, announced
    collector.splitter.feed(header)
    assert collector.splitter.passthrough and collector.handed == [header]


def test_incomplete_frames_wait_and_buffer_only_what_arrived() -> None:
    collector = Collector(ConnectionType.CLIENT)
    frame = encode_data_frame(2, b"z" * 70000, None)
    for i in range(0, len(frame), 1000):
        collector.splitter.feed(frame[i : i + 1000])
    assert collector.got == [(2, b"z" * 70000)]
    assert collector.handed == []


def test_encoded_frames_are_what_wsproto_sends_and_reads() -> None:
    server = FrameProtocol(client=False, extensions=[])
    for size in (0, 1, 125, 126, 65535, 65536, 70000):
        payload = os.urandom(size)
        assert encode_data_frame(2, payload, None) == bytes(server.send_data(payload))
        text = "\u00e9" * (size // 2)
        assert encode_data_frame(1, text.encode(), None) == bytes(server.send_data(text))
    keys = KeySource()
    wire = b"".join(encode_data_frame(2, b"m%d" % i, keys.next()) for i in range(2000))
    assert wsproto_messages(ConnectionType.SERVER, wire) == [(2, b"m%d" % i) for i in range(2000)]


def test_mask_is_its_own_inverse() -> None:
    payload = os.urandom(1001)
    key = b"\x01\x02\x03\x04"
    assert mask(key, mask(key, payload)) == payload
    assert mask(key, b"\x00\x00\x00\x00\x00") == b"\x01\x02\x03\x04\x01"
    assert mask(key, b"") == b""
    keys = KeySource()
    assert len({keys.next() for _ in range(3000)}) > 2990  # fresh keys, beyond one batch


def run_of(messages: list[bytes]) -> bytes:
    return b"".join(prefix(len(m)) + m for m in messages)


# Same-length messages (the batch paths) around every header size boundary,
# mixed with others; the lengths repeat so that batches form.
SIZES = st.sampled_from([0, 1, 3, 4, 5, 22, 125, 126, 127, 1030, 65535, 65536])
BATCHES = st.lists(
    st.tuples(SIZES, st.integers(1, 3 * MIN_BATCH), st.binary(min_size=1, max_size=8)),
    min_size=1,
    max_size=5,
)


def messages_of(batches: list[tuple[int, int, bytes]]) -> list[bytes]:
    out = []
    for size, count, seed in batches:
        for i in range(count):
            out.append(((seed + bytes([i])) * (size // (len(seed) + 1) + 1))[:size])
    return out


@settings(max_examples=60, deadline=None)
@given(
    BATCHES,
    st.data(),
    st.sampled_from([ConnectionType.CLIENT, ConnectionType.SERVER]),
    st.booleans(),
)
def test_batches_of_same_length_frames_split_like_wsproto(
    batches: list[tuple[int, int, bytes]],
    data: st.DataObject,
    receiver: ConnectionType,
    spans: bool,
) -> None:
    """Also with ``binary_spans``: a client's batches handed over as
    BINARY_SPAN records, the messages before each first."""
    messages = messages_of(batches)
    sender = ConnectionType.SERVER if receiver is ConnectionType.CLIENT else ConnectionType.CLIENT
    wire = frames_from(sender, [BytesMessage(data=m) for m in messages])
    assert wsproto_messages(receiver, wire) == [(2, m) for m in messages]
    collector = fed_in_chunks(receiver, wire, data, 4, spans=spans)
    assert collector.got == [(2, m) for m in messages]
    assert collector.handed == [] and not collector.splitter.passthrough


@settings(max_examples=60, deadline=None)
@given(BATCHES, st.booleans())
def test_encode_run_frames_each_message_as_wsproto_would(
    batches: list[tuple[int, int, bytes]], client: bool
) -> None:
    messages = messages_of(batches)
    run = run_of(messages)
    keys = KeySource() if client else None
    wire, used = encode_run(run, keys)
    assert used == len(run)
    receiver = ConnectionType.SERVER if client else ConnectionType.CLIENT
    assert wsproto_messages(receiver, wire) == [(2, m) for m in messages]
    if not client:  # unmasked: byte for byte what one frame at a time gives
        assert wire == b"".join(encode_data_frame(2, m, None) for m in messages)


def test_encode_run_masks_every_frame_with_its_own_fresh_key() -> None:
    messages = [b"k" * 22] * 200  # one batch
    wire, _ = encode_run(run_of(messages), KeySource())
    keys = {wire[i * 28 + 2 : i * 28 + 6] for i in range(200)}
    assert len(keys) > 195  # RFC 6455, 5.3: a fresh key per frame
    assert all(wire[i * 28 + 6 : i * 28 + 28] != messages[0] for i in range(200))


def test_encode_run_leaves_a_message_cut_off_at_the_end() -> None:
    run = run_of([b"a" * 10] * 8 + [b"b" * 300])
    wire, used = encode_run(run[:-1], None)
    assert used == 8 * 13
    assert wsproto_messages(ConnectionType.CLIENT, wire) == [(2, b"a" * 10)] * 8


def test_a_batch_stops_at_the_first_frame_of_another_kind() -> None:
    # Same-length frames, then a text frame and a ping of that same length.
    server = FrameProtocol(client=False, extensions=[])
    wire = b"".join(bytes(server.send_data(b"x" * 10)) for _ in range(6))
    wire += bytes(server.send_data("y" * 10)) + bytes(server.ping(b"z" * 10))
    wire += b"".join(bytes(server.send_data(b"x" * 10)) for _ in range(6))
    collector = Collector(ConnectionType.CLIENT)
    collector.splitter.feed(wire)
    assert collector.got == [(2, b"x" * 10)] * 6 + [(1, b"y" * 10), (9, b"z" * 10)] + [
        (2, b"x" * 10)
    ] * 6
    assert collector.runs == 3  # binary, text, (the ping to wsproto), binary


def test_key_source_takes_many_keys_at_once() -> None:
    keys = KeySource()
    batch = keys.take(300)
    assert len(batch) == 1200
    assert len({batch[i : i + 4] for i in range(0, 1200, 4)}) > 295
    assert len(keys.take(5000)) == 20000  # beyond one pool: fetched on its own


def test_masked_batches_longer_than_one_conversion_split_and_join_like_wsproto() -> None:
    # More same-length masked frames than MAX_MASKED_COUNT: converted in
    # several batches each way, every frame its own key, every byte right.
    for size, count in ((22, 2 * MAX_MASKED_COUNT + 5), (125, MAX_MASKED_COUNT + 1), (5, 3000)):
        messages = [bytes([i % 251]) * size for i in range(count)]
        wire, used = encode_run(run_of(messages), KeySource())
        assert used == len(run_of(messages))
        stride = size + 6
        assert len({wire[i * stride + 2 : i * stride + 6] for i in range(count)}) > count - 5
        assert wsproto_messages(ConnectionType.SERVER, wire) == [(2, m) for m in messages]
        collector = Collector(ConnectionType.SERVER)
        collector.splitter.feed(wire)
        assert collector.got == [(2, m) for m in messages]
        assert collector.runs == 1 and collector.handed == []


def test_encode_run_reads_the_run_from_an_offset() -> None:
    # The transport frames a record's run where it lies (after the record
    # header): the same frames as from the run alone.
    run = run_of([b"a" * 10] * 9 + [b"bc"])
    head = b"\x12\x00\x00\x00\x99"
    for data in (head + run, bytearray(head + run)):
        assert encode_run(data, None, start=5) == encode_run(run, None)
        wire, used = encode_run(data, KeySource(), start=5)
        assert used == len(run)
        assert wsproto_messages(ConnectionType.SERVER, wire) == [(2, b"a" * 10)] * 9 + [(2, b"bc")]


def test_key_source_keys_stay_fresh_as_its_pool_grows() -> None:
    # RFC 6455, 5.3: a fresh key per frame, however keys are fetched (the
    # pool grows for a connection that takes many at once).
    keys = KeySource()
    taken = b"".join([keys.take(3000) for _ in range(10)] + [keys.next() for _ in range(100)])
    assert len(taken) == 4 * 30_100
    assert len({taken[i : i + 4] for i in range(0, len(taken), 4)}) > 30_000


def test_masked_batches_of_many_lengths_taking_turns_stay_exact() -> None:
    # Long batches of more lengths than their masks are cached for, taking
    # turns: each batch right whichever masks it gets.
    messages = [bytes([size]) * size for _ in range(3) for size in range(4, 126, 11)
                for _ in range(70)]
    wire, used = encode_run(run_of(messages), KeySource())
    assert used == len(run_of(messages))
    assert wsproto_messages(ConnectionType.SERVER, wire) == [(2, m) for m in messages]
    collector = Collector(ConnectionType.SERVER)
    collector.splitter.feed(wire)
    assert collector.got == [(2, m) for m in messages]


# Text messages of mixed lengths around every header size boundary (the
# text paths take no batches: lengths seldom repeat), ASCII or not.
TEXTS = st.lists(
    st.one_of(
        st.text(max_size=140),
        st.integers(120, 300).map(lambda n: "a" * n),
        st.integers(0, 3).map(lambda n: "\u00e9" * (32767 + n)),  # 65534..65540 bytes
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(TEXTS, st.booleans())
def test_encode_text_run_frames_each_message_as_wsproto_would(
    texts: list[str], client: bool
) -> None:
    messages = [t.encode() for t in texts]
    run = run_of(messages)
    wire, used = encode_run(run, KeySource() if client else None, text=True)
    assert used == len(run)
    receiver = ConnectionType.SERVER if client else ConnectionType.CLIENT
    assert wsproto_messages(receiver, wire) == [(1, m) for m in messages]
    if not client:  # unmasked: byte for byte what one frame at a time gives
        assert wire == b"".join(encode_data_frame(1, m, None) for m in messages)
    # A message cut off at the end is left for later.
    unmasked = b"".join(encode_data_frame(1, m, None) for m in messages)
    cut = run + b"\x00\x01\x00" + b"x" * 10
    assert encode_run(cut, None, text=True) == (unmasked, len(run))


@given(TEXTS, st.integers(0, 8), st.booleans())
def test_encode_text_run_refuses_any_message_that_is_not_utf8_alone(
    texts: list[str], at: int, client: bool
) -> None:
    """A bad engine cannot make us send invalid UTF-8 (RFC 6455, 8.1): one
    bad message anywhere fails the run, also a character split between two
    messages (valid only when they are joined)."""
    messages = [t.encode() for t in texts]
    at = min(at, len(messages))
    for bad in ([b"ok\xff"], [b"split \xc3", b"\xa9 across"]):
        run = run_of(messages[:at] + bad + messages[at:])
        with pytest.raises(UnicodeDecodeError):
            encode_run(run, KeySource() if client else None, text=True)


def lines_of(messages: list[bytes]) -> bytes:
    return b"".join(m + b"\xff" for m in messages)


@settings(max_examples=60, deadline=None)
@given(TEXTS, st.booleans())
def test_frame_lines_frames_each_message_as_encode_run_does(texts: list[str], client: bool) -> None:
    """A TEXT_LINES record's messages (empty ones included) framed as the
    same messages of a TEXT_RUN: byte for byte unmasked, as wsproto reads
    them masked."""
    assume(texts)  # a record holds at least one message
    messages = [t.encode() for t in texts]
    wire = frame_lines(lines_of(messages), KeySource() if client else None)
    receiver = ConnectionType.SERVER if client else ConnectionType.CLIENT
    assert wsproto_messages(receiver, wire) == [(1, m) for m in messages]
    if not client:
        assert wire == encode_run(run_of(messages), None, text=True)[0]


@given(TEXTS, st.integers(0, 8), st.booleans())
def test_frame_lines_refuses_any_message_that_is_not_utf8_alone(
    texts: list[str], at: int, client: bool
) -> None:
    """As for runs: a bad engine cannot make us send invalid UTF-8 (RFC
    6455, 8.1), nor a record that does not end a line."""
    messages = [t.encode() for t in texts]
    at = min(at, len(messages))
    for bad in ([b"ok\xc3"], [b"split \xc3", b"\xa9 across"]):
        with pytest.raises(UnicodeDecodeError):
            frame_lines(lines_of(messages[:at] + bad + messages[at:]), None)
    with pytest.raises(RecordError):
        frame_lines(lines_of(messages) + b"cut off", KeySource() if client else None)
    with pytest.raises(RecordError):
        split_lines(b"")


@settings(max_examples=60, deadline=None)
@given(
    TEXTS, st.data(), st.sampled_from([ConnectionType.CLIENT, ConnectionType.SERVER]), st.booleans()
)
def test_text_frames_of_mixed_lengths_split_like_wsproto(
    texts: list[str], data: st.DataObject, receiver: ConnectionType, lines: bool
) -> None:
    """Text frames of any lengths, around each header size, however the
    bytes are chunked: the client's text path (the server's general one)
    gives what wsproto gives, with nothing handed to wsproto; as runs or,
    with ``text_lines``, as lines (empty messages included)."""
    sender = ConnectionType.SERVER if receiver is ConnectionType.CLIENT else ConnectionType.CLIENT
    events: list[Event] = [TextMessage(data=t) for t in texts]
    where = data.draw(st.integers(0, len(events)), label="binary at")
    events.insert(where, BytesMessage(data=b"b"))
    wire = frames_from(sender, events)
    expected = wsproto_messages(receiver, wire)
    collector = fed_in_chunks(receiver, wire, data, 4, lines=lines)
    assert collector.got == expected
    assert collector.handed == [] and not collector.splitter.passthrough


@settings(max_examples=60, deadline=None)
@given(
    TEXTS,
    st.integers(0, 8),
    st.sampled_from([b"ok\xff", b"\xc3", b"\xed\xa0\x80"]),
    st.booleans(),
)
def test_a_text_frame_that_is_not_utf8_goes_to_wsproto_after_the_good_ones(
    texts: list[str], at: int, bad: bytes, lines: bool
) -> None:
    """RFC 6455, 8.1: invalid UTF-8 in a text message fails the connection
    (1007, wsproto's answer): the messages before it are delivered, the bad
    frame and all after it go to wsproto, also when the frames before it
    are not ASCII."""
    messages = [t.encode() for t in texts]
    at = min(at, len(messages))
    wire = bytearray()
    for i, m in enumerate([*messages[:at], bad, *messages[at:]]):
        # a frame with any payload, as a broken server would send it
        wire += encode_data_frame(1, m, None) if i != at else bytes((0x81, len(m))) + m
    collector = Collector(ConnectionType.CLIENT, lines=lines)
    collector.splitter.feed(bytes(wire))
    assert collector.got == [(1, m) for m in messages[:at]] + [(8, (1007).to_bytes(2, "big"))]
    assert collector.splitter.passthrough
    assert collector.handed and collector.handed[0].startswith(bytes((0x81, len(bad))) + bad)


# Shaped batches (runs.shape_of): every length class of the key tile (a
# payload 0-3 bytes short of a whole number of keys) at the counts around
# the shaped limit, each way.
SHAPED_LENGTHS = (4, 5, 6, 7, 21, 22, 23, 124, 125)
SHAPED_COUNTS = (MIN_BATCH, 16, SHAPED - 1, SHAPED, SHAPED + 1)


def test_encode_batch_frames_every_shape_as_wsproto_would() -> None:
    for n in SHAPED_LENGTHS:
        for count in SHAPED_COUNTS:
            messages = [bytes([i % 251, n]) * (n // 2) + bytes(n % 2) for i in range(count)]
            run = run_of(messages)
            plain = encode_batch(run, 0, None)
            assert plain == b"".join(encode_data_frame(2, m, None) for m in messages)
            masked = encode_batch(b"\x12head" + run, 5, KeySource())
            assert masked is not None and len(masked) == count * (n + 6)
            keys = {masked[i * (n + 6) + 2 : i * (n + 6) + 6] for i in range(count)}
            assert len(keys) > count - 2  # RFC 6455, 5.3: a fresh key per frame
            assert wsproto_messages(ConnectionType.SERVER, masked) == [(2, m) for m in messages]
            for receiver, wire in ((ConnectionType.SERVER, masked), (ConnectionType.CLIENT, plain)):
                collector = Collector(receiver)
                collector.splitter.feed(wire)
                assert collector.got == [(2, m) for m in messages]
                assert collector.runs == 1 and collector.handed == []


def test_encode_batch_refuses_a_run_with_one_length_unlike_the_others() -> None:
    # Same total as a batch of 16 x 22 bytes, one length byte different in
    # each column of the 3-byte length: never framed as a batch.
    run = bytearray(run_of([b"q" * 22] * 16))
    for column in range(3):
        for index in (1, 7, 15):
            bad = bytearray(run)
            bad[index * 25 + column] ^= 0x01
            assert encode_batch(bytes(bad), 0, None) is None
            assert encode_batch(bad, 0, KeySource()) is None
    uneven = run_of([b"q" * 22] * 7 + [b"q" * 21, b"q" * 23] + [b"q" * 22] * 7)
    assert encode_batch(uneven, 0, None) is None
    wire, used = encode_run(uneven, None)
    assert used == len(uneven)
    assert wsproto_messages(ConnectionType.CLIENT, wire)[7:9] == [(2, b"q" * 21), (2, b"q" * 23)]


def test_a_read_with_one_frame_unlike_the_others_is_not_taken_as_a_batch() -> None:
    # Frames that fill a read evenly, one of them another length (or
    # opcode, or mask bit) in the middle: the messages wsproto reads.
    for receiver in (ConnectionType.SERVER, ConnectionType.CLIENT):
        sender = FrameProtocol(client=receiver is ConnectionType.SERVER, extensions=[])
        lengths = [22] * 7 + [21, 23] + [22] * 7
        wire = b"".join(bytes(sender.send_data(bytes([n]) * n)) for n in lengths)
        collector = Collector(receiver)
        collector.splitter.feed(wire)
        assert collector.got == [(2, bytes([n]) * n) for n in lengths]
        text = b"".join(
            bytes(sender.send_data("t" * 22 if i == 5 else b"b" * 22)) for i in range(16)
        )
        collector = Collector(receiver)
        collector.splitter.feed(text)
        assert collector.got == [(1, b"t" * 22) if i == 5 else (2, b"b" * 22) for i in range(16)]
    unmasked = b"".join(encode_data_frame(2, b"u" * 22, None) for _ in range(16))
    collector = Collector(ConnectionType.SERVER)  # expects masked frames
    collector.splitter.feed(unmasked)
    assert collector.got == [(8, (1002).to_bytes(2, "big"))]  # wsproto's verdict
    assert collector.splitter.passthrough


def raw_frame(first: int, payload: bytes, masked: bool, *, wide: bool = False) -> bytes:
    """One frame as a peer writes it, whatever it breaks: first byte
    ``first`` (FIN, reserved bits, opcode), masked with a fixed key or not,
    its length in the shortest form (``wide``: the 16-bit one)."""
    n = len(payload)
    bit = 0x80 if masked else 0
    if wide or 126 <= n < 65536:
        head = bytes((first, bit | 126)) + n.to_bytes(2, "big")
    elif n < 126:
        head = bytes((first, bit | n))
    else:
        head = bytes((first, bit | 127)) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    key = b"\x37\xfa\x21\x3d"
    return head + key + mask(key, payload)


#: Frames that end the fast path (reserved bits, opcodes, mask bits, lengths,
#: control frames, UTF-8, fragments), each as a sender of either role
#: (``masked``) writes it; wsproto alone says what each means.
UNUSUAL: dict[str, Callable[[bool], bytes]] = {
    "reserved bit": lambda m: raw_frame(0xC2, b"rsv1", m),
    "reserved data opcode": lambda m: raw_frame(0x83, b"op3", m),
    "reserved control opcode": lambda m: raw_frame(0x8B, b"opB", m),
    "mask bit the wrong way": lambda m: raw_frame(0x82, b"wrong mask", not m),
    "non-minimal length": lambda m: raw_frame(0x82, b"x" * 5, m, wide=True),
    "control frame too long": lambda m: raw_frame(0x89, b"p" * 126, m),
    "fragmented control frame": lambda m: raw_frame(0x09, b"ping", m),
    "continuation without a start": lambda m: raw_frame(0x80, b"cont", m),
    "text that is not UTF-8": lambda m: raw_frame(0x81, b"ok\xc3(", m),
    "a message in fragments, a ping between": lambda m: raw_frame(0x02, b"frag", m)
    + raw_frame(0x89, b"between", m)
    + raw_frame(0x80, b"ments", m),
}

# Messages around the unusual frame: batches of one length (both sizes of
# header), a lone binary message, text, a ping.
AROUND = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([4, 22, 125, 126, 1030]), st.integers(1, 70)).map(
            lambda nc: [BytesMessage(data=bytes([i % 7 + 48]) * nc[0]) for i in range(nc[1])]
        ),
        st.binary(max_size=200).map(lambda b: [BytesMessage(data=b)]),
        st.text(max_size=20).map(lambda t: [TextMessage(data=t)]),
        st.binary(max_size=20).map(lambda b: [Ping(payload=b)]),
    ),
    max_size=4,
).map(lambda groups: [ev for group in groups for ev in group])


@settings(max_examples=150, deadline=None)
@given(
    AROUND,
    st.sampled_from(sorted(UNUSUAL)),
    AROUND,
    st.data(),
    st.sampled_from([ConnectionType.CLIENT, ConnectionType.SERVER]),
)
def test_splitter_fast_paths_give_what_wsproto_alone_gives_around_unusual_frames(
    before: list[Event],
    unusual: str,
    after: list[Event],
    data: st.DataObject,
    receiver: ConnectionType,
) -> None:
    """The differential: messages, batches and one unusual frame, cut into
    reads anywhere (a frame completed from the head of the next read, a
    record cut out of a batch where it lies): the same messages in the same
    order, and the same verdict on the unusual frame (wsproto's close code:
    1002 for broken framing, 1007 for bad UTF-8), as wsproto alone, the
    plain path."""
    sender = ConnectionType.SERVER if receiver is ConnectionType.CLIENT else ConnectionType.CLIENT
    masked = sender is ConnectionType.CLIENT
    wire = frames_from(sender, before) + UNUSUAL[unusual](masked) + frames_from(sender, after)
    expected = wsproto_messages(receiver, wire)
    spans = data.draw(st.booleans(), label="binary_spans")
    collector = fed_in_chunks(receiver, wire, data, 8, spans=spans)
    assert collector.got == expected
    assert collector.splitter.passthrough


@pytest.mark.parametrize("receiver", [ConnectionType.CLIENT, ConnectionType.SERVER])
def test_long_batches_are_re_headed_in_place_as_wsproto_reads_them(
    receiver: ConnectionType,
) -> None:
    """A stream's reads: hundreds of same-length frames (re-headed by
    strided deletions and assignments, or a byte column at a time), a
    frame before and after them of another length, whole or cut into two
    reads anywhere in a frame: the messages, in order, every byte of each."""
    sender = ConnectionType.SERVER if receiver is ConnectionType.CLIENT else ConnectionType.CLIENT
    for n in (4, 5, 22, 31, 32, 33, 125, 126, 1030):
        for count in (SHAPED + 1, 511, 512, 700):
            messages = [b"first"] + [
                bytes((i + j) % 251 + 1 for j in range(n)) for i in range(count)
            ] + [b"last one"]
            wire = frames_from(sender, [BytesMessage(data=m) for m in messages])
            for cut in (len(wire), 7 + (n + 2) // 2, len(wire) - n):
                for spans in (False, True):
                    collector = Collector(receiver, spans=spans)
                    collector.splitter.feed(wire[:cut])
                    collector.splitter.feed(wire[cut:])
                    assert collector.got == [(2, m) for m in messages], (n, count, cut)
                    assert collector.handed == [] and not collector.splitter.passthrough
                    # A client's batches come as spans (a server's are masked: never).
                    assert bool(collector.spans) == (spans and receiver is ConnectionType.CLIENT)


@pytest.mark.parametrize("n", [4, 125, 126, 1030, 0xFFFF])
def test_a_client_read_of_nothing_but_equal_frames_goes_to_the_engine_as_it_arrived(n: int) -> None:
    """With ``binary_spans``, a client's read that is nothing but equal FIN
    binary frames (a batch at least; with 2-byte headers, more than a
    shaped batch) is handed over as it is, the read object itself: a
    BINARY_FRAMES chunk, whose messages are the frames'. Anything else in
    the read (another length, a cut frame, a Ping), a server's masked
    reads, spans off, or a non-minimal length: the other paths, as before."""
    sender = ConnectionType.SERVER
    count = SHAPED + 1 if n < 126 else MIN_BATCH
    messages = [bytes(((i * 3 + n) % 251,)) * n for i in range(count)]
    wire = frames_from(sender, [BytesMessage(data=m) for m in messages])
    collector = Collector(ConnectionType.CLIENT, max_payload=1 << 17, spans=True)
    collector.splitter.feed(wire)
    assert collector.handed_records == [wire] and collector.handed_records[0] is wire
    assert collector.frames == 1 and collector.got == [(2, m) for m in messages]
    assert frames_fields(wire) == (count, n, 2 if n < 126 else 4)
    others = {
        "another length": wire + frames_from(sender, [BytesMessage(data=b"tail!")]),
        "a cut frame": wire[:-1],
        "a ping": wire + frames_from(sender, [Ping(payload=b"p")]),
        "too few": frames_from(sender, [BytesMessage(data=m) for m in messages[: count - 1]])
        if n >= 126 else wire[: (n + 2) * MIN_BATCH],
    }
    for name, data in others.items():
        for spans in (True, False):
            other = Collector(ConnectionType.CLIENT, max_payload=1 << 17, spans=spans)
            other.splitter.feed(data)
            assert other.frames == 0, name
            assert other.got == wsproto_messages(ConnectionType.CLIENT, data)[: len(other.got)]
    plain = Collector(ConnectionType.CLIENT, max_payload=1 << 17)
    plain.splitter.feed(wire)
    assert plain.frames == 0 and plain.got == [(2, m) for m in messages]
    masked = frames_from(ConnectionType.CLIENT, [BytesMessage(data=m) for m in messages])
    server = Collector(ConnectionType.SERVER, max_payload=1 << 17, spans=True)
    server.splitter.feed(masked)
    assert server.frames == 0 and server.got == [(2, m) for m in messages]
    if n >= 126:
        long_form = b"".join(
            bytes((0x82, 127)) + len(m).to_bytes(8, "big") + m for m in messages
        )  # (non-minimal lengths: RFC 6455, 5.2)
        odd = Collector(ConnectionType.CLIENT, max_payload=1 << 17, spans=True)
        odd.splitter.feed(long_form)
        assert odd.frames == 0 and odd.splitter.passthrough


@pytest.mark.parametrize("n", [126, 127, 1030, 0xFFFF])
def test_unmasked_batches_of_16_bit_lengths_are_framed_byte_for_byte(n: int) -> None:
    """A server's stream of 1 KiB items: same-length messages of 126 bytes
    to 64 KiB framed by joining views of their payloads (a cached getter
    per group of 512): exactly the frames one at a time gives, for any
    count around the groups and from any offset, and no view of the
    caller's buffer outlives the call (a driver resizes it next)."""
    for count in (4, 511, 512, 513, 1025) if n < 2000 else (4, 5):
        messages = [bytes((i * 7 % 251,)) * n for i in range(count)]
        run = run_of(messages)
        for start in (0, 5):
            offered = bytearray(bytes(start) + run)
            wire, used = encode_run(offered, None, start=start)
            assert used == len(run), (n, count, start)
            assert wire == b"".join(encode_data_frame(2, m, None) for m in messages)
            del offered[: start + 1]  # (a view still held would raise BufferError)


@settings(max_examples=60, deadline=None)
@given(
    st.binary(min_size=4, max_size=4),
    st.sampled_from([1, 3, TRANSLATE_FROM - 1, TRANSLATE_FROM, TRANSLATE_FROM + 1,
                     TRANSLATE_FROM + 2, TRANSLATE_FROM + 3, 70001]),
    st.integers(0, 2**32),
)
def test_websocket_5_3_masking_xors_each_octet_with_its_key_octet_at_any_length(
    key: bytes, size: int, seed: int
) -> None:
    """RFC 6455, 5.3: octet i of the masked payload is octet i XOR key
    octet i mod 4, whichever way ``mask`` computes it (as integers, or a
    byte column at a time by translation from ``TRANSLATE_FROM`` bytes on);
    wsproto reads a frame masked so."""
    payload = random.Random(seed).randbytes(size)
    expected = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    assert mask(key, payload) == expected
    assert mask(key, bytearray(payload)) == expected
    frame = encode_data_frame(2, payload, key)
    assert wsproto_messages(ConnectionType.SERVER, frame) == [(2, payload)]
