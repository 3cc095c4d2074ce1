"""Protocol-agnostic, application-facing session pieces, shared by every
driver (threads now, a selector loop later) and every protocol binding.

- :class:`StreamIterator`: a blocking iterator over an inbound stream that
  keeps a prefetch window and asks for more as items are consumed; closing it
  cancels the stream.
- :class:`Outbound`: one outbound stream pulled from an application source
  (an iterator, a generator or a Publisher) strictly within the peer's credit.
- :func:`make_source`: turn what a handler returned into such a source.

Nothing here knows a wire protocol; bindings pass callables that do.
Everything except :class:`StreamIterator` runs on the connection's thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from .queues import CreditQueue, EndOfStream

__all__ = [
    "END",
    "PENDING",
    "IteratorSource",
    "Outbound",
    "PublisherSource",
    "Source",
    "StreamIterator",
    "ThreadedSource",
    "make_source",
]

T = TypeVar("T")
MAX_DEMAND = 2**63 - 1


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


class _Failed:
    """A source raised; the error is sent after the items pulled before it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class StreamIterator(Generic[T]):
    """Blocking iterator over an inbound stream.

    Whoever creates it has already granted ``prefetch`` on ``queue`` and sent
    it to the peer with the request. Each time half the window is consumed the
    iterator (or every ``batch`` items) grants that many again and calls
    ``request_more(n)`` (which hands
    the demand to the connection thread). ``close()`` (or leaving a ``with``
    block) cancels a stream that has not ended. Consume from one thread at a time.
    """

    def __init__(
        self,
        queue: CreditQueue[T],
        prefetch: int,
        request_more: Callable[[int], None],
        cancel: Callable[[], None],
        timeout: float | None = None,
        batch: int | None = None,
    ) -> None:
        if prefetch <= 0:
            raise ValueError("prefetch must be positive")
        self._queue = queue
        self._batch = max(1, prefetch // 2) if batch is None else max(1, min(batch, prefetch))
        self._consumed = 0
        self._request_more = request_more
        self._cancel = cancel
        self._timeout = timeout
        self._finished = False
        # Items taken from the queue in one batch, handed out one by one.
        self._ready: deque[T] = deque()

    def __iter__(self) -> StreamIterator[T]:
        return self

    def __next__(self) -> T:
        ready = self._ready
        item = ready.popleft() if ready else self._take()
        self._consumed += 1
        if self._consumed >= self._batch:
            n, self._consumed = self._consumed, 0
            if not self._queue.done:
                self._queue.grant(n)
                self._request_more(n)
        return item

    def _take(self) -> T:
        if self._finished:
            raise StopIteration
        try:
            batch = self._queue.get_batch(self._timeout, self._batch)
        except EndOfStream:
            self._finished = True
            raise StopIteration from None
        except TimeoutError:
            raise
        except BaseException:
            self._finished = True
            raise
        item = batch[0]
        if len(batch) > 1:
            self._ready.extend(batch[1:])
        return item

    def close(self) -> None:
        """Cancel the stream if it is still running; idempotent."""
        if self._finished:
            return
        self._finished = True
        self._ready.clear()
        if not self._queue.done:
            self._queue.close()
            self._cancel()

    def __enter__(self) -> StreamIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Source(Protocol[T]):  # type: ignore[misc]
    """Where an :class:`Outbound` pulls items from."""

    def pull(self) -> T:
        """The next item, ``END`` when finished, ``PENDING`` if none yet. May raise."""

    def demand(self, n: int) -> None:
        """The peer granted ``n`` more items."""

    def cancel(self) -> None: ...


class IteratorSource(Generic[T]):
    """A synchronous iterator or generator, pulled on the connection thread."""

    __slots__ = ("_it",)

    def __init__(self, iterable: Iterable[T]) -> None:
        self._it = iter(iterable)

    def pull(self) -> T:
        return next(self._it, END)

    def demand(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()  # runs a generator's finally blocks


class PublisherSource(Generic[T]):
    """A Reactive Streams Publisher: subscribed on the connection thread, it may
    signal from any thread. Items land in a :class:`CreditQueue` sized by the
    demand requested from the publisher (so it too never grows past credit);
    ``notify`` (the driver's wake-up) is called so the loop pulls them."""

    def __init__(self, publisher: Any, notify: Callable[[], None]) -> None:
        self._queue: CreditQueue[T] = CreditQueue()
        self._notify = notify
        self._subscription: Any = None
        self._pending_demand = 0
        self._cancelled = False
        self._lock = threading.Lock()
        publisher.subscribe(self)

    # Subscriber side (any thread)
    def on_subscribe(self, subscription: Any) -> None:
        if subscription is None:
            raise TypeError("on_subscribe(None)")  # rule 2.13
        with self._lock:
            if self._subscription is not None or self._cancelled:
                subscription.cancel()  # rule 2.5
                return
            self._subscription = subscription
            pending, self._pending_demand = self._pending_demand, 0
        if pending:
            subscription.request(pending)

    def on_next(self, item: T) -> None:
        if item is None:
            raise TypeError("on_next(None)")  # rule 2.13
        self._queue.put(item)
        self._notify()

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("on_error(None)")  # rule 2.13
        self._queue.finish(error)
        self._notify()

    def on_complete(self) -> None:
        self._queue.finish()
        self._notify()

    # Source side (connection thread)
    def pull(self) -> T:
        try:
            return self._queue.get(timeout=0)
        except EndOfStream:
            return END  # type: ignore[no-any-return]
        except TimeoutError:
            return PENDING  # type: ignore[no-any-return]

    def demand(self, n: int) -> None:
        self._queue.grant(n)
        with self._lock:
            subscription = self._subscription
            if subscription is None:
                self._pending_demand = min(MAX_DEMAND, self._pending_demand + n)
                return
        subscription.request(n)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            subscription = self._subscription
        self._queue.close()
        if subscription is not None:
            subscription.cancel()


class ThreadedSource(Generic[T]):
    """An iterable pulled on its own worker thread, for handlers whose items
    may block (a channel handler iterating its inbound, a slow generator):
    the connection thread never waits on application code. The worker pulls
    only while demand is outstanding; items cross to the connection thread in
    a :class:`CreditQueue` sized by that demand."""

    def __init__(self, iterable: Iterable[T], notify: Callable[[], None], name: str) -> None:
        self._queue: CreditQueue[T] = CreditQueue()
        self._notify = notify
        self._iterable = iterable
        self._demand = 0
        self._cancelled = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for item in self._iterable:
                with self._cond:
                    while self._demand == 0 and not self._cancelled:
                        self._cond.wait()
                    if self._cancelled:
                        break
                    self._demand -= 1
                self._queue.put(item)
                self._notify()
            else:
                self._queue.finish()
        except Exception as exc:
            self._queue.finish(exc)
        finally:
            close = getattr(self._iterable, "close", None)
            if self._cancelled and close is not None:
                with contextlib.suppress(Exception):
                    close()
        self._notify()

    def pull(self) -> T:
        try:
            return self._queue.get(timeout=0)
        except EndOfStream:
            return END  # type: ignore[no-any-return]
        except TimeoutError:
            return PENDING  # type: ignore[no-any-return]

    def demand(self, n: int) -> None:
        self._queue.grant(n)
        with self._cond:
            self._demand = min(MAX_DEMAND, self._demand + n)
            self._cond.notify()

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            self._cond.notify()
        self._queue.close()

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
    iterables on a worker thread of that name instead of the caller's."""
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


class Outbound(Generic[T]):
    """One outbound stream, pulled from ``source`` only within the peer's credit.

    ``ready()`` (optional) says whether the transport can take an item now.
    ``emit(item, last)`` sends one item (``last``: the source is known to have
    ended, so the item can carry the completion). ``complete()`` sends a bare
    completion, ``fail(exc)`` an error. One item is read ahead of the credit at
    most, to learn whether the next item is the last; it is never sent early.
    """

    __slots__ = (
        "_ahead",
        "_complete",
        "_emit",
        "_fail",
        "_ready",
        "credit",
        "finished",
        "source",
    )

    def __init__(
        self,
        source: IteratorSource[T] | PublisherSource[T] | ThreadedSource[T],
        emit: Callable[[T, bool], None],
        complete: Callable[[], None],
        fail: Callable[[BaseException], None],
        credit: int = 0,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.source = source
        self._ready = ready
        self._emit = emit
        self._complete = complete
        self._fail = fail
        self.credit = 0
        self.finished = False
        self._ahead: Any = PENDING
        if credit:
            self.add_credit(credit)

    def add_credit(self, n: int) -> None:
        self.credit = min(MAX_DEMAND, self.credit + n)
        self.source.demand(n)

    def pump(self, budget: int) -> bool:
        """Send up to ``budget`` items. True if more could be sent right now."""
        if self.finished:
            return False
        emit = self._emit
        ready = self._ready
        ahead = self._ahead
        if ahead is PENDING:
            ahead = self._pull()
        while self.credit > 0 and budget > 0 and not isinstance(ahead, _Marker):
            if isinstance(ahead, _Failed):
                break
            if ready is not None and not ready():
                self._ahead = ahead
                return True  # the transport is behind: resume on a later turn
            item = ahead
            ahead = self._pull()
            self.credit -= 1
            budget -= 1
            try:
                emit(item, ahead is END)
            except Exception as exc:  # e.g. the item is not a valid payload
                ahead = _Failed(exc)
                break
            if ahead is END:
                self._ahead = END
                self.finished = True
                return False
        self._ahead = ahead
        if isinstance(ahead, _Failed):
            self.finished = True
            self._fail(ahead.error)
            return False
        if ahead is END:
            self.finished = True
            self._complete()
            return False
        return self.credit > 0 and ahead is not PENDING

    def _pull(self) -> Any:
        try:
            return self.source.pull()
        except Exception as exc:
            return _Failed(exc)

    def cancel(self) -> None:
        """The peer cancelled: stop and release the source."""
        if self.finished:
            return
        self.finished = True
        with contextlib.suppress(Exception):  # a failing finally must not hurt the connection
            self.source.cancel()
