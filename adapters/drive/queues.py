"""Plumbing shared by every adapter: wake-ups and the queues between the
connection-owning I/O thread and application threads (docs/architecture.md,
"Threads").

Two directions, two queues:

- :class:`CreditQueue`, I/O thread -> application: inbound items of one
  stream. Its capacity is the demand the application granted, so the I/O side
  can always put without blocking; a put beyond it is a bug (the peer sent
  more than it was allowed and the core did not stop it, or the adapter
  miscounted) and raises :class:`CreditExceeded` rather than growing memory.
- :class:`Inbox`, application -> I/O thread: commands ("send this request",
  "request 128 more"). The I/O side drains without blocking; producers wait
  (with a timeout) only when it is full, and wake the loop through a
  :class:`Wakeup`. :class:`Batcher` is an inbox of plain items (e.g. the
  payloads of fire-and-forgets) handed to the I/O thread many per call.

The fast paths take no lock: ``deque.append`` and ``popleft`` are atomic, and a
consumer only pays for a :class:`Signal` (one lock) when it must sleep.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat, starmap
from typing import Generic, Protocol, TypeVar

from .errors import seconds

T = TypeVar("T")


class Waker(Protocol):
    """Anything an :class:`Inbox` can wake: a :class:`Wakeup`, or one
    connection of a selector loop (which marks itself and wakes its loop)."""

    def wake(self) -> None: ...

__all__ = [
    "Batcher",
    "CreditExceeded",
    "CreditQueue",
    "EndOfStream",
    "Inbox",
    "QueueClosed",
    "Signal",
    "Waker",
    "Wakeup",
    "refill_batch",
]


class QueueClosed(Exception):
    """The queue was closed (stream cancelled or connection gone) while in use."""


class EndOfStream(Exception):
    """The producer completed normally and every item has been taken."""


class CreditExceeded(AssertionError):
    """An I/O-side put found the queue full: more items than demand granted."""


#: Serializes ``CreditQueue.grant`` (rare: a consumer's replenish) for
#: every queue: one lock per queue cost an allocation per request-response.
_GRANT_LOCK = threading.Lock()


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class Wakeup:
    """Wakes an I/O loop blocked in ``select``: a socketpair whose read end the
    loop watches. Wake-ups coalesce: one byte is in flight at most (per race),
    so a burst of producers costs one system call, not one each.

    Protocol for the loop: call :meth:`clear` *before* draining the inboxes it
    guards; a wake that lands after ``clear`` leaves a byte for the next select.
    """

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._pending = False
        self._closed = False

    def fileno(self) -> int:
        return self._reader.fileno()

    def wake(self) -> None:
        """Any thread: make the loop's next (or current) select return."""
        if self._pending or self._closed:
            return
        self._pending = True
        try:
            self._writer.send(b"\0")
        except (BlockingIOError, InterruptedError):
            pass  # the socket buffer is full of wake bytes already
        except OSError:
            pass  # closed concurrently: the loop is going away anyway

    def clear(self) -> None:
        """I/O thread: consume pending wake bytes; then drain the inboxes."""
        try:
            # One read: wakes coalesce (one byte per race), and a byte that is
            # left, or lands later, only makes the next select return at once.
            self._reader.recv(4096)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pass
        self._pending = False

    def close(self) -> None:
        self._closed = True
        self._reader.close()
        self._writer.close()


class Signal:
    """A wake-up for one waiting thread: :meth:`set` lets the next (or the
    current) :meth:`wait` return True, once. A bare lock held while unset, so
    creating one and waking a sleeper cost a fraction of a
    :class:`threading.Event` (no Condition). Waiters must re-check what they
    wait for: a ``set`` nobody waited for makes the next ``wait`` return at once.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        """Any thread."""
        try:  # noqa: SIM105 - on every wake-up: a context manager costs more
            self._lock.release()
        except RuntimeError:
            pass  # set already, not yet consumed

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set (True) or ``timeout`` seconds pass (False)."""
        if timeout is None:
            return self._lock.acquire()
        return self._lock.acquire(True, min(timeout, threading.TIMEOUT_MAX))


