"""The trace file format: round trips, and typed errors for every bad input."""

from __future__ import annotations

import io
import json
import math
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.trace import (
    FORMAT_VERSION,
    MAGIC,
    MAX_RECORD_SIZE,
    DataRecord,
    Direction,
    EndReason,
    EndRecord,
    Record,
    TraceFormatError,
    TraceReader,
    TraceWriter,
    read_trace,
)

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def _write(records: list[Record], metadata: dict[str, object] | None = None) -> bytes:
    buf = io.BytesIO()
    with TraceWriter(buf, metadata) as writer:
        for r in records:
            if isinstance(r, DataRecord):
                writer.write_data(r.direction, r.timestamp, r.data)
            else:
                writer.write_end(r.direction, r.timestamp, r.reason)
    return buf.getvalue()


SAMPLE: list[Record] = [
    DataRecord(direction=C2S, timestamp=0.0, data=b"\x00\x00\x06abcdef"),
    DataRecord(direction=S2C, timestamp=0.001, data=b"xy"),
    DataRecord(direction=C2S, timestamp=0.001, data=b"z"),
    EndRecord(direction=C2S, timestamp=0.5),
    EndRecord(direction=S2C, timestamp=0.75, reason=EndReason.ERROR),
]


def _header(version: int = FORMAT_VERSION, flags: int = 0, meta: bytes = b"{}") -> bytes:
    head = MAGIC + struct.pack(">HHI", version, flags, len(meta)) + meta
    return head + struct.pack(">I", zlib.crc32(head))


def _record(kind: int, direction: int, ts: float, body: bytes, crc: int | None = None) -> bytes:
    head = struct.pack(">BBdI", kind, direction, ts, len(body))
    value = zlib.crc32(head + body) if crc is None else crc
    return head + body + struct.pack(">I", value)


def _trace_end(count: int, ts: float = 0.0) -> bytes:
    return _record(3, 0, ts, struct.pack(">Q", count))


def _read_all(data: bytes, **kw: object) -> list[Record]:
    return list(TraceReader(data, **kw))  # type: ignore[arg-type]


def test_trace_error_is_a_remote_protocol_error() -> None:
    assert issubclass(TraceFormatError, RemoteProtocolError)


def test_round_trip_writer_reader_keeps_records_and_metadata() -> None:
    data = _write(SAMPLE, {"protocol": "rsocket", "n": 3, "nested": {"a": [1, 2]}})
    reader = TraceReader(data)
    assert reader.metadata == {"protocol": "rsocket", "n": 3, "nested": {"a": [1, 2]}}
    assert list(reader) == SAMPLE


def test_round_trip_through_a_path(tmp_path: Path) -> None:
    path = tmp_path / "t.rstrace"
    with TraceWriter(path, {"x": 1}) as writer:
        writer.write_data(C2S, 1.5, b"abc")
        writer.write_end(C2S, 2.0)
    trace = read_trace(path)
    assert trace.metadata == {"x": 1}
    assert trace.data(C2S) == b"abc" and trace.chunks(S2C) == []


@settings(max_examples=50, deadline=None)
@given(
    chunks=st.lists(
        st.tuples(st.sampled_from(list(Direction)), st.binary(min_size=1, max_size=64)),
        max_size=20,
    ),
    steps=st.lists(st.floats(0, 10, allow_nan=False), min_size=20, max_size=20),
)
def test_round_trip_property(chunks: list[tuple[Direction, bytes]], steps: list[float]) -> None:
    ts = 0.0
    records: list[Record] = []
    for (direction, data), step in zip(chunks, steps, strict=False):
        ts += step
        records.append(DataRecord(direction=direction, timestamp=ts, data=data))
    records.append(EndRecord(direction=S2C, timestamp=ts))
    assert _read_all(_write(records)) == records


def test_empty_trace_is_valid() -> None:
    assert _read_all(_write([])) == []


def test_every_truncation_is_a_typed_error() -> None:
    data = _write(SAMPLE, {"k": "v"})
    for n in range(len(data)):
        with pytest.raises(TraceFormatError):
            _read_all(data[:n])


def test_every_single_byte_corruption_is_a_typed_error() -> None:
    data = _write(SAMPLE)
    for i in range(len(data)):
        for mask in (0x01, 0x80):
            bad = bytearray(data)
            bad[i] ^= mask
            with pytest.raises(TraceFormatError):
                _read_all(bytes(bad))


def test_records_before_a_corruption_are_yielded_first() -> None:
    data = bytearray(_write(SAMPLE))
    data[-20] ^= 0xFF  # inside the last records
    reader = iter(TraceReader(bytes(data)))
    assert next(reader) == SAMPLE[0]
    with pytest.raises(TraceFormatError):
        list(reader)


