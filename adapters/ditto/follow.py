"""The iterators that resume a history after its last delivered revision
(:class:`ResumingHistory`) and that go from a thing's history to its live
events (:class:`FollowEvents`), on a connection that a session may replace
(docs/protocols/ditto.md, "Reconnect, resume, follow").

They run on the consumer's thread: each holds plain subscriptions of the
current connection and, when one ends with ``ConnectionClosed``, asks
``reconnect`` to restore the connection (once for all the iterators of a
session: a generation number tells who came late), then subscribes again
after its last delivered revision (:mod:`.resume`). On a lone connection
(``DittoConnection.follow``) ``reconnect`` re-raises: the loss ends the
iterator.
"""

from __future__ import annotations

import abc
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

__all__ = [
    "Connection",
    "FollowEvents",
    "ResumableRead",
    "ResumingHistory",
    "ResumingSearch",
    "ack_wait",
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
C = TypeVar("C")
R = TypeVar("R")


class ResumableRead(Generic[C, R]):
    """What the iterators of both APIs hold: how to reach the current
    connection (``current``) and restore it (``reconnect``), the thing, the
    :class:`~.resume.Position` (last delivered revision), the window."""

    def __init__(self, current: C, reconnect: R, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        self._current = current
        self._reconnect = reconnect
        self.entity = entity
        self.position = Position(query)
        self._prefetch = prefetch
        self._timeout = timeout
        self._generation = 0
        self._closed = False

    @property
    def last(self) -> int | None:
        """The last revision handed out (None: none yet)."""
        return self.position.last

    @property
    def resumes(self) -> int:
        """Connections lost and resumed, subscriptions renewed after a 408."""
        return self.position.resumes


class _Resuming(ResumableRead[Current, Reconnect], abc.ABC):
    """What both synchronous iterators share: the current subscriptions, closing."""

    def _history(self, connection: Connection, query: dict[str, Any]) -> StreamIterator[Any]:
        return connection.subscribe_for_persisted_events(
            self.entity, prefetch=self._prefetch, timeout=self._timeout, **query)

    def _lost(self, error: BaseException) -> None:
        """The subscription ended with ``error``: restore the connection if it
        was lost (else re-raise), for the caller to subscribe again."""
        self._drop()
        if self._closed:
            raise error
        if self.position.must_reconnect(error):
            self._reconnect(self._generation, error)

    @abc.abstractmethod
    def _drop(self) -> None:
        """Close the current subscriptions (the session's connection stays)."""

    def close(self) -> None:
        self._closed = True
        self._drop()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ResumingHistory(_Resuming):
    """A history that resumes after its last delivered revision (exactly
    once, in order) when its connection is restored, or renews its
    subscription when Ditto ended it for lack of requests (408). Items,
    errors and ``timeout`` as ``DittoConnection.subscribe_for_persisted_events``."""

    def __init__(self, current: Current, reconnect: Reconnect, entity: str,
                 query: dict[str, Any], prefetch: int, timeout: float | None) -> None:
        super().__init__(current, reconnect, entity, query, prefetch, timeout)
        self._it: StreamIterator[Any] | None = None
        # Subscribed now, so the window fills while the caller gets ready;
        # on a connection found closed, the first next() reconnects.
        with contextlib.suppress(ConnectionClosed):
            self._subscribe()

    def _subscribe(self) -> StreamIterator[Any]:
        connection, self._generation = self._current()
        self._it = self._history(connection, self.position.history())
        return self._it

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        while True:
            if self._it is None and (self._closed or self.position.ended()):
                raise StopIteration
            try:
                item = next(self._it or self._subscribe())
            except StopIteration:
                self._it = None
                self._closed = True
                raise
            except (ConnectionClosed, DittoRemoteError) as exc:
                self._lost(exc)
                continue
            if self.position.fresh(item):
                return item

    def _drop(self) -> None:
        it, self._it = self._it, None
        if it is not None:
            it.close()


class FollowEvents(_Resuming):
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
        check_follow(query)
        super().__init__(current, reconnect, entity, query, prefetch, timeout)
        self._live: StreamIterator[Any] | None = None
        self._past: StreamIterator[Any] | None = None
        #: a live event waiting for the history of the gap before it
        self._held: Any = None
        with contextlib.suppress(ConnectionClosed):  # the first next() reconnects
            self._start()

    def _start(self) -> None:
        connection, self._generation = self._current()
        wait = ack_wait(self._timeout)
        self._live = connection.live_events(
            self.entity, filter=self.position.query.get("filter"), prefetch=self._prefetch,
            timeout=wait)
        try:
            first = next(self._live)
        except TimeoutError:
            self._drop()
            raise not_acknowledged(wait) from None
        except BaseException:
            self._drop()  # a tap that raised is over: the next start makes a new one
            raise
        check_started(first)
        self._past = self._history(connection, self.position.history())

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        while True:
            if self._closed:
                raise StopIteration
            try:
                if self._live is None:
                    self._start()
                    continue
                if self._past is not None:
                    try:
                        item = next(self._past)
                    except StopIteration:
                        self._past = None
                        item, self._held = self._held, None
                        if item is None:
                            continue
                else:
                    item = next(self._live)
                    gap = self.position.gap(item)
                    if gap is not None:  # read it before this live event
                        self._held = item
                        self._past = self._history(self._current()[0], gap)
                        continue
            except LiveOverflow:
                self._drop()  # the rest is in the history: start again from last
                continue
            except (ConnectionClosed, DittoRemoteError) as exc:
                self._lost(exc)
                continue
            except TimeoutError as exc:
                if waits_on(exc, self._timeout):
                    continue  # no timeout of the user's: live events may take forever
                raise
            if self.position.fresh(item):
                return item

    def _drop(self) -> None:
        for it in (self._past, self._live):
            if it is not None:
                it.close()
        # A held live event is read again with the history after ``last``.
        self._past = self._live = self._held = None


class ResumingSearch:
    """A search whose pages go on after the last thing handed out when the
    connection is restored or Ditto ended it for lack of requests (408):
    see :class:`~.resume.SearchPosition` for when that is possible. Pages
    as ``DittoConnection.search`` (a page emptied at the seam is skipped)."""

    def __init__(self, current: Current, reconnect: Reconnect, query: dict[str, Any],
                 prefetch: int, timeout: float | None) -> None:
        self._current = current
        self._reconnect = reconnect
        self.position = SearchPosition(query)
        self._prefetch = prefetch
        self._timeout = timeout
        self._generation = 0
        self._it: StreamIterator[list[Any]] | None = None
        self._closed = False

    def __iter__(self) -> Iterator[list[Any]]:
        return self

    def __next__(self) -> list[Any]:
        while True:
            if self._closed:
                raise StopIteration
            try:
                if self._it is None:
                    connection, self._generation = self._current()
                    self._it = connection.search(prefetch=self._prefetch, timeout=self._timeout,
                                                 **self.position.search())
                page = next(self._it)
            except StopIteration:
                self._closed = True
                raise
            except (ConnectionClosed, DittoRemoteError) as exc:
                if self._it is not None:
                    self._it.close()
                self._it = None
                if self._closed:
                    raise
                if self.position.must_reconnect(exc):
                    self._reconnect(self._generation, exc)
                continue
            fresh = self.position.fresh(page)
            if fresh:
                return fresh

    def close(self) -> None:
        self._closed = True
        if self._it is not None:
            self._it.close()

    def __enter__(self) -> ResumingSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
