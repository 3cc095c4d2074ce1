"""Records that carry WebSocket frames as they are (messages.py):
BINARY_SPAN (a client's batches of equal messages, each behind the header
it arrived with: ``WebSocketOptions(binary_spans=True)``) and FRAMED (a
server engine's frames, written as they are). Each is held to the plain
records: the same messages, in order, every byte; what the socket left is
kept and acknowledged as for the other records."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters.rsocket.engine import client_websocket, framed_records
from sansrs.adapters.transport.urls import parse_url
from sansrs.adapters.transport.websocket import WebSocketOptions
from sansrs.adapters.transport.websocket.frames import binary_head, encode_data_frame
from sansrs.adapters.transport.websocket.messages import (
    MessageKind,
    MessageReader,
    RecordError,
    encode_close,
    encode_record,
    encode_span,
    record_head,
    span_fields,
    split_span,
)
from sansrs.adapters.transport.websocket.messages import encode_run as encode_record_run
from wsproto.events import Ping

from tests.adapters.transport.test_websocket_frames import run_of
from tests.adapters.transport.test_websocket_records import TrickleStream, open_pair

SIZES = st.sampled_from([0, 1, 4, 22, 125, 126, 1030, 65535])


def frames_of(messages: list[bytes]) -> bytes:
    """A server's frames of ``messages`` (unmasked)."""
    return b"".join(encode_data_frame(2, m, None) for m in messages)


def framed_record(messages: list[bytes]) -> bytes:
    frames = frames_of(messages)
    return record_head(MessageKind.FRAMED, len(frames)) + frames


# -- the records ----------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(SIZES, st.integers(1, 20), st.integers(0, 1), st.binary(max_size=30))
def test_a_span_record_holds_its_messages_behind_their_headers(
    size: int, count: int, lead_count: int, before: bytes
) -> None:
    """``encode_span`` (a lead frame, then frames, behind records that go
    first) and the readers: ``split_span``, ``span_fields``, a
    ``MessageReader`` (messages one by one, or the span whole with
    ``feed_whole``) give back exactly those messages."""
    messages = [bytes([i % 251]) * size for i in range(lead_count + count)]
    skip = len(binary_head(size))
    first = encode_record(MessageKind.BINARY, before) if before else b""
    lead = frames_of(messages[:lead_count])
    record = encode_span(frames_of(messages[lead_count:]), skip, size, first, lead)
    reader = MessageReader()
    expected = ([(2, before)] if before else []) + [(2, m) for m in messages]
    assert reader.feed(record) == expected
    buf, records = MessageReader(keep_runs=True).feed_whole(record)
    assert buf is record
    kind, start, stop = records[-1]
    assert kind == MessageKind.BINARY_SPAN and stop == len(record)
    assert span_fields(buf, start, stop) == (len(messages), size, skip)
    assert split_span(buf, start, stop) == [(2, m) for m in messages]


def test_a_span_record_that_its_frames_do_not_fill_is_refused() -> None:
    with pytest.raises(ValueError, match="not frames"):
        encode_span(b"\x82\x05abcd", 2, 5)  # a byte short
    with pytest.raises(ValueError, match="not frames"):
        encode_span(b"", 2, 5)
    broken = record_head(MessageKind.BINARY_SPAN, 5 + 6) + bytes((2,)) + (5).to_bytes(4, "big")
    with pytest.raises(RecordError, match="do not fill"):
        MessageReader().feed(broken + b"\x82\x05abcd")
    with pytest.raises(RecordError, match="shorter than its fields"):
        MessageReader().feed(record_head(MessageKind.BINARY_SPAN, 2) + b"\x02\x00")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=12), st.data())
