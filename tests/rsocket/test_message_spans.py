"""A message transport's runs and spans, held to the byte-stream paths.

- ``Connection.frame_runs(head)``: a stream's runs (``send_payloads``)
  queued as the transport's frames, each behind ``head(length)`` instead of
  its length prefix. Un-framed, the output is frame for frame what the
  plain connection writes, with the same sizes, credit and position.
- ``Connection.receive_span(buf, off, count, size, skip)``: equal frames,
  each behind ``skip`` bytes of the transport's, make exactly what
  ``receive_data`` makes of the same frames length-prefixed: the same
  events (a run as one ``PayloadRunReceived``), credit, position, errors.

The head used here is a WebSocket server's (FIN binary, 7/16/64-bit
length), written out in the test: the core knows no WebSocket.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    Framing,
    LocalProtocolError,
    RemoteProtocolError,
    Role,
    SessionStore,
)
from sansrs.rsocket.events import Event, PayloadRunReceived
from tests.rsocket.pair import Pair
from tests.rsocket.resume_pair import ResumePair
from tests.rsocket.test_payload_runs import _flatten
from tests.rsocket.test_send_payloads import _one_by_one


def ws_head(n: int) -> bytes:
    """A WebSocket server's header of a binary message of ``n`` bytes."""
    if n < 126:
        return bytes((0x82, n))
    if n < 0x10000:
        return bytes((0x82, 126)) + n.to_bytes(2, "big")
    return bytes((0x82, 127)) + n.to_bytes(8, "big")


def unframe(data: bytes) -> list[bytes]:
    """The messages of WebSocket frames as ``ws_head`` heads them."""
    out = []
    off = 0
    while off < len(data):
        assert data[off] == 0x82
        n = data[off + 1]
        off += 2
        if n == 126:
            n = int.from_bytes(data[off : off + 2], "big")
            off += 2
        elif n == 127:
            n = int.from_bytes(data[off : off + 8], "big")
            off += 8
        out.append(data[off : off + n])
        off += n
    assert off == len(data)
    return out


def unprefix(data: bytes) -> list[bytes]:
    """The frames of length-prefixed bytes."""
    out = []
    off = 0
    while off < len(data):
        n = int.from_bytes(data[off : off + 3], "big")
        out.append(data[off + 3 : off + 3 + n])
        off += 3 + n
    assert off == len(data)
    return out


def frames_of(pieces: list[bytes], framed: list[int]) -> list[bytes]:
    """Every frame of ``framed_pieces_to_send``'s output, in order."""
    out: list[bytes] = []
    at = 0
    for start in [*framed, len(pieces)]:
        out += unprefix(b"".join(pieces[at:start]))
        if start < len(pieces):
            out += unframe(pieces[start] + pieces[start + 1])
        at = start + 2
    return out


def _streaming(initial_n: int, *, frame: bool, **config: int) -> tuple[Pair, int]:
    server_config = ConnectionConfig(**config) if config else None  # type: ignore[arg-type]
    pair = Pair.established(server_config=server_config)
    pair.client.request_stream(b"q", initial_n=initial_n)
    pair.pump()
    sid = pair.take()[1][0].stream_id  # type: ignore[attr-defined]
    if frame:
        pair.server.frame_runs(ws_head)
    return pair, sid


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.sampled_from([0, 1, 5, 16, 119, 120, 1000, 65530, 70_000]),
                     min_size=1, max_size=40),
    credit=st.integers(1, 50),
    limit=st.integers(1, 400_000),
    other=st.booleans(),
)
def test_rsocket_frame_runs_framed_output_is_frame_for_frame_what_send_payload_writes(
    lengths: list[int], credit: int, limit: int, other: bool
) -> None:
    """Any lengths (each side of the 7-, 16- and 64-bit WebSocket lengths),
    credit and output limit, runs between other frames: the framed runs
    and the plain pieces around them, un-framed, are the frames the plain
    connection writes, with the same sizes, credit and position."""
    items = [bytes([65 + i % 26]) * n for i, n in enumerate(lengths)]
    framed, sid_f = _streaming(credit, frame=True, max_queued_output=limit)
    plain, sid_p = _streaming(credit, frame=False, max_queued_output=limit)
    if other:  # a frame queued before the run: plain pieces, then the run
        framed.server.send_keepalive()
        plain.server.send_keepalive()
    sent = framed.server.send_payloads(sid_f, items)
    rest = _one_by_one(framed.server, sid_f, items[sent:])
    assert sent + rest == _one_by_one(plain.server, sid_p, items)
    assert framed.server.sent_position == plain.server.sent_position
    assert framed.server.queued_output == plain.server.queued_output
    assert framed.server.output_blocked == plain.server.output_blocked
    pieces, at = framed.server.framed_pieces_to_send()
    assert frames_of(pieces, at) == unprefix(plain.server.data_to_send())
    assert framed.server.framed_pieces_to_send() == ([], [])  # taken


