"""What the engines deliver inbound items to under asyncio (on the event
loop's thread), as application coroutines take them:

- :class:`AsyncStream`: an inbound stream as an async iterator with a
  prefetch window (the engine's sink on one side, ``async for`` on the other),
  and :class:`AsyncStreamBatches`, the same a list at a time;
- :class:`FutureSink`: a single answer into a future.

Re-exported by :mod:`.aio` (their import path of old).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from itertools import repeat, starmap
from typing import Any, Generic, Protocol, Self, TypeVar

from .errors import seconds
from .queues import refill_batch

__all__ = [
    "PACKED_BATCH",
    "AsyncStream",
    "AsyncStreamBatches",
    "FutureSink",
    "Packing",
]

T = TypeVar("T")

#: The most packed entries made items at once (one ``unpack_all``), for
#: ``async for`` and ``next_batch`` alike, once anything was put packed
#: (:meth:`AsyncStream.put_packed`, :class:`Packing`): what is made at once
#: stays below the garbage collector's first threshold (700 allocations by
#: default), so it dies young, never promoted and never the cause of a full
#: collection (``bench_tcp.py`` rows ``stream16`` / ``stream16b``,
#: ``--impl sansrs-asyncio``).
PACKED_BATCH = 512


class Packing(Protocol[T]):
    """How an :class:`AsyncStream` turns the entries its producer queued
    packed (:meth:`AsyncStream.put_packed`: e.g. a protocol's run of items
    as their bytes, which the garbage collector does not track) into items
    as the consumer takes them. Items put as themselves (``put``,
    ``put_many``) share the queue: ``unpack`` gives such an item back as is."""

    def unpack(self, entry: Any) -> T:
        """One entry (packed, or an item) as the item it stands for."""
        ...

    def unpack_all(self, entries: list[Any]) -> list[T]:
        """``[unpack(e) for e in entries]``, made as cheaply as it can be."""
        ...


class FutureSink(Generic[T]):
    """At most one item (a request-response answer) into ``future``:
    completion without an item gives ``None``, an error raises it."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[T | None]) -> None:
        self.future = future

    @property
    def done(self) -> bool:
        return self.future.done()

    def put(self, item: T) -> None:
        if not self.future.done():
            self.future.set_result(item)

    def put_many(self, items: list[T]) -> None:
        self.put(items[0])

    def finish(self, error: BaseException | None = None) -> None:
        if not self.future.done():
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)

    def close(self, error: BaseException | None = None) -> None:
        if not self.future.done():
            self.future.cancel()


