"""Logic written once for the synchronous and the asyncio client: the
resuming iterators (:mod:`.follow`) and a session's reconnect
(:class:`~.resume.Reconnecting`) decide in *step generators* that
yield what they wait for (an op: the next item of a stream, closing one,
the current connection, a reconnect, a pause) and get its result sent
back, or its error thrown in. Each form runs them its way of waiting:
:func:`run` blocks, :func:`arun` awaits; a form's ``perform`` does one op
(``follow.blocking``, ``aio.awaiting``, the sessions' ``_perform``).

So the decisions (what to subscribe next, what to drop as a duplicate,
when to resume and from where) have one home, and a form keeps only how
it waits. A step generator holds no state of its own between calls: its
object's fields do, so an error raised to the caller leaves the object as
the synchronous loop it replaces left it. A read holds a :class:`Pull` per
subscription and yields that same op for each item (nothing made per item).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeVar

__all__ = [
    "CURRENT",
    "END",
    "OPEN",
    "RETIRE",
    "Close",
    "CurrentConnection",
    "Op",
    "Open",
    "Pause",
    "Pull",
    "Restore",
    "Retire",
    "Steps",
    "arun",
    "run",
]

T = TypeVar("T")


class _End:
    def __repr__(self) -> str:
        return "END"


#: What a :class:`Pull` of a stream that ended gives, and what a read's
#: ``next`` returns at its end (the forms raise StopIteration /
#: StopAsyncIteration for it: neither may cross a generator).
END: Final[Any] = _End()


@dataclass(frozen=True, slots=True, kw_only=True)
class Pull:
    """The next item of ``stream`` (a subscription's iterator), or :data:`END`."""

    stream: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    """Close ``stream`` (cancels its subscription if it is still running)."""

    stream: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentConnection:
    """The current connection and its generation: ``(connection, int)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Restore:
    """Restore the connection of ``generation``, lost with ``cause``."""

    generation: int
    cause: BaseException


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """Wait ``seconds`` before a reconnect attempt: True if the session was
    closed meanwhile."""

    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Retire:
    """Close the session's lost connection."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Open:
    """Open a new connection, the session's current one from now (an
    error opening it is thrown in)."""


CURRENT: Final = CurrentConnection()
RETIRE: Final = Retire()
OPEN: Final = Open()

Op: TypeAlias = Pull | Close | CurrentConnection | Restore | Pause | Retire | Open
#: A step generator: yields ops, is sent their results, returns ``T``.
Steps: TypeAlias = Generator[Op, Any, T]


# run and arun: the one place each way of waiting is written, alike by choice.
def run(steps: Steps[T], perform: Callable[[Op], Any]) -> T:
    """Run ``steps`` to its result, each op done by ``perform`` (blocking)."""
    try:
        op = steps.send(None)
        while True:
            try:
                result = perform(op)
            except BaseException as exc:  # the generator decides; what it lets go is raised
                error: BaseException | None = exc
            else:
                op = steps.send(result)
                continue
            try:
                op = steps.throw(error)  # type: ignore[arg-type]
            finally:
                error = None  # no cycle through this frame
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun(steps: Steps[T], perform: Callable[[Op], Awaitable[Any]]) -> T:
    """:func:`run`, each op awaited (``CancelledError`` is thrown in, as any error)."""
    try:
        op = steps.send(None)
        while True:
            try:
                result = await perform(op)
            except BaseException as exc:
                error: BaseException | None = exc
            else:
                op = steps.send(result)
                continue
            try:
                op = steps.throw(error)  # type: ignore[arg-type]
            finally:
                error = None
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
