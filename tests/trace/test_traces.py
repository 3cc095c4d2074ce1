"""Replay of the recorded rsocket-py traces in tests/traces/.

Every trace: every frame decodes, re-encoding gives the same bytes, chunked
and whole-stream decoding agree, and the frame types are exactly the ones the
exchange must contain (tests/tools/record_traces.py recorded them).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sansrs.rsocket import (
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    Frame,
    FrameReader,
    FrameType,
    KeepaliveFrame,
    LengthPrefixSplitter,
    PayloadFrame,
    RequestChannelFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    SetupFrame,
    decode_frame,
    encode_frame,
    encode_frame_prefixed,
)
from sansrs.trace import (
    DataRecord,
    Direction,
    EndReason,
    EndRecord,
    RSocketFrameReceiver,
    Trace,
    dissect_records,
    read_trace,
    replay,
)

TRACES = Path(__file__).resolve().parent.parent / "traces"
C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
T = FrameType

Frames = dict[Direction, list[Frame]]


def _frames(trace: Trace) -> Frames:
    return {d: FrameReader().feed(trace.data(d)) for d in Direction}


def _of(frames: list[Frame], cls: type) -> list[Frame]:
    return [f for f in frames if isinstance(f, cls)]


def _check_request_response(f: Frames) -> None:
    (reply,) = f[S2C]
    assert isinstance(reply, PayloadFrame) and reply.next and reply.complete
    assert reply.data == b"echo:hello" and reply.metadata == b"meta"


def _check_stream(f: Frames) -> None:
    (request,) = _of(f[C2S], RequestStreamFrame)
    assert isinstance(request, RequestStreamFrame) and request.initial_request_n == 2
    items = _of(f[S2C], PayloadFrame)
    assert [p.data for p in items] == [b"item-%d" % i for i in range(5)]  # type: ignore[union-attr]
    assert [p.complete for p in items] == [False] * 4 + [True]  # type: ignore[union-attr]


def _check_channel(f: Frames) -> None:
    outbound = _of(f[C2S], PayloadFrame)
    assert [p.data for p in outbound] == [b"c1", b"c2"]  # type: ignore[union-attr]
    assert outbound[-1].complete  # type: ignore[union-attr]
    echoes = _of(f[S2C], PayloadFrame)
    assert [p.data for p in echoes] == [b"re:c0", b"re:c1", b"re:c2"]  # type: ignore[union-attr]


def _check_error(f: Frames) -> None:
    (error,) = f[S2C]
    assert isinstance(error, ErrorFrame)
    assert error.error_code == ErrorCode.APPLICATION_ERROR and error.stream_id == 1
    assert error.message == "requested failure"


def _reassemble(frames: list[Frame]) -> tuple[bytes, bytes]:
    """Data and metadata of one fragmented message (spec: Fragmentation)."""
    assert frames[0].follows  # type: ignore[union-attr]
    assert all(f.follows for f in frames[:-1]) and not frames[-1].follows  # type: ignore[union-attr]
    data = b"".join(f.data for f in frames)  # type: ignore[union-attr]
    metadata = b"".join(f.metadata or b"" for f in frames)  # type: ignore[union-attr]
    return data, metadata


def _check_fragmented(f: Frames) -> None:
    expected = bytes(range(256)) * 2 + b"tail"
    request = f[C2S][1:]
    assert isinstance(request[0], RequestResponseFrame)
    assert all(isinstance(p, PayloadFrame) for p in request[1:])
    assert _reassemble(request) == (expected, b"m" * 100)
    reply = f[S2C]
    assert all(isinstance(p, PayloadFrame) for p in reply) and len(reply) > 1
    assert reply[-1].complete  # type: ignore[union-attr]
    assert _reassemble(reply) == (b"echo:" + expected, b"m" * 100)


def _check_cancel(f: Frames) -> None:
    (request,) = _of(f[C2S], RequestStreamFrame)
    (cancel,) = _of(f[C2S], CancelFrame)
    assert cancel.stream_id == request.stream_id
    assert f[C2S].index(cancel) < f[C2S].index(_of(f[C2S], RequestResponseFrame)[0])


def _check_keepalive(f: Frames) -> None:
    sent = _of(f[C2S], KeepaliveFrame)
    answers = _of(f[S2C], KeepaliveFrame)
    assert sent and all(k.respond for k in sent)  # type: ignore[union-attr]
    assert answers and not any(k.respond for k in answers)  # type: ignore[union-attr]


def _nothing(f: Frames) -> None:
    pass


# exchange -> (frame types client->server, frame types server->client, extra check)
EXPECTED: dict[str, tuple[set[int], set[int], Callable[[Frames], None]]] = {
    "request_response": ({T.SETUP, T.REQUEST_RESPONSE}, {T.PAYLOAD}, _check_request_response),
    "fire_and_forget": ({T.SETUP, T.REQUEST_FNF}, set(), _nothing),
    "request_stream": ({T.SETUP, T.REQUEST_STREAM, T.REQUEST_N}, {T.PAYLOAD}, _check_stream),
    "request_channel": (
        {T.SETUP, T.REQUEST_CHANNEL, T.PAYLOAD, T.REQUEST_N},
        {T.REQUEST_N, T.PAYLOAD},
        _check_channel,
    ),
    "metadata_push": ({T.SETUP, T.METADATA_PUSH}, set(), _nothing),
    "application_error": ({T.SETUP, T.REQUEST_RESPONSE}, {T.ERROR}, _check_error),
    "fragmented": ({T.SETUP, T.REQUEST_RESPONSE, T.PAYLOAD}, {T.PAYLOAD}, _check_fragmented),
    "cancel": (
        {T.SETUP, T.REQUEST_STREAM, T.CANCEL, T.REQUEST_RESPONSE},
        {T.PAYLOAD},
        _check_cancel,
    ),
    "keepalive": ({T.SETUP, T.KEEPALIVE}, {T.KEEPALIVE}, _check_keepalive),
}

TRACE_FILES = sorted(TRACES.glob("*.rstrace"))


def test_every_recorded_exchange_is_present_and_expected() -> None:
    assert {p.stem for p in TRACE_FILES} == set(EXPECTED)


@pytest.fixture(params=TRACE_FILES, ids=lambda p: p.stem)
def trace(request: pytest.FixtureRequest) -> Trace:
    return read_trace(request.param)


def test_trace_metadata_describes_the_exchange(trace: Trace) -> None:
    meta = trace.metadata
    assert meta["protocol"] == "rsocket" and meta["framing"] == "length-prefixed"
    assert meta["exchange"] in EXPECTED and meta["description"]
    assert "rsocket-py" in meta["client"] and "rsocket-py" in meta["server"]


def test_trace_both_directions_end_cleanly(trace: Trace) -> None:
    ends = [r for r in trace.records if isinstance(r, EndRecord)]
    assert sorted(e.direction for e in ends) == [C2S, S2C]
    assert all(e.reason is EndReason.EOF for e in ends)
    assert isinstance(trace.records[-1], EndRecord)


def test_trace_every_frame_decodes_and_reencodes_to_the_same_bytes(trace: Trace) -> None:
    for direction in Direction:
        stream = trace.data(direction)
        splitter = LengthPrefixSplitter()
        bodies = splitter.feed(stream)
        assert splitter.pending == 0, "a direction ends inside a frame"
        for body in bodies:
            frame = decode_frame(body)
            assert encode_frame(frame) == body, frame
        # The prefixed encoder (PAYLOAD fast path included) gives the stream back.
        assert b"".join(encode_frame_prefixed(decode_frame(b)) for b in bodies) == stream


def test_trace_frame_types_match_the_exchange(trace: Trace) -> None:
    c2s, s2c, check = EXPECTED[trace.metadata["exchange"]]
    frames = _frames(trace)
    assert {f.frame_type for f in frames[C2S]} == c2s
    assert {f.frame_type for f in frames[S2C]} == s2c
    assert isinstance(frames[C2S][0], SetupFrame)
    check(frames)


def test_trace_fragmented_has_payload_frames_with_the_f_flag() -> None:
    frames = _frames(read_trace(TRACES / "fragmented.rstrace"))
    for direction in Direction:
        follows = [f for f in frames[direction] if isinstance(f, PayloadFrame) and f.follows]
        assert len(follows) >= 5
    first = frames[C2S][1]
    assert isinstance(first, RequestResponseFrame) and first.follows


def test_trace_channel_request_n_flows_both_ways() -> None:
    frames = _frames(read_trace(TRACES / "request_channel.rstrace"))
    assert isinstance(frames[C2S][1], RequestChannelFrame)
    assert any(f.frame_type == T.REQUEST_N for f in frames[C2S])
    assert any(f.frame_type == T.REQUEST_N for f in frames[S2C])


def test_trace_replay_chunk_by_chunk_matches_whole_stream(trace: Trace) -> None:
    produced = replay(trace, {d: RSocketFrameReceiver() for d in Direction})
    assert not [p for p in produced if p.error is not None]
    for direction in Direction:
        got = [p.item for p in produced if p.direction == direction]
        assert got == _frames(trace)[direction]


def test_trace_dissector_reports_no_invalid_frame(trace: Trace) -> None:
    infos = list(dissect_records(trace.records))
    assert infos and not any(i.invalid for i in infos)
    frames = _frames(trace)
    assert [i.frame for i in infos if i.direction == C2S] == frames[C2S]


def test_trace_records_keep_the_chunk_boundaries_of_the_capture() -> None:
    # rsocket-py writes a frame's header and body with separate writes, so
    # some chunks split a frame: replay must cope, and the trace keeps them.
    trace = read_trace(TRACES / "request_stream.rstrace")
    chunks = [r for r in trace.records if isinstance(r, DataRecord)]
    assert len(chunks) >= 4
    stream = trace.data(S2C)
    boundaries = set()
    pos = 0
    for chunk in trace.chunks(S2C):
        pos += len(chunk)
        boundaries.add(pos)
    frame_ends = set()
    pos = 0
    for body in LengthPrefixSplitter().feed(stream):
        pos += 3 + len(body)
        frame_ends.add(pos)
    assert boundaries - frame_ends, "expected at least one chunk ending inside a frame"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(EXPECTED)), cuts=st.lists(st.integers(0, 4000), max_size=20))
def test_trace_any_rechunking_decodes_the_same_frames(name: str, cuts: list[int]) -> None:
    trace = read_trace(TRACES / f"{name}.rstrace")
    for direction in Direction:
        stream = trace.data(direction)
        points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
        reader = FrameReader()
        frames: list[Frame] = []
        for a, b in itertools.pairwise(points):
            frames.extend(reader.feed(stream[a:b]))
        assert frames == FrameReader().feed(stream)
