"""Fuzz target: the trace reader (``TraceReader``) and the dissector behind it.

Rule: nothing but ``RemoteProtocolError`` (``TraceFormatError`` is one)
escapes reading; the dissector never raises on the records read; a trace
that reads cleanly is written back by ``TraceWriter`` and reads the same.

Input: byte 0 bit 0 set skips the CRC checks (so mutations reach the record
parser behind them), the rest is the file. Seeds: fuzz/corpus/trace/.
"""

from __future__ import annotations

import io

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs import LocalProtocolError, RemoteProtocolError
    from sansrs.trace import (
        DataRecord,
        Record,
        TraceReader,
        TraceWriter,
        dissect_records,
        format_frame_info,
    )

MAX_RECORD = 1 << 16


def test_one_input(data: bytes) -> None:
    if not data:
        return
    records: list[Record] = []
    try:
        reader = TraceReader(data[1:], max_record_size=MAX_RECORD, verify_checksums=not data[0] & 1)
        metadata = reader.metadata
        for record in reader:
            records.append(record)
    except RemoteProtocolError:
        complete = False
    else:
        complete = True
    framing = "message" if data[0] & 2 else "length-prefixed"
    for info in dissect_records(records, framing=framing):
        format_frame_info(info)
    if not complete:
        return
    out = io.BytesIO()
    try:
        writer = TraceWriter(out, metadata)
    except LocalProtocolError as exc:
        # The canonical JSON may be longer than the input's (1E2 -> 100.0).
        if "exceeds" in exc.message:
            return
        raise
    with writer:
        for r in records:
            if isinstance(r, DataRecord):
                writer.write_data(r.direction, r.timestamp, r.data)
            else:
                writer.write_end(r.direction, r.timestamp, r.reason)
    again = TraceReader(out.getvalue())
    assert again.metadata == metadata
    assert list(again) == records


if __name__ == "__main__":
    run(test_one_input)
