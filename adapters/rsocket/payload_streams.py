"""An RSocket stream as the application holds it, for each driver: the
generic drive layer's iterators (:class:`~..drive.streams.StreamIterator`,
:class:`~..drive.aio_streams.AsyncStream`) whose batches are
:class:`~.batch.PayloadBatch` es, as ``request_stream_batches`` hands out:
one batch type for every RSocket batch API (docs/adapters.md, "Batches").
Entries (a payload without metadata as its ``bytes``, or a Payload) become
Payloads by :data:`~.fast.PAYLOAD_ENTRIES` alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..drive.aio_streams import AsyncStream, AsyncStreamBatches
from ..drive.queues import CreditQueue
from ..drive.streams import StreamBatches, StreamIterator
from .batch import PayloadBatch
from .fast import PAYLOAD_ENTRIES, DataRuns
from .types import Payload

__all__ = ["AsyncPayloadStream", "PayloadStream"]

_payloads = PAYLOAD_ENTRIES.payloads


class PayloadStream(StreamIterator[Payload]):
    """A blocking RSocket stream: a :class:`StreamIterator` of Payloads fed
    by a :class:`~.fast.DataRuns` (items without metadata wait as their
    ``bytes``) whose :meth:`next_batch` is a :class:`PayloadBatch`."""

    def __init__(self, queue: CreditQueue[Payload | bytes], sink: DataRuns, **options: Any) -> None:
        self._sink = sink
        super().__init__(queue, make=self._payloads, **options)

    def _payloads(self, taken: Iterator[Payload | bytes]) -> Iterator[Payload]:
        # The sink's flag as of now: cleared before a Payload with metadata is put.
        return _payloads(taken, self._sink.plain)

    def next_batch(self) -> PayloadBatch:
        """Every payload that has arrived and not been handed out, as one
        :class:`PayloadBatch` (see :meth:`StreamIterator.next_batch`)."""
        entries = self.next_entries()
        return PAYLOAD_ENTRIES.batch(entries, self._sink.plain)

    def batches(self) -> StreamBatches[PayloadBatch]:
        """This stream as an iterator of :class:`PayloadBatch` es."""
        return StreamBatches(self, self.next_batch)


class AsyncPayloadStream(AsyncStream[Payload]):
    """An asyncio RSocket stream: an :class:`AsyncStream` of Payloads fed
    by its :attr:`sink`, a :class:`~.fast.DataRuns` (items without metadata
    wait as their ``bytes``, as on a blocking stream), whose
    :meth:`next_batch` is a :class:`PayloadBatch` of any size (its Payloads
    made as it is read: nothing for the garbage collector to promote)."""

    def __init__(self, prefetch: int, *args: Any, **options: Any) -> None:
        super().__init__(prefetch, *args, packing=PAYLOAD_ENTRIES, **options)
        #: What the engine feeds (the request's sink).
        self.sink = DataRuns(self)

    async def next_batch(self) -> PayloadBatch:
        """Every payload that has arrived and not been taken, as one
        :class:`PayloadBatch` (see :meth:`AsyncStream.next_batch`)."""
        made = self.made  # Payloads ahead of the entries: not all bytes
        entries = await self.next_entries()
        return PAYLOAD_ENTRIES.batch(entries, self.sink.plain and not made)

    def batches(self) -> AsyncStreamBatches[PayloadBatch]:
        """This stream as an async iterator of :class:`PayloadBatch` es."""
        return AsyncStreamBatches(self, self.next_batch)
