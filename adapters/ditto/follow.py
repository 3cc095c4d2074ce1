"""The iterators that resume a history after its last delivered revision
(:class:`ResumingHistory`), that go from a thing's history to its live
events (:class:`FollowEvents`) and that resume a search
(:class:`ResumingSearch`), on a connection that a session may replace
(docs/protocols/ditto.md, "Reconnect, resume, follow").

Each holds plain subscriptions of the current connection and, when one ends
with ``ConnectionClosed``, asks ``reconnect`` to restore the connection
(once for all the iterators of a session: a generation number tells who
came late), then subscribes again after its last delivered revision
(:mod:`.resume`). On a lone connection (``DittoConnection.follow``)
``reconnect`` re-raises: the loss ends the iterator.

The decisions are written once, as step generators (:mod:`.steps`):
:class:`HistoryRead`, :class:`FollowRead`, :class:`SearchRead`. The
iterators here run them on the consumer's thread (blocking); the asyncio
ones (``aio.AsyncResumingHistory``, ...) run the same steps awaited.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from typing_extensions import Unpack

from sansrs.ditto import DittoRemoteError

from ..drive.errors import ConnectionClosed
from ..drive.streams import StreamIterator
from .engine import HistoryQuery, SearchQuery
from .live import ACK_TIMEOUT, STARTED, LiveNotAcknowledged, LiveOverflow
from .resume import Position, SearchPosition
from .steps import CURRENT, END, Close, CurrentConnection, Op, Pull, Restore, Steps, run

__all__ = [
    "Connection",
    "FollowEvents",
    "FollowRead",
    "HistoryRead",
    "ReadSteps",
    "ResumableRead",
    "Resuming",
    "ResumingHistory",
    "ResumingSearch",
    "SearchRead",
    "ack_wait",
    "blocking",
    "check_follow",
    "check_started",
    "follow_connection",
    "not_acknowledged",
    "waits_on",
]


class Connection(Protocol):
    """What the iterators use of a ``DittoConnection``."""

    def subscribe_for_persisted_events(
        self, entity: str, *, prefetch: int = ..., timeout: float | None = ...,
        **query: Unpack[HistoryQuery],
    ) -> StreamIterator[Any]: ...

    def live_events(
        self, entity: str, *, filter: str | None = ..., prefetch: int = ...,
        timeout: float | None = ...,
    ) -> StreamIterator[Any]: ...

    def search(
        self, *, prefetch: int = ..., timeout: float | None = ..., **query: Unpack[SearchQuery]
    ) -> StreamIterator[list[Any]]: ...


#: (the current connection, its generation)
Current = Callable[[], tuple[Connection, int]]
#: Restore the connection of a generation that was lost with the given error.
Reconnect = Callable[[int, BaseException], None]


class ReadSteps(Protocol):
    """What the forms run of a read's steps (:class:`HistoryRead`,
    :class:`FollowRead`, :class:`SearchRead`)."""

    position: Any

    def start(self) -> Steps[Any]: ...

    def next(self) -> Steps[Any]: ...

    def close(self) -> Steps[None]: ...


Core = TypeVar("Core", bound=ReadSteps)


# -- the decisions, once for both forms (step generators: .steps) ------------------


class ResumableRead:
    """What a resumable read of one thing's history holds in either form:
    the thing, the :class:`~.resume.Position` (last delivered revision),
    the window, the generation of the connection it reads from."""

    def __init__(self, entity: str, query: dict[str, Any], prefetch: int,
                 timeout: float | None) -> None:
        self.entity = entity
        self.position = Position(query)
        self.prefetch = prefetch
        self.timeout = timeout
        self.generation = 0
        self.closed = False

    def history(self, connection: Any, query: dict[str, Any]) -> Any:
        """Subscribe to the history on ``connection`` (its iterator)."""
        return connection.subscribe_for_persisted_events(
            self.entity, prefetch=self.prefetch, timeout=self.timeout, **query)

    def close(self, drop: Steps[None]) -> Steps[None]:
        """Closed: ``drop`` the current subscriptions; no more items."""
        self.closed = True
        yield from drop

    def lost(self, error: BaseException, drop: Steps[None]) -> Steps[None]:
        """A subscription ended with ``error``: ``drop`` the current ones,
        then restore the connection if it was lost (else re-raise), for the
        caller to subscribe again."""
        yield from drop
        if self.closed:
            raise error
        if self.position.must_reconnect(error):
            yield Restore(generation=self.generation, cause=error)


class HistoryRead:
    """The steps of a history that resumes after its last delivered revision
    (:class:`ResumingHistory`, ``aio.AsyncResumingHistory``)."""

    def __init__(self, entity: str, query: dict[str, Any], prefetch: int,
                 timeout: float | None) -> None:
        self.read = ResumableRead(entity, query, prefetch, timeout)
        self.position = self.read.position
        self._it: Pull | None = None

    def start(self) -> Steps[Pull]:
        """Subscribe on the current connection after the last revision."""
        read = self.read
        connection, read.generation = yield CURRENT
        self._it = Pull(stream=read.history(connection, read.position.history()))
        return self._it

    def next(self) -> Steps[Any]:
        """The next event not handed out yet, or :data:`~.steps.END`."""
        read = self.read
        while True:
            if self._it is None and (read.closed or read.position.ended()):
                return END
            try:
                item = yield self._it or (yield from self.start())
            except (ConnectionClosed, DittoRemoteError) as exc:
                yield from read.lost(exc, self.drop())
                continue
            if item is END:
                self._it = None
                read.closed = True
                return END
            if read.position.fresh(item):
                return item

    def drop(self) -> Steps[None]:
        it, self._it = self._it, None
        if it is not None:
            yield Close(stream=it.stream)

    def close(self) -> Steps[None]:
        return self.read.close(self.drop())


class FollowRead:
    """The steps of a thing's history, then its live events (:class:`FollowEvents`,
    ``aio.AsyncFollowEvents``: the rules are theirs)."""

    def __init__(self, entity: str, query: dict[str, Any], prefetch: int,
                 timeout: float | None) -> None:
        check_follow(query)
        self.read = ResumableRead(entity, query, prefetch, timeout)
        self.position = self.read.position
        self._live: Pull | None = None
        self._past: Pull | None = None
        #: a live event waiting for the history of the gap before it
        self._held: Any = None

    def start(self) -> Steps[Any]:
        """Ask for the live events, wait for Ditto's acknowledgement, then
        subscribe to the history after the last revision."""
        read = self.read
        connection, read.generation = yield CURRENT
        wait = ack_wait(read.timeout)
        self._live = Pull(stream=connection.live_events(
            read.entity, filter=read.position.query.get("filter"), prefetch=read.prefetch,
            timeout=wait))
        try:
            first = yield self._live
        except TimeoutError:
            yield from self.drop()
            raise not_acknowledged(wait) from None
        except BaseException:
            yield from self.drop()  # a tap that raised is over: the next start makes a new one
            raise
        if first is END:
            yield from self.drop()
            return END
        check_started(first)
        self._past = Pull(stream=read.history(connection, read.position.history()))
        return None

    def next(self) -> Steps[Any]:
        """The next event not handed out yet (history first, then live, a
        live gap read from the history), or :data:`~.steps.END`."""
        read = self.read
        position = read.position
        while True:
            if read.closed:
                return END
            try:
                if self._live is None:
                    if (yield from self.start()) is END:
                        return END
                    continue
                if self._past is not None:
                    item = yield self._past
                    if item is END:
                        self._past = None
                        item, self._held = self._held, None
                        if item is None:
                            continue
                else:
                    item = yield self._live
                    if item is END:
                        return END
                    gap = position.gap(item)
                    if gap is not None:  # read it before this live event
                        self._held = item
                        connection, _ = yield CURRENT
                        self._past = Pull(stream=read.history(connection, gap))
                        continue
            except LiveOverflow:
                yield from self.drop()  # the rest is in the history: start again from last
                continue
            except (ConnectionClosed, DittoRemoteError) as exc:
                yield from read.lost(exc, self.drop())
                continue
            except TimeoutError as exc:
                if waits_on(exc, read.timeout):
                    continue  # no timeout of the user's: live events may take forever
                raise
            if position.fresh(item):
                return item

    def drop(self) -> Steps[None]:
        """Close the current subscriptions (the session's connection stays);
        a held live event is read again with the history after ``last``."""
        its = (self._past, self._live)
        self._past = self._live = self._held = None
        for it in its:
            if it is not None:
                yield Close(stream=it.stream)

    def close(self) -> Steps[None]:
        return self.read.close(self.drop())


class SearchRead:
    """The steps of a search that goes on after the last thing handed out
    (:class:`ResumingSearch`, ``aio.AsyncResumingSearch``)."""

    def __init__(self, query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        self.position = SearchPosition(query)
        self.prefetch = prefetch
        self.timeout = timeout
        self.generation = 0
        self.closed = False
        self._it: Pull | None = None

    def start(self) -> Steps[Pull]:
        connection, self.generation = yield CURRENT
        self._it = Pull(stream=connection.search(prefetch=self.prefetch, timeout=self.timeout,
                                                 **self.position.search()))
        return self._it

    def next(self) -> Steps[Any]:
        """The next page's things after the last one handed out (a page
        emptied at the seam is skipped), or :data:`~.steps.END`."""
        while True:
            if self.closed:
                return END
            try:
                page = yield self._it or (yield from self.start())
            except (ConnectionClosed, DittoRemoteError) as exc:
                it, self._it = self._it, None
                if it is not None:
                    yield Close(stream=it.stream)
                if self.closed:
                    raise
                if self.position.must_reconnect(exc):
                    yield Restore(generation=self.generation, cause=exc)
                continue
            if page is END:
                self.closed = True
                return END
            fresh = self.position.fresh(page)
            if fresh:
                return fresh

    def close(self) -> Steps[None]:
        self.closed = True
        if self._it is not None:
            yield Close(stream=self._it.stream)


# -- the synchronous form: blocking waits ---------------------------------------------


def blocking(current: Current, reconnect: Reconnect) -> Callable[[Op], Any]:
    """How the synchronous iterators wait: each op done on the consumer's
    thread (``perform`` for :func:`~.steps.run`)."""

    def perform(op: Op) -> Any:
        if isinstance(op, Pull):
            return next(op.stream, END)
        if isinstance(op, Close):
            return op.stream.close()
        if isinstance(op, CurrentConnection):
            return current()
        if isinstance(op, Restore):
            return reconnect(op.generation, op.cause)
        raise AssertionError(f"not an iterator's op: {op!r}")

    return perform


class Resuming(Generic[Core]):
    """A resumable read as a blocking iterator: ``core``'s steps, run on the
    consumer's thread."""

    def __init__(self, current: Current, reconnect: Reconnect, core: Core) -> None:
        self._core = core
        self._perform = blocking(current, reconnect)

    @property
    def position(self) -> Any:
        """Where the read is (:class:`~.resume.Position`, :class:`~.resume.SearchPosition`)."""
        return self._core.position

    @property
    def last(self) -> Any:
        """The last revision (a search: ``thingId``) handed out (None: none yet)."""
        return self._core.position.last

    @property
    def resumes(self) -> int:
        """Connections lost and resumed, subscriptions renewed after a 408."""
        return self._core.position.resumes  # type: ignore[no-any-return]

    def _start(self) -> None:
        # Subscribed now, so the window fills while the caller gets ready;
        # on a connection found closed, the first next() reconnects.
        with contextlib.suppress(ConnectionClosed):
            run(self._core.start(), self._perform)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        item = run(self._core.next(), self._perform)
        if item is END:
            raise StopIteration
        return item

    def close(self) -> None:
        run(self._core.close(), self._perform)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ResumingHistory(Resuming[HistoryRead]):
    """A history that resumes after its last delivered revision (exactly
    once, in order) when its connection is restored, or renews its
    subscription when Ditto ended it for lack of requests (408). Items,
    errors and ``timeout`` as ``DittoConnection.subscribe_for_persisted_events``."""

    def __init__(self, current: Current, reconnect: Reconnect, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, HistoryRead(entity, query, prefetch, timeout))
        self.entity = entity
        self._start()


