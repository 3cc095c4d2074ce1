"""Async sources as Reactive Streams Publishers under asyncio: what an
``async def`` handler or source returns (a coroutine, an async iterable)
made a Publisher the engines pull within credit (:func:`asyncify`).

Re-exported by :mod:`.aio` (their import path of old).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Coroutine
from typing import Any

from sansrs.streams import RULE_3_9, IllegalArgumentError, add_demand

__all__ = ["AsyncIterablePublisher", "AwaitablePublisher", "asyncify"]


class AwaitablePublisher:
    """One awaitable (an ``async def`` handler's coroutine) as a Publisher of
    at most one item: ``None`` completes empty. Awaited on the event loop at
    the first ``request(n)``; ``cancel()`` cancels it."""

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._awaitable = awaitable

    def subscribe(self, subscriber: Any) -> None:
        subscriber.on_subscribe(_AwaitableSubscription(self._awaitable, subscriber))


class _AwaitableSubscription:
    def __init__(self, awaitable: Awaitable[Any], subscriber: Any) -> None:
        self._awaitable = awaitable
        self._subscriber = subscriber
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Future[Any] | None = None
        self._done = False

    def request(self, n: int) -> None:
        if n <= 0:
            self._end(IllegalArgumentError(f"{RULE_3_9} (got {n})"))
            return
        if self._task is None and not self._done:
            self._task = asyncio.ensure_future(self._awaitable, loop=self._loop)
            self._task.add_done_callback(self._finished)

    def _finished(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or self._done:
            return
        exc = fut.exception()
        if exc is not None:
            self._end(exc)
            return
        self._done = True
        result = fut.result()
        if result is not None:
            self._subscriber.on_next(result)
        self._subscriber.on_complete()

    def _end(self, error: BaseException) -> None:
        if not self._done:
            self._done = True
            self._subscriber.on_error(error)

    def cancel(self) -> None:
        self._done = True
        if self._task is not None:
            self._task.cancel()
        elif isinstance(self._awaitable, Coroutine):
            self._awaitable.close()


class AsyncIterablePublisher:
    """An async iterable as a Publisher: the next item is awaited only while
    demand is outstanding, on the event loop; ``cancel()`` closes it."""

    def __init__(self, iterable: AsyncIterable[Any]) -> None:
        self._iterable = iterable

    def subscribe(self, subscriber: Any) -> None:
        subscriber.on_subscribe(_AsyncIterSubscription(aiter(self._iterable), subscriber))


_NOTHING: Any = object()  # no item awaited ahead


class _AsyncIterSubscription:
    """Pulls ``iterator`` on a task while demand is outstanding (loop thread),
    and one item ahead once it is used up: an iterator that has ended then
    completes at once, not at the next request (a consumer that asks for
    exactly the N items it expects gets its completion)."""

    def __init__(self, iterator: AsyncIterator[Any], subscriber: Any) -> None:
        self._iterator = iterator
        self._subscriber = subscriber
        self._loop = asyncio.get_running_loop()
        self._demand = 0
        self._ahead: Any = _NOTHING
        self._task: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._cancelled = False

    async def _run(self) -> None:
        subscriber = self._subscriber
        try:
            while not self._cancelled:
                if self._ahead is _NOTHING:
                    try:
                        self._ahead = await anext(self._iterator)
                    except StopAsyncIteration:
                        self._cancelled = True
                        subscriber.on_complete()
                        return
                if not self._demand or self._cancelled:
                    return  # the item waits for the next request
                item, self._ahead = self._ahead, _NOTHING
                self._demand -= 1
                subscriber.on_next(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._cancelled = True
            subscriber.on_error(exc)
        finally:
            self._task = None

    def request(self, n: int) -> None:
        if self._cancelled:
            return
        if n <= 0:
            self._cancelled = True
            self._subscriber.on_error(IllegalArgumentError(f"{RULE_3_9} (got {n})"))
            return
        self._demand = add_demand(self._demand, n)
        if self._task is None:
            self._task = self._loop.create_task(self._run())

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()
        closer = getattr(self._iterator, "aclose", None)
        if closer is not None:
            # Runs the generator's finally blocks; kept so it is not collected.
            self._closer = self._loop.create_task(closer())


def asyncify(result: object) -> object:
    """A handler's or source's result, with async forms made Publishers: a
    coroutine or future (at most one item), an async iterable (a stream).
    Anything else is returned as it is."""
    # Not asyncio.iscoroutine: it also says yes to plain generators.
    if isinstance(result, Coroutine | asyncio.Future):
        return AwaitablePublisher(result)
    if isinstance(result, AsyncIterable):
        return AsyncIterablePublisher(result)
    return result
