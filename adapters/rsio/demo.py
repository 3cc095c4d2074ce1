"""The demo publishers of ``sansrs serve --protocol rsio``.

- ``counter`` (infinite) and ``counter/N`` (N elements): 0, 1, 2, ... as
  fixed-size 8-byte big-endian unsigned integers. Fixed-size mode: the
  engine reads them in bulk (``packed_reader``) and sends onNextPacked.
- ``blobs`` (3 elements) and ``blobs/N``: variable-size elements of
  ``BLOB_SIZE`` (3 MiB) bytes, larger than the default ``split_size``
  (1 MiB), so each leaves as onNextPart... onNextLastPart. Element i is the
  4-byte big-endian i repeated.

Each is a Reactive Streams Publisher too (``subscribe``), for any other use.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator
from typing import Any

from sansrs.streams import IterablePublisher, from_generator

__all__ = [
    "BLOB_SIZE",
    "COUNTER_SIZE",
    "BlobPublisher",
    "CounterPublisher",
    "blob",
    "demo_publishers",
]

COUNTER_SIZE = 8
BLOB_SIZE = 3 * 1024 * 1024
_U64_MAX = 2**64 - 1


def _counter_bytes(start: int, stop: int) -> bytes:
    values = array("Q", range(start, stop))
    if sys.byteorder == "little":
        values.byteswap()  # network order on the wire
    return values.tobytes()


class _CounterReader:
    __slots__ = ("_next", "_stop")

    def __init__(self, stop: int) -> None:
        self._next = 0
        self._stop = stop

    def read(self, max_count: int) -> bytes:
        start = self._next
        stop = min(self._stop, start + max_count)
        self._next = stop
        return _counter_bytes(start, stop) if stop > start else b""

    def exhausted(self) -> bool:
        return self._next >= self._stop

    def close(self) -> None:
        self._next = self._stop


class CounterPublisher:
    """``count`` 8-byte counters (None: until cancelled)."""

    element_size = COUNTER_SIZE

    def __init__(self, count: int | None = None) -> None:
        self.count = count
        self._stop = _U64_MAX if count is None else count

    def packed_reader(self) -> _CounterReader:
        return _CounterReader(self._stop)

    def _items(self) -> Iterator[bytes]:
        for i in range(self._stop):
            yield i.to_bytes(8, "big")

    def subscribe(self, subscriber: Any) -> None:
        from_generator(self._items).subscribe(subscriber)


def blob(i: int, size: int = BLOB_SIZE) -> bytes:
    """Element ``i`` of the ``blobs`` stream."""
    unit = (i & 0xFFFFFFFF).to_bytes(4, "big")
    return (unit * (size // 4 + 1))[:size]


class BlobPublisher:
    """``count`` elements of ``size`` bytes (sent split when large)."""

    def __init__(self, count: int = 3, size: int = BLOB_SIZE) -> None:
        self._publisher: IterablePublisher[bytes] = from_generator(
            lambda: (blob(i, size) for i in range(count))
        )

    def subscribe(self, subscriber: Any) -> None:
        self._publisher.subscribe(subscriber)


def demo_publishers(name: str) -> CounterPublisher | BlobPublisher | None:
    """Resolve a demo name (see the module doc); None if unknown."""
    base, _, arg = name.partition("/")
    if arg:
        if not arg.isdigit() or len(arg) > 18:
            return None
        n: int | None = int(arg)
    else:
        n = None
    if base == "counter":
        return CounterPublisher(n)
    if base == "blobs":
        return BlobPublisher(3 if n is None else n)
    return None