class FollowEvents(Resuming[FollowRead]):
    """A thing's history, then its live events, with no gap and no
    duplicate at the seam (by revision).

    Each (re)start: ask Ditto for the thing's live events
    (``START-SEND-EVENTS`` with a filter for the thing) and wait for its
    acknowledgement; only then subscribe for the history from the last
    delivered revision + 1 up to the latest. Every event persisted after
    the acknowledgement is pushed live, every one before it is in the
    history; the live events the history already had are dropped by
    revision. The live events wait (at most ``prefetch``) while the history
    is read. When live events skip revisions (Ditto's live events are at
    most once), the gap is read from the history before the next live event
    (not with a ``filter``, which skips revisions by design). More live
    events than fit in ``prefetch`` (a consumer slower than the thing
    changes) restart the same way: nothing is lost. A lost connection is
    restored (with a session) and restarts likewise."""

    def __init__(self, current: Current, reconnect: Reconnect, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, FollowRead(entity, query, prefetch, timeout))
        self.entity = entity
        self._start()


class ResumingSearch(Resuming[SearchRead]):
    """A search whose pages go on after the last thing handed out when the
    connection is restored or Ditto ended it for lack of requests (408):
    see :class:`~.resume.SearchPosition` for when that is possible. Pages
    as ``DittoConnection.search`` (a page emptied at the seam is skipped)."""

    def __init__(self, current: Current, reconnect: Reconnect, query: dict[str, Any],
                 prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, SearchRead(query, prefetch, timeout))


