"""The Spark wire formats and the row codec (no Spark, no sockets)."""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest
from sansrs.adapters.spark import (
    Ack,
    JobRequest,
    ReadRequest,
    WireError,
    WriteHeader,
    decode_rows,
    encode_rows,
)


class FakeRow(tuple[Any, ...]):
    """Shaped like pyspark's Row: a tuple with ``__fields__``."""

    __fields__ = ("device", "n")


def test_encode_rows_dicts_tuples_and_row_like_values() -> None:
    rows: list[Any] = [{"a": 1}, (1, "x"), 3, "s", None]
    (batch,) = encode_rows(rows, 100, 1 << 20)
    assert batch == b'{"a":1}\n[1,"x"]\n3\n"s"\nnull\n'
    assert decode_rows(batch) == [{"a": 1}, [1, "x"], 3, "s", None]
    spark_rows = [FakeRow(("d1", 1)), FakeRow(("d2", 2))]
    (batch,) = encode_rows(spark_rows, 100, 1 << 20)
    assert decode_rows(batch) == [{"device": "d1", "n": 1}, {"device": "d2", "n": 2}]


def test_encode_rows_cuts_by_rows_and_by_bytes() -> None:
    batches = list(encode_rows(({"i": i} for i in range(10)), 3, 1 << 20))
    assert [b.count(b"\n") for b in batches] == [3, 3, 3, 1]
    batches = list(encode_rows(["x" * 100, "y", "z" * 300], 100, 150))
    # a batch never passes 150 bytes; the 300-byte row travels alone
    assert [decode_rows(b) for b in batches] == [["x" * 100, "y"], ["z" * 300]]
    assert list(encode_rows([], 10, 10)) == []
    with pytest.raises(ValueError):
        list(encode_rows([1], 0, 10))


def test_encode_rows_is_lazy() -> None:
    pulled = 0

    def rows() -> Any:
        nonlocal pulled
        for i in range(1000):
            pulled += 1
            yield i

    batches = encode_rows(rows(), 10, 1 << 20)
    next(batches)
    assert pulled <= 11


def test_values_json_lacks_are_encoded() -> None:
    row = {
        "t": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "d": datetime.date(2026, 1, 2),
        "x": decimal.Decimal("1.50"),
        "b": b"\x00\xff",
        "nested": FakeRowDict(),
    }
    (batch,) = encode_rows([row], 10, 1 << 20)
    assert decode_rows(batch) == [
        {"t": "2026-01-02T03:04:05", "d": "2026-01-02", "x": "1.50", "b": "AP8=",
         "nested": {"k": 1}}
    ]
    with pytest.raises(TypeError):
        list(encode_rows([{"o": object()}], 10, 100))


class FakeRowDict:
    def asDict(self) -> dict[str, int]:
        return {"k": 1}


def test_newlines_inside_strings_survive() -> None:
    (batch,) = encode_rows([{"s": "a\nb"}, "c\n"], 10, 1 << 20)
    assert decode_rows(batch) == [{"s": "a\nb"}, "c\n"]


def test_decode_rows_rejects_malformed_batches() -> None:
    assert decode_rows(b"") == []
    with pytest.raises(WireError):
        decode_rows(b'{"a":1}')  # no final newline
    with pytest.raises(WireError):
        decode_rows(b"{nope\n")


def test_write_header_round_trip_and_validation() -> None:
    h = WriteHeader(route="r", app="app", write="w", partition=3, attempt=1, commit="job")
    assert WriteHeader.from_bytes(h.to_bytes()) == h
    assert h.key == ("app", "w", 3)
    bad: list[Any] = [
        None,
        b"",
        b"[1]",
        b"{not json",
        b'{"route": "r", "app": "a", "write": "w"}',
        b'{"route": "r", "app": "a", "write": "w", "partition": true}',
        b'{"route": "r", "app": "a", "write": "w", "partition": -1}',
        b'{"route": "r", "app": "a", "write": "w", "partition": 0, "v": 2}',
        b'{"route": "r", "app": "a", "write": "w", "partition": 0, "encoding": "csv"}',
        b'{"route": "r", "app": "a", "write": "w", "partition": 0, "commit": "never"}',
        b'{"route": "r", "app": "a", "write": "w", "partition": 0, "attempt": "1"}',
    ]
    for data in bad:
        with pytest.raises(WireError):
            WriteHeader.from_bytes(data)


def test_read_request_ack_and_job_request_round_trip() -> None:
    r = ReadRequest(route="events", partition=2, partitions=4, options={"n": 5})
    assert ReadRequest.from_bytes(r.to_bytes()) == r
    for data in (
        b'{"route": "e", "partition": 4, "partitions": 4}',
        b'{"route": "e", "partition": 0, "partitions": 1, "options": []}',
        b'{"route": 1, "partition": 0, "partitions": 1}',
    ):
        with pytest.raises(WireError):
            ReadRequest.from_bytes(data)
    a = Ack(partition=1, attempt=0, rows=10, nbytes=100, duplicate=True)
    assert Ack.from_bytes(a.to_bytes()) == a
    j = JobRequest(op="commit", route="s", app="a", write="w", partitions=(0, 2))
    assert JobRequest.from_bytes(j.to_bytes()) == j
    assert json.loads(j.to_bytes())["partitions"] == [0, 2]
    for data in (
        b'{"op": "drop", "route": "s", "app": "a", "write": "w"}',
        b'{"op": "commit", "route": "s", "app": "a", "write": "w", "partitions": ["1"]}',
    ):
        with pytest.raises(WireError):
            JobRequest.from_bytes(data)


# -- the optional encoding "arrow" ------------------------------------------


def test_arrow_payloads_round_trip_rows_and_dicts() -> None:
    from sansrs.adapters.spark._arrow import (
        count_rows_arrow,
        decode_rows_arrow,
        encode_rows_arrow,
    )

    rows = [FakeRow((f"d{i}", i)) for i in range(25)]
    payloads = list(encode_rows_arrow(rows, 10, 1 << 20))
    assert [n for _, n in payloads] == [10, 10, 5]
    assert [count_rows_arrow(p) for p, _ in payloads] == [10, 10, 5]
    decoded = [r for p, _ in payloads for r in decode_rows_arrow(p)]
    assert decoded == [{"device": f"d{i}", "n": i} for i in range(25)]
    dicts = [{"a": i, "s": "x" * 100} for i in range(50)]
    sliced = list(encode_rows_arrow(dicts, 50, 1000))  # ~5 KB of buffers: cut
    assert len(sliced) > 1 and sum(n for _, n in sliced) == 50
    assert [r for p, _ in sliced for r in decode_rows_arrow(p)] == dicts
    assert list(encode_rows_arrow([], 10, 10)) == []


def test_arrow_encoding_refuses_what_it_cannot_carry() -> None:
    from sansrs.adapters.spark._arrow import count_rows_arrow, encode_rows_arrow

    with pytest.raises(TypeError, match="Spark Rows or dicts"):
        list(encode_rows_arrow([(1, 2)], 10, 100))
    with pytest.raises(TypeError, match="one Arrow schema"):
        list(encode_rows_arrow([{"a": 1}, {"a": "x"}], 10, 1 << 20))
    for garbage in (b"", b"not arrow at all", b"\xff\xff\xff\xff\x08\x00\x00\x00abc"):
        with pytest.raises(WireError, match="malformed Arrow IPC payload"):
            count_rows_arrow(garbage)
    header = WriteHeader(route="r", app="a", write="w", partition=0, encoding="arrow")
    assert WriteHeader.from_bytes(header.to_bytes()).encoding == "arrow"
