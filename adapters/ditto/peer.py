"""A Ditto connection as a synchronous application sees it: the client's
(:class:`DittoConnection`: persisted-events history and search as blocking
iterators or Publishers) and a server's view of one connected client
(:class:`DittoServerPeer`). Every call may come from any application thread;
it is handed to the connection's owning thread, which alone drives the
sans-IO core through :mod:`.engine`. See docs/protocols/ditto.md.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from typing_extensions import Unpack

from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer
from ..drive.publishers import RemoteStreamPublisher, SubscriberSink
from ..drive.queues import CreditQueue
from ..drive.streams import StreamIterator, check_prefetch
from .batches import EventBatches
from .engine import (
    DittoClientEngine,
    DittoServerEngine,
    HistoryQuery,
    SearchQuery,
    SubscribeRequest,
    SubscriptionHandle,
    history_request,
    search_request,
)
from .follow import FollowEvents, follow_connection
from .live import LiveTap

__all__ = [
    "DEFAULT_PREFETCH",
    "DEFAULT_SEARCH_PREFETCH",
    "MAX_PREFETCH",
    "DittoConnection",
    "DittoServerPeer",
    "subscription_publisher",
]

DEFAULT_PREFETCH = 64
DEFAULT_SEARCH_PREFETCH = 2
MAX_PREFETCH = 2**31 - 1


class DittoConnection(DrivenPeer):
    """A client connection to a Ditto WebSocket endpoint. Thread-safe; a
    context manager. (The asyncio twin, with the same methods returning async
    iterators, is :class:`~.aio.AsyncDittoConnection`.)"""

    def __init__(self, thread: Driver, engine: DittoClientEngine) -> None:
        super().__init__(thread)
        self._engine = engine

    def _iterator(
        self, request: SubscribeRequest, prefetch: int, timeout: float | None
    ) -> StreamIterator[Any]:
        queue, prefetch, more, cancel, handle = self._open(request, prefetch)
        return StreamIterator(queue, prefetch, more, cancel, timeout, explain=handle.unanswered)

    def _batches(
        self,
        request: SubscribeRequest,
        prefetch: int,
        timeout: float | None,
        paused: bool,
        head_start: int,
    ) -> EventBatches:
        head = min(head_start, prefetch) if paused else 0
        queue, prefetch, more, cancel, handle = self._open(request, prefetch, paused, head)
        return EventBatches(queue, prefetch, more, cancel, timeout,
                            paused=paused, head_start=head, explain=handle.unanswered)

    def _open(
        self, request: SubscribeRequest, prefetch: int, paused: bool = False, head: int = 0
    ) -> tuple[
        CreditQueue[Any], int, Callable[[int], None], Callable[[], None], SubscriptionHandle
    ]:
        """Subscribe with ``prefetch`` granted (checked; asked of Ditto now,
        or by the consumer later if ``paused``): the queue, the prefetch and
        the demand calls of an iterator, and the subscription."""
        prefetch = check_prefetch(prefetch, MAX_PREFETCH)
        queue: CreditQueue[Any] = CreditQueue(granted=prefetch)
        handle = SubscriptionHandle(request, queue, head if paused else prefetch)
        engine = self._engine
        self._submit(lambda: engine.subscribe(handle))
        more, cancel = self._calls(lambda n: engine.request_more(handle, n),
                                   lambda: engine.cancel(handle))
        return queue, prefetch, more, cancel, handle

    def live_events(
        self,
        entity: str,
        *,
        filter: str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> StreamIterator[Any]:
        """The live change notifications of thing ``entity`` (Ditto's
        ``START-SEND-EVENTS`` with a filter for it, and ``filter``, RQL).
        The first item is :data:`~.live.STARTED`, once Ditto acknowledged
        (every event persisted after it is pushed); then each event as Ditto
        sends it. Ditto pushes without demand: at most ``prefetch`` events
        wait; one more ends the iterator with :class:`~.live.LiveOverflow`
        (the history has the rest: :meth:`follow` reads it). Closing the
        iterator stops the events (``STOP-SEND-EVENTS`` when none is left)."""
        prefetch = check_prefetch(prefetch, MAX_PREFETCH)
        queue: CreditQueue[Any] = CreditQueue(granted=prefetch)
        tap = LiveTap(entity, queue, prefetch, filter)
        live = self._engine.live
        self._submit(lambda: live.add(tap))
        more, cancel = self._calls(lambda n: live.credit(tap, n), lambda: live.remove(tap))
        return StreamIterator(queue, prefetch, more, cancel, timeout)

    def follow(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> FollowEvents:
        """The history of ``entity`` (``query`` as for
        :meth:`subscribe_for_persisted_events`, without an end), then its
        live events, as one iterator: no gap and no duplicate at the seam
        (:class:`~.session.FollowEvents`). A lost connection ends it with
        ``ConnectionClosed``; ``DittoSession.follow`` reconnects and resumes."""
        return follow_connection(self, entity, dict(query), prefetch, timeout)

    def _calls(
        self, more: Callable[[int], None], cancel: Callable[[], None]
    ) -> tuple[Callable[[int], None], Callable[[], None]]:
        """``more`` and ``cancel`` handed to the connection's thread; a
        closed connection is not their error (the iterator sees why next)."""

        def more_later(n: int) -> None:
            with contextlib.suppress(ConnectionClosed):
                self._submit(lambda: more(n))

        def cancel_later() -> None:
            with contextlib.suppress(ConnectionClosed):
                self._submit(cancel)

        return more_later, cancel_later

    def refresh_token(self) -> None:
        """Ask the token provider (``connect(token=<callable>)``) for a token
        now and send it as ``JWT-TOKEN`` (e.g. after a role change); nothing
        without a provider or while a fetch is under way."""
        engine = self._engine
        self._submit(engine.refresh_token)

    def _publisher(self, request: SubscribeRequest) -> RemoteStreamPublisher[Any, Any]:
        return subscription_publisher(self._engine, self._submit, request)

    # -- history ---------------------------------------------------------------
    def subscribe_for_persisted_events(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[HistoryQuery],
    ) -> StreamIterator[Any]:
        """The history of ``entity`` (``"<namespace>:<name>"``) as a blocking iterator.

        ``query``: the range and filter (:class:`~.engine.HistoryQuery`:
        ``from_revision``, ``to_revision``, ``from_timestamp``,
        ``to_timestamp``, ``filter``, ``group``, ``headers``). Each item is
        one event as Ditto sends it (a Ditto Protocol message as parsed JSON;
        ``sansrs.ditto.envelope_from_json`` makes it an ``Envelope``).
        ``prefetch`` events are requested at once and, each time half of them
        are consumed, that many more. ``timeout`` bounds each wait for an
        event (``TimeoutError``). Closing the iterator (or leaving its
        ``with``) cancels the subscription. A ``failed`` raises
        ``DittoRemoteError`` (``status``, ``code``, ``error.message``,
        ``description``); a lost connection ``ConnectionClosed``.
        """
        return self._iterator(history_request(entity, **query), prefetch, timeout)

    def persisted_event_batches(
        self,
        entity: str,
        *,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
        paused: bool = False,
        head_start: int = 0,
        **query: Unpack[HistoryQuery],
    ) -> EventBatches:
        """:meth:`subscribe_for_persisted_events`, consumed a list of events
        at a time (:class:`~.batches.EventBatches`): each ``next`` returns
        every event that has arrived, at least one and at most ``prefetch //
        2``, and renews the demand for them. For consumers that treat events
        in bulk (the Spark reader): one call per batch instead of one per
        event. Errors, ``timeout`` and ``close`` as for the item iterator.

        ``paused``: subscribe now, but ask Ditto for only ``head_start``
        events (default none) until the first ``next`` asks for the rest of
        ``prefetch``: a reader of several histories in turn opens the next
        one while it reads this one, so that one starts without waiting for
        ``created`` (and, with a head start, for its first events). Ditto may
        end a subscription that stays idle too long (408).
        """
        if head_start < 0:
            raise ValueError("head_start must not be negative")
        return self._batches(
            history_request(entity, **query), prefetch, timeout, paused, head_start
        )

    def persisted_events_publisher(
        self, entity: str, **query: Unpack[HistoryQuery]
    ) -> RemoteStreamPublisher[Any, Any]:
        """The same history as a Reactive Streams Publisher (one Subscriber).

        The subscribe is sent at the first ``request(n)``; Ditto's demand is
        the Subscriber's; ``cancel()`` cancels. Signals arrive on the
        connection thread.
        """
        return self._publisher(history_request(entity, **query))

    # -- search ------------------------------------------------------------------
    def search(
        self,
        *,
        prefetch: int = DEFAULT_SEARCH_PREFETCH,
        timeout: float | None = None,
        **query: Unpack[SearchQuery],
    ) -> StreamIterator[list[Any]]:
        """A search (the older search protocol) as a blocking iterator of pages.

        ``query`` (:class:`~.engine.SearchQuery`): ``filter``, ``options``
        (Ditto's string, e.g. ``"size(10),sort(+thingId)"``), ``namespaces``,
        ``fields``, ``headers``. Each item is one page (a list of things);
        demand counts pages, so ``prefetch`` is in pages.
        """
        return self._iterator(search_request(**query), prefetch, timeout)

    def search_publisher(self, **query: Unpack[SearchQuery]) -> RemoteStreamPublisher[Any, Any]:
        """The same search as a Publisher of pages."""
        return self._publisher(search_request(**query))


def subscription_publisher(
    engine: DittoClientEngine,
    submit: Callable[[Callable[[], object]], None],
    request: SubscribeRequest,
) -> RemoteStreamPublisher[Any, Any]:
    """A subscription as a Publisher, for either API (``submit`` runs a call on
    the connection's thread)."""

    def start(sink: SubscriberSink[Any], n: int) -> SubscriptionHandle:
        handle = SubscriptionHandle(request, sink, n)
        engine.subscribe(handle)
        return handle

    return RemoteStreamPublisher(submit, start, engine.request_more, engine.cancel)


class DittoServerPeer:
    """One connected client as the server sees it (inspection and control)."""

    def __init__(self, thread: Driver, engine: DittoServerEngine) -> None:
        self.thread = thread
        self.engine = engine

    def inspect(self, fn: Callable[[DittoServerEngine], Any], timeout: float = 5.0) -> Any:
        """Run ``fn(engine)`` on the connection's thread (the only safe place to
        read its state) and return the result; ``TimeoutError`` if it is stuck."""
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            try:
                box.append(fn(self.engine))
            finally:
                done.set()

        self.thread.call_soon(run, timeout)
        if not done.wait(timeout) or not box:
            raise TimeoutError("the connection's thread did not run the inspection")
        return box[0]

    def close(self, timeout: float | None = 5.0) -> None:
        self.thread.close(timeout)
