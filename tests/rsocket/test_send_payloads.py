"""``Connection.send_payloads`` (a stream's items as one batch) must behave
exactly as ``send_payload`` called once per item on its first path: the same
bytes on the wire, the same credit, sizes and implied position; it stops
where that path would not take an item (credit, the output limit, an item
too big, a resumable session) and leaves the rest to ``send_payload``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    Framing,
    LocalProtocolError,
    Role,
    SessionStore,
)
from tests.rsocket.pair import Pair
from tests.rsocket.resume_pair import ResumePair


def _streaming(initial_n: int = 1000, **config: int) -> tuple[Pair, int]:
    """A server responding to a request-stream with ``initial_n`` credit."""
    server_config = ConnectionConfig(**config) if config else None  # type: ignore[arg-type]
    pair = Pair.established(server_config=server_config)
    pair.client.request_stream(b"q", initial_n=initial_n)
    pair.pump()
    _, server_events = pair.take()
    return pair, server_events[0].stream_id  # type: ignore[attr-defined]


def _one_by_one(conn: Connection, sid: int, items: list[bytes]) -> int:
    sent = 0
    for item in items:
        try:
            conn.send_payload(sid, item)
        except LocalProtocolError:
            break
        sent += 1
    return sent


BATCHES: list[list[bytes]] = [
    [b"x" * 16] * 100,  # one length: one header, joined
    [b"%d" % i for i in range(100)],  # lengths differ: one by one in a loop
    [b""] * 5,
    [b"a" * 70_000] * 3,  # above 64 KiB: a 24-bit length still
    # None longer than the first, one shorter: not one length (the joined
    # size tells), one by one.
    [b"a" * 16, b"b" * 10, b"c" * 16, b"d" * 16],
    [b"a" * 16] * 99 + [b""],
    [b"a" * 16, b"b" * 17, b"c" * 15],  # one longer, one shorter, summing alike
]


@pytest.mark.parametrize("items", BATCHES)
def test_rsocket_send_payloads_writes_what_send_payload_writes(items: list[bytes]) -> None:
    batch, sid_b = _streaming()
    single, sid_s = _streaming()
    assert batch.server.send_payloads(sid_b, items) == len(items)
    assert _one_by_one(single.server, sid_s, items) == len(items)
    assert batch.server.sent_position == single.server.sent_position
    assert batch.server.queued_output == single.server.queued_output
    assert batch.server.data_to_send() == single.server.data_to_send()
    batch.pump()
    single.pump()
    assert batch.take()[0] == single.take()[0]  # the client sees the same items


@pytest.mark.parametrize("items", [[b"x" * 16] * 50, [b"%d" % i for i in range(50)]])
def test_rsocket_send_payloads_stops_at_the_credit_rule_1_1(items: list[bytes]) -> None:
    pair, sid = _streaming(initial_n=20)
    assert pair.server.send_payloads(sid, items) == 20
    assert pair.server.send_payloads(sid, items[20:]) == 0  # no credit left
    with pytest.raises(LocalProtocolError):
        pair.server.send_payload(sid, items[20])


@pytest.mark.parametrize(
    "make",
    [lambda i: b"y" * 1000, lambda i: b"y" * (1000 + i % 7), lambda i: b"y" * (1000 - i % 7)],
)
def test_rsocket_send_payloads_stops_where_the_output_limit_stops_send_payload(
    make: Callable[[int], bytes],
) -> None:
    items = [make(i) for i in range(100)]
    batch, sid_b = _streaming(max_queued_output=20_000)
    single, sid_s = _streaming(max_queued_output=20_000)
    sent = batch.server.send_payloads(sid_b, items)
    assert 0 < sent < len(items)
    assert sent == _one_by_one(single.server, sid_s, items)
    assert batch.server.output_blocked and single.server.output_blocked
    assert batch.server.data_to_send() == single.server.data_to_send()


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.sampled_from([0, 1, 5, 6, 7, 16, 1000]), min_size=1, max_size=60),
    credit=st.integers(1, 70),
    limit=st.integers(1, 40_000),
)
def test_rsocket_send_payloads_differential_any_lengths_credit_and_limit(
    lengths: list[int], credit: int, limit: int
) -> None:
    """Any mix of lengths (runs of one length, the first the longest or
    not), any credit, any output limit: what ``send_payloads`` queues and
    ``send_payload``'s one-by-one rest make the same bytes, sizes, credit
    and position as ``send_payload`` alone."""
    items = [bytes([65 + i % 26]) * n for i, n in enumerate(lengths)]
    batch, sid_b = _streaming(initial_n=credit, max_queued_output=limit)
    single, sid_s = _streaming(initial_n=credit, max_queued_output=limit)
    sent = batch.server.send_payloads(sid_b, items)
    rest = _one_by_one(batch.server, sid_b, items[sent:])
    assert sent + rest == _one_by_one(single.server, sid_s, items)
    assert batch.server.sent_position == single.server.sent_position
    assert batch.server.queued_output == single.server.queued_output
    assert batch.server.output_blocked == single.server.output_blocked
    assert batch.server.data_to_send() == single.server.data_to_send()


def test_rsocket_send_payloads_leaves_large_items_and_resumable_sessions_to_send_payload() -> None:
    pair, sid = _streaming(fragment_size=1024)
    assert pair.server.send_payloads(sid, [b"z" * 2000] * 3) == 0  # would be fragmented
    assert pair.server.send_payloads(sid, [b"s", b"z" * 2000]) == 1  # the leading run only
    assert pair.server.send_payloads(9999, [b"x"]) == 0  # no such stream


def test_rsocket_send_payloads_takes_nothing_while_frames_are_retained() -> None:
    store = SessionStore(keep_detached=30.0, max_retained=1 << 20)
    pair = ResumePair(None, ConnectionConfig(resume_buffer_size=1 << 20), store)
    sid = pair.client.request_stream(b"q", initial_n=10)
    pair.pump()
    pair.take()
    assert pair.server.resumable
    # Retained frames are two pieces each (their boundaries): one by one.
    assert pair.server.send_payloads(sid, [b"x" * 16] * 5) == 0


# -- pieces_to_send: data_to_send not joined ------------------------------------


def _queue_mixed(conn: Connection, sid: int) -> None:
    conn.send_payloads(sid, [b"x" * 1024] * 50)
    conn.send_payload(sid, b"md-item", b"md")
    conn.send_payloads(sid, [b"%d" % i for i in range(40)])
    conn.send_payload(sid, b"last", complete=True)


def test_rsocket_pieces_to_send_are_the_bytes_data_to_send_writes() -> None:
    pieces_pair, sid = _streaming()
    joined_pair, sid2 = _streaming()
    assert sid == sid2
    _queue_mixed(pieces_pair.server, sid)
    _queue_mixed(joined_pair.server, sid)
    queued = pieces_pair.server.queued_output
    pieces = pieces_pair.server.pieces_to_send()
    assert len(pieces) > 2  # not joined
    assert b"".join(pieces) == joined_pair.server.data_to_send()
    assert sum(map(len, pieces)) == queued
    assert pieces_pair.server.queued_output == 0
    assert pieces_pair.server.pieces_to_send() == []  # taken once
    assert pieces_pair.server.sent_position == joined_pair.server.sent_position


def test_rsocket_pieces_to_send_refused_on_message_framing() -> None:
    conn = Connection(Role.CLIENT, ConnectionConfig(framing=Framing.MESSAGES))
    with pytest.raises(LocalProtocolError, match="pieces_to_send"):
        conn.pieces_to_send()


def test_rsocket_pieces_to_send_on_a_resumable_session_retains_what_data_to_send_retains() -> None:
    """The resumable session's bookkeeping before a send (``before_send``)
    runs for pieces as for joined bytes: the session resumes alike."""
    outputs = []
    for take in ("pieces", "bytes"):
        store = SessionStore(keep_detached=30.0, max_retained=1 << 20)
        pair = ResumePair(None, ConnectionConfig(resume_buffer_size=1 << 20), store)
        sid = pair.client.request_stream(b"q", initial_n=100)
        pair.pump()
        sid_s = pair.take()[1][0].stream_id  # type: ignore[attr-defined]
        for i in range(20):
            pair.server.send_payload(sid_s, b"item%d" % i)
        out = (b"".join(pair.server.pieces_to_send()) if take == "pieces"
               else pair.server.data_to_send())
        outputs.append((out, pair.server.sent_position, pair.server.queued_output))
        assert sid
    assert outputs[0] == outputs[1]
