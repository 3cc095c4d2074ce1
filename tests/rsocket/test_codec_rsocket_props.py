"""Property tests of the RSocket frame codec (hypothesis)."""

from __future__ import annotations

import struct
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sansrs.rsocket import (
    Frame,
    FrameReader,
    PayloadFrame,
    RemoteProtocolError,
    UnknownFrame,
    decode_frame,
    encode_frame,
    encode_frame_prefixed,
    encode_frames_prefixed,
)
from sansrs.rsocket._codec import _dec_payload
from sansrs.rsocket._encode import encode_payload
from tests.rsocket.strategies import DEFINED_FLAGS, FRAME_STRATEGIES, frame_bytes, frames


@pytest.mark.parametrize("cls", list(FRAME_STRATEGIES), ids=lambda c: c.__name__)
@given(data=st.data())
def test_encode_then_decode_is_identity(cls: type, data: Any) -> None:
    frame = data.draw(FRAME_STRATEGIES[cls])
    encoded = encode_frame(frame)
    decoded = decode_frame(encoded)
    assert decoded == frame
    assert type(decoded) is cls
    assert encode_frame(decoded) == encoded


@given(frame_bytes())
def test_decode_then_encode_gives_the_same_bytes(data: bytes) -> None:
    """Any frame decode accepts (defined flag bits only) encodes back exactly."""
    try:
        frame = decode_frame(data)
    except RemoteProtocolError:
        return
    assert encode_frame(frame) == data


@given(frames(), st.integers(0, 0x3FF))
def test_undefined_flag_bits_are_ignored(frame: Frame, noise: int) -> None:
    """Spec 'Handling the Unexpected' 8: flag bits a frame type does not
    define MUST be ignored."""
    if isinstance(frame, UnknownFrame):
        return
    data = bytearray(encode_frame(frame))
    noise &= ~DEFINED_FLAGS[int(frame.frame_type)]
    data[4] |= noise >> 8
    data[5] |= noise & 0xFF
    assert decode_frame(bytes(data)) == frame


@given(st.binary(max_size=80))
def test_arbitrary_bytes_raise_only_remote_protocol_error(data: bytes) -> None:
    try:
        frame = decode_frame(data)
    except RemoteProtocolError:
        return
    # Whatever decodes, encodes; and re-decodes to the same frame.
    assert decode_frame(encode_frame(frame)) == frame


@given(frame_bytes())
def test_arbitrary_known_type_bytes_raise_only_remote_protocol_error(data: bytes) -> None:
    try:
        decode_frame(data)
    except RemoteProtocolError as exc:
        assert exc.error_code in (0x001, 0x101)


@given(frames(PayloadFrame), st.sampled_from([b"", bytes.fromhex("000006 00000001 2400")]))
def test_payload_fast_paths_agree_with_the_general_ones(frame: PayloadFrame, pad: bytes) -> None:
    """encode_frame / encode_frame_prefixed / encode_frames_prefixed and
    decode_frame / FrameReader.feed each carry an inline copy of the PAYLOAD
    path (docs/performance.md, "RSocket frame codec"); all must match
    encode_payload and _dec_payload, and set every field (``repr`` reads
    them all)."""
    encoded = encode_frame(frame)
    assert encoded == encode_payload(frame)
    prefixed = len(encoded).to_bytes(3, "big") + encoded
    assert encode_frame_prefixed(frame) == encode_payload(frame, prefixed=True) == prefixed
    assert encode_frames_prefixed([frame, frame]) == prefixed * 2
    sid, tf = struct.unpack_from(">IH", encoded)
    general = _dec_payload(encoded, sid, tf)
    for decoded in (
        decode_frame(encoded),
        FrameReader().feed(pad + encode_frame_prefixed(frame))[-1],
    ):
        assert decoded == general == frame
        assert repr(decoded) == repr(general)
        assert all(getattr(decoded, f.name) == getattr(frame, f.name) for f in fields(frame))
