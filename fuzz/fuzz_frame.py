"""Fuzz target: ``sansrs.rsocket.decode_frame`` on one frame (no length prefix).

Rule: nothing but ``RemoteProtocolError`` escapes; a frame that decodes
encodes without error, and decode(encode(frame)) gives the same frame and the
same bytes again (encoding is stable); the length-prefixed encoders give
the same bytes behind a 24-bit prefix.
Input: the frame bytes as they are. Seeds: fuzz/corpus/frame/.
"""

from __future__ import annotations

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs import RemoteProtocolError
    from sansrs.rsocket import (
        decode_frame,
        encode_frame,
        encode_frame_prefixed,
        encode_frames_prefixed,
    )


def test_one_input(data: bytes) -> None:
    try:
        frame = decode_frame(data)
    except RemoteProtocolError:
        return
    encoded = encode_frame(frame)
    again = decode_frame(encoded)
    if again != frame:
        raise AssertionError(f"unstable decode: {frame!r} -> {encoded!r} -> {again!r}")
    if encode_frame(again) != encoded:
        raise AssertionError(f"unstable encode: {frame!r}")
    # The prefixed encoders have their own PAYLOAD fast path: same bytes.
    prefixed = len(encoded).to_bytes(3, "big") + encoded
    if encode_frame_prefixed(frame) != prefixed:
        raise AssertionError(f"encode_frame_prefixed differs for {frame!r}")
    if encode_frames_prefixed([frame, frame]) != prefixed * 2:
        raise AssertionError(f"encode_frames_prefixed differs for {frame!r}")


if __name__ == "__main__":
    run(test_one_input)
