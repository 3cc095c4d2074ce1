"""Fuzz target: ``FrameReader.feed`` over a length-prefixed byte stream.

Rule: nothing but ``RemoteProtocolError`` escapes; any chunking gives the same
frames and the same error code as one ``feed`` of the whole stream, and as the
reference path ``LengthPrefixSplitter`` + ``decode_frame`` (FrameReader has its
own fast path for PAYLOAD frames); every frame re-encodes stably.

Input: byte 0 picks ``max_frame_size`` (0: the 24-bit maximum, else
6 + 4 * byte), byte 1 seeds the chunk sizes, the rest is the stream.
Seeds: fuzz/corpus/stream/ (``b"\\x00\\x00" + one direction of a trace``).
"""

from __future__ import annotations

import random

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs import RemoteProtocolError
    from sansrs.rsocket import (
        MAX_FRAME_LENGTH,
        Frame,
        FrameReader,
        FramingError,
        LengthPrefixSplitter,
        decode_frame,
        encode_frame,
    )

Outcome = tuple[list[Frame], int | None]


def reference(stream: bytes, max_frame_size: int) -> Outcome:
    """Frames and error code the slow, obvious way."""
    error: int | None = None
    try:
        bodies = LengthPrefixSplitter(max_frame_size).feed(stream)
    except FramingError as exc:
        bodies, error = exc.frames, exc.error_code
    frames: list[Frame] = []
    for body in bodies:
        try:
            frames.append(decode_frame(body))
        except RemoteProtocolError as exc:
            return frames, exc.error_code
    return frames, error


def chunked(stream: bytes, max_frame_size: int, sizes: list[int]) -> Outcome:
    reader = FrameReader(max_frame_size)
    frames: list[Frame] = []
    offset = 0
    for size in sizes:
        chunk = stream[offset : offset + size]
        offset += size
        try:
            frames.extend(reader.feed(chunk))
        except FramingError as exc:
            frames.extend(exc.frames)
            # A broken reader keeps failing with the same code.
            try:
                reader.feed(b"\x00")
            except FramingError as again:
                assert again.error_code == exc.error_code and not again.frames
            else:
                raise AssertionError("FrameReader accepted bytes after an error") from None
            return frames, exc.error_code
    return frames, None


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    max_frame_size = MAX_FRAME_LENGTH if data[0] == 0 else 6 + 4 * data[0]
    rng = random.Random(data[1])
    stream = data[2:]
    sizes: list[int] = []
    total = 0
    while total <= len(stream):
        size = rng.choice((0, 1, 2, 3, 5, 9, 17, 64, 1000))
        sizes.append(size)
        total += size
    expected = reference(stream, max_frame_size)
    whole = chunked(stream, max_frame_size, [len(stream) + 1])
    pieces = chunked(stream, max_frame_size, sizes)
    if whole != expected:
        raise AssertionError(f"FrameReader {whole!r} != reference {expected!r}")
    if pieces != expected:
        raise AssertionError(f"chunked {sizes} gives {pieces!r} != {expected!r}")
    for frame in expected[0]:
        assert decode_frame(encode_frame(frame)) == frame


if __name__ == "__main__":
    run(test_one_input)
