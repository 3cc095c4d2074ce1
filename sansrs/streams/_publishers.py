"""Ready-made Publishers: iterable, generator, range, empty, error.

All of them hand each Subscriber an ``IteratorSubscription``: the iterator is
pulled only when there is demand, one element per unit of demand (and one
ahead when the demand runs out, to learn whether that was the last: see
``IteratorSubscription``), and closed (``close()``, for generators) on
cancellation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Generic, TypeVar

from ._api import (
    MAX_DEMAND,
    Subscriber,
    add_demand,
    check_request_argument,
    require_not_none,
    rule_3_9_error,
)
from ._report import report_cleanup_error, report_subscriber_error
from ._serial import Mailbox

__all__ = [
    "IterablePublisher",
    "IteratorSubscription",
    "empty_publisher",
    "error_publisher",
    "from_generator",
    "from_iterable",
    "range_publisher",
]

T = TypeVar("T")

_START = object()
_CANCEL = object()
_NOTHING = object()  # no element pulled ahead


class IteratorSubscription(Generic[T]):
    """One Subscriber's view of an iterator, with every Subscription rule built in.

    ``remaining`` (when the length is known) lets the subscription signal
    ``on_complete`` right after the last element, without waiting for more
    demand. When it is not known, the iterator is pulled one element ahead
    whenever an ``on_next`` uses up the demand: if it has ended,
    ``on_complete`` follows at once, as Reactor's ``fromIterable`` does (its
    ``hasNext`` after each element), so a Subscriber that requests exactly
    the N elements it expects is not left waiting; otherwise the element
    waits for the next request. ``failure`` makes it signal ``on_error``
    right after ``on_subscribe`` (a Publisher in a failed state, rule 1.9).
    """

    __slots__ = (
        "__weakref__",
        "_ahead",
        "_cancelled",
        "_demand",
        "_done",
        "_failure",
        "_iterator",
        "_mailbox",
        "_remaining",
        "_subscriber",
    )

    def __init__(
        self,
        subscriber: Subscriber[T],
        iterator: Iterator[T] | None,
        *,
        remaining: int | None = None,
        failure: BaseException | None = None,
    ) -> None:
        self._subscriber: Subscriber[T] | None = subscriber
        self._iterator = iterator
        self._remaining = remaining
        self._failure = failure
        self._demand = 0
        self._cancelled = False
        self._done = False
        self._ahead: object = _NOTHING
        self._mailbox: Mailbox[object] = Mailbox(self._drain)

    def start(self) -> None:
        """Signal ``on_subscribe`` (and what follows without demand)."""
        self._mailbox.post(_START)

    def request(self, n: int) -> None:
        check_request_argument(n)
        if self._cancelled:
            return  # rule 3.6
        self._mailbox.post(n)

    def cancel(self) -> None:
        if self._cancelled:
            return  # rule 3.7
        self._cancelled = True
        self._mailbox.post(_CANCEL)

    @property
    def cancelled(self) -> bool:
        """True once cancelled or terminated (rules 1.6, 3.6)."""
        return self._cancelled or self._done

    # -- the drainer (holds the mailbox token) --------------------------------

    def _drain(self) -> None:
        items = self._mailbox.items
        while True:
            while items:
                message = items.popleft()
                if self._done:
                    continue
                if message is _START:
                    self._start()
                elif message is _CANCEL:
                    self._release(close=True)
                else:
                    assert isinstance(message, int)
                    if message <= 0:
                        self._terminate(rule_3_9_error(message), close=True)
                    else:
                        self._demand = add_demand(self._demand, message)
            if self._done or self._demand == 0 or self._cancelled:
                return  # a cancel seen here has its message on the way: its poster drains it
            self._emit_one()

    def _start(self) -> None:
        subscriber = self._subscriber
        assert subscriber is not None
        if not self._call(subscriber.on_subscribe, self) or self._cancelled:
            return
        if self._failure is not None:
            self._terminate(self._failure, close=True)
        elif self._remaining == 0:
            self._terminate(None, close=False)

    def _emit_one(self) -> None:
        iterator = self._iterator
        subscriber = self._subscriber
        assert iterator is not None and subscriber is not None
        item: object = self._ahead
        if item is _NOTHING:
            try:
                item = next(iterator)
            except StopIteration:
                self._terminate(None, close=False)
                return
            except Exception as exc:  # the source failed: rule 1.4
                self._terminate(exc, close=True)
                return
        else:
            self._ahead = _NOTHING
        if self._demand != MAX_DEMAND:  # rule 3.17: MAX_DEMAND is unbounded
            self._demand -= 1
        if self._remaining is not None:
            self._remaining -= 1
        if item is None:
            self._terminate(TypeError("source produced None; rule 2.13 forbids on_next(None)"),
                            close=True)
            return
        if not self._call(subscriber.on_next, item):
            return
        if self._remaining == 0:
            self._terminate(None, close=False)
        elif self._remaining is None and self._demand == 0 and not self._cancelled:
            self._look_ahead(iterator)

    def _look_ahead(self, iterator: Iterator[T]) -> None:
        """The demand is used up: pull the next element now, so that an
        ended iterator completes at once (held for the next request otherwise)."""
        try:
            self._ahead = next(iterator)
        except StopIteration:
            self._terminate(None, close=False)
        except Exception as exc:  # the source failed: rule 1.4
            self._terminate(exc, close=True)

    def _call(self, method: Callable[..., None], *args: object) -> bool:
        """Invoke a Subscriber method; a raise is a rule 2.13 violation: cancel."""
        try:
            method(*args)
        except Exception as exc:
            subscriber = self._subscriber
            self._cancelled = True
            self._release(close=True)
            report_subscriber_error(exc, subscriber)
            return False
        return True

    def _terminate(self, error: BaseException | None, *, close: bool) -> None:
        subscriber = self._subscriber
        self._release(close=close)  # rule 1.6: terminal means cancelled
        if subscriber is None:
            return
        try:
            if error is None:
                subscriber.on_complete()
            else:
                subscriber.on_error(error)
        except Exception as exc:
            report_subscriber_error(exc, subscriber)

    def _release(self, *, close: bool) -> None:
        """Rules 1.7, 3.13: no signal after this, and no reference to the Subscriber."""
        self._done = True
        self._subscriber = None
        self._ahead = _NOTHING
        iterator, self._iterator = self._iterator, None
        self._demand = 0
        close_method = getattr(iterator, "close", None) if close else None
        if close_method is not None:
            try:
                close_method()
            except Exception as exc:
                report_cleanup_error(exc, iterator)


class IterablePublisher(Generic[T]):
    """A Publisher over an iterable, pulled only on demand.

    ``factory`` is called once per Subscriber to get a fresh iterator, so a
    re-iterable source (list, range) can serve many Subscribers (rule 1.11,
    each one unicast). ``length`` (when known) allows completing right after
    the last element. A one-shot iterator serves only its first Subscriber;
    later ones are rejected with ``on_error`` after ``on_subscribe`` (rule 1.9).
    """

    __slots__ = ("_factory", "_failure", "_length", "_one_shot_used", "_single_use")

    def __init__(
        self,
        factory: Callable[[], Iterable[T]],
        *,
        length: int | None = None,
        single_use: bool = False,
        failure: BaseException | None = None,
    ) -> None:
        self._factory = factory
        self._length = length
        self._single_use = single_use
        self._one_shot_used: list[None] = [None]
        self._failure = failure

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        require_not_none(subscriber, "subscriber", "1.9")
        failure = self._failure
        iterator: Iterator[T] | None = None
        if failure is None and self._single_use:
            try:
                self._one_shot_used.pop()  # atomic: only the first Subscriber wins
            except IndexError:
                failure = RuntimeError(
                    "this Publisher wraps a one-shot iterator and already has its Subscriber "
                    "(rule 1.11 leaves multi-subscribe optional; use from_generator for fresh "
                    "iterators per Subscriber)"
                )
        if failure is None:
            try:
                iterator = iter(self._factory())
            except Exception as exc:  # rule 1.9: failures go through on_error
                failure = exc
        IteratorSubscription(
            subscriber, iterator, remaining=self._length if failure is None else None,
            failure=failure,
        ).start()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(factory={self._factory!r}, length={self._length})"


def from_iterable(iterable: Iterable[T]) -> IterablePublisher[T]:
    """Publish the elements of ``iterable``.

    A re-iterable collection is iterated afresh for each Subscriber; a
    one-shot iterator (``iter(x) is x``, e.g. a generator object) serves one
    Subscriber and is closed when that Subscriber cancels.
    """
    require_not_none(iterable, "iterable", "1.9")
    if iter(iterable) is iterable:
        return IterablePublisher(lambda: iterable, single_use=True)
    length = len(iterable) if isinstance(iterable, Sized) else None
    return IterablePublisher(lambda: iterable, length=length)


def from_generator(factory: Callable[[], Iterable[T]]) -> IterablePublisher[T]:
    """Publish a fresh iterator from ``factory()`` to every Subscriber.

    The generator advances only on demand (and one element ahead when the
    demand runs out, to complete right behind its last element) and is
    ``close()``d on cancel, so its ``finally`` blocks run.
    """
    require_not_none(factory, "factory", "1.9")
    return IterablePublisher(factory)


def range_publisher(start: int, count: int | None = None) -> IterablePublisher[int]:
    """``start, start+1, ...``: ``count`` elements, or infinitely many if None."""
    if count is None:
        return IterablePublisher(lambda: itertools.count(start))
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return IterablePublisher(lambda: range(start, start + count), length=count)


def empty_publisher() -> IterablePublisher[object]:
    """Signals ``on_subscribe`` then ``on_complete`` at once, without demand."""
    return IterablePublisher(tuple, length=0)


def error_publisher(error: BaseException) -> IterablePublisher[object]:
    """Signals ``on_subscribe`` then ``on_error(error)`` at once (rule 1.9)."""
    require_not_none(error, "error", "1.9")
    return IterablePublisher(tuple, failure=error)
