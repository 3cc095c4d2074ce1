"""What ``request_stream_batches`` hands out: :class:`PayloadBatch`, a
read-only sequence of payloads whose items are made as they are read.

A list of Payloads alive at once (thousands per hand-over with a large
prefetch) is tracked by the garbage collector: each batch brought young
collections, its survivors were promoted and full collections followed
(``bench_tcp.py`` row ``stream16b``: a quarter of the client's CPU per
item). A batch keeps the items without metadata as their ``bytes``
(untracked) and makes each Payload when it is read, by C calls while the
batch holds no Payload: iterating it costs what iterating a list costs,
and a Payload lives as long as the application keeps it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import overload

from .types import Payload

__all__ = ["PayloadBatch"]

#: ``new_tuple(Payload, (data, metadata))``: a Payload without NamedTuple's
#: ``__new__`` (as ``fast.new_tuple``; here to keep this module standalone).
_new_tuple = tuple.__new__


def payload_of(entry: Payload | bytes) -> Payload:
    """An entry (a Payload, or the data of one without metadata) as a Payload."""
    if type(entry) is bytes:
        return _new_tuple(Payload, (entry, None))
    return entry  # type: ignore[return-value]


def payloads_of(entries: Iterator[Payload | bytes], plain: bool) -> Iterator[Payload]:
    """``entries`` as Payloads made as they are iterated; ``plain``: all are
    ``bytes`` (made by C calls alone, no Python frame per item)."""
    if plain:
        return map(_new_tuple, repeat(Payload), zip(entries, repeat(None)))
    return map(payload_of, entries)


class PayloadBatch(Sequence[Payload]):
    """Payloads received together, in order: a read-only sequence (``len``,
    indexing, slices, iteration, ``in``, ``index``, ``count``, ``reversed``)
    equal to the list of the same payloads (``batch == [Payload(b"a")]``).
    ``list(batch)`` makes a list of them; :attr:`data` lists their data.

    ``entries`` are Payloads or, for a payload without metadata, its data
    as ``bytes``; ``plain`` promises they are all ``bytes``. The batch keeps
    ``entries`` (not a copy) and makes each Payload when it is read: a new,
    equal Payload at each read.
    """

    __slots__ = ("_entries", "_plain")
    __hash__ = None  # type: ignore[assignment]  # equal to a list: unhashable as one

    def __init__(self, entries: list[Payload | bytes], plain: bool = False) -> None:
        self._entries = entries
        self._plain = plain

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Payload]:
        return payloads_of(iter(self._entries), self._plain)

    @overload
    def __getitem__(self, index: int) -> Payload: ...

    @overload
    def __getitem__(self, index: slice) -> PayloadBatch: ...

    def __getitem__(self, index: int | slice) -> Payload | PayloadBatch:
        if isinstance(index, slice):
            return PayloadBatch(self._entries[index], self._plain)
        return payload_of(self._entries[index])

    @property
    def data(self) -> list[bytes]:
        """The payloads' data, in order (no Payload made when all are plain)."""
        if self._plain:
            return list(self._entries)  # type: ignore[arg-type]
        return [p.data for p in self]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PayloadBatch):
            return list(self) == list(other)
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"PayloadBatch({list(self)!r})"