def test_rsocket_frame_runs_a_run_of_one_length_is_one_framed_run() -> None:
    pair, sid = _streaming(1000, frame=True)
    items = [bytes([i]) * 1024 for i in range(200)]
    assert pair.server.send_payloads(sid, items) == 200
    pieces, framed = pair.server.framed_pieces_to_send()
    assert framed == [0] and len(pieces) == 2
    frames = unframe(b"".join(pieces))
    head = struct.pack(">IH", sid, 0x0A << 10 | 0x20)  # PAYLOAD, N
    assert frames == [head + item for item in items]


def test_rsocket_frame_runs_refuses_the_byte_stream_output_calls() -> None:
    pair, sid = _streaming(10, frame=True)
    pair.server.send_payloads(sid, [b"x" * 16] * 5)
    with pytest.raises(LocalProtocolError, match="framed_pieces_to_send"):
        pair.server.data_to_send()
    with pytest.raises(LocalProtocolError, match="framed_pieces_to_send"):
        pair.server.pieces_to_send()
    pair.server.frame_runs(None)  # back to length prefixes for what comes next
    with pytest.raises(LocalProtocolError, match="framed_pieces_to_send"):
        pair.server.data_to_send()  # (the runs framed before are still queued)
    assert pair.server.framed_pieces_to_send()[1] == [0]  # what was framed stays so
    pair.server.send_payloads(sid, [b"y" * 16] * 5)
    assert unprefix(pair.server.data_to_send()) == [
        struct.pack(">IH", sid, 0x0A << 10 | 0x20) + b"y" * 16
    ] * 5


def test_rsocket_frame_runs_refused_on_message_framing() -> None:
    conn = Connection(Role.CLIENT, ConnectionConfig(framing=Framing.MESSAGES))
    with pytest.raises(LocalProtocolError):
        conn.frame_runs(ws_head)
    with pytest.raises(LocalProtocolError):
        conn.framed_pieces_to_send()
    with pytest.raises(LocalProtocolError):
        conn.receive_span(b"x" * 16, 0, 1, 16, 0)


def test_rsocket_frame_runs_frames_nothing_while_frames_are_retained() -> None:
    """A resumable session's items take send_payload's second path (they
    are retained): no run is framed, all is length-prefixed."""
    store = SessionStore(keep_detached=30.0, max_retained=1 << 20)
    pair = ResumePair(None, ConnectionConfig(resume_buffer_size=1 << 20), store)
    sid = pair.client.request_stream(b"q", initial_n=50)
    pair.pump()
    pair.take()
    assert pair.server.resumable
    pair.server.frame_runs(ws_head)
    assert pair.server.send_payloads(sid, [b"r" * 16] * 10) == 0
    for _ in range(10):
        pair.server.send_payload(sid, b"r" * 16)
    pieces, framed = pair.server.framed_pieces_to_send()
    assert framed == [] and len(unprefix(b"".join(pieces))) == 10


# -- receive_span ---------------------------------------------------------------


def _client_streaming(initial_n: int, *, runs: bool) -> tuple[Pair, int, int]:
    """A client with a stream open (``initial_n`` credit); the stream's ID at
    the client and at the server."""
    pair = Pair.established(ConnectionConfig(payload_runs=runs))
    sid_c = pair.client.request_stream(b"q", initial_n=initial_n)
    pair.pump()
    sid = pair.take()[1][0].stream_id  # type: ignore[attr-defined]
    return pair, sid_c, sid


def _frame(sid: int, tf: int, data: bytes) -> bytes:
    return struct.pack(">IH", sid, tf) + data


PAYLOAD_N = 0x0A << 10 | 0x20
PAYLOAD_NC = PAYLOAD_N | 0x40
#: Frames of one length a span may hold: items, the stream's last, another
#: stream's item, a frame with metadata (M), a fragment (F), a KEEPALIVE, a
#: frame of an unknown type (ignorable or not), a PAYLOAD without N or C.
KINDS = st.sampled_from(["item", "item", "item", "last", "other", "metadata", "follows",
                         "keepalive", "unknown", "empty"])


def _frames(sid: int, kinds: list[str], size: int) -> list[bytes]:
    n = size - 6
    out = []
    for i, kind in enumerate(kinds):
        body = bytes([i % 251]) * n
        if kind == "item":
            out.append(_frame(sid, PAYLOAD_N, body))
        elif kind == "last":
            out.append(_frame(sid, PAYLOAD_NC, body))
        elif kind == "other":
            out.append(_frame(sid + 2, PAYLOAD_N, body))
        elif kind == "metadata" and n >= 3:
            out.append(_frame(sid, PAYLOAD_N | 0x100, (0).to_bytes(3, "big") + body[3:]))
        elif kind == "follows":
            out.append(_frame(sid, PAYLOAD_N | 0x80, body))
        elif kind == "keepalive" and n >= 8:
            out.append(_frame(0, 0x03 << 10, (0).to_bytes(8, "big") + body[8:]))
        elif kind == "unknown":
            out.append(_frame(sid, 0x30 << 10 | (i % 2) << 9, body))
        else:
            out.append(_frame(sid, 0x0A << 10, body))  # a PAYLOAD with neither N nor C
    return out


