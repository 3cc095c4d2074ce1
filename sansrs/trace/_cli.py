"""``python -m sansrs.trace``: a dissector for byte traces and raw captures.

    python -m sansrs.trace decode FILE            frames of a trace, one per line
    python -m sansrs.trace decode --raw FILE      FILE is one direction's raw bytes
    python -m sansrs.trace info FILE              metadata, counts, sizes

Exit status: 0 when every frame is valid, 1 when any frame is invalid (each
is printed with its error and error code), 2 when the file cannot be read
(not a trace, corrupt, truncated) or on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from ..rsocket import MAX_FRAME_LENGTH, FrameType
from ._dissect import FrameInfo, StreamDissector, dissect_records, format_frame_info
from ._format import DataRecord, Direction, EndRecord, Record, TraceFormatError, TraceReader

__all__ = ["main"]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_UNREADABLE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sansrs.trace",
        description="Dissect RSocket byte traces (sansrs trace files) and raw captures.",
        epilog="Exit status: 0 all frames valid, 1 some frame invalid, 2 unreadable input.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    dec = sub.add_parser("decode", help="print every frame, one per line")
    dec.add_argument("file", type=Path)
    dec.add_argument(
        "--raw",
        action="store_true",
        help="FILE is a plain byte stream of length-prefixed frames (one direction)",
    )
    dec.add_argument("--preview", type=int, default=24, metavar="N", help="bytes of data shown")
    dec.add_argument(
        "--max-frame-size",
        type=int,
        default=MAX_FRAME_LENGTH,
        metavar="N",
        help="frame lengths above N are invalid (default: the 24-bit maximum)",
    )
    dec.add_argument("--chunks", action="store_true", help="also print every chunk and end record")
    info = sub.add_parser("info", help="print metadata, record and frame counts")
    info.add_argument("file", type=Path)
    return parser


def _framing(metadata: dict[str, object]) -> str:
    framing = metadata.get("framing", "length-prefixed")
    return framing if framing in ("length-prefixed", "message") else "length-prefixed"


def _decode(args: argparse.Namespace, out: TextIO) -> int:
    invalid = 0
    if args.raw:
        data = args.file.read_bytes()
        dissector = StreamDissector(None, max_frame_size=args.max_frame_size)
        infos: Iterator[FrameInfo] = iter(dissector.feed(data) + dissector.end())
        for info in infos:
            invalid += info.invalid
            print(format_frame_info(info, preview=args.preview), file=out)
    else:
        reader = TraceReader(args.file)
        print(f"# {json.dumps(reader.metadata, sort_keys=True)}", file=out)
        records: Iterator[Record] = iter(reader)
        if args.chunks:
            records = _echo_records(records, out)
        for info in dissect_records(
            records, max_frame_size=args.max_frame_size, framing=_framing(reader.metadata)
        ):
            invalid += info.invalid
            print(format_frame_info(info, preview=args.preview), file=out)
    print(f"# {invalid} invalid frame(s)", file=out)
    return EXIT_INVALID if invalid else EXIT_OK


def _echo_records(records: Iterator[Record], out: TextIO) -> Iterator[Record]:
    for record in records:
        if isinstance(record, DataRecord):
            print(
                f"{record.timestamp:10.6f} {record.direction.arrow} chunk {len(record.data)} bytes",
                file=out,
            )
        else:
            print(
                f"{record.timestamp:10.6f} {record.direction.arrow} end ({record.reason.name})",
                file=out,
            )
        yield record


def _info(args: argparse.Namespace, out: TextIO) -> int:
    reader = TraceReader(args.file)
    records = list(reader)
    print(f"file: {args.file}", file=out)
    print("metadata: " + json.dumps(reader.metadata, indent=2, sort_keys=True), file=out)
    duration = records[-1].timestamp if records else 0.0
    print(f"records: {len(records)}  duration: {duration:.6f} s", file=out)
    frames = {d: Counter[str]() for d in Direction}
    invalid = 0
    for info in dissect_records(
        records, max_frame_size=MAX_FRAME_LENGTH, framing=_framing(reader.metadata)
    ):
        assert info.direction is not None
        if info.invalid:
            invalid += 1
            frames[info.direction]["INVALID"] += 1
        elif info.frame is not None:
            try:
                name = FrameType(info.frame.frame_type).name
            except ValueError:
                name = "UNKNOWN"
            frames[info.direction][name] += 1
    for direction in Direction:
        chunks = [r for r in records if isinstance(r, DataRecord) and r.direction == direction]
        ends = [r for r in records if isinstance(r, EndRecord) and r.direction == direction]
        end = f"{ends[0].reason.name} at {ends[0].timestamp:.6f}" if ends else "none"
        counts = ", ".join(f"{k}={v}" for k, v in sorted(frames[direction].items())) or "none"
        print(
            f"{direction.arrow}: {len(chunks)} chunks, {sum(len(r.data) for r in chunks)} bytes,"
            f" end: {end}; frames: {counts}",
            file=out,
        )
    print(f"invalid frames: {invalid}", file=out)
    return EXIT_INVALID if invalid else EXIT_OK


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit status instead of exiting."""
    out = out if out is not None else sys.stdout
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_UNREADABLE
    try:
        if args.command == "decode":
            return _decode(args, out)
        return _info(args, out)
    except TraceFormatError as exc:
        out.flush()
        print(f"error: {args.file}: {exc.message}", file=sys.stderr)
        return EXIT_UNREADABLE
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
