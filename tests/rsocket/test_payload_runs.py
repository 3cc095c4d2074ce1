"""The batch fast paths of the core held to the plain ones they replace.

- ``ConnectionConfig.payload_runs``: a run of plain items reported as one
  ``PayloadRunReceived`` must carry exactly what the ``PayloadReceived``
  events of the plain path carry (same items, same order, the other events
  alike and in place), with the same credit and implied position, however
  the bytes are cut.
- ``Connection.request_fnf_many``: the same bytes and stream IDs as
  ``request_fnf`` one by one, or nothing (the caller goes one by one).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sansrs.rsocket import Connection, ConnectionConfig, LocalProtocolError
from sansrs.rsocket.events import Event, PayloadReceived, PayloadRunReceived
from tests.rsocket.pair import Chunker, Pair, sized, whole

Item = tuple[bytes, bytes | None]


def _flatten(events: list[Event]) -> list[Event]:
    """Each run as the PayloadReceived events of the plain path."""
    out: list[Event] = []
    for ev in events:
        if isinstance(ev, PayloadRunReceived):
            out += [
                PayloadReceived(stream_id=ev.stream_id, data=d, metadata=None, complete=False,
                                next=True)
                for d in ev.data
            ]
        else:
            out.append(ev)
    return out


def _run(runs: bool, items: list[Item], initial_n: int, end: str, chunker: Chunker,
         more: int) -> tuple[list[Event], int, int, bytes]:
    """A client requesting a stream (``initial_n``, then ``more`` once the
    first events are in), the server sending ``items`` within the credit
    and ending with ``end``; the client's events, received position, the
    server's credit left (items it could still send) and the client's
    output after a keepalive."""
    pair = Pair.established(ConnectionConfig(payload_runs=runs), chunker=chunker)
    sid_c = pair.client.request_stream(b"q", initial_n=initial_n)
    pair.pump()
    sid = pair.take()[1][0].stream_id  # type: ignore[attr-defined]
    sent = 0
    events: list[Event] = []
    for step, credit in enumerate((initial_n, more)):
        if step:
            if not more:
                break
            pair.client.request_n(sid_c, more)
            pair.pump()
            pair.take()
        batch = items[sent : sent + credit]
        for data, metadata in batch:
            pair.server.send_payload(sid, data, metadata)
        sent += len(batch)
        pair.pump()
        events += pair.take()[0]
    if end == "complete":
        pair.server.send_complete(sid)
    elif end == "error":
        pair.server.send_error(sid, 0x201, "boom")
    pair.pump()
    events += pair.take()[0]
    pair.client.send_keepalive()
    return events, pair.client.received_position, sent, pair.client.data_to_send()


items_st = st.lists(
    st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=5)).map(
        lambda t: (t[0], t[1])
    )
    | st.just((b"x" * 16, None)),
    max_size=300,
)
# Runs of one length are the common case: many items alike, some varied.
uniform_st = st.integers(0, 300).map(lambda n: [(b"y" * 16, None)] * n)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=items_st | uniform_st,
    initial_n=st.integers(1, 400),
    more=st.integers(0, 300),
    end=st.sampled_from(["complete", "error", "none"]),
    cut=st.integers(0, 200),
)
# Empty items: frames of 9 bytes, the data cut at each frame's very end.
@example(items=[(b"", None)] * 3, initial_n=1, more=2, end="complete", cut=0)
def test_rsocket_payload_runs_carry_what_payload_events_carry(
    items: list[Item], initial_n: int, more: int, end: str, cut: int
) -> None:
    chunker = whole if cut == 0 else sized(cut)
    plain = _run(False, items, initial_n, end, chunker, more)
    runs = _run(True, items, initial_n, end, chunker, more)
    assert _flatten(runs[0]) == plain[0]
    assert runs[1:] == plain[1:]


def test_rsocket_payload_runs_one_event_per_run_of_plain_items() -> None:
    items: list[Item] = [(b"a" * 16, None)] * 100 + [(b"m", b"md")] + [(b"%d" % i, None)
                                                                        for i in range(50)]
    events = _run(True, items, 1000, "complete", whole, 0)[0]
    kinds = [type(ev).__name__ for ev in events]
    assert kinds == ["PayloadRunReceived", "PayloadReceived", "PayloadRunReceived",
                     "PayloadReceived"]
    assert len(events[0].data) == 100  # type: ignore[union-attr]
    assert events[2].data == [b"%d" % i for i in range(50)]  # type: ignore[union-attr]


def test_rsocket_payload_runs_off_by_default() -> None:
    assert ConnectionConfig().payload_runs is False
    events = _run(False, [(b"x", None)] * 10, 10, "none", whole, 0)[0]
    assert all(isinstance(ev, PayloadReceived) for ev in events)


# -- request_fnf_many -----------------------------------------------------------


def _client(**config: object) -> Connection:
    pair = Pair.established(
        ConnectionConfig(**config) if config else None  # type: ignore[arg-type]
    )
    return pair.client


FNF_BATCHES = [
    [b"x" * 16] * 200,
    [b"y" * 5] * 128 * 3,  # whole blocks of the packing struct, nothing after
    [b""] * 129,
    [b"a" * 1024] * 130,  # the largest frames packed by blocks
    [b"a" * 70_000] * 130,  # a length beyond 16 bits (frames of that size go one by one)
    [b"%d" % i for i in range(200)],
    [b""] * 3,
    [b"a" * 70_000] * 2,
]


@pytest.mark.parametrize("items", FNF_BATCHES)
def test_rsocket_request_fnf_many_writes_what_request_fnf_writes(items: list[bytes]) -> None:
    batch, single = _client(), _client()
    assert batch.request_fnf_many(items) == len(items)
    ids = [single.request_fnf(x) for x in items]
    assert ids == list(range(1, 2 * len(items), 2))
    assert batch.sent_position == single.sent_position
    assert batch.queued_output == single.queued_output
    assert batch.data_to_send() == single.data_to_send()
    assert batch.request_fnf(b"next") == single.request_fnf(b"next")  # IDs go on alike


@settings(max_examples=100, deadline=None)
@given(
    size=st.sampled_from([0, 1, 16, 300]),
    count=st.integers(1, 400),
    odd=st.none() | st.integers(0, 399),
)
def test_rsocket_request_fnf_many_of_runs_around_the_packing_block_writes_what_request_fnf_writes(
    size: int, count: int, odd: int | None
) -> None:
    """Runs of one data size (packed by blocks of 128 frames, the rest one
    by one) or with one item of another size, of any length: the bytes,
    IDs and position of ``request_fnf`` one by one."""
    items = [b"d" * size] * count
    if odd is not None and odd < count:
        items[odd] = b"o" * (size + 1)
    batch, single = _client(), _client()
    assert batch.request_fnf_many(items) == count
    for x in items:
        single.request_fnf(x)
    assert batch.sent_position == single.sent_position
    assert batch.queued_output == single.queued_output
    assert batch.data_to_send() == single.data_to_send()


@pytest.mark.parametrize(
    "items",
    [
        [b"ok", "text", b"ok"],  # not bytes
        [b"ok", bytearray(b"ba")],
        [b"big" * 30],  # beyond one frame of fragment_size 64
    ],
)
def test_rsocket_request_fnf_many_leaves_what_it_cannot_take_to_request_fnf(
    items: list[bytes],
) -> None:
    conn = _client(fragment_size=64)
    before = conn.sent_position
    assert conn.request_fnf_many(items) == 0
    assert conn.sent_position == before and conn.data_to_send() == b""


def test_rsocket_request_fnf_many_near_stream_id_wrap_goes_one_by_one() -> None:
    conn = _client()
    conn._streams.ids._next = 0x7FFFFFFF - 2  # type: ignore[attr-defined]
    assert conn.request_fnf_many([b"a"] * 3) == 0  # 2**31 - 3, 2**31 - 1, then wrap
    assert conn.request_fnf_many([b"a"] * 2) == 2


def test_rsocket_request_fnf_many_refused_as_request_fnf_when_closed() -> None:
    conn = _client()
    conn.close()
    with pytest.raises(LocalProtocolError) as many:
        conn.request_fnf_many([b"a"])
    with pytest.raises(LocalProtocolError) as one:
        conn.request_fnf(b"a")
    assert str(many.value) == str(one.value)


# -- runs cut by structs of whole frames (_fast._span) ----------------------------

# Run lengths around the span block (128 frames a struct) and sizes from
# empty to beyond 64 KiB (the 24-bit length's high byte in use).
SPAN_COUNTS = [1, 2, 3, 127, 128, 129, 255, 256, 257, 300]
SPAN_SIZES = [0, 1, 16, 1024, 70_000]


@pytest.mark.parametrize(
    ("count", "size"),
    # A few frames of 70 KB are enough for the high length byte.
    [(c, s) for c in SPAN_COUNTS for s in SPAN_SIZES if s < 70_000 or c <= 3],
)
def test_rsocket_payload_runs_cut_by_span_structs_carry_what_payload_events_carry(
    count: int, size: int
) -> None:
    items: list[Item] = [((b"%08d" % i * (size // 8 + 1))[:size], None) for i in range(count)]
    for chunker in (whole, sized(1033), sized(7)):
        plain = _run(False, items, count + 5, "complete", chunker, 0)
        runs = _run(True, items, count + 5, "complete", chunker, 0)
        assert _flatten(runs[0]) == plain[0]
        assert runs[1:] == plain[1:]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    count=st.integers(1, 400),
    size=st.integers(0, 40),
    initial_n=st.integers(1, 450),
    cut=st.integers(0, 3000),
)
def test_rsocket_payload_runs_of_one_length_cut_anywhere_carry_what_payload_events_carry(
    count: int, size: int, initial_n: int, cut: int
) -> None:
    """Runs of one length (the span structs' path), credit and reads cut
    anywhere, the data distinct per item (order is seen)."""
    items: list[Item] = [((b"%07d" % i * 6)[:size], None) for i in range(count)]
    chunker = whole if cut == 0 else sized(cut)
    plain = _run(False, items, initial_n, "complete", chunker, count)
    runs = _run(True, items, initial_n, "complete", chunker, count)
    assert _flatten(runs[0]) == plain[0]
    assert runs[1:] == plain[1:]


def test_rsocket_payload_runs_span_structs_stay_bounded() -> None:
    """A peer varying the length and count of its runs makes a struct per
    shape it sends, never more than ``_SPAN_CACHE`` at a time."""
    from sansrs.rsocket import _fast

    buf = b"".join(b"\x00\x00" + bytes([6 + size]) + b"\x00\x00\x00\x01\x28\x00" + b"d" * size
                   for size in range(30) for _ in range(3))
    off = 0
    for size in range(30):
        for count in (1, 2, 3):
            stride = size + 9
            fields = _fast._span(buf, off, count, _fast._PAYLOAD_SPAN, size)
            assert fields == [b"d" * size] * count
            assert len(_fast._span_structs) <= _fast._SPAN_CACHE
        off += 3 * stride


def _payload_frames(sid: int, items: list[bytes], flags: int = 0) -> bytes:
    from sansrs.rsocket._fast import PAYLOAD_ITEM, pack_prefix_header

    return b"".join(
        pack_prefix_header(0, len(d) + 6, sid, PAYLOAD_ITEM | flags) + d for d in items
    )


def _cut_by_spans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The frame counts ``_fast._span`` cuts, call by call."""
    from sansrs.rsocket import _fast

    counts: list[int] = []
    span = _fast._span

    def counted(buf: bytes, off: int, count: int, layout: str, size: int) -> list[bytes]:
        counts.append(count)
        return span(buf, off, count, layout, size)

    monkeypatch.setattr(_fast, "_span", counted)
    return counts


@pytest.mark.parametrize("behind", ["last", "other-stream", "keepalive"])
def test_rsocket_payload_runs_span_before_a_frame_of_another_shape_is_cut_by_span_structs(
    monkeypatch: pytest.MonkeyPatch, behind: str
) -> None:
    """The items of a read that ends with another frame (the stream's last
    item, another stream's, a KEEPALIVE) are cut by span structs up to it,
    not frame by frame."""
    from sansrs.rsocket._fast import payload_run_data
    from sansrs.rsocket._frames import FLAG_COMPLETE

    counts = _cut_by_spans(monkeypatch)
    items = [b"%016d" % i for i in range(50)]
    run = _payload_frames(1, items)
    # Frames as long as the items (else the span would not reach them).
    tail = {
        "last": _payload_frames(1, [b"%016d" % 50], FLAG_COMPLETE),
        "other-stream": _payload_frames(3, [b"%016d" % 0]),
        "keepalive": b"\x00\x00\x16\x00\x00\x00\x00\x0c\x00" + bytes(16),
    }[behind]
    buf = run + tail
    off, credit, position, data = payload_run_data(buf, 0, 25, 22, len(buf), 1 << 24, 1, 1000)
    assert (off, credit, position, data) == (len(run), 950, 50 * 22, items)
    assert counts == [50]


def test_rsocket_payload_runs_spans_of_several_lengths_make_one_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spans of one length after another, on one stream: each cut by span
    structs, all in one list (one event for the run)."""
    from sansrs.rsocket._fast import payload_run_data

    counts = _cut_by_spans(monkeypatch)
    items = [b"%d" % i for i in range(1000)]  # 10 of 1 byte, 90 of 2, 900 of 3
    buf = _payload_frames(1, items)
    off, credit, position, data = payload_run_data(buf, 0, 10, 7, len(buf), 1 << 24, 1, 5000)
    assert (off, credit, position, data) == (len(buf), 4000, len(buf) - 3000, items)
    assert counts == [10, 90, 900]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    blocks=st.lists(st.tuples(st.integers(0, 20), st.integers(1, 60)), max_size=8),
    initial_n=st.integers(1, 500),
    cut=st.integers(0, 2000),
)
def test_rsocket_payload_runs_of_blocks_of_one_length_carry_what_payload_events_carry(
    blocks: list[tuple[int, int]], initial_n: int, cut: int
) -> None:
    """Blocks of items of one length each (spans after spans), credit and
    reads cut anywhere."""
    items: list[Item] = []
    for size, count in blocks:
        items += [((b"%07d" % len(items) * 3)[:size], None)] * count
    chunker = whole if cut == 0 else sized(cut)
    plain = _run(False, items, initial_n, "complete", chunker, len(items))
    runs = _run(True, items, initial_n, "complete", chunker, len(items))
    assert _flatten(runs[0]) == plain[0]
    assert runs[1:] == plain[1:]


def test_rsocket_payload_runs_read_completing_a_frame_is_cut_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read that completes a frame begun in the one before: that frame is
    parsed alone, the items behind it are cut from the read itself (not a
    copy of the whole read joined behind the partial frame), and the events
    are those of the plain path."""
    from sansrs.rsocket import _receive

    bufs: list[bytes] = []
    run_data = _receive.payload_run_data

    def recorded(buf: bytes, *args: int) -> tuple[int, int, int, list[bytes]]:
        bufs.append(buf)
        return run_data(buf, *args)

    monkeypatch.setattr(_receive, "payload_run_data", recorded)
    pair = Pair.established(ConnectionConfig(payload_runs=True))
    sid_c = pair.client.request_stream(b"q", initial_n=100)
    pair.pump()
    sid = pair.take()[1][0].stream_id  # type: ignore[attr-defined]
    items = [b"%020d" % i for i in range(40)]
    for data in items:
        pair.server.send_payload(sid, data)
    out = pair.server.data_to_send()
    first, rest = out[:40], out[40:]  # the second frame cut after 11 bytes
    pair.client.receive_data(first)
    pair.client.receive_data(rest)
    assert any(buf is rest for buf in bufs)
    received = [d for ev in pair.client.events() if isinstance(ev, PayloadRunReceived)
                for d in ev.data]
    assert received == items
    assert sid_c == sid