def _outcome(conn: Connection, feed: object) -> tuple[list[Event], int, str, bytes]:
    """What feeding does: the events (runs flattened), the received
    position, the error raised (its message) and what the connection writes
    then (its KEEPALIVE carries the position; an ERROR frame if it failed)."""
    error = ""
    try:
        feed()  # type: ignore[operator]
    except RemoteProtocolError as exc:
        error = exc.message
    events = _flatten(conn.events())
    if conn.state.name == "ESTABLISHED":
        conn.send_keepalive()
    return events, conn.received_position, error, conn.data_to_send()


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.lists(KINDS, min_size=1, max_size=12),
    size=st.sampled_from([6, 7, 14, 22, 130, 1030]),
    credit=st.integers(1, 20),
    skip=st.integers(0, 10),
    runs=st.booleans(),
    pending=st.booleans(),
)
def test_rsocket_receive_span_makes_what_receive_data_makes_of_the_same_frames(
    kinds: list[str], size: int, credit: int, skip: int, runs: bool, pending: bool
) -> None:
    """The differential: any frames of one length (a stream's items, its
    last, another stream's, metadata, fragments, KEEPALIVE, unknown types),
    any credit (also less than the span), with and without payload_runs,
    with a frame of the byte stream pending before it or not: the same
    events, position, error and output as the frames length-prefixed
    through ``receive_data``."""
    span_pair, _, sid = _client_streaming(credit, runs=runs)
    plain_pair, _, _ = _client_streaming(credit, runs=runs)
    frames = _frames(sid, kinds, size)
    assert all(len(f) == size for f in frames)
    junk = bytes([0xEE]) * skip
    buf = b"\x00" * 3 + b"".join(junk + f for f in frames)
    prefixed = b"".join(size.to_bytes(3, "big") + f for f in frames)
    if pending:  # half a KEEPALIVE already in: the span's bytes continue it
        keepalive = _frame(0, 0x03 << 10, bytes(8))
        lead = len(keepalive).to_bytes(3, "big") + keepalive
        span_pair.client.receive_data(lead[:5])
        plain_pair.client.receive_data(lead[:5])

    def by_span() -> None:
        span_pair.client.receive_span(buf, 3, len(frames), size, skip)

    def by_bytes() -> None:
        plain_pair.client.receive_data(prefixed)

    assert _outcome(span_pair.client, by_span) == _outcome(plain_pair.client, by_bytes)


def test_rsocket_receive_span_of_a_streams_items_is_one_run() -> None:
    pair, _, sid = _client_streaming(1000, runs=True)
    items = [bytes([i % 251]) * 1024 for i in range(300)]
    buf = b"".join(ws_head(1030) + _frame(sid, PAYLOAD_N, item) for item in items)
    pair.client.receive_span(buf, 0, 300, 1030, 4)
    events = pair.client.events()
    assert events == [PayloadRunReceived(stream_id=sid, data=items)]
    assert pair.client.received_position == 300 * 1030


def test_rsocket_receive_span_stops_at_the_credit_as_receive_data_does() -> None:
    """More items than the credit (rule 1.1 broken by the peer): what
    receive_data does with the same frames (the items within the credit,
    then the connection fails)."""
    span_pair, _, sid = _client_streaming(3, runs=True)
    plain_pair, _, _ = _client_streaming(3, runs=True)
    frames = [_frame(sid, PAYLOAD_N, bytes([i]) * 16) for i in range(5)]
    buf = b"".join(ws_head(22) + f for f in frames)
    prefixed = b"".join((22).to_bytes(3, "big") + f for f in frames)
    assert _outcome(span_pair.client, lambda: span_pair.client.receive_span(buf, 0, 5, 22, 2)) \
        == _outcome(plain_pair.client, lambda: plain_pair.client.receive_data(prefixed))


@pytest.mark.parametrize(
    ("off", "count", "size", "skip"),
    [(0, 0, 22, 2), (0, 2, 22, 2), (-1, 1, 22, 2), (0, 1, -1, 2), (0, 1, 22, -1), (30, 1, 22, 2)],
)
def test_rsocket_receive_span_outside_the_bytes_given_is_refused(
    off: int, count: int, size: int, skip: int
) -> None:
    """A caller's mistake (frames that do not lie within the bytes given)
    is a LocalProtocolError, and changes nothing."""
    pair, _, sid = _client_streaming(10, runs=True)
    buf = ws_head(22) + _frame(sid, PAYLOAD_N, b"x" * 16)
    with pytest.raises(LocalProtocolError):
        pair.client.receive_span(buf, off, count, size, skip)
    assert pair.client.events() == [] and pair.client.received_position == 0


def test_rsocket_receive_span_of_frames_too_long_fails_the_connection() -> None:
    pair, _, sid = _client_streaming(10, runs=True)
    size = (1 << 24) + 10
    buf = bytes(2) + _frame(sid, PAYLOAD_N, bytes(size - 6))
    with pytest.raises(RemoteProtocolError, match="maximum frame size"):
        pair.client.receive_span(buf, 0, 1, size, 2)
