"""A Ditto client that survives dropped connections and expired tokens:
:class:`DittoSession` (threads), with the iterators that resume after the
last delivered revision (:class:`ResumingHistory`) and that go from a
thing's history to its live events (:class:`FollowEvents`).

    with DittoSession("wss://ditto/ws/2", token=fetch_jwt,
                      reconnect=ReconnectPolicy(max_outage=120)) as ditto:
        for event in ditto.follow("org.acme:thing-1", from_revision=1):
            ...   # every revision once, in order, then the new ones as they happen

The iterators run on the consumer's thread: each holds a plain subscription
of the current connection (``DittoConnection``) and, when that ends with
``ConnectionClosed``, asks the session to reconnect (once for all its
iterators: a generation number tells who came late) and subscribes again
after its last delivered revision (:mod:`.resume`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from typing_extensions import Unpack

from .client import connect as _connect
from .engine import HistoryQuery, SearchQuery
from .follow import Connection, FollowEvents, ResumingHistory, ResumingSearch
from .peer import DEFAULT_PREFETCH, DEFAULT_SEARCH_PREFETCH, DittoConnection
from .resume import Reconnecting, ReconnectPolicy
from .steps import Op, Open, Pause, Retire, run

__all__ = ["DittoSession"]


# Keywords written out where users read them (DittoConnection's): alike by choice.
class DittoSession:
    """A Ditto client whose connection is restored when lost (thread-safe).

    ``connect_options``: those of :func:`~.client.connect` (``token`` may be
    a provider: called again on every reconnect, so an expired token is
    replaced on demand). ``reconnect``: the :class:`~.resume.ReconnectPolicy`
    (backoff, bounded outage: :class:`~.resume.ReconnectFailed`). The
    iterators of :meth:`subscribe_for_persisted_events` and :meth:`follow`
    resume after their last delivered revision. ``connect`` and ``clock``
    are injectable (tests)."""

    def __init__(
        self,
        url: str,
        *,
        reconnect: ReconnectPolicy | None = None,
        connect: Callable[..., DittoConnection] = _connect,
        clock: Callable[[], float] = time.monotonic,
        **connect_options: Any,
    ) -> None:
        self.policy = reconnect or ReconnectPolicy()
        self._state = Reconnecting(clock)
        self._open: Callable[[], DittoConnection] = lambda: connect(url, **connect_options)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._connection = self._open()

    @property
    def reconnects(self) -> int:
        """Connections restored so far (inspection)."""
        return self._state.reconnects

    @property
    def connection(self) -> DittoConnection:
        """The current connection (replaced by each reconnect)."""
        return self._connection

    def current(self) -> tuple[Connection, int]:
        with self._lock:
            return self._connection, self._state.generation

    def reconnect(self, generation: int, cause: BaseException) -> None:
        """Restore the connection of ``generation`` (lost with ``cause``);
        returns at once if another iterator did it already. Waits out the
        policy's backoff; ``ReconnectFailed`` past its outage, ``cause`` if
        the session was closed."""
        with self._lock:
            run(self._state.reconnect(generation, cause, self.policy), self._perform)

    def _perform(self, op: Op) -> Any:
        """A reconnect's op, blocking (the lock held)."""
        if isinstance(op, Pause):
            return self._stop.wait(op.seconds)  # close() ends the wait
        if isinstance(op, Open):
            self._connection = self._open()
        elif isinstance(op, Retire):
            self._connection.close(timeout=1.0)
        else:
            raise AssertionError(f"not a reconnect's op: {op!r}")
        return None

    def subscribe_for_persisted_events(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> ResumingHistory:
        """The history of ``entity`` (as ``DittoConnection``'s), resumed after
        the last delivered revision whenever the connection is restored or
        Ditto ended the subscription for lack of requests (408)."""
        return ResumingHistory(self.current, self.reconnect, entity, dict(query),
                               prefetch, timeout)

    def follow(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> FollowEvents:
        """The history of ``entity``, then its live events, as one iterator
        that never ends by itself (see :class:`FollowEvents`)."""
        return FollowEvents(self.current, self.reconnect, entity, dict(query), prefetch, timeout)

    def search(
        self,
        *,
        prefetch: int = DEFAULT_SEARCH_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[SearchQuery],
    ) -> ResumingSearch:
        """A search (as ``DittoConnection``'s) that goes on after the last
        thing handed out when the connection is restored or Ditto ended it
        for lack of requests: if ordered by ``thingId`` (the default) and
        the things carry it (:class:`~.resume.SearchPosition`)."""
        return ResumingSearch(self.current, self.reconnect, dict(query), prefetch, timeout)

    def close(self) -> None:
        self._state.closed = True
        self._stop.set()
        with self._lock:
            self._connection.close()

    def __enter__(self) -> DittoSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