class AsyncStream(Generic[T]):
    """An inbound stream as an async iterator (``async for``) that keeps a
    prefetch window: each time ``batch`` units (default half the window)
    have been consumed, that many more are requested with ``request_more(n)``.
    ``units(item)`` counts what one item is worth (1 by default; a packed
    batch of fixed-size elements counts its elements). ``aclose()`` (or
    leaving ``async with``) cancels with ``cancel()`` if the stream is still
    running. ``timeout`` bounds each wait for an item (``TimeoutError``).

    The engine feeds it as a sink (``put``, ``put_many``, ``put_packed``
    alias ``put_data``, ``finish``, ``close``) on the event loop's thread;
    ``starting`` is awaited before the first item (e.g. a channel's first
    outbound item).

    ``packing`` (optional) lets the producer queue items packed
    (``put_packed``, :class:`Packing`: e.g. a protocol's payloads as their
    bytes, which the garbage collector does not track), made items only as
    the consumer takes them: the items handed out, their order, the window
    and the errors are the same as if they had been put as items."""

    # The keywords of its synchronous twin, drive.streams.StreamIterator, by choice.
    def __init__(
        self,
        prefetch: int,
        request_more: Callable[[int], None],
        cancel: Callable[[], None],
        *,
        timeout: float | None = None,
        batch: int | None = None,
        units: Callable[[T], int] | None = None,
        starting: Awaitable[None] | None = None,
        explain: Callable[[], str] | None = None,
        packing: Packing[T] | None = None,
    ) -> None:
        self._request_more = request_more
        self._cancel = cancel
        self._timeout = timeout
        self._explain = explain
        self._batch = refill_batch(prefetch, batch)
        self._units = units
        #: Units still to consume before ``request_more`` (``batch`` less
        #: those consumed since the last one): one decrement per item.
        self._left = self._batch
        self._packing = packing
        #: Something was put packed: entries are unpacked as they are taken.
        self._packed = False
        #: Where an engine may hand a run of items packed (``put_packed``),
        #: if this stream takes them so; None: it takes items only.
        self.put_data: Callable[[list[Any]], None] | None = (
            None if packing is None else self.put_packed
        )
        # What the consumer has not taken: items and entries put packed
        # (the sink's side), and items made ready, older than all of those.
        self._items: deque[Any] = deque()
        self._ready: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False
        self._error: BaseException | None = None
        self._cancelled = False
        self._starting = starting

    # -- sink side (engine, loop thread) --------------------------------------
    @property
    def done(self) -> bool:
        return self._done

    def put(self, item: T) -> None:
        self._items.append(item)
        self._notify()

    def put_many(self, items: list[T]) -> None:
        self._items.extend(items)
        self._notify()

    def put_packed(self, entries: list[Any]) -> None:
        """Items packed, one entry each (what ``packing.unpack`` turns into
        items): made items only as the consumer takes them."""
        if self._packing is None:
            raise TypeError("put_packed needs a stream made with packing=")
        self._packed = True
        self._items.extend(entries)
        self._notify()

    def finish(self, error: BaseException | None = None) -> None:
        if not self._done:
            self._done = True
            self._error = error
        self._notify()

    def close(self, error: BaseException | None = None) -> None:
        self._done = True
        self._items.clear()
        self._ready.clear()
        self._notify()

    def _notify(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- consumer side ----------------------------------------------------------
    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        ready = self._ready
        if not ready:
            ready = await self._refill()  # returns with items ready, or raises
        item: T = ready.popleft()
        if self._units is not None:
            self._left -= self._units(item)
        else:
            self._left -= 1
        if self._left <= 0:
            self._consumed()
        return item

    async def _refill(self) -> deque[T]:
        """Items ready for the consumer, waiting for them (as
        :meth:`_arrival`): everything queued, or once anything was put
        packed at most :data:`PACKED_BATCH`, made by one ``unpack_all``."""
        await self._arrival()
        items = self._items
        if not self._packed:  # the queue itself becomes the ready items
            self._ready, self._items = items, self._ready
            return items
        ready = self._ready
        packing: Packing[T] = self._packing  # type: ignore[assignment]  # put_packed checked it
        if len(items) <= PACKED_BATCH:
            ready.extend(packing.unpack_all(list(items)))
            items.clear()
        else:
            ready.extend(packing.unpack_all(list(starmap(items.popleft, repeat((), PACKED_BATCH)))))
        return ready

    def _consumed(self) -> None:
        """``batch`` units (or more) were consumed: ask for that many more."""
        if not self._done:
            n, self._left = self._batch - self._left, self._batch
            self._request_more(n)

    async def _arrival(self) -> None:
        """Until an item is queued (``starting`` awaited first): raises the
        stream's error once, then ``StopAsyncIteration``, when it has ended."""
        if self._starting is not None:
            starting, self._starting = self._starting, None
            await starting
        items = self._items
        while not items:
            if self._done:
                error, self._error = self._error, None
                if error is not None and not self._cancelled:
                    self._cancelled = True  # raise once, then end
                    raise error
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                if self._timeout is None:
                    await self._waiter
                else:
                    try:
                        await asyncio.wait_for(self._waiter, self._timeout)
                    except TimeoutError:
                        raise TimeoutError(self._no_item(self._timeout)) from None
            finally:
                self._waiter = None

    def _no_item(self, timeout: float) -> str:
        """A timeout's message, as ``CreditQueue`` says it, with ``explain``'s reason."""
        why = self._explain() if self._explain is not None else ""
        return f"no item within {seconds(timeout)}" + (f": {why}" if why else "")

    async def next_batch(self) -> list[T]:
        """Every item that has arrived and not been taken (at least one;
        waits as ``__anext__`` does; once anything was put packed, at most
        :data:`PACKED_BATCH` of them), in order; they count as consumed, so
        the window is replenished as if they were taken one by one (one
        ``request_more`` for them all). Raises what ``__anext__`` raises
        (``StopAsyncIteration`` at the end)."""
        ready = self._ready
        if not ready:
            ready = await self._refill()  # waits, ends and fails as one item does
        elif not self._packed and self._items:
            ready.extend(self._items)
            self._items.clear()
        batch = list(ready)
        ready.clear()
        units = self._units
        self._left -= len(batch) if units is None else sum(map(units, batch))
        if self._left <= 0:
            self._consumed()
        return batch

    def batches(self) -> AsyncStreamBatches[T]:
        """This stream as an async iterator of lists (:meth:`next_batch`)."""
        return AsyncStreamBatches(self)

    async def aclose(self) -> None:
        """Cancel the stream if it is still running; idempotent."""
        if self._starting is not None:
            starting, self._starting = self._starting, None
            with contextlib.suppress(Exception):
                await starting
        if not self._done:
            self._done = True
            self._cancelled = True
            self._items.clear()
            self._ready.clear()
            self._cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncStreamBatches(Generic[T]):
    """An :class:`AsyncStream` as an async iterator of lists: each list is
    what arrived since the previous one (never empty; once anything was put
    packed, at most :data:`PACKED_BATCH` long), within the same window; the items,
    their order and the errors are the item iterator's.
    ``aclose()`` (or leaving ``async with``) cancels a stream still running."""

    __slots__ = ("_stream",)

    def __init__(self, stream: AsyncStream[T]) -> None:
        self._stream = stream

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> list[T]:
        return await self._stream.next_batch()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
