"""Reconnect and resume, the parts both APIs share (no I/O, no clock of
their own): the backoff policy, the typed error when the outage lasts too
long, a session's reconnect (:class:`Reconnecting`), and the arithmetic of
resuming a history after its last delivered revision
(docs/protocols/ditto.md, "Reconnect, resume, follow").

Ditto numbers every event of a thing with its ``revision`` (1, 2, ...), so
a history read that lost its connection is resumed by subscribing again
``from_revision = last + 1``; anything at or below ``last`` that arrives
anyway (at the seam) is dropped by revision: each revision is delivered
exactly once, in order.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sansrs.ditto import DittoRemoteError

from ..drive.errors import ConnectionClosed
from .live import rql_string
from .steps import OPEN, RETIRE, Pause, Steps

__all__ = [
    "IDLE_TIMEOUT_STATUS",
    "Backoff",
    "Position",
    "ReconnectFailed",
    "ReconnectPolicy",
    "Reconnecting",
    "SearchPosition",
    "must_reconnect",
    "resumed_query",
    "revision_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconnectPolicy:
    """How a session reconnects after its connection was lost (opt-in).

    The n-th attempt (from 0) waits ``min(max_delay, initial_delay *
    multiplier**n)``, of which a fraction ``jitter`` is random (so clients
    that lost one server do not come back in step); ``random`` gives
    numbers in [0, 1) (injected in tests). Reconnecting gives up with
    :class:`ReconnectFailed` once the outage (from the loss to the next
    attempt) would exceed ``max_outage`` seconds.
    Defaults: 0.1 s, x2, capped at 5 s, jitter 0.5, outage at most 60 s.
    """

    initial_delay: float = 0.1
    multiplier: float = 2.0
    max_delay: float = 5.0
    jitter: float = 0.5
    max_outage: float = 60.0
    random: Callable[[], float] = field(default=_random.random, compare=False)

    def __post_init__(self) -> None:
        if not (self.initial_delay >= 0 and self.max_delay >= self.initial_delay):
            raise ValueError("need 0 <= initial_delay <= max_delay")
        if not self.multiplier >= 1:
            raise ValueError("multiplier must be >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter is a fraction in [0, 1]")
        if not self.max_outage >= 0:
            raise ValueError("max_outage must be >= 0")


class ReconnectFailed(ConnectionClosed):
    """The connection could not be restored within ``max_outage``: ``cause``
    is the last failure (the loss itself, or the last attempt's error,
    e.g. a refused upgrade), ``attempts`` how many were made."""

    def __init__(self, cause: BaseException, attempts: int, outage: float) -> None:
        super().__init__(
            f"gave up reconnecting after {attempts} attempt(s) in {outage:.1f} s: {cause}"
        )
        self.cause = cause
        self.attempts = attempts
        self.outage = outage


class Backoff:
    """The delays of one outage: ``next_delay(now)`` before each attempt,
    ``ReconnectFailed`` when waiting it would exceed the policy's outage."""

    def __init__(self, policy: ReconnectPolicy, started: float) -> None:
        self.policy = policy
        self.started = started
        self.attempts = 0

    def next_delay(self, now: float, cause: BaseException) -> float:
        p = self.policy
        base = min(p.max_delay, p.initial_delay * p.multiplier**self.attempts)
        delay = base * (1.0 - p.jitter * p.random())
        if now + delay - self.started > p.max_outage:
            raise ReconnectFailed(cause, self.attempts, now - self.started) from cause
        self.attempts += 1
        return delay


