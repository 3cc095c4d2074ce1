"""What the asyncio ``connect`` and ``serve`` functions return: an awaitable
that is also an async context manager, as ``websockets.connect`` is. Every
form users type works::

    async with connect(url) as client: ...          # opens, closes on exit
    client = await connect(url)                     # opens; close it yourself
    async with await connect(url) as client: ...    # the older spelling

The connection is opened when first awaited or entered, never before (no
coroutine is created that might go un-awaited), and at most once.
:func:`awaitable_context` makes an ``async def connect`` return one; its
arguments are bound at the call, so a wrong one fails there."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Generator
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, ParamSpec, TypeVar

__all__ = ["Connecting", "awaitable_context"]

T = TypeVar("T", bound=AbstractAsyncContextManager[Any])
P = ParamSpec("P")


class Connecting(Generic[T]):
    """``await`` it for the connection (or server), or ``async with`` it to
    have it closed on exit. ``opener`` is called once, when first needed."""

    __slots__ = ("_open", "_opened")

    def __init__(self, opener: Callable[[], Awaitable[T]]) -> None:
        self._open: Callable[[], Awaitable[T]] | None = opener
        self._opened: T | None = None

    async def _get(self) -> T:
        if self._opened is not None:
            return self._opened
        if self._open is None:
            raise RuntimeError("this connect() failed or is being awaited already")
        opener, self._open = self._open, None
        self._opened = await opener()
        return self._opened

    def __await__(self) -> Generator[Any, None, T]:
        return self._get().__await__()

    async def __aenter__(self) -> T:
        opened = await self._get()
        await opened.__aenter__()
        return opened

    async def __aexit__(self, *exc: Any) -> None:
        assert self._opened is not None, "__aexit__ without __aenter__"
        await self._opened.__aexit__(*exc)


def awaitable_context(opener: Callable[P, Awaitable[T]]) -> Callable[P, Connecting[T]]:
    """``@awaitable_context async def connect(...)``: ``connect(...)`` returns
    a :class:`Connecting` that runs the body when awaited or entered. The
    arguments are bound at once (a wrong keyword is a TypeError at the call)."""
    signature = inspect.signature(opener)

    @functools.wraps(opener)
    def call(*args: P.args, **kwargs: P.kwargs) -> Connecting[T]:
        signature.bind(*args, **kwargs)
        return Connecting(lambda: opener(*args, **kwargs))

    return call