def test_feed_whole_finds_the_records_feed_finds_however_they_are_cut(
    messages: list[bytes], data: st.DataObject
) -> None:
    """Whole records only, each ``(kind, start, stop)`` of its payload in
    the bytes returned, the rest kept for the next call: what ``feed`` (with
    runs kept) gives, cut anywhere."""
    stream = b"".join(
        encode_record_run(run_of([m])) if i % 2 else encode_record(MessageKind.BINARY, m)
        for i, m in enumerate(messages)
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=5)))
    whole, plain = MessageReader(keep_runs=True), MessageReader(keep_runs=True)
    got: list[tuple[int, bytes]] = []
    expected: list[tuple[int, bytes]] = []
    last = 0
    for cut in [*cuts, len(stream)]:
        buf, records = whole.feed_whole(stream[last:cut])
        got += [(kind, buf[start:stop]) for kind, start, stop in records]
        expected += plain.feed(stream[last:cut])
        last = cut
    assert got == expected and not whole.pending


# -- a client's reads: spans ----------------------------------------------------


@pytest.mark.parametrize("n", [4, 22, 125, 126, 1030])
def test_a_clients_reads_of_a_stream_are_spans_led_by_the_frame_the_last_read_cut(n: int) -> None:
    """``binary_spans``: every read of a server's stream of equal messages
    is one BINARY_SPAN record, the frame the previous read cut off leading
    it (not a record of its own), and the messages are all there, in order."""
    messages = [bytes([i % 251]) * n for i in range(3000)]
    wire = frames_of(messages)
    client, client_stream, _, _ = open_pair(WebSocketOptions(binary_spans=True))
    got: list[tuple[int, bytes]] = []
    kinds: list[list[int]] = []
    reader = MessageReader()
    read = len(wire) // 20 + 1  # (each read ends inside a frame)
    for at in range(0, len(wire), read):
        client_stream.chunk = wire[at : at + read]
        try:
            record = client.recv()
        except BlockingIOError:
            continue
        _, records = MessageReader(keep_runs=True).feed_whole(record)
        kinds.append([kind for kind, _, _ in records])
        got += reader.feed(record)
    assert got == [(2, m) for m in messages]
    assert all(k == [MessageKind.BINARY_SPAN] for k in kinds[:-1]), kinds
    assert len(kinds) >= 19


def test_a_server_never_takes_spans_its_frames_are_masked() -> None:
    _, _, server, server_stream = open_pair(WebSocketOptions(binary_spans=True))
    client_side = open_pair()[0]
    client_side._stream = TrickleStream([10**6])
    record = encode_record_run(run_of([b"m" * 22] * 200))
    assert client_side.send(record) == len(record)
    server_stream.chunk = bytes(client_side._stream.written)
    got = server.recv()
    assert got[0] == MessageKind.BINARY_RUN
    assert MessageReader().feed(got) == [(2, b"m" * 22)] * 200


# -- a server's writes: FRAMED --------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(SIZES, st.integers(1, 40)), min_size=1, max_size=4),
    st.lists(st.integers(1, 5000), min_size=1, max_size=4),
    st.booleans(),
)
def test_a_framed_record_goes_out_as_it_is_whatever_the_socket_takes(
    groups: list[tuple[int, int]], rooms: list[int], behind: bool
) -> None:
    """FRAMED records (and a run behind one) through a socket that takes a
    little at a time: acknowledged only once written, the rest offered
    again by the caller, on the wire exactly the frames given (and the
    run's frames after them)."""
    messages = [bytes([(3 * i + j) % 251]) * n for i, (n, count) in enumerate(groups)
                for j in range(count)]
    record = framed_record(messages)
    more = [b"after", b"x" * 300]
    if behind:
        record += encode_record_run(run_of(more))
    server = open_pair()[2]
    stream = TrickleStream(rooms)
    server._stream = stream
    out = bytearray(record)
    while out:
        del out[: server.send(out)]
    while server.buffered:
        server.send(b"")
    expected = messages + (more if behind else [])
    assert bytes(stream.written) == frames_of(expected)