class Reconnecting:
    """A session's connections and the decisions of its reconnect, for
    ``DittoSession`` and ``aio.AsyncDittoSession`` (their lock held): which
    generation of connection is current, whether a reconnect is still
    needed (the first of the iterators that lost a generation does it, the
    others find it done), the backoff between attempts, when to give up.
    ``clock``: monotonic seconds."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        #: the current connection's generation (each reconnect adds one)
        self.generation = 0
        #: connections restored so far
        self.reconnects = 0
        self.closed = False

    def reconnect(
        self, generation: int, cause: BaseException, policy: ReconnectPolicy
    ) -> Steps[None]:
        """Restore the connection of ``generation`` (lost with ``cause``):
        nothing if another iterator did it already; ``cause`` if the session
        was closed; ``ReconnectFailed`` past ``policy``'s outage. Attempts
        that fail to connect (refused upgrades included) are retried."""
        if generation != self.generation:
            return
        if self.closed:
            raise cause
        yield RETIRE
        backoff = Backoff(policy, self._clock())
        error = cause
        while True:
            if (yield Pause(seconds=backoff.next_delay(self._clock(), error))):
                raise cause  # closed while waiting
            try:
                yield OPEN
            except (OSError, ConnectionError) as exc:  # refused upgrades included
                error = exc
                continue
            self.generation += 1
            self.reconnects += 1
            return


def revision_of(item: Any) -> int | None:
    """The ``revision`` of a history or live event (None if it has none)."""
    if isinstance(item, Mapping):
        revision = item.get("revision")
        if type(revision) is int:
            return revision
    return None


def resumed_query(query: Mapping[str, Any], last: int | None) -> dict[str, Any]:
    """The subscribe arguments that continue ``query`` after revision ``last``:
    ``from_revision = last + 1`` (a ``from_timestamp`` is then implied and
    dropped: revisions grow with time); the end of the range is kept."""
    out = dict(query)
    if last is not None:
        out["from_revision"] = last + 1
        out.pop("from_timestamp", None)
    return out


#: Ditto's status for a subscription it ended for lack of requests.
IDLE_TIMEOUT_STATUS = 408


class Position:
    """Where a resumable read of one thing's history is, and what to
    subscribe next (the logic of both APIs' iterators; no I/O)."""

    def __init__(self, query: Mapping[str, Any]) -> None:
        self.query = dict(query)
        #: the last revision handed out (None: none yet)
        self.last: int | None = None
        #: connections lost and resumed, subscriptions renewed after a 408
        self.resumes = 0

    def fresh(self, item: Any) -> bool:
        """Hand ``item`` out? Not if its revision was handed out already."""
        revision = revision_of(item)
        if revision is None:
            return True
        if self.last is not None and revision <= self.last:
            return False
        self.last = revision
        return True

    def history(self) -> dict[str, Any]:
        """The subscribe arguments for the rest of the history."""
        return resumed_query(self.query, self.last)

    def ended(self) -> bool:
        """The history's explicit end (``to_revision`` > 0) was handed out."""
        end = self.query.get("to_revision")
        return end is not None and end > 0 and self.last is not None and self.last >= end

    def gap(self, item: Any) -> dict[str, Any] | None:
        """A live ``item`` that skips revisions: the subscribe arguments that
        read the gap from the history (None: no gap, or a ``filter``, which
        skips revisions by design)."""
        revision = revision_of(item)
        last = self.last
        if (revision is None or last is None or revision <= last + 1
                or self.query.get("filter") is not None):
            return None
        query = resumed_query(self.query, last)
        query["to_revision"] = revision - 1
        return query

    def must_reconnect(self, error: BaseException) -> bool:
        """A subscription ended with ``error``: True if the connection was
        lost (restore it, then subscribe again), False if only the
        subscription must be renewed (Ditto's idle timeout, 408); any other
        error is raised."""
        reconnect = must_reconnect(error)
        self.resumes += 1
        return reconnect


def must_reconnect(error: BaseException) -> bool:
    """``Position.must_reconnect`` for any resumable read (raises what is
    not a lost connection or Ditto's idle timeout)."""
    if isinstance(error, ConnectionClosed):
        return True
    if isinstance(error, DittoRemoteError) and error.status == IDLE_TIMEOUT_STATUS:
        return False  # the connection is fine
    raise error


_SORTS_BY_ID = ("sort(+thingId)",)


class SearchPosition:
    """Where a resumable search is: the last thing handed out, by ``thingId``.

    A search resumes from a documented point only when its order is by
    ``thingId`` ascending (Ditto's default, ``sort(+thingId)``) and the
    things carry their ``thingId`` (``fields`` lists it, or is not given):
    it is subscribed again with ``and(gt(thingId,"<last>"),<filter>)``, and
    things at or before the last one (at the seam) are dropped. Things
    created or changed meanwhile are found as a new search would find them.
    Any other search raises the error that ended it."""

    def __init__(self, query: Mapping[str, Any]) -> None:
        self.query = dict(query)
        options = [o.strip() for o in (self.query.get("options") or "").split(",")]
        sorts = [o for o in options if o.startswith("sort(")]
        fields = self.query.get("fields")
        self.resumable = (all(o in _SORTS_BY_ID for o in sorts)
                          and (fields is None or "thingId" in fields.split(",")))
        #: the thingId of the last thing handed out
        self.last: str | None = None
        self.resumes = 0

    def fresh(self, page: Any) -> list[Any]:
        """The things of ``page`` after the last one handed out."""
        if not isinstance(page, list):
            return page  # type: ignore[no-any-return]
        last = self.last
        out = []
        for thing in page:
            thing_id = thing.get("thingId") if isinstance(thing, Mapping) else None
            if isinstance(thing_id, str):
                if last is not None and thing_id <= last:
                    continue
                last = thing_id
            out.append(thing)
        self.last = last
        return out

    def search(self) -> dict[str, Any]:
        """The subscribe arguments for the rest of the search."""
        if self.last is None:
            return dict(self.query)
        after = f"gt(thingId,{rql_string(self.last)})"
        query = dict(self.query)
        extra = query.get("filter")
        query["filter"] = after if not extra else f"and({after},{extra})"
        return query

    def must_reconnect(self, error: BaseException) -> bool:
        if not self.resumable:
            raise error
        reconnect = must_reconnect(error)
        self.resumes += 1
        return reconnect
