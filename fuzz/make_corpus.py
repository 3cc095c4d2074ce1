"""Regenerate the seed corpora in fuzz/corpus/ from the traces in tests/traces/.

    .venv/bin/python fuzz/make_corpus.py

- ``frame/``: every distinct frame body of every trace, plus one valid frame
  of each type the traces lack (LEASE, RESUME, RESUME_OK, EXT, ...) and a
  few malformed ones;
- ``stream/``: ``b"\\x00\\x00"`` + each direction's byte stream (the two
  parameter bytes of fuzz_stream.py);
- ``trace/``: each trace file, once with CRC checks on (``b"\\x00"``) and once
  off (``b"\\x01"``), the prefix byte of fuzz_trace.py.

File names are content hashes, so regenerating is idempotent and a stale
seed is removed.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from sansrs.rsocket import (
    ErrorCode,
    ErrorFrame,
    ExtFrame,
    Frame,
    LeaseFrame,
    LengthPrefixSplitter,
    MetadataPushFrame,
    RequestChannelFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    UnknownFrame,
    encode_frame,
)
from sansrs.trace import Direction, read_trace

ROOT = Path(__file__).resolve().parent.parent

TRACES = ROOT / "tests" / "traces"
CORPUS = Path(__file__).resolve().parent / "corpus"

EXTRA_FRAMES: list[Frame] = [
    LeaseFrame(ttl=1000, number_of_requests=5, metadata=b"lm"),
    ResumeFrame(b"token", 12, 3),
    ResumeOkFrame(7),
    ExtFrame(5, 0x1234, b"data", b"meta"),
    ErrorFrame(0, ErrorCode.CONNECTION_CLOSE, b"bye"),
    MetadataPushFrame(b""),
    RequestChannelFrame(3, 5, b"x", b"y", complete=True),
    SetupFrame(100, 1000, "a", "b", b"m", b"d", resume_token=b"t", lease=True),
    UnknownFrame(1, 0x10, 0x200, b"ignored", ignore=True),
]
MALFORMED_FRAMES = [
    b"",
    b"\x00\x00\x00\x01",
    b"\x00\x00\x00\x01\x20\x00\x00\x00\x00\x00",  # REQUEST_N n=0
    b"\x80\x00\x00\x01\x28\x20abc",  # PAYLOAD with the reserved stream bit
    b"\x00\x00\x00\x01\x29\x20\xff\xff\xff",  # PAYLOAD metadata longer than the frame
]


def _write(folder: Path, seeds: list[bytes]) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {hashlib.sha1(s).hexdigest()[:16]: s for s in seeds}
    for old in folder.iterdir():
        if old.name not in wanted:
            old.unlink()
    for name, seed in wanted.items():
        (folder / name).write_bytes(seed)
    return len(wanted)


def main() -> int:
    frames: list[bytes] = [encode_frame(f) for f in EXTRA_FRAMES] + MALFORMED_FRAMES
    streams: list[bytes] = []
    traces: list[bytes] = []
    for path in sorted(TRACES.glob("*.rstrace")):
        trace = read_trace(path)
        raw = path.read_bytes()
        traces += [b"\x00" + raw, b"\x01" + raw]
        for direction in Direction:
            stream = trace.data(direction)
            if stream:
                streams.append(b"\x00\x00" + stream)
                frames.extend(LengthPrefixSplitter().feed(stream))
    for name, seeds in (("frame", frames), ("stream", streams), ("trace", traces)):
        count = _write(CORPUS / name, seeds)
        size = sum(p.stat().st_size for p in (CORPUS / name).iterdir())
        print(f"fuzz/corpus/{name}: {count} seeds, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