def check_follow(query: Mapping[str, Any]) -> None:
    """A followed history has no end."""
    if query.get("to_revision") is not None or query.get("to_timestamp") is not None:
        raise ValueError("a followed history has no end (to_revision / to_timestamp)")


def ack_wait(timeout: float | None) -> float:
    """How long a follower's live tap waits at a time: the user's
    ``timeout``, else :data:`~.live.ACK_TIMEOUT` (the acknowledgement is
    bounded even when the follower may wait forever for events)."""
    return ACK_TIMEOUT if timeout is None else timeout


def not_acknowledged(wait: float) -> LiveNotAcknowledged:
    return LiveNotAcknowledged(
        f"Ditto did not acknowledge START-SEND-EVENTS within {wait:g} s "
        "(does the server send live events?)")


def waits_on(error: TimeoutError, timeout: float | None) -> bool:
    """A follower without a ``timeout`` of its own keeps waiting for live
    events after its tap's bounded wait ran out (not after an unanswered
    ``START-SEND-EVENTS``)."""
    return timeout is None and not isinstance(error, LiveNotAcknowledged)


def check_started(first: Any) -> None:
    """A live tap's first item is Ditto's acknowledgement."""
    if first is not STARTED:
        raise AssertionError(f"live events began with {first!r}")


def _fixed(connection: Connection) -> tuple[Current, Reconnect]:
    """A connection that is not restored: a loss ends the iterator."""

    def reconnect(generation: int, cause: BaseException) -> None:
        raise cause

    return (lambda: (connection, 0)), reconnect


def follow_connection(
    connection: Connection, entity: str, query: dict[str, Any], prefetch: int,
    timeout: float | None,
) -> FollowEvents:
    """:class:`FollowEvents` on one connection (not restored when lost)."""
    current, reconnect = _fixed(connection)
    return FollowEvents(current, reconnect, entity, query, prefetch, timeout)
