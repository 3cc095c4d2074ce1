"""``ConnectionConfig.fnf_runs`` held to the plain receive path.

A run of REQUEST_FNF reported as one ``FireAndForgetRunReceived`` must carry
exactly what the ``FireAndForgetReceived`` events of the plain path carry
(same requests, same order, the other events alike and in place), with the
same state, output, implied position and errors, for any sequence of frames,
bad ones included (stream ID 0, of the server's parity, in use, beyond
2**31-1; fragments; malformed metadata; flags a REQUEST_FNF does not
define; a lease in force; before SETUP was accepted; while closing), however
the bytes are cut.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.rsocket import Connection, ConnectionConfig, ConnectionState, Role
from sansrs.rsocket._fast import _same_shape
from sansrs.rsocket.events import (
    Event,
    FireAndForgetReceived,
    FireAndForgetRunReceived,
    SetupReceived,
)

# Frame types and flags, as on the wire (spec: Frame Header Format).
SETUP, LEASE, KEEPALIVE, RR, FNF, STREAM, CANCEL, PAYLOAD, ERROR = (
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x09, 0x0A, 0x0B,
)
IGNORE, M, F, C, N = 0x200, 0x100, 0x80, 0x40, 0x20
MAX_SID = 0x7FFFFFFF


def frame(sid: int, ftype: int, flags: int, body: bytes) -> bytes:
    """A length-prefixed frame."""
    head = sid.to_bytes(4, "big") + (ftype << 10 | flags).to_bytes(2, "big")
    return (len(head) + len(body)).to_bytes(3, "big") + head + body


def fnf(sid: int, data: bytes, metadata: bytes | None = None, flags: int = 0) -> bytes:
    if metadata is None:
        return frame(sid, FNF, flags, data)
    return frame(sid, FNF, flags | M, len(metadata).to_bytes(3, "big") + metadata + data)


def setup(lease: bool = False) -> bytes:
    mime = b"\x18application/octet-stream"
    body = b"\x00\x01\x00\x00" + (1000).to_bytes(4, "big") + (60000).to_bytes(4, "big")
    return frame(0, SETUP, 0x40 if lease else 0, body + mime + mime)


def flatten(events: list[Event]) -> list[Event]:
    """Each run as the FireAndForgetReceived events of the plain path."""
    out: list[Event] = []
    for ev in events:
        if isinstance(ev, FireAndForgetRunReceived):
            assert len(ev.stream_ids) == len(ev.data) == len(ev.metadata) >= 1
            out += [
                FireAndForgetReceived(stream_id=s, data=d, metadata=m)
                for s, d, m in zip(ev.stream_ids, ev.data, ev.metadata, strict=True)
            ]
        else:
            out.append(ev)
    return out


class Server:
    """A server connection and what it did, step by step."""

    def __init__(self, runs: bool, lease: int | None, accept: bool) -> None:
        self.conn = Connection(Role.SERVER, ConnectionConfig(fnf_runs=runs, max_frame_size=4096))
        self.log: list[object] = []
        self.runs = 0
        self.feed(setup(lease is not None))
        if accept:
            self.accept(lease)

    def accept(self, lease: int | None) -> None:
        if self.conn.state is not ConnectionState.SETUP_RECEIVED:
            return
        try:  # (the frames held meanwhile are processed now: they may be bad)
            if lease is None:
                self.conn.accept_setup()
            else:
                self.conn.accept_setup(lease_ttl=60_000, lease_number=lease)
        except RemoteProtocolError as exc:
            self.log.append(("error", type(exc).__name__, str(exc)))
        self.log.append(("accepted", self.conn.data_to_send(), flatten(self.conn.events())))

    def feed(self, chunk: bytes) -> None:
        conn = self.conn
        try:
            conn.receive_data(chunk, now=1.0)
        except (RemoteProtocolError, LocalProtocolError) as exc:
            self.log.append(("error", type(exc).__name__, str(exc)))
        events = conn.events()
        self.runs += sum(isinstance(e, FireAndForgetRunReceived) for e in events)
        self.log.append(flatten(events))
        self.log.append((conn.data_to_send(), conn.state, conn.received_position))


# -- the frames a client (or a misbehaving peer) may send ------------------------

sids = st.sampled_from([1, 3, 5, 7, 9, 11]) | st.sampled_from(
    [0, 2, 4, MAX_SID, MAX_SID + 2, 0xFFFFFFFF]  # 0, ours, the largest, beyond 2**31-1
) | st.integers(1, MAX_SID)
data_st = st.binary(max_size=24)


@st.composite
def fnf_frames(draw: st.DrawFn) -> bytes:
    sid, data = draw(sids), draw(data_st)
    shape = draw(st.sampled_from(["plain", "metadata", "flags", "bad-metadata", "short-metadata"]))
    if shape == "plain":
        return fnf(sid, data)
    if shape == "metadata":
        return fnf(sid, data, draw(st.binary(max_size=8)))
    if shape == "flags":  # F, C, N, I, or a bit no frame defines
        return fnf(sid, data, flags=draw(st.sampled_from([F, C, N, IGNORE, 0x01, 0x10, F | M])))
    if shape == "bad-metadata":  # a metadata length beyond the frame
        return frame(sid, FNF, M, (len(data) + 1).to_bytes(3, "big") + data)
    return frame(sid, FNF, M, data[:2])  # M, without room for the metadata length


@st.composite
def uniform_runs(draw: st.DrawFn) -> bytes:
    """What a client's ``request_fnf_many`` writes (one length, IDs 2 apart),
    maybe with one frame changed: the C path and its checks."""
    count = draw(st.integers(2, 60))
    first = draw(st.sampled_from([1, 3, 101, MAX_SID - 40, 2]))
    size = draw(st.integers(0, 20))
    frames = [fnf(first + 2 * i, b"%c" % (65 + i % 26) * size) for i in range(count)]
    change = draw(st.none() | st.integers(0, count - 1))
    if change is not None:
        sid = draw(sids)
        frames[change] = draw(st.sampled_from([
            fnf(sid, b"z" * size),  # same length: only its stream ID differs
            fnf(1, b"z" * size),  # a duplicate (or in-use) ID
            fnf(first + 2 * change, b"z" * size, flags=C),  # same length, other flags
            frame(first + 2 * change, RR, 0, b"z" * size),  # same length, another type
        ]))
    return b"".join(frames)


@st.composite
def other_frames(draw: st.DrawFn) -> bytes:
    sid, data = draw(sids), draw(data_st)
    return draw(st.sampled_from([
        frame(sid, RR, 0, data),
        frame(sid, STREAM, 0, b"\x00\x00\x00\x05" + data),  # opens a stream: its ID in use
        frame(sid, STREAM, F, b"\x00\x00\x00\x05" + data),  # a fragment, reassembly pending
        frame(sid, PAYLOAD, N, data),  # (a follow-up fragment on a stream in reassembly)
        frame(sid, CANCEL, 0, b""),
        frame(sid, ERROR, 0, (0x201).to_bytes(4, "big") + data),
        frame(0, KEEPALIVE, 0x80, (0).to_bytes(8, "big") + data),
        frame(0, LEASE, 0, (1000).to_bytes(4, "big") + (5).to_bytes(4, "big")),
        frame(0, ERROR, 0, (0x102).to_bytes(4, "big") + b"close"),  # CONNECTION_CLOSE
        frame(sid, 0x3F, IGNORE, data),  # unknown, ignorable
        data,  # garbage
    ]))


stream_st = st.lists(
    fnf_frames() | uniform_runs() | other_frames(), min_size=1, max_size=20
).map(b"".join)


def run(runs: bool, stream: bytes, cut: int, lease: int | None, accept: str) -> Server:
    server = Server(runs, lease, accept == "first")
    step = cut or len(stream) or 1
    for i in range(0, len(stream), step):
        server.feed(stream[i : i + step])
        if accept == "later" and i == 0:
            server.accept(lease)
    server.accept(lease)
    return server


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=stream_st,
    cut=st.sampled_from([0, 0, 1, 7, 9, 40, 300]),
    lease=st.none() | st.integers(1, 20),
    accept=st.sampled_from(["first", "first", "later"]),
)
@example(stream=b"".join(fnf(1 + 2 * i, b"x" * 16) for i in range(50)), cut=0, lease=None,
         accept="first")
@example(stream=b"".join(fnf(1 + 2 * i, b"x" * 16) for i in range(50)), cut=0, lease=3,
         accept="first")
# A stream opened (ID 5 in use), then a run of one shape over it (the C path
# must fall back at 5: spec 9.1, ignored); IDs of ours and 0 inside a span;
# empty data (9-byte frames); a span, another shape, a span.
@example(stream=frame(5, STREAM, 0, b"\x00\x00\x00\x05")
         + b"".join(fnf(1 + 2 * i, b"x" * 4) for i in range(8)), cut=0, lease=None, accept="first")
@example(stream=b"".join(fnf(i, b"y") for i in (1, 3, 4, 7, 0, 9)), cut=0, lease=None,
         accept="first")
@example(stream=b"".join(fnf(1 + 2 * i, b"") for i in range(30)), cut=0, lease=None,
         accept="first")
@example(stream=b"".join(fnf(1 + 2 * i, b"ab" if i % 7 else b"abc") for i in range(40)), cut=0,
         lease=None, accept="first")
def test_rsocket_fnf_runs_carry_what_fire_and_forget_events_carry(
    stream: bytes, cut: int, lease: int | None, accept: str
) -> None:
    plain = run(False, stream, cut, lease, accept)
    runs = run(True, stream, cut, lease, accept)
    assert runs.log == plain.log
    assert plain.runs == 0


def test_rsocket_fnf_runs_one_event_per_run_of_requests() -> None:
    uniform = b"".join(fnf(1 + 2 * i, b"x" * 16) for i in range(100))
    varied = fnf(201, b"a") + fnf(203, b"bb", b"md") + fnf(207, b"", b"")
    conn = Connection(Role.SERVER, ConnectionConfig(fnf_runs=True))
    conn.receive_data(setup(), now=0.0)
    assert isinstance(conn.events()[0], SetupReceived)
    conn.accept_setup()
    conn.receive_data(uniform + frame(301, RR, 0, b"q") + varied + uniform[:5], now=0.0)
    got = conn.events()
    assert [type(e).__name__ for e in got] == [
        "FireAndForgetRunReceived", "RequestResponseReceived", "FireAndForgetRunReceived",
    ]
    first, _, second = got
    assert isinstance(first, FireAndForgetRunReceived)
    assert isinstance(second, FireAndForgetRunReceived)
    assert first.stream_ids == list(range(1, 200, 2))
    assert first.data == [b"x" * 16] * 100 and first.metadata == [None] * 100
    assert second.stream_ids == [201, 203, 207]
    assert second.data == [b"a", b"bb", b""] and second.metadata == [None, b"md", b""]
    assert conn.received_position == len(uniform) + 7 + len(varied) - 3 * 103  # no prefixes


def test_rsocket_fnf_runs_off_by_default() -> None:
    assert ConnectionConfig().fnf_runs is False
    server = Server(False, None, True)
    server.feed(b"".join(fnf(1 + 2 * i, b"x") for i in range(10)))
    events = server.log[-2]
    assert isinstance(events, list) and len(events) == 10
    assert server.runs == 0


@pytest.mark.parametrize("cut", [0, 4096, 1000])
def test_rsocket_fnf_runs_long_spans_of_many_sizes(cut: int) -> None:
    """Spans beyond the unpacking block (128 frames), of more data sizes
    than the block structs kept (16), with a frame of another shape or an
    ID in use inside: what the plain path reports."""
    stream = b""
    sid = 1
    for size in [*range(20), 0, 3, 1000]:
        for i in range(400):
            stream += fnf(sid, bytes([65 + size % 26]) * size)
            sid += 2
            if i == 300:  # another shape, then the span again
                stream += fnf(sid, b"", b"md")
                sid += 2
        stream += frame(sid, STREAM, 0, b"\x00\x00\x00\x05")  # in use from here on
        stream += fnf(sid, b"z" * size) + fnf(sid + 2, b"z" * size)
        sid += 4
    plain = run(False, stream, cut, None, "first")
    runs = run(True, stream, cut, None, "first")
    assert runs.log == plain.log
    assert runs.runs > 0


class _CountingBytes(bytes):
    """``bytes`` that count the elements their slices hold."""

    looked = 0

    def __getitem__(self, key: Any) -> Any:
        got = super().__getitem__(key)
        if isinstance(key, slice):
            _CountingBytes.looked += len(got)
        return got


def _same_shape_reference(buf: bytes, off: int, stride: int, count: int) -> int:
    head = buf[off : off + 3] + buf[off + 7 : off + 9]
    n = 1
    while n < count:
        at = off + n * stride
        if buf[at : at + 3] + buf[at + 7 : at + 9] != head:
            break
        n += 1
    return n


@settings(max_examples=300, deadline=None)
@given(
    shapes=st.lists(st.sampled_from([b"", b"a", b"bb"]), min_size=2, max_size=200),
    skip=st.integers(0, 3),
)
def test_rsocket_fnf_runs_same_shape_counts_the_frames_of_the_first_ones_shape(
    shapes: list[bytes], skip: int
) -> None:
    """``_same_shape``: how many frames from the first on share its length
    and type/flags (the stream IDs differ), within ``count``: what looking
    at each frame in turn finds."""
    stride = 9 + len(shapes[0])
    buf = b"\x00" * skip + b"".join(fnf(1 + 2 * i, d) for i, d in enumerate(shapes))
    count = (len(buf) - skip) // stride
    assert _same_shape(buf, skip, stride, count) == _same_shape_reference(
        buf, skip, stride, count
    )


@pytest.mark.parametrize("other_at", [None, 1, 5000, 9999])
def test_rsocket_fnf_runs_same_shape_looks_at_each_frame_about_twice(
    other_at: int | None,
) -> None:
    """A span of m frames costs O(m) sliced bytes, not O(m log m) (``bench_tcp.py``
    row ``fnf16m``: the server's receive); a frame of another shape right
    after the first costs O(1)."""
    m = 10_000
    frames = [fnf(1 + 2 * i, b"x" * 16 if i != other_at else b"y" * 17) for i in range(m)]
    buf = _CountingBytes(b"".join(frames))
    stride = len(frames[0])
    _CountingBytes.looked = 0
    good = _same_shape(buf, 0, stride, len(buf) // stride)
    assert good == (m if other_at is None else other_at)
    assert _CountingBytes.looked <= 5 * 3 * good + 64  # 5 header bytes of each frame
