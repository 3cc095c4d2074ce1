"""RSocket frame codec throughput: sansrs vs rsocket-py on the same bytes.

Workload: N (default 200,000) PAYLOAD frames, 16 bytes of data each, N flag,
odd stream IDs; the TCP byte stream is the N frames each with its 24-bit
length prefix (25 bytes per frame). Every figure is frames per second, the
median of --runs (default 5) timed runs, garbage collector enabled as in a
real program (``--no-gc`` times with it off, as ``timeit`` does).

Decode rows:
  reader, one buffer   FrameReader().feed(the whole stream): one call, a list of N frames
  reader, 64 KiB       the stream fed in 64 KiB chunks, each chunk's frames dropped
                       after the call (what a connection does with socket reads)
  decode_frame         decode_frame(body) per frame, bodies pre-split
rsocket-py rows use its FrameParser (the stream in the same 64 KiB chunks:
its buffer is re-sliced per frame, so one 5 MB buffer would take hours) and
its parse_or_ignore per body.

Encode rows:
  encode_frame             encode_frame(f) per frame (no prefix)
  encode_frame_prefixed    encode_frame_prefixed(f) per frame
  encode_frames_prefixed   one call for all N frames, one joined buffer
rsocket-py rows use frame.serialize() and serialize_with_frame_size_header().

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


def median_rate(fn: Callable[[], Any], frames: int, runs: int, use_gc: bool) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        if not use_gc:
            gc.disable()
        try:
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        del result
        times.append(elapsed)
    return frames / statistics.median(times)


def drain(agen: Any) -> int:
    """Run rsocket-py's async-generator parser without an event loop (it never
    awaits); return how many frames it yielded."""
    count = 0
    step = agen.__anext__
    while True:
        try:
            step().send(None)
        except StopIteration:
            count += 1
        except StopAsyncIteration:
            return count


def _stream_id(i: int) -> int:
    return (2 * i + 1) & 0x7FFFFFFF


def _workload_frames(n: int) -> list[PayloadFrame]:
    return [PayloadFrame(_stream_id(i), DATA, None, next=True) for i in range(n)]


def _workload(n: int) -> tuple[bytes, list[bytes]]:
    """The length-prefixed stream and the unprefixed frame bodies."""
    frames = _workload_frames(n)
    return encode_frames_prefixed(frames), [encode_frame(f) for f in frames]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-gc", action="store_true", help="time with the GC disabled")
    args = parser.parse_args(argv)
    n, runs, use_gc = args.frames, args.runs, not args.no_gc

    results: dict[str, float] = {}

    def measure(key: str, fn: Callable[[], Any]) -> None:
        results[key] = median_rate(fn, n, runs, use_gc)

    # Phase 1, decode. Only the input bytes are alive (bytes objects are not
    # tracked by the GC), so the collector sees what decoding creates and
    # nothing of the benchmark's own.
    stream, bodies = _workload(n)
    chunks = [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)]
    expected = _workload_frames(n)
    assert FrameReader().feed(stream) == expected  # every decoder sees every frame
    assert [decode_frame(b) for b in bodies] == expected
    if rs_frame is not None:
        assert [rs_frame.parse_or_ignore(b).data for b in bodies[:100]] == [DATA] * 100
    del expected

    def reader_chunks() -> int:
        feed = FrameReader().feed
        count = 0
        for chunk in chunks:
            count += len(feed(chunk))  # frames dropped, as a connection does
        assert count == n
        return count

    measure("ours reader one buffer", lambda: FrameReader().feed(stream))
    measure("ours reader 64k", reader_chunks)
    measure("ours decode_frame", lambda: [decode_frame(b) for b in bodies])
    if rs_frame is not None:
        parse = rs_frame.parse_or_ignore

        def rs_parser_chunks() -> int:
            parser = FrameParser()
            count = 0
            for chunk in chunks:
                count += drain(parser.receive_data(chunk))
            assert count == n
            return count

        measure("rsocket-py parser 64k", rs_parser_chunks)
        measure("rsocket-py parse_or_ignore", lambda: [parse(b) for b in bodies])
    chunks.clear()

    # Phase 2, encode: the N frame objects of each implementation.
    ours = _workload_frames(n)
    assert [encode_frame(f) for f in ours] == bodies
    assert encode_frames_prefixed(ours) == stream
    measure("ours encode_frame", lambda: [encode_frame(f) for f in ours])
    measure("ours encode_frame_prefixed", lambda: [encode_frame_prefixed(f) for f in ours])
    measure("ours encode_frames_prefixed", lambda: encode_frames_prefixed(ours))
    ours.clear()
    if rs_frame is not None:
        theirs = []
        for i in range(n):
            payload = rs_frame.PayloadFrame()
            payload.stream_id = _stream_id(i)
            payload.data = DATA
            payload.flags_next = True
            theirs.append(payload)
        serialize_prefixed = rs_frame.serialize_with_frame_size_header
        assert [f.serialize() for f in theirs] == bodies  # the same bytes
        assert b"".join(serialize_prefixed(f) for f in theirs) == stream
        measure("rsocket-py serialize", lambda: [f.serialize() for f in theirs])
        measure(
            "rsocket-py serialize_with_frame_size_header",
            lambda: [serialize_prefixed(f) for f in theirs],
        )
        theirs.clear()

    def ratio(key: str, peer: str) -> float | None:
        return results[key] / results[peer] if peer in results else None

    rows = [
        ("decode", "FrameReader.feed, one buffer", results["ours reader one buffer"],
         ratio("ours reader one buffer", "rsocket-py parser 64k")),
        ("decode", "FrameReader.feed, 64 KiB chunks", results["ours reader 64k"],
         ratio("ours reader 64k", "rsocket-py parser 64k")),
        ("decode", "decode_frame per frame", results["ours decode_frame"],
         ratio("ours decode_frame", "rsocket-py parse_or_ignore")),
        ("encode", "encode_frame per frame", results["ours encode_frame"],
         ratio("ours encode_frame", "rsocket-py serialize")),
        ("encode", "encode_frame_prefixed per frame", results["ours encode_frame_prefixed"],
         ratio("ours encode_frame_prefixed", "rsocket-py serialize_with_frame_size_header")),
        ("encode", "encode_frames_prefixed, one call", results["ours encode_frames_prefixed"],
         ratio("ours encode_frames_prefixed", "rsocket-py serialize_with_frame_size_header")),
    ]  # fmt: skip
    peer_rows = [
        ("decode", "rsocket-py FrameParser, 64 KiB chunks", "rsocket-py parser 64k"),
        ("decode", "rsocket-py parse_or_ignore per frame", "rsocket-py parse_or_ignore"),
        ("encode", "rsocket-py serialize per frame", "rsocket-py serialize"),
        ("encode", "rsocket-py serialize_with_frame_size_header",
         "rsocket-py serialize_with_frame_size_header"),
    ]  # fmt: skip

    print(
        f"RSocket frame codec: {n} PAYLOAD frames, 16-byte data, {len(stream):,} bytes; "
        f"median of {runs} runs; GC {'on' if use_gc else 'off'}; "
        f"Python {platform.python_version()} on {platform.machine()}"
    )
    print()
    print("| op | sansrs | frames/s | x rsocket-py |")
    print("| --- | --- | ---: | ---: |")
    for op, name, rate, rel in rows:
        print(f"| {op} | {name} | {rate:,.0f} | {'' if rel is None else f'{rel:.1f}x'} |")
    if rs_frame is not None:
        print()
        print("| op | rsocket-py 0.4.20 | frames/s |")
        print("| --- | --- | ---: |")
        for op, name, key in peer_rows:
            print(f"| {op} | {name} | {results[key]:,.0f} |")
    else:
        print("\nrsocket-py not installed: no comparison", file=sys.stderr)


if __name__ == "__main__":
    main()