def test_a_framed_record_is_written_from_the_bytes_given_no_copy_on_the_way() -> None:
    """The socket is handed a view of the record's frames (not a copy
    joined or buffered first) and the record counts as written at once."""
    server = open_pair()[2]
    handed: list[object] = []

    class Keeping(TrickleStream):
        def send(self, data: bytes | bytearray | memoryview) -> int:
            handed.append(type(data))
            return super().send(data)

    server._stream = Keeping([10**7])
    record = framed_record([b"f" * 1030] * 100)
    assert server.send(record) == len(record)
    assert handed == [memoryview] and server.buffered == 0
    assert bytes(server._stream.written) == record[5:]


def test_a_framed_record_waits_behind_a_pong_and_is_dropped_once_closing() -> None:
    """As every record: a Pong the socket could not take yet goes first,
    whole; once a Close was sent nothing more is (RFC 6455, 5.5.1)."""
    client, _, server, _ = open_pair()
    stream = TrickleStream([0])  # full: the Pong of the Ping read waits
    server._stream = stream
    stream.chunk = client._ws.send(Ping(payload=b"hi"))
    with pytest.raises(BlockingIOError):
        server.recv()
    assert stream.written == b""
    stream.rooms = [10**6]
    record = framed_record([b"p" * 22] * 5)
    while not server.send(record):
        pass
    wire = bytes(stream.written)
    assert wire[0] == 0x8A and wire.endswith(frames_of([b"p" * 22] * 5))  # the Pong, then them
    stream.written.clear()
    server.send(encode_close(1000, "bye"))
    stream.written.clear()
    assert server.send(record) == len(record)  # dropped
    assert stream.written == b""


def test_a_client_refuses_framed_records_it_must_mask_each_frame() -> None:
    client = open_pair()[0]
    with pytest.raises(ValueError, match="masks each frame"):
        client.send(framed_record([b"c" * 22]))


# -- the RSocket engine's side ---------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["plain", "framed"]), min_size=1, max_size=6))
def test_the_engines_records_keep_framed_runs_and_plain_pieces_in_order(
    order: list[str],
) -> None:
    """``framed_records``: framed runs (two pieces each) one after another
    one FRAMED record (the transport writes it in one call), the
    length-prefixed pieces between them BINARY_RUNs, in order; through a
    server transport, the frames of each in that order."""
    pieces: list[bytes] = []
    framed: list[int] = []
    messages: list[bytes] = []
    for i, part in enumerate(order):
        items = [bytes([i + 65]) * (10 + i)] * (i + 1)
        if part == "framed":
            head = binary_head(10 + i)
            framed.append(len(pieces))
            pieces += (head, head.join(items))
        else:
            pieces += [(10 + i).to_bytes(3, "big") + item for item in items]
        messages += items
    record = bytearray(framed_records(pieces, framed))
    kinds = []
    at = 0
    while at < len(record):
        kinds.append(record[at])
        at += 5 + int.from_bytes(record[at + 1 : at + 5], "big")
    runs = [part for i, part in enumerate(order) if i == 0 or order[i - 1] != part]
    assert kinds == [MessageKind.FRAMED if r == "framed" else MessageKind.BINARY_RUN for r in runs]
    server = open_pair()[2]
    server._stream = TrickleStream([10**6])
    while record:  # (as a driver: what is acknowledged goes, the rest is offered again)
        sent = server.send(record)
        assert sent
        del record[:sent]
    assert bytes(server._stream.written) == frames_of(messages)


def test_an_rsocket_client_asks_for_spans_on_websocket_urls_only() -> None:
    options = WebSocketOptions(max_message_size=1000)
    assert client_websocket("ws://h:1/p", options) == replace(options, binary_spans=True)
    assert client_websocket(parse_url("wss://h:1/p"), None) == WebSocketOptions(binary_spans=True)
    assert client_websocket("tcp://h:1", None) is None
    assert client_websocket("tcp://h:1", options) is options  # (the connect refuses it)
    assert client_websocket("nonsense", None) is None