def test_trailing_bytes_after_the_end_of_trace_are_rejected() -> None:
    with pytest.raises(TraceFormatError, match="trailing"):
        _read_all(_write(SAMPLE) + b"\x00")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "magic"),
        (b"GIF89a..", "magic"),
        (MAGIC + b"\x00", "truncated"),
        (_header(version=2), "version 2"),
        (_header(flags=1), "flags"),
        (_header(meta=b"[1, 2]"), "not a JSON object"),
        (_header(meta=b"\xff\xfe"), "UTF-8 JSON"),
        (_header(meta=b"{"), "UTF-8 JSON"),
        (_header(meta=b"[" * 60000), "UTF-8 JSON"),  # recursion in the JSON parser
        # Python's json accepts these, but they are not JSON and a writer
        # could not write them back (allow_nan=False).
        (_header(meta=b'{"a":NaN}'), "UTF-8 JSON"),
        (_header(meta=b'{"a":-Infinity}'), "UTF-8 JSON"),
        (_header(meta=b'{"a":1e400}'), "UTF-8 JSON"),
        (MAGIC + struct.pack(">HHI", 1, 0, 1 << 20), "metadata length"),
        (_header() + _record(9, 0, 0.0, b"x") + _trace_end(1), "record kind 9"),
        (_header() + _record(1, 2, 0.0, b"x") + _trace_end(1), "direction 2"),
        (_header() + _record(1, 0, 0.0, b"") + _trace_end(1), "empty data"),
        (_header() + _record(1, 0, -1.0, b"x") + _trace_end(1), "timestamp"),
        (_header() + _record(1, 0, math.nan, b"x") + _trace_end(1), "timestamp"),
        (_header() + _record(1, 0, math.inf, b"x") + _trace_end(1), "timestamp"),
        (
            _header() + _record(1, 0, 2.0, b"x") + _record(1, 0, 1.0, b"y") + _trace_end(2, 2.0),
            "backwards",
        ),
        (_header() + _record(2, 0, 0.0, b"\x00") + _record(1, 0, 0.0, b"x"), "after the end"),
        (_header() + _record(2, 1, 0.0, b"\x00") + _record(2, 1, 0.0, b"\x00"), "second end"),
        (_header() + _record(2, 0, 0.0, b"\x07") + _trace_end(1), "end-of-direction"),
        (_header() + _record(2, 0, 0.0, b"") + _trace_end(1), "end-of-direction"),
        (_header() + _record(1, 0, 0.0, b"x", crc=0) + _trace_end(1), "checksum"),
        (_header() + _record(1, 0, 0.0, b"x") + _trace_end(5), "declares 5"),
        (_header() + _record(3, 1, 0.0, b"\x00" * 8), "end-of-trace"),
        (_header() + _record(1, 0, 0.0, b"x"), "no end-of-trace"),
    ],
)
def test_malformed_traces_raise_trace_format_error(data: bytes, message: str) -> None:
    with pytest.raises(TraceFormatError, match=message):
        _read_all(data)


def test_record_length_is_bounded_before_reading_the_body() -> None:
    # A header claiming a 16 MiB record: rejected without reading 16 MiB.
    data = _header() + struct.pack(">BBdI", 1, 0, 0.0, MAX_RECORD_SIZE + 1)
    with pytest.raises(TraceFormatError, match="exceeds the limit"):
        _read_all(data)
    small = _write([DataRecord(direction=C2S, timestamp=0.0, data=b"x" * 100)])
    with pytest.raises(TraceFormatError, match="exceeds the limit 99"):
        _read_all(small, max_record_size=99)
    assert len(_read_all(small, max_record_size=100)) == 1


def test_verify_checksums_false_salvages_a_damaged_body() -> None:
    data = bytearray(_write([DataRecord(direction=C2S, timestamp=0.0, data=b"hello")]))
    data[data.index(b"hello")] = ord("j")
    with pytest.raises(TraceFormatError, match="checksum"):
        _read_all(bytes(data))
    (record,) = _read_all(bytes(data), verify_checksums=False)
    assert isinstance(record, DataRecord) and record.data == b"jello"


def test_a_reader_iterates_once() -> None:
    reader = TraceReader(_write(SAMPLE))
    list(reader)
    with pytest.raises(LocalProtocolError):
        list(reader)


def test_metadata_is_canonical_json() -> None:
    data = _write([], {"b": 1, "a": "é"})
    length = struct.unpack(">I", data[12:16])[0]
    assert json.loads(data[16 : 16 + length]) == {"a": "é", "b": 1}


@pytest.mark.parametrize(
    "misuse",
    [
        lambda w: w.write_data(C2S, 0.0, b""),
        lambda w: w.write_data(C2S, -0.1, b"x"),
        lambda w: w.write_data(C2S, math.nan, b"x"),
        lambda w: (w.write_data(C2S, 2.0, b"x"), w.write_data(S2C, 1.0, b"y")),
        lambda w: (w.write_end(C2S, 0.0), w.write_data(C2S, 0.0, b"x")),
        lambda w: (w.write_end(S2C, 0.0), w.write_end(S2C, 0.0)),
        lambda w: (w.close(), w.write_data(C2S, 0.0, b"x")),
    ],
)
def test_writer_misuse_is_a_local_protocol_error(misuse: object) -> None:
    writer = TraceWriter(io.BytesIO())
    with pytest.raises(LocalProtocolError):
        misuse(writer)  # type: ignore[operator]


def test_writer_rejects_oversized_chunks_and_metadata() -> None:
    writer = TraceWriter(io.BytesIO())
    with pytest.raises(LocalProtocolError):
        writer.write_data(C2S, 0.0, bytes(MAX_RECORD_SIZE + 1))
    with pytest.raises(LocalProtocolError):
        TraceWriter(io.BytesIO(), {"big": "x" * 70000})


def test_writer_close_is_idempotent_and_tracks_ends() -> None:
    buf = io.BytesIO()
    writer = TraceWriter(buf)
    writer.write_end(S2C, 0.0)
    assert writer.ended == {S2C}
    writer.close()
    writer.close()
    assert _read_all(buf.getvalue()) == [EndRecord(direction=S2C, timestamp=0.0)]