def refill_batch(prefetch: int, batch: int | None) -> int:
    """Units an inbound stream's consumer takes before it grants that many
    again: ``batch`` within ``1..prefetch``, by default half the window."""
    return max(1, prefetch // 2) if batch is None else max(1, min(batch, prefetch))


class CreditQueue(Generic[T]):
    """Items of one inbound stream, from the I/O thread to its consumer
    (one consuming thread at a time).

    ``grant(n)`` (consumer side) raises the capacity *before* the matching
    demand is signalled to the peer; ``put`` (I/O side) never blocks and checks
    that it stays within what was granted. ``finish`` ends the stream after the
    queued items (normally, or with an error); ``close`` abandons it at once
    (cancel, connection lost) and drops any later put.
    """

    __slots__ = (
        "_close_error",
        "_closed",
        "_error",
        "_event",
        "_finished",
        "_granted",
        "_items",
        "_put_count",
        "_waiting",
    )

    def __init__(self, granted: int = 0) -> None:
        if granted < 0:
            raise ValueError("granted must be >= 0")
        self._items: deque[T] = deque()
        self._granted = granted
        self._put_count = 0
        # Made when a consumer first waits: a request-response answered on
        # the waiting thread (a direct call) never needs one.
        self._event: Signal | None = None
        self._waiting = False
        self._finished = False
        self._error: BaseException | None = None
        self._closed = False
        self._close_error: BaseException | None = None

    # -- consumer side ---------------------------------------------------
    def grant(self, n: int) -> None:
        """Allow ``n`` more items. Call before telling the peer it may send them."""
        if n <= 0:
            raise ValueError("grant must be positive")
        with _GRANT_LOCK:
            self._granted += n

    @property
    def granted(self) -> int:
        return self._granted

    def __len__(self) -> int:
        return len(self._items)

    def get(self, timeout: float | None = None) -> T:
        """Next item; waits up to ``timeout`` seconds (``None``: no limit).

        Raises :class:`EndOfStream` after the last item of a completed stream,
        the producer's error after the last item of a failed one,
        :class:`QueueClosed` once closed, :class:`TimeoutError` on timeout.
        """
        if self._closed:
            raise self._closed_exception()
        items = self._items
        if not items:
            self._wait(timeout)
        return items.popleft()

    def get_batch(self, timeout: float | None = None, max_items: int = 1024) -> list[T]:
        """Every item ready now (at least one, at most ``max_items``); waits and
        raises as :meth:`get`. One call per batch instead of one per item."""
        if self._closed:
            raise self._closed_exception()
        items = self._items
        if not items:
            self._wait(timeout)
        # popleft n times by C calls alone (no bytecode per item); safe
        # against puts meanwhile, which only append behind the n taken.
        return list(starmap(items.popleft, repeat((), min(len(items), max_items))))

    def _wait(self, timeout: float | None) -> None:
        """Return once an item is queued; raise at the end, on close or timeout."""
        items = self._items
        deadline = None if timeout is None else time.monotonic() + timeout
        event = self._event
        if event is None:
            # Before the flag: a producer that sees the flag finds the signal.
            event = self._event = Signal()
        while True:
            self._waiting = True
            # Re-check after raising the flag: a put or finish from now on
            # sets the signal (one set earlier only makes a wait return early).
            if self._closed:
                self._waiting = False
                raise self._closed_exception()
            if items:
                self._waiting = False
                return
            if self._finished:
                self._waiting = False
                if self._error is not None:
                    raise self._error
                raise EndOfStream
            if not event.wait(_remaining(deadline)):
                self._waiting = False
                raise TimeoutError(f"no item within {seconds(timeout or 0.0)}")

    def close(self, error: BaseException | None = None) -> None:
        """Any thread: abandon the queue, wake every waiter, drop queued items."""
        if self._closed:
            return
        self._close_error = error
        self._closed = True
        self._items.clear()
        if self._event is not None:  # None: nobody ever waited
            self._event.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def answered(self) -> bool:
        """An item is queued, or the stream ended: a wait would return at
        once (a direct call's ``until``, see ``LoopConnection.call_direct``)."""
        return bool(self._items) or self._finished or self._closed

    @property
    def done(self) -> bool:
        """Finished and drained, or closed: no further item will come out."""
        return self._closed or (self._finished and not self._items)

    def _closed_exception(self) -> BaseException:
        if self._close_error is not None:
            return self._close_error
        return QueueClosed("queue closed")

    # -- I/O side ----------------------------------------------------------
    def put(self, item: T) -> None:
        """Never blocks. Dropped silently once closed (items in flight at cancel)."""
        if self._closed or self._finished:
            return
        if self._put_count >= self._granted:
            raise self._beyond_credit()
        self._put_count += 1
        self._items.append(item)
        if self._waiting:
            self._wake()

    def put_many(self, batch: list[T]) -> None:
        """:meth:`put` for several items at once (one check, one wake-up)."""
        if self._closed or self._finished:
            return
        if self._put_count + len(batch) > self._granted:
            raise self._beyond_credit()
        self._put_count += len(batch)
        self._items.extend(batch)
        if self._waiting:
            self._wake()

    def _wake(self) -> None:
        # One wake-up per sleep: without the reset, every put until the
        # consumer actually runs would pay for Event.set (a lock each).
        self._waiting = False
        event = self._event  # made before the flag
        if event is not None:
            event.set()

    def _beyond_credit(self) -> CreditExceeded:
        return CreditExceeded(
            f"put beyond granted demand ({self._granted}): the queue must never fill"
        )

    def finish(self, error: BaseException | None = None) -> None:
        """End the stream after the queued items: normally, or with ``error``."""
        if self._finished or self._closed:
            return
        self._error = error
        self._finished = True
        if self._event is not None:  # None: nobody ever waited
            self._event.set()


class Inbox(Generic[T]):
    """Commands from any thread to the I/O thread that drains them.

    ``put`` appends and wakes the loop; it waits for room (up to ``timeout``)
    only when ``capacity`` items are pending, which bounds memory when
    producers outrun the loop. The bound is soft by at most the number of
    producer threads racing past the check at once.
    """

    def __init__(self, wakeup: Waker, capacity: int = 4096) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self._wakeup = wakeup
        self._capacity = capacity
        #: The pending commands (the owner tests it for being non-empty;
        #: only ``put`` and ``drain`` change it).
        self.items: deque[T] = deque()
        self._items = self.items
        self._space = threading.Event()
        self._space_waiters = 0
        self._waiters_lock = threading.Lock()
        self._closed = False
        self._close_error: BaseException | None = None

    def __len__(self) -> int:
        return len(self._items)

    @property
    def capacity(self) -> int:
        """Commands pending at most before producers wait."""
        return self._capacity

    def put(self, item: T, timeout: float | None = None) -> None:
        """Any thread. Raises :class:`QueueClosed` once closed, :class:`TimeoutError`
        if no room appears within ``timeout`` seconds."""
        if self._closed:
            raise self._closed_exception()
        if len(self._items) >= self._capacity:
            self._wait_for_space(timeout)
        self._items.append(item)
        self._wakeup.wake()

    def put_many(self, items: Sequence[T], timeout: float | None = None) -> None:
        """:meth:`put` for each of ``items`` in order, one wake-up per part:
        parts of at most half the capacity, each waiting for its room."""
        part = max(1, self._capacity // 2)
        for start in range(0, len(items), part):
            chunk = items[start : start + part]
            if self._closed:
                raise self._closed_exception()
            if len(self._items) + len(chunk) > self._capacity:
                self._wait_for_space(timeout, len(chunk))
            self._items.extend(chunk)
            self._wakeup.wake()

    def _wait_for_space(self, timeout: float | None, room: int = 1) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._waiters_lock:
            self._space_waiters += 1
        try:
            while True:
                self._space.clear()
                if self._closed:
                    raise self._closed_exception()
                if len(self._items) + room <= self._capacity:
                    return
                self._wakeup.wake()
                if not self._space.wait(_remaining(deadline)):
                    raise TimeoutError(f"inbox still full after {seconds(timeout or 0.0)}")
        finally:
            with self._waiters_lock:
                self._space_waiters -= 1

    def drain(self) -> list[T]:
        """I/O thread: take every pending command, never blocking."""
        items = self._items
        batch = list(starmap(items.popleft, repeat((), len(items))))  # C calls alone
        if self._space_waiters:
            self._space.set()
        return batch

    def close(self, error: BaseException | None = None) -> list[T]:
        """Refuse further puts, wake blocked producers; returns what was pending."""
        self._close_error = error
        self._closed = True
        self._space.set()
        return self.drain()

    @property
    def closed(self) -> bool:
        return self._closed

    def _closed_exception(self) -> BaseException:
        if self._close_error is not None:
            return self._close_error
        return QueueClosed("inbox closed")


class Batcher(Inbox[T]):
    """Items from any thread, consumed on the I/O thread many per call.

    The first item put after a drain schedules one call, ``submit(drain)``
    (e.g. a connection's ``call_soon``); the items put before that call runs
    join its batch, so a burst costs one hand-off, not one per item, and
    ``consume(batch)`` sees them in order. A call submitted by the same
    thread after a put runs after the item was consumed (the scheduled drain
    is ahead of it). On the I/O thread itself (``is_owner()``) a put drains
    at once, keeping that thread's own calls in order. Producers wait (up to
    ``timeout``) while ``capacity`` items are pending, and, given ``room``,
    for ``room(timeout)`` before a put that starts a batch: the consumer's
    own limit (e.g. the connection's unwritten output below ``high_water``),
    so what a batch makes is bounded too, not only the items it holds.
    """

    def __init__(
        self,
        submit: Callable[[Callable[[], None]], None],
        consume: Callable[[list[T]], None],
        is_owner: Callable[[], bool],
        capacity: int = 4096,
        room: Callable[[float | None], None] | None = None,
    ) -> None:
        super().__init__(self, capacity)
        self._submit = submit
        self._consume = consume
        self._is_owner = is_owner
        self._scheduled = False
        #: The thread whose put scheduled the pending drain (None: none
        #: pending, or not known): not the owner when it did, and it cannot
        #: become the owner before that drain runs (a direct call runs the
        #: calls queued before it first), so its puts until then may skip
        #: ``is_owner`` (``FireAndForgets.send``). Written by :meth:`wake`
        #: alone, cleared by :meth:`run` before ``_scheduled``.
        self._producer: int | None = None
        #: Waits (up to its timeout) until the consumer can take a batch.
        self._room = room

    def put(self, item: T, timeout: float | None = None) -> None:
        """Any thread; raises what ``submit`` raises (e.g. the connection is gone)."""
        if self._closed:
            raise self._closed_exception()
        items = self._items
        if self._is_owner():  # never waits for room: only this thread makes room
            items.append(item)
            self.run()
            return
        # Inbox.put with its wake-up inlined: the calls it saves are a fifth
        # of a fire-and-forget sent one at a time (bench_opcodes.py --items
        # fnf16; bench_tcp.py row fnf16).
        if len(items) >= self._capacity:
            self._wait_for_space(timeout)
        if not self._scheduled and self._room is not None:
            self._room(timeout)  # (once per batch: the put that starts one)
        items.append(item)
        if not self._scheduled:
            self.wake()

    def put_many(self, items: Sequence[T], timeout: float | None = None) -> None:
        """:meth:`put` for each of ``items``, in order, many per hand-off:
        parts of at most half the capacity, each waiting for its room."""
        if self._is_owner():
            if self._closed:
                raise self._closed_exception()
            self._items.extend(items)
            self.run()
            return
        room = self._room
        if room is None:
            super().put_many(items, timeout)
            return
        part = max(1, self._capacity // 2)
        pending = self._items
        for start in range(0, len(items), part):
            chunk = items[start : start + part]
            if self._closed:
                raise self._closed_exception()
            if len(pending) + len(chunk) > self._capacity:
                self._wait_for_space(timeout, len(chunk))
            if not self._scheduled:
                room(timeout)
            pending.extend(chunk)
            self.wake()

    def wake(self) -> None:
        """(Called by ``put``.) Schedule a drain unless one is pending."""
        if self._scheduled:
            return
        # Before the flag: whoever sees the flag set sees who set it (or
        # None, a drain having started since: the general path then).
        self._producer = threading.get_ident()
        self._scheduled = True
        try:
            self._submit(self.run)
        except BaseException:
            self._scheduled = False
            raise

    def run(self) -> None:
        """I/O thread: consume every pending item in one batch."""
        # Cleared before draining: an item put after this schedules anew.
        self._producer = None  # (first: see __init__)
        self._scheduled = False
        batch = self.drain()
        if batch:
            self._consume(batch)
