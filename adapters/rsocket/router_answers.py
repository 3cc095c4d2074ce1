"""What a :class:`~.routing.Router` answers that is not its handler's
value as it stands: answers that wait for an ``async def authenticate``
(the handler runs once it said who asks), and the response data MIME type
declared in each payload's composite metadata (``produces=``)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any

from sansrs.streams import MapProcessor

from .fast import as_payload
from .types import Payload, is_single_value

__all__ = ["declare_mime", "items_later", "single_later", "then"]


async def then(outcome: Awaitable[Any], connection: object) -> object:
    await outcome
    return connection


async def single_later(later: Awaitable[Any], answer: Callable[[Any], Any]) -> Any:
    """A request-response answered once ``later`` (the awaited check) says
    who asks: the handler's value (awaited if it is a coroutine, the first
    item if it is a Publisher)."""
    result = answer(await later)
    if inspect.isawaitable(result):
        return await result
    if result is not None and callable(getattr(result, "subscribe", None)):
        async for item in _publisher_items(result):
            return item
        return None
    return result


async def items_later(later: Awaitable[Any], answer: Callable[[Any], Any]) -> AsyncIterator[Any]:
    """A stream or channel whose handler runs once ``later`` (the awaited
    check) said who asks: its items, whatever shape they come in."""
    result = answer(await later)
    if inspect.isawaitable(result):  # as an async def stream handler: one item
        value = await result
        if value is not None:
            yield value
    elif is_single_value(result):
        yield result
    elif callable(getattr(result, "subscribe", None)):
        async for item in _publisher_items(result):
            yield item
    elif isinstance(result, AsyncIterable):
        async for item in result:
            yield item
    elif result is not None:
        for item in result:
            yield item


async def _publisher_items(publisher: Any) -> AsyncIterator[Any]:
    """A Reactive Streams Publisher's items, one requested at a time; its
    signals (from any thread) cross to the event loop."""
    loop = asyncio.get_running_loop()
    signals: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def signal(kind: str, value: Any = None) -> None:
        loop.call_soon_threadsafe(signals.put_nowait, (kind, value))

    class Subscriber:
        def on_subscribe(self, subscription: Any) -> None:
            signal("subscribe", subscription)

        def on_next(self, item: Any) -> None:
            signal("next", item)

        def on_error(self, error: BaseException) -> None:
            signal("error", error)

        def on_complete(self) -> None:
            signal("complete")

    publisher.subscribe(Subscriber())
    subscription: Any = None
    ended = False
    try:
        while True:
            kind, value = await signals.get()
            if kind == "subscribe":
                subscription = value
                subscription.request(1)
            elif kind == "next":
                yield value
                subscription.request(1)
            elif kind == "error":
                ended = True
                raise value
            else:
                ended = True
                return
    finally:
        if not ended and subscription is not None:
            subscription.cancel()


# -- declaring the response data MIME type ------------------------------------------


def declare_mime(result: Any, entry: bytes) -> Any:
    """``result`` (a value, an iterable, a Publisher, a coroutine or an async
    iterable) with ``entry`` (composite metadata declaring the data MIME type)
    appended to each payload's metadata."""

    def add(item: object) -> Payload:
        p = as_payload(item)
        return Payload(p.data, entry if p.metadata is None else p.metadata + entry)

    if result is None:
        return None
    if isinstance(result, bytes | str | bytearray | memoryview | tuple):
        return add(result)
    if isinstance(result, Coroutine):
        return _declare_awaited(result, add)
    if callable(getattr(result, "subscribe", None)):
        mapped: MapProcessor[object, Payload] = MapProcessor(add)
        result.subscribe(mapped)
        return mapped
    if isinstance(result, AsyncIterable):
        return _declare_async(result, add)
    if isinstance(result, Iterable):
        return map(add, result)
    return result


async def _declare_awaited(
    result: Coroutine[Any, Any, Any], add: Callable[[object], Payload]
) -> Any:
    value = await result
    return None if value is None else add(value)


async def _declare_async(items: AsyncIterable[Any], add: Callable[[object], Payload]) -> Any:
    async for item in items:
        yield add(item)
