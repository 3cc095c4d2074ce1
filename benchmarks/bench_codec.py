"""RSocket frame codec throughput: sansrs vs rsocket-py on the same bytes.

Workload: N (default 200,000) PAYLOAD frames, 16 bytes of data each, N flag,
odd stream IDs; the TCP byte stream is the N frames each with its 24-bit
length prefix (25 bytes a frame). Both implementations encode to, and decode
from, exactly these bytes (checked before timing). Every figure is frames per
second, the median of --runs (default 5) timed runs; sansrs and rsocket-py
runs alternate so load on the machine hits both alike, and each run is timed
in CPU time of this process (``time.process_time``), so other processes on
the shared 2-core machine do not count. The garbage collector
is on, as in a real program (``--no-gc`` turns it off, as ``timeit`` does).

Decode rows:
  stream in 64 KiB chunks   the stream fed in 64 KiB pieces (a socket read),
                            each piece's frames dropped after the call, as a
                            connection does: sansrs FrameReader.feed,
                            rsocket-py FrameParser.receive_data
  stream, all N kept        all N frames alive at the end: sansrs one
                            FrameReader.feed of the whole 5 MB stream,
                            rsocket-py FrameParser on the 64 KiB pieces (its
                            buffer is re-sliced per frame, so one 5 MB
                            buffer would take hours); this row measures
                            CPython's cyclic GC as much as the codec
  per frame                 decode_frame vs parse_or_ignore on pre-split
                            bodies, each frame dropped / all kept
Encode rows: encode_frame vs frame.serialize(), encode_frame_prefixed vs
serialize_with_frame_size_header, encode_frames_prefixed (one call, one
joined buffer) vs joining serialize_with_frame_size_header of each frame.

Usage: python benchmarks/bench_codec.py [--frames N] [--runs R] [--no-gc]
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from sansrs.rsocket import (
    FrameReader,
    PayloadFrame,
    decode_frame,
    encode_frame,
    encode_frame_prefixed,
    encode_frames_prefixed,
)

try:
    from rsocket import frame as rs_frame
    from rsocket.frame_parser import FrameParser
except ImportError:  # pragma: no cover - rsocket-py is a test extra
    rs_frame = None
    FrameParser = None

CHUNK = 64 * 1024
DATA = b"0123456789abcdef"


def timed(fn: Callable[[], Any], use_gc: bool) -> float:
    gc.collect()
    if not use_gc:
        gc.disable()
    try:
        start = time.process_time()
        result = fn()
        elapsed = time.process_time() - start
    finally:
        gc.enable()
    del result
    return elapsed


def drain(agen: Any) -> list[Any]:
    """Run rsocket-py's async-generator parser without an event loop (it never
    awaits); return the frames it yielded."""
    frames = []
    step = agen.__anext__
    while True:
        try:
            step().send(None)
        except StopIteration as item:
            frames.append(item.value)
        except StopAsyncIteration:
            return frames


def _stream_id(i: int) -> int:
    return (2 * i + 1) & 0x7FFFFFFF


def _workload_frames(n: int) -> list[PayloadFrame]:
    return [PayloadFrame(_stream_id(i), DATA, None, next=True) for i in range(n)]


def _workload(n: int) -> tuple[bytes, list[bytes]]:
    """The length-prefixed stream and the unprefixed frame bodies."""
    frames = _workload_frames(n)
    return encode_frames_prefixed(frames), [encode_frame(f) for f in frames]


Case = tuple[str, str, Callable[[], Any], Callable[[], Any] | None]


def run_cases(
    cases: list[Case], n: int, runs: int, use_gc: bool
) -> list[tuple[str, str, float, float | None]]:
    """Time each case's sansrs and rsocket-py function alternately (so load
    drift hits both alike); return (op, label, ours/s, theirs/s) medians."""
    times: dict[tuple[int, int], list[float]] = {}
    for _ in range(runs):
        for i, (_, _, ours, theirs) in enumerate(cases):
            for j, fn in enumerate((ours, theirs)):
                if fn is not None:
                    times.setdefault((i, j), []).append(timed(fn, use_gc))
    out = []
    for i, (op, label, _, theirs) in enumerate(cases):
        ours_rate = n / statistics.median(times[i, 0])
        theirs_rate = n / statistics.median(times[i, 1]) if theirs is not None else None
        out.append((op, label, ours_rate, theirs_rate))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-gc", action="store_true", help="time with the GC disabled")
    args = parser.parse_args(argv)
    n, runs, use_gc = args.frames, args.runs, not args.no_gc
    peer = rs_frame is not None

    # Phase 1, decode. Only the input bytes are alive (bytes objects are not
    # tracked by the GC), so the collector sees what decoding creates and
    # nothing of the benchmark's own.
    stream, bodies = _workload(n)
    chunks = [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)]
    expected = _workload_frames(n)
    assert FrameReader().feed(stream) == expected  # every decoder sees every frame
    assert [decode_frame(b) for b in bodies] == expected
    expected.clear()
    if peer:
        assert [rs_frame.parse_or_ignore(b).data for b in bodies[:100]] == [DATA] * 100

    def ours_chunks(keep: bool) -> Callable[[], Any]:
        def run() -> Any:
            feed = FrameReader().feed
            kept: list[Any] = []
            count = 0
            for chunk in chunks:
                frames = feed(chunk)
                count += len(frames)
                if keep:
                    kept += frames
            assert count == n
            return kept

        return run

    def theirs_chunks(keep: bool) -> Callable[[], Any]:
        def run() -> Any:
            receive = FrameParser().receive_data
            kept: list[Any] = []
            count = 0
            for chunk in chunks:
                frames = drain(receive(chunk))
                count += len(frames)
                if keep:
                    kept += frames
            assert count == n
            return kept

        return run

    def ours_each() -> None:
        for body in bodies:
            decode_frame(body)

    def theirs_each() -> None:
        for body in bodies:
            parse(body)

    parse = rs_frame.parse_or_ignore if peer else None
    decode_cases: list[Case] = [
        ("decode", "stream in 64 KiB chunks, frames dropped per chunk (FrameReader.feed)",
         ours_chunks(False), theirs_chunks(False) if peer else None),
        ("decode", "stream, all N frames kept (FrameReader.feed: one call)",
         lambda: FrameReader().feed(stream), theirs_chunks(True) if peer else None),
        ("decode", "per frame, each dropped (decode_frame)",
         ours_each, theirs_each if peer else None),
        ("decode", "per frame, all N kept in a list (decode_frame)",
         lambda: [decode_frame(b) for b in bodies],
         (lambda: [parse(b) for b in bodies]) if peer else None),
    ]  # fmt: skip
    rows = run_cases(decode_cases, n, runs, use_gc)
    chunks.clear()

    # Phase 2, encode: the N frame objects of each implementation.
    ours = _workload_frames(n)
    assert [encode_frame(f) for f in ours] == bodies
    assert encode_frames_prefixed(ours) == stream
    theirs: list[Any] = []
    if peer:
        for i in range(n):
            payload = rs_frame.PayloadFrame()
            payload.stream_id = _stream_id(i)
            payload.data = DATA
            payload.flags_next = True
            theirs.append(payload)
        serialize_prefixed = rs_frame.serialize_with_frame_size_header
        assert [f.serialize() for f in theirs] == bodies  # the same bytes
        assert b"".join(serialize_prefixed(f) for f in theirs) == stream
    encode_cases: list[Case] = [
        ("encode", "per frame (encode_frame)",
         lambda: [encode_frame(f) for f in ours],
         (lambda: [f.serialize() for f in theirs]) if peer else None),
        ("encode", "per frame with length prefix (encode_frame_prefixed)",
         lambda: [encode_frame_prefixed(f) for f in ours],
         (lambda: [serialize_prefixed(f) for f in theirs]) if peer else None),
        ("encode", "all N frames into one stream (encode_frames_prefixed)",
         lambda: encode_frames_prefixed(ours),
         (lambda: b"".join([serialize_prefixed(f) for f in theirs])) if peer else None),
    ]  # fmt: skip
    rows += run_cases(encode_cases, n, runs, use_gc)

    print(
        f"RSocket frame codec: {n:,} PAYLOAD frames, 16-byte data, {len(stream):,} bytes; "
        f"median of {runs} runs; GC {'on' if use_gc else 'off'}; "
        f"Python {platform.python_version()} on {platform.machine()}"
    )
    print()
    print("| op | workload | sansrs frames/s | rsocket-py frames/s | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for op, label, ours_rate, theirs_rate in rows:
        if theirs_rate is None:
            print(f"| {op} | {label} | {ours_rate:,.0f} | | |")
        else:
            print(
                f"| {op} | {label} | {ours_rate:,.0f} | {theirs_rate:,.0f} "
                f"| {ours_rate / theirs_rate:.1f}x |"
            )
    if not peer:
        print("\nrsocket-py not installed: no comparison", file=sys.stderr)


if __name__ == "__main__":
    main()
