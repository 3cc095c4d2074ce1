"""Differential property test of the receive path: any chunking of a byte
stream gives the same events, the same output and the same error as feeding
it whole, and the same as feeding the frames one by one on a message
transport (which goes through ``decode_frame`` and the handlers only, not
the byte-stream fast path)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs import RemoteProtocolError
from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    Frame,
    Framing,
    PayloadFrame,
    RequestNFrame,
    Role,
    encode_frame,
    encode_frames_prefixed,
)
from tests.rsocket.strategies import frame_bytes, frames, split_points

SIDS = st.sampled_from([0, 1, 2, 3, 5, 7])
PAYLOADS = st.builds(
    PayloadFrame,
    SIDS,
    st.binary(max_size=20),
    st.none() | st.binary(max_size=8),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
REQUEST_NS = st.builds(RequestNFrame, SIDS, st.integers(1, 5))
STREAM_FRAMES = st.lists(st.one_of(PAYLOADS, PAYLOADS, PAYLOADS, REQUEST_NS, frames()), max_size=25)


def client(framing: Framing) -> Connection:
    conn = Connection(Role.CLIENT, ConnectionConfig(framing=framing, max_reassembly_size=200))
    conn.setup()
    conn.request_stream(b"s", initial_n=6)  # 1
    conn.request_channel(b"c", initial_n=6)  # 3
    conn.request_response(b"r")  # 5
    if framing is Framing.MESSAGES:
        conn.frames_to_send()
    else:
        conn.data_to_send()
    return conn


Outcome = tuple[list[object], bytes, int | None]


def feed_bytes(chunks: list[bytes]) -> Outcome:
    conn = client(Framing.LENGTH_PREFIXED)
    error = None
    try:
        for chunk in chunks:
            if chunk:
                conn.receive_data(chunk)
    except RemoteProtocolError as exc:
        error = exc.error_code
    return list(conn.events()), conn.data_to_send(), error


def feed_messages(bodies: list[bytes]) -> Outcome:
    conn = client(Framing.MESSAGES)
    error = None
    try:
        for body in bodies:
            conn.receive_frame(body)
    except RemoteProtocolError as exc:
        error = exc.error_code
    out = b"".join(len(f).to_bytes(3, "big") + f for f in conn.frames_to_send())
    return list(conn.events()), out, error


@settings(max_examples=200, deadline=None)
@given(st.data(), STREAM_FRAMES)
def test_chunking_and_framing_give_the_same_outcome(
    data: st.DataObject, drawn: list[Frame]
) -> None:
    stream = encode_frames_prefixed(drawn)
    whole = feed_bytes([stream])
    assert feed_bytes(data.draw(split_points(stream), label="chunks")) == whole
    assert feed_messages([encode_frame(f) for f in drawn]) == whole


@settings(max_examples=200, deadline=None)
@given(
    st.data(),
    st.lists(
        st.one_of(
            STREAM_FRAMES.map(lambda fs: [encode_frame(f) for f in fs]),
            st.lists(frame_bytes(), max_size=3),
        ),
        max_size=4,
    ),
)
def test_malformed_frames_same_outcome_any_chunking_and_framing(
    data: st.DataObject, groups: list[list[bytes]]
) -> None:
    bodies = [body for group in groups for body in group]
    stream = b"".join(len(b).to_bytes(3, "big") + b for b in bodies)
    whole = feed_bytes([stream])
    assert feed_bytes(data.draw(split_points(stream), label="chunks")) == whole
    assert feed_messages(bodies) == whole
