"""The optional row encoding ``arrow``: each payload is one Arrow IPC stream
(schema + one record batch + end marker). Needs pyarrow, imported only when
this encoding is used. Faster than JSON lines on the writing side (columns
are built in C++; see docs/performance.md), for sinks that want columns."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from ._wire import WireError

__all__ = ["count_rows_arrow", "decode_rows_arrow", "encode_rows_arrow"]


def _to_batch(pa: Any, chunk: list[Any]) -> Any:
    first = chunk[0]
    fields = getattr(first, "__fields__", None)  # Spark Rows: one array per column
    if fields is not None:
        columns = [pa.array(column) for column in zip(*chunk, strict=True)]
        return pa.RecordBatch.from_arrays(columns, names=list(fields))
    if isinstance(first, dict):
        return pa.RecordBatch.from_pylist(chunk)
    raise TypeError(
        f"the arrow encoding takes Spark Rows or dicts, not {type(first).__name__}"
    )


def _ipc(pa: Any, batch: Any) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def encode_rows_arrow(
    rows: Iterable[Any], rows_per_payload: int, bytes_per_payload: int
) -> Iterator[tuple[bytes, int]]:
    """``(payload, rows in it)`` for batches of at most ``rows_per_payload``
    rows; a batch whose Arrow buffers pass ``bytes_per_payload`` is sliced
    (a single row travels alone). Lazy, like :func:`~._wire.encode_rows`."""
    if rows_per_payload <= 0 or bytes_per_payload <= 0:
        raise ValueError("rows_per_payload and bytes_per_payload must be positive")
    import pyarrow as pa

    it = iter(rows)
    while chunk := list(islice(it, rows_per_payload)):
        try:
            batch = _to_batch(pa, chunk)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeError(f"rows do not fit one Arrow schema: {exc}") from None
        n = batch.num_rows
        step = n if batch.nbytes <= bytes_per_payload else max(
            1, n * bytes_per_payload // batch.nbytes
        )
        for start in range(0, n, step):
            piece = batch.slice(start, step)
            yield _ipc(pa, piece), piece.num_rows


def _batches(data: bytes) -> Iterator[Any]:
    import pyarrow as pa

    try:
        yield from pa.ipc.open_stream(data)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        raise WireError(f"malformed Arrow IPC payload: {exc}") from None


def count_rows_arrow(data: bytes) -> int:
    """Rows in one Arrow IPC payload (its buffers are not copied)."""
    return sum(batch.num_rows for batch in _batches(data))


def decode_rows_arrow(data: bytes) -> list[Any]:
    """The rows of one Arrow IPC payload as dicts."""
    rows: list[Any] = []
    for batch in _batches(data):
        rows.extend(batch.to_pylist())
    return rows
