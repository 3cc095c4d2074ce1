"""Where outbound streams pull their items from, and what bounds them.

- :class:`IteratorSource`: a synchronous iterator or generator, pulled on the
  connection's thread (nothing is produced that is not pulled).
- :class:`PublisherSource`: a Reactive Streams Publisher, which may signal
  from any thread.
- :class:`ThreadedSource`: an iterable pulled on a worker thread (its items
  may block).
- :func:`make_source`: what a handler returned, as one of these.

Publishers and worker threads produce on their own, so what they are asked
for is what they may hold: a :class:`SourceBudget` per connection bounds it
in bytes, all streams together (``LoopConfig.source_budget``). A source asks
its producer for more only when the connection pulls from it, which the
driver stops doing while the socket does not drain (``high_water``), and
never for more than the peer's credit: so a peer that signals unbounded
demand and never reads makes a server produce about a budget's worth, not
everything it was asked for. Nothing here knows a wire protocol.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import islice
from typing import Any, Generic, Protocol, TypeVar

from sansrs.streams import MAX_DEMAND, add_demand

from .aio import asyncify
from .config import LoopConfig

__all__ = [
    "END",
    "PENDING",
    "IteratorSource",
    "PublisherSource",
    "Source",
    "SourceBudget",
    "ThreadedSource",
    "is_publisher",
    "make_source",
    "weight",
]

T = TypeVar("T")


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: A source has finished (normally; errors are raised).
END: Any = _Marker("END")
#: A source has nothing right now but may have later (publishers).
PENDING: Any = _Marker("PENDING")
_NOTHING: Any = _Marker("NOTHING")  # no item pulled ahead

#: What an item of a type with no length is assumed to weigh (bytes).
OPAQUE_WEIGHT = 256
#: Items asked of a producer at once, at most (however small they are).
MAX_ASK = 1024
_DEFAULT_BUDGET = LoopConfig().source_budget


def weight(item: object) -> int:
    """What ``item`` costs to hold, in bytes: its length for bytes and text,
    the sum of its parts for a tuple (an RSocket Payload is data and
    metadata), :data:`OPAQUE_WEIGHT` otherwise."""
    t = type(item)
    if t is bytes or t is bytearray or t is str:
        return len(item)  # type: ignore[arg-type]
    if isinstance(item, memoryview):
        return item.nbytes
    if isinstance(item, tuple):
        return 16 + sum(weight(part) for part in item if part is not None)
    return OPAQUE_WEIGHT


class SourceBudget:
    """Bytes the sources of one connection hold or have asked for
    (``LoopConfig.source_budget``); thread-safe. A reservation beyond the
    limit is refused while anything is held (so one item always flows), and
    the refused sources are woken when bytes are released."""

    __slots__ = ("_lock", "_waiting", "held", "limit")

    def __init__(self, limit: int = _DEFAULT_BUDGET) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()
        self._waiting: list[Callable[[], None]] = []

    def reserve(self, nbytes: int, waiter: Callable[[], None]) -> bool:
        """Hold ``nbytes`` more; False (and ``waiter()`` later) if over the limit."""
        with self._lock:
            if self.held and self.held + nbytes > self.limit:
                self._waiting.append(waiter)
                return False
            self.held += nbytes
            return True

    def adjust(self, delta: int) -> None:
        """A reservation turned out ``delta`` bytes off (negative: released)."""
        with self._lock:
            self.held += delta
            if delta >= 0 or not self._waiting or self.held >= self.limit:
                return
            waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            waiter()


class Source(Protocol[T]):  # type: ignore[misc]
    """Where an :class:`~.streams.Outbound` pulls items from."""

    def pull(self) -> T:
        """The next item, ``END`` when finished, ``PENDING`` if none yet. May raise."""

    def demand(self, n: int) -> None:
        """The peer granted ``n`` more items."""

    def cancel(self) -> None: ...


class IteratorSource(Generic[T]):
    """A synchronous iterator or generator, pulled on the connection thread."""

    __slots__ = ("_it", "pull")

    def __init__(self, iterable: Iterable[T]) -> None:
        self._it = iter(iterable)
        # ``pull()``: the next item or END. A C-level partial, not a method:
        # it is called once per item sent (the hot path of every stream).
        self.pull: Callable[[], T] = partial(next, self._it, END)

    def pull_many(self, into: list[T], n: int) -> bool:
        """Append up to ``n`` next items to ``into`` in one C-level call;
        False once the iterator has ended. An exception from the iterator
        propagates with the items before it already in ``into``."""
        before = len(into)
        into.extend(islice(self._it, n))
        return len(into) - before == n

    def demand(self, n: int) -> None:
        pass

    def bind(self, budget: SourceBudget) -> None:
        pass  # produces only what is pulled: nothing is held ahead

    def cancel(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()  # runs a generator's finally blocks


class _Window(Generic[T]):
    """What a producer on its own (a Publisher, a worker thread) has been
    asked for and has delivered, bounded by the peer's credit and the
    connection's :class:`SourceBudget`.

    The producer is asked (``ask(k)``) only from :meth:`pull`, on the
    connection's thread, for at most a window of about an eighth of the
    budget (a single item while its size is unknown); every item asked for
    holds an estimate of its size in the budget until it is pulled. Items
    arrive through :meth:`deliver` from any thread."""

    __slots__ = (
        "_ask",
        "_asked",
        "_asked_bytes",
        "_budget",
        "_credit",
        "_done",
        "_error",
        "_est",
        "_items",
        "_lock",
        "_notify",
        "_queued_bytes",
        "cancelled",
    )

    def __init__(self, ask: Callable[[int], None], notify: Callable[[], None]) -> None:
        self._ask = ask
        self._notify = notify
        self._budget = SourceBudget()
        self._lock = threading.Lock()
        self._items: deque[T] = deque()
        self._credit = 0  # the peer's demand not yet asked of the producer
        self._asked = 0  # asked of the producer, not yet delivered
        self._asked_bytes = 0  # the budget held for those
        self._queued_bytes = 0  # delivered, not yet pulled
        self._est = 0  # bytes an item is expected to weigh (0: unknown yet)
        self._done = False
        self._error: BaseException | None = None
        self.cancelled = False

    def bind(self, budget: SourceBudget) -> None:
        """Count against the connection's ``budget`` (before the first pull)."""
        self._budget = budget

    def demand(self, n: int) -> None:
        with self._lock:
            self._credit = add_demand(self._credit, n)

    # -- connection thread -----------------------------------------------------
    def pull(self) -> T:
        items = self._items
        if len(items) + self._asked <= self._low_water():
            self._ask_more()
        with self._lock:
            if items:
                item = items.popleft()
            elif self._done:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                return END  # type: ignore[no-any-return]
            else:
                return PENDING  # type: ignore[no-any-return]
            w = weight(item)
            self._queued_bytes -= w
        self._budget.adjust(-w)
        return item

    def _low_water(self) -> int:
        est = self._est
        if not est:
            return 0
        return max(1, min(MAX_ASK, self._budget.limit // 8 // est)) // 2

    def _ask_more(self) -> None:
        budget = self._budget
        with self._lock:
            if self._done or self.cancelled or self._credit <= 0:
                return
            est = self._est
            if est:
                window = max(1, min(MAX_ASK, budget.limit // 8 // est))
                each = est
            else:
                # Size unknown: one item, reserved as a sixteenth of the
                # budget, so that at most 16 such first asks are in flight.
                window, each = 1, max(1, budget.limit // 16)
            k = min(self._credit, window - len(self._items) - self._asked)
            if k <= 0:
                return
        if not budget.reserve(k * each, self._notify):
            return  # woken (notify) once the connection has sent some
        with self._lock:
            if self._done or self.cancelled:
                release = k * each
            else:
                release = 0
                self._asked += k
                self._asked_bytes += k * each
                if self._credit != MAX_DEMAND:
                    self._credit -= k
        if release:
            budget.adjust(-release)
            return
        self._ask(k)

    # -- any thread ------------------------------------------------------------
    def deliver(self, item: T) -> bool:
        """An item from the producer; False if it was not asked for (the
        producer broke Reactive Streams rule 1.1)."""
        w = weight(item)
        with self._lock:
            if self._done or self.cancelled:
                return True  # in flight at cancel: dropped
            asked = self._asked
            if asked <= 0:
                return False
            share = self._asked_bytes // asked
            self._asked = asked - 1
            self._asked_bytes -= share
            self._items.append(item)
            self._queued_bytes += w
            self._est = max(w, self._est // 2, 1)
        self._budget.adjust(w - share)
        self._notify()
        return True

    def finish(self, error: BaseException | None = None) -> None:
        """The producer ended (after what it delivered)."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self._error = error
            release, self._asked_bytes, self._asked = self._asked_bytes, 0, 0
        if release:
            self._budget.adjust(-release)
        self._notify()

    def close(self) -> None:
        """Cancelled: drop what is held and give its bytes back."""
        with self._lock:
            self.cancelled = True
            self._done = True
            release = self._asked_bytes + self._queued_bytes
            self._asked_bytes = self._queued_bytes = self._asked = 0
            self._items.clear()
        if release:
            self._budget.adjust(-release)


class PublisherSource(Generic[T]):
    """A Reactive Streams Publisher: subscribed on the connection thread, it
    may signal from any thread. It is asked (``request``) for items only as
    the connection pulls, within the peer's credit and the connection's
    :class:`SourceBudget`; ``notify`` (the driver's wake-up) is called when
    items arrive, so the loop pulls them."""

    def __init__(self, publisher: Any, notify: Callable[[], None]) -> None:
        self._window: _Window[T] = _Window(self._request, notify)
        self._subscription: Any = None
        self._pending_demand = 0
        self._lock = threading.Lock()
        self.pull = self._window.pull
        self.demand = self._window.demand
        self.bind = self._window.bind
        publisher.subscribe(self)

    # Subscriber side (any thread)
    def on_subscribe(self, subscription: Any) -> None:
        if subscription is None:
            raise TypeError("on_subscribe(None)")  # rule 2.13
        with self._lock:
            if self._subscription is not None or self._window.cancelled:
                subscription.cancel()  # rule 2.5
                return
            self._subscription = subscription
            pending, self._pending_demand = self._pending_demand, 0
        if pending:
            subscription.request(pending)

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("on_next(None)")  # rule 2.13
        if not self._window.deliver(item):
            # More than requested (rule 1.1): the stream fails, the publisher stops.
            self._window.finish(RuntimeError("the publisher signalled more items than requested"))
            self._cancel_upstream()

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("on_error(None)")  # rule 2.13
        self._window.finish(error)

    def on_complete(self) -> None:
        self._window.finish()

    # Source side (connection thread)
    def _request(self, n: int) -> None:
        with self._lock:
            subscription = self._subscription
            if subscription is None:
                self._pending_demand = add_demand(self._pending_demand, n)
                return
        subscription.request(n)

    def _cancel_upstream(self) -> None:
        with self._lock:
            subscription = self._subscription
        if subscription is not None:
            with contextlib.suppress(Exception):
                subscription.cancel()

    def cancel(self) -> None:
        self._window.close()
        self._cancel_upstream()


class ThreadedSource(Generic[T]):
    """An iterable pulled on its own worker thread, for handlers whose items
    may block (a channel handler iterating its inbound, a slow generator):
    the connection thread never waits on application code. The worker takes
    an item from the iterable only once it has been asked for one (within
    the peer's credit and the connection's :class:`SourceBudget`), and one
    more when what it was asked for is used up, to complete right behind the
    last item."""

    def __init__(self, iterable: Iterable[T], notify: Callable[[], None], name: str) -> None:
        self._window: _Window[T] = _Window(self._grant, notify)
        self._notify = notify
        self._iterable = iterable
        self._allowed = 0
        self._cond = threading.Condition()
        self.pull = self._window.pull
        self.demand = self._window.demand
        self.bind = self._window.bind
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        window = self._window
        it: Iterator[T] | None = None
        ahead: Any = _NOTHING
        try:
            it = iter(self._iterable)
            while True:
                with self._cond:
                    while self._allowed == 0 and not window.cancelled:
                        self._cond.wait()
                    if window.cancelled:
                        break
                    self._allowed -= 1
                if ahead is _NOTHING:
                    try:
                        ahead = next(it)
                    except StopIteration:
                        window.finish()
                        break
                window.deliver(ahead)
                ahead = _NOTHING
                with self._cond:
                    used_up = self._allowed == 0
                if used_up:
                    # One item ahead when the grant is used up: an iterable
                    # that has ended completes now, not at the next request
                    # (a consumer that asks for exactly N must get it).
                    try:
                        ahead = next(it)
                    except StopIteration:
                        window.finish()
                        break
        except Exception as exc:
            window.finish(exc)
        finally:
            close = getattr(it if it is not None else self._iterable, "close", None)
            if window.cancelled and close is not None:
                with contextlib.suppress(Exception):
                    close()
        self._notify()

    def _grant(self, n: int) -> None:
        with self._cond:
            self._allowed += n
            self._cond.notify()

    def cancel(self) -> None:
        self._window.close()
        with self._cond:
            self._cond.notify()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


def is_publisher(obj: object) -> bool:
    return callable(getattr(obj, "subscribe", None))


def make_source(
    result: object,
    *,
    is_single: Callable[[object], bool],
    notify: Callable[[], None],
    threaded: str | None = None,
) -> IteratorSource[Any] | PublisherSource[Any] | ThreadedSource[Any]:
    """A handler's result as a source: a Publisher, an iterable or generator,
    or a single value (``is_single`` says which values count as one item,
    e.g. ``bytes``, which would otherwise iterate as ints). ``threaded``: pull
    iterables on a worker thread of that name instead of the caller's.
    Async forms (a coroutine, an async iterable: under the asyncio driver)
    are pulled on the event loop (:func:`~.aio.asyncify`)."""
    result = asyncify(result)
    if is_publisher(result):
        return PublisherSource(result, notify)
    if result is None:
        return IteratorSource(())
    if is_single(result):
        return IteratorSource((result,))
    if isinstance(result, Iterable):
        if threaded is not None:
            return ThreadedSource(result, notify, threaded)
        return IteratorSource(result)
    raise TypeError(
        f"a stream handler must return an iterable, a generator or a Publisher, "
        f"not {type(result).__name__}"
    )
