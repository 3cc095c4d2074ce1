"""Hypothesis strategies for RSocket frames, reusable by every RSocket test.

Import as ``from strategies import frames`` from a test module in
``tests/rsocket/`` (pytest puts the folder on ``sys.path``; there is no
package ``__init__``, on purpose: a package named ``rsocket`` would shadow
rsocket-py).

Every strategy here yields *valid* frames: ``encode_frame`` accepts them and
``decode_frame(encode_frame(f)) == f``. ``frames()`` draws any frame type
(``UnknownFrame`` included); ``FRAME_STRATEGIES`` maps each frame class to its
own strategy; ``frame_bytes()`` draws raw frame bytes of a known type with any
defined flag bits and any body, most of them invalid (for decoder tests);
``length_prefixed_stream()`` draws a list of frames and their TCP byte stream.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import strategies as st

from sansrs.rsocket import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_IGNORE,
    FLAG_LEASE,
    FLAG_METADATA,
    FLAG_NEXT,
    FLAG_RESPOND,
    FLAG_RESUME_ENABLE,
    MAX_POSITION,
    MAX_REQUEST_N,
    MAX_STREAM_ID,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    ExtFrame,
    Frame,
    FrameType,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    UnknownFrame,
    encode_frames_prefixed,
)

MAX_U31 = 0x7FFFFFFF

#: Frame types this codec knows nothing about (decode to UnknownFrame).
UNKNOWN_FRAME_TYPES = [t for t in range(64) if t not in {int(m) for m in FrameType}] + [
    int(FrameType.RESERVED)
]

#: Flag bits each known frame type defines (I and M included where they mean
#: something); every other bit is ignored on reception and sent as 0.
DEFINED_FLAGS: dict[int, int] = {
    FrameType.SETUP: FLAG_IGNORE | FLAG_METADATA | FLAG_RESUME_ENABLE | FLAG_LEASE,
    FrameType.LEASE: FLAG_IGNORE | FLAG_METADATA,
    FrameType.KEEPALIVE: FLAG_IGNORE | FLAG_RESPOND,
    FrameType.REQUEST_RESPONSE: FLAG_IGNORE | FLAG_METADATA | FLAG_FOLLOWS,
    FrameType.REQUEST_FNF: FLAG_IGNORE | FLAG_METADATA | FLAG_FOLLOWS,
    FrameType.REQUEST_STREAM: FLAG_IGNORE | FLAG_METADATA | FLAG_FOLLOWS,
    FrameType.REQUEST_CHANNEL: FLAG_IGNORE | FLAG_METADATA | FLAG_FOLLOWS | FLAG_COMPLETE,
    FrameType.REQUEST_N: FLAG_IGNORE,
    FrameType.CANCEL: FLAG_IGNORE,
    FrameType.PAYLOAD: FLAG_IGNORE | FLAG_METADATA | FLAG_FOLLOWS | FLAG_COMPLETE | FLAG_NEXT,
    FrameType.ERROR: FLAG_IGNORE,
    FrameType.METADATA_PUSH: FLAG_IGNORE | FLAG_METADATA,
    FrameType.RESUME: FLAG_IGNORE,
    FrameType.RESUME_OK: FLAG_IGNORE,
    FrameType.EXT: FLAG_IGNORE | FLAG_METADATA,
}

# -- field strategies ------------------------------------------------------

payload_bytes = st.binary(max_size=64)
metadata = st.none() | st.binary(max_size=64)
stream_ids = st.integers(0, MAX_STREAM_ID)
request_stream_ids = st.integers(1, MAX_STREAM_ID)
positive_u31 = st.integers(1, MAX_U31)
any_u31 = st.integers(0, MAX_U31)
request_n = st.integers(1, MAX_REQUEST_N)
positions = st.integers(0, MAX_POSITION)
versions = st.integers(0, 0xFFFF)
ascii_text = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=40)
mime_types = ascii_text | st.text(
    st.characters(min_codepoint=32, max_codepoint=126), min_size=255, max_size=255
)
error_codes = st.sampled_from(list(ErrorCode)) | st.integers(0, 0xFFFFFFFF).map(
    lambda c: ErrorCode(c) if c in ErrorCode._value2member_map_ else c
)


def _bits(*names: str) -> dict[str, Any]:
    return {name: st.booleans() for name in names}


# -- one strategy per frame class -------------------------------------------

FRAME_STRATEGIES: dict[type, st.SearchStrategy[Any]] = {
    SetupFrame: st.builds(
        SetupFrame,
        keepalive_interval=positive_u31,
        max_lifetime=positive_u31,
        metadata_mime_type=mime_types,
        data_mime_type=mime_types,
        metadata=metadata,
        data=payload_bytes,
        resume_token=st.none() | st.binary(max_size=32),
        major_version=versions,
        minor_version=versions,
        **_bits("lease", "ignore"),
    ),
    LeaseFrame: st.builds(
        LeaseFrame, ttl=any_u31, number_of_requests=any_u31, metadata=metadata, **_bits("ignore")
    ),
    KeepaliveFrame: st.builds(
        KeepaliveFrame,
        last_received_position=positions,
        data=payload_bytes,
        **_bits("respond", "ignore"),
    ),
    RequestResponseFrame: st.builds(
        RequestResponseFrame,
        stream_id=request_stream_ids,
        data=payload_bytes,
        metadata=metadata,
        **_bits("follows", "ignore"),
    ),
    RequestFnfFrame: st.builds(
        RequestFnfFrame,
        stream_id=request_stream_ids,
        data=payload_bytes,
        metadata=metadata,
        **_bits("follows", "ignore"),
    ),
    RequestStreamFrame: st.builds(
        RequestStreamFrame,
        stream_id=request_stream_ids,
        initial_request_n=request_n,
        data=payload_bytes,
        metadata=metadata,
        **_bits("follows", "ignore"),
    ),
    RequestChannelFrame: st.builds(
        RequestChannelFrame,
        stream_id=request_stream_ids,
        initial_request_n=request_n,
        data=payload_bytes,
        metadata=metadata,
        **_bits("follows", "complete", "ignore"),
    ),
    RequestNFrame: st.builds(
        RequestNFrame, stream_id=stream_ids, request_n=request_n, **_bits("ignore")
    ),
    CancelFrame: st.builds(CancelFrame, stream_id=stream_ids, **_bits("ignore")),
    PayloadFrame: st.builds(
        PayloadFrame,
        stream_id=stream_ids,
        data=payload_bytes,
        metadata=metadata,
        **_bits("follows", "complete", "next", "ignore"),
    ),
    ErrorFrame: st.builds(
        ErrorFrame,
        stream_id=stream_ids,
        error_code=error_codes,
        data=payload_bytes,
        **_bits("ignore"),
    ),
    MetadataPushFrame: st.builds(
        MetadataPushFrame, metadata=payload_bytes, stream_id=stream_ids, **_bits("ignore")
    ),
    ResumeFrame: st.builds(
        ResumeFrame,
        resume_token=st.binary(max_size=32),
        last_received_server_position=positions,
        first_available_client_position=positions,
        major_version=versions,
        minor_version=versions,
        **_bits("ignore"),
    ),
    ResumeOkFrame: st.builds(
        ResumeOkFrame, last_received_client_position=positions, **_bits("ignore")
    ),
    ExtFrame: st.builds(
        ExtFrame,
        stream_id=stream_ids,
        extended_type=positive_u31,
        data=payload_bytes,
        metadata=metadata,
        **_bits("ignore"),
    ),
    UnknownFrame: st.builds(
        lambda sid, ftype, flags, body: UnknownFrame(
            sid, ftype, flags, body, bool(flags & FLAG_IGNORE)
        ),
        st.integers(0, 0xFFFFFFFF),
        st.sampled_from(UNKNOWN_FRAME_TYPES),
        st.integers(0, 0x3FF),
        payload_bytes,
    ),
}


def frames(*classes: type) -> st.SearchStrategy[Frame]:
    """Valid frames of the given classes (all frame classes when none given)."""
    chosen = classes or tuple(FRAME_STRATEGIES)
    return st.one_of([FRAME_STRATEGIES[c] for c in chosen])


@st.composite
def frame_bytes(draw: st.DrawFn) -> bytes:
    """Raw frame bytes (no prefix): a known frame type, only its defined flag
    bits, any stream ID and any body. Mostly invalid; when ``decode_frame``
    accepts them, ``encode_frame`` must give them back exactly."""
    ftype = draw(st.sampled_from(sorted(DEFINED_FLAGS)))
    flags = draw(st.integers(0, 0x3FF)) & DEFINED_FLAGS[ftype]
    sid = draw(st.sampled_from([0, 1, 2, MAX_STREAM_ID, 0x80000000]) | st.integers(0, 0xFFFFFFFF))
    body = draw(st.binary(max_size=48))
    return sid.to_bytes(4, "big") + (ftype << 10 | flags).to_bytes(2, "big") + body


@st.composite
def length_prefixed_stream(draw: st.DrawFn, max_frames: int = 12) -> tuple[list[Frame], bytes]:
    """A list of valid frames and their length-prefixed byte stream."""
    drawn = draw(st.lists(frames(), max_size=max_frames))
    return drawn, encode_frames_prefixed(drawn)


@st.composite
def split_points(draw: st.DrawFn, data: bytes) -> list[bytes]:
    """``data`` cut into chunks at arbitrary points (empty chunks included)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=16)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]
