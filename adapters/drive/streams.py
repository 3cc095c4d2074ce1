"""Protocol-agnostic stream pieces, shared by every driver and every
protocol engine.

- :class:`StreamIterator`: a blocking iterator over an inbound stream that
  keeps a prefetch window and asks for more as items are consumed; closing it
  cancels the stream.
- :class:`Outbound`: one outbound stream pulled from an application source
  (an iterator, a generator or a Publisher) strictly within the peer's credit.
- :class:`Outbounds`: the outbound streams of one connection and the pump
  that shares the connection among them.
- The sources they pull from (:func:`make_source`) are in :mod:`.sources`;
  a remote stream as a Reactive Streams Publisher is in :mod:`.publishers`.

Nothing here knows a wire protocol; bindings pass callables that do.
Everything except :class:`StreamIterator` runs on the connection's thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any, Generic, Protocol, TypeVar

from sansrs.streams import MAX_DEMAND, add_demand

from .config import LoopConfig
from .queues import CreditQueue, EndOfStream, refill_batch
from .sources import (
    END,
    PENDING,
    IteratorSource,
    PublisherSource,
    Source,
    SourceBudget,
    ThreadedSource,
    is_publisher,
    make_source,
    weight,
)

__all__ = [
    "END",
    "PENDING",
    "IteratorSource",
    "Outbound",
    "Outbounds",
    "PublisherSource",
    "Pumped",
    "Sink",
    "Source",
    "SourceBudget",
    "StreamBatches",
    "StreamIterator",
    "ThreadedSource",
    "check_prefetch",
    "is_publisher",
    "make_source",
]

T = TypeVar("T")
B = TypeVar("B", covariant=True)
H = TypeVar("H")
_log = logging.getLogger("sansrs.adapters")


class _Failed:
    """A source raised; the error is sent after the items pulled before it."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class StreamIterator(Generic[T]):
    """Blocking iterator over an inbound stream.

    Whoever creates it has already granted ``prefetch`` on ``queue`` and sent
    it to the peer with the request. Each time half the window is consumed
    (or every ``batch`` units) the iterator grants that many again and calls
    ``request_more(n)`` (which hands the demand to the connection thread).
    ``units(item)`` counts what one item is worth (1 by default; a batch of
    fixed-size elements counts its elements: the queue's capacity, in items,
    then stays above what the peer may send). ``close()`` (or leaving a
    ``with`` block) cancels a stream that has not ended. Consume from one
    thread at a time.

    Items leave the queue a local batch at a time (at most ``batch``, one
    queue operation each); a ``for`` loop takes them from that batch by
    ``itertools.chain`` (no bytecode of ours per item), ``next()`` one
    call each. Both draw on the same local batch, so
    they can be mixed and a loop left by ``break`` loses nothing. A local
    batch counts as consumed once it has all been handed out: the window
    (what the queue may hold) stays ``prefetch``. :meth:`next_batch` hands
    out everything that arrived as one list (:class:`StreamBatches`).

    ``make(taken)`` (optional) turns an iterator over what the queue holds
    into the items handed out, made as they are iterated (e.g. a protocol's
    payloads kept in the queue as their bytes: nothing made ahead of the
    consumer lives long enough for the garbage collector to see it). The
    queue's entries are then what ``units`` and the window count, and
    :meth:`next_entries` hands out a batch of them as the queue held them.
    """

    # The keywords of its asyncio twin, drive.aio.AsyncStream, by choice.
    def __init__(
        self,
        # Any: with ``make``, the queue holds what ``make`` takes, not T.
        queue: CreditQueue[Any],
        prefetch: int,
        request_more: Callable[[int], None],
        cancel: Callable[[], None],
        timeout: float | None = None,
        batch: int | None = None,
        units: Callable[[Any], int] | None = None,
        *,
        explain: Callable[[], str] | None = None,
        make: Callable[[Iterator[Any]], Iterator[T]] | None = None,
    ) -> None:
        if prefetch <= 0:
            raise ValueError("prefetch must be positive")
        self._queue = queue
        #: What a timeout's message adds, if anything (why nothing came:
        #: e.g. the peer's bytes were not the protocol expected).
        self._explain = explain
        self._batch = refill_batch(prefetch, batch)
        self._units = units
        self._make = make
        self._consumed = 0
        self._request_more = request_more
        self._cancel = cancel
        self._timeout = timeout
        self._finished = False
        # The local batch taken from the queue, and what of it is still to
        # be handed out (an iterator over it, shared by next() and loops:
        # ``_rest`` the items, made of ``_raw``'s entries as it goes).
        self._local: list[Any] = []
        self._raw: Iterator[Any] = iter(self._local)
        self._rest: Iterator[T] = self._raw
        self._counted = 0  # items of the local batch counted already (by next())

    def __iter__(self) -> Iterator[T]:
        # chain takes each item from the local batch by C calls alone (a
        # generator's ``yield from`` ran a frame per item: bench_opcodes.py
        # --items stream16); Python runs once per local batch, to refill.
        return chain.from_iterable(self._local_batches())

    def _local_batches(self) -> Iterator[Iterator[T]]:
        while True:
            yield self._rest
            if not self._refill(self._batch):
                return

    def __next__(self) -> T:
        item = next(self._rest, _NONE)
        while item is _NONE:
            if not self._refill(self._batch):
                raise StopIteration
            item = next(self._rest, _NONE)
        # Counted at once (a loop's items count when their batch is done).
        self._counted += 1
        self._consumed += 1 if self._units is None else self._units(item)
        if self._consumed >= self._batch:
            self._grant()
        return item

    def _settle(self) -> None:
        """Count what of the local batch was handed out and not counted yet."""
        done = self._local
        if done:
            counted, self._counted, self._local = self._counted, 0, []
            self._count(done[counted:] if counted else done)

    def _refill(self, most: int) -> bool:
        """The local batch was all handed out: count it consumed (granting
        what the window asks for) and take the next one, of at most
        ``most`` items, waiting for it; False at the end. Raises the
        stream's error after its last item, :class:`TimeoutError`."""
        self._settle()
        if self._finished:
            return False
        try:
            batch = self._queue.get_batch(self._timeout, most)
        except EndOfStream:
            self._finished = True
            return False
        except TimeoutError as exc:
            why = self._explain() if self._explain is not None else ""
            if why:
                raise TimeoutError(f"{exc}: {why}") from None
            raise
        except BaseException:
            self._finished = True
            raise
        self._local = batch
        make = self._make
        self._raw = raw = iter(batch)
        self._rest = raw if make is None else make(raw)
        return True

    def _count(self, items: list[Any]) -> None:
        """``items`` were handed out: grant again once ``batch`` units were."""
        units = self._units
        self._consumed += len(items) if units is None else sum(map(units, items))
        if self._consumed >= self._batch:
            self._grant()

    def _grant(self) -> None:
        n, self._consumed = self._consumed, 0
        if not self._queue.done:
            self._queue.grant(n)
            self._request_more(n)

    def next_batch(self) -> Sequence[T]:
        """Every item that has arrived and not been handed out (at least
        one; waits as ``next`` does) as a list, in order; they count as
        consumed, so the window is replenished as if they were taken one by
        one. Raises what ``next`` raises: :class:`StopIteration` at the end,
        the stream's error after its last items, :class:`TimeoutError`. A
        protocol's stream may hand out a sequence type of its own
        (:meth:`next_entries`)."""
        entries = self.next_entries()
        make = self._make
        return entries if make is None else list(make(iter(entries)))

    def next_entries(self) -> list[Any]:
        """:meth:`next_batch` as the queue held the items (before ``make``)."""
        rest = list(self._raw)
        if rest:  # what next() or a loop left of the local batch
            self._settle()  # (counts the part handed out before too)
            return rest
        if not self._refill(_ALL):
            raise StopIteration
        batch = self._local
        self._raw = self._rest = iter(())
        self._settle()
        return batch

    def batches(self) -> StreamBatches[Sequence[T]]:
        """This stream as an iterator of lists of items (:meth:`next_batch`)."""
        return StreamBatches(self, self.next_batch)

    def close(self) -> None:
        """Cancel the stream if it is still running; idempotent."""
        if self._finished:
            return
        self._finished = True
        # Emptied, not dropped: a loop delegating to an iterator over it ends
        # at its next item (nothing is made of what is left, with ``make``).
        self._local.clear()
        self._local = []
        self._raw = self._rest = iter(())
        self._counted = 0
        if not self._queue.done:
            self._queue.close()
            self._cancel()

    def __enter__(self) -> StreamIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: A batch takes every item queued (the queue never holds more than the window).
_ALL = 1 << 62
_NONE: Any = object()


class StreamBatches(Generic[B]):
    """A :class:`StreamIterator` as an iterator of batches: each is what
    arrived since the last one (one queue operation per batch, not per
    item), within the same prefetch window and the same replenishing; a
    list of items (:meth:`StreamIterator.next_batch`) unless the protocol
    hands out a sequence type of its own (``next_batch``). The items, their
    order and the errors are those of the item iterator; a batch is never
    empty. ``close()`` (or leaving a ``with`` block, e.g. by ``break``)
    cancels a stream still running, as the item iterator's does."""

    __slots__ = ("_next", "_stream")

    def __init__(self, stream: StreamIterator[Any], next_batch: Callable[[], B]) -> None:
        self._stream = stream
        self._next = next_batch

    def __iter__(self) -> StreamBatches[B]:
        return self

    def __next__(self) -> B:
        return self._next()

    def close(self) -> None:
        """Cancel the stream if it is still running; idempotent."""
        self._stream.close()

    def __enter__(self) -> StreamBatches[B]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sink(Protocol[T]):
    """Where an engine delivers one inbound stream, on the connection's
    thread: a :class:`~.queues.CreditQueue` (a blocking iterator's),
    :class:`~.publishers.SubscriberSink` (a Subscriber's), an asyncio stream
    (:class:`~.aio.AsyncStream`, :class:`~.aio.FutureSink`)."""

    def put(self, item: T) -> None: ...

    def put_many(self, items: list[T]) -> None: ...

    def finish(self, error: BaseException | None = None) -> None:
        """The stream ended (normally, or with ``error``) after what was put."""

    def close(self, error: BaseException | None = None) -> None:
        """The stream was abandoned (cancelled): drop what is left."""


def check_prefetch(prefetch: int, maximum: int = MAX_DEMAND) -> int:
    """``prefetch`` if it is an int in ``1..maximum`` (a protocol's largest
    demand in one message); ``ValueError`` otherwise."""
    if type(prefetch) is not int or not 0 < prefetch <= maximum:
        raise ValueError(f"prefetch must be an int in 1..{maximum}, not {prefetch!r}")
    return prefetch


#: Bytes an outbound stream pulls from an iterator at once (the batch path):
#: 16-byte items go 1,024 at a time, 128 KiB ones one by one.
BATCH_BYTES = 128 * 1024
_BATCH_MAX = 1024

#: Bytes of items a stream queues per turn on the batch path before the
#: driver writes them (``LoopConfig.high_water``, set by
#: :meth:`Outbounds.attach`): the socket gets a turn's first items while the
#: next are made, instead of a whole credit window (4 MiB of 1 KiB items)
#: made before any is written (bench_tcp.py stream1k, stream1kb).
TURN_BYTES = LoopConfig().high_water


def _batch_items(item_weight: int) -> int:
    """Items of the next batch, from what an item weighed (0: not known yet:
    one, to learn it)."""
    if not item_weight:
        return 1
    return max(1, min(_BATCH_MAX, BATCH_BYTES // item_weight))


class Outbound(Generic[T]):
    """One outbound stream, pulled from ``source`` only within the peer's credit.

    ``ready()`` (optional) says whether the transport can take an item now.
    ``emit(item, last)`` sends one item (``last``: the source is known to have
    ended, so the item can carry the completion). ``complete()`` sends a bare
    completion, ``fail(exc)`` an error. One item is read ahead of the credit at
    most, to learn whether the next item is the last; it is never sent early.

    ``emit_many(items)`` (optional) sends a leading run of ``items`` (none of
    them the last) and returns how many went: it stops where the transport
    cannot take more, like ``ready()``. With it and a source that can
    ``pull_many`` (an iterator), items are pulled and sent in batches: one
    call for many items each way (docs/performance.md, "Streaming server").
    """

    __slots__ = (
        "_ahead",
        "_complete",
        "_emit",
        "_emit_many",
        "_fail",
        "_held",
        "_pull_many",
        "_ready",
        "_weight",
        "credit",
        "finished",
        "source",
        "turn_bytes",
    )

    def __init__(
        self,
        source: IteratorSource[T] | PublisherSource[T] | ThreadedSource[T],
        emit: Callable[[T, bool], None],
        complete: Callable[[], None],
        fail: Callable[[BaseException], None],
        credit: int = 0,
        ready: Callable[[], bool] | None = None,
        emit_many: Callable[[list[T]], int] | None = None,
    ) -> None:
        self.source = source
        self._ready = ready
        self._emit = emit
        self._emit_many = emit_many
        pull_many = getattr(source, "pull_many", None)
        self._pull_many: Callable[[list[T], int], bool] | None = (
            pull_many if emit_many is not None else None
        )
        #: The batch path: items pulled and not yet sent, in order, and what
        #: the last batch's items weighed (bytes; sizes the next batch).
        self._held: list[T] = []
        self._weight = 0
        #: Bytes of items one :meth:`pump` queues at most on the batch path.
        self.turn_bytes = TURN_BYTES
        self._complete = complete
        self._fail = fail
        self.credit = 0
        self.finished = False
        self._ahead: Any = PENDING
        if credit:
            self.add_credit(credit)

    def add_credit(self, n: int) -> None:
        self.credit = add_demand(self.credit, n)
        self.source.demand(n)

    def bind(self, budget: SourceBudget) -> None:
        """Count what the source holds against the connection's ``budget``."""
        self.source.bind(budget)

    def pump(self, budget: int) -> bool:
        """Send up to ``budget`` items. True if more could be sent right now."""
        if self.finished:
            return False
        if self._pull_many is not None:
            return self._pump_batches(budget)
        emit = self._emit
        ready = self._ready
        pull = self.source.pull
        ahead = self._ahead
        if ahead is PENDING:
            ahead = self._pull()
        # Hot loop: locals only, identity tests; a pull that raises becomes
        # _Failed, sent after the items pulled before it.
        credit = self.credit
        steps = min(credit, budget)
        sent = 0
        while sent < steps and ahead is not END and ahead is not PENDING:
            if type(ahead) is _Failed:
                break
            if ready is not None and not ready():
                self.credit = credit - sent
                self._ahead = ahead
                return True  # the transport is behind: resume on a later turn
            item = ahead
            try:
                ahead = pull()
            except Exception as exc:
                ahead = _Failed(exc)
            sent += 1
            try:
                emit(item, ahead is END)
            except Exception as exc:  # e.g. the item is not a valid payload
                ahead = _Failed(exc)
                break
            if ahead is END:
                self.credit = credit - sent
                self._ahead = END
                self.finished = True
                return False
        self.credit = credit - sent
        self._ahead = ahead
        if self._ended(ahead):
            return False
        return self.credit > 0 and ahead is not PENDING

    def _ended(self, ahead: Any) -> bool:
        """The source has ended (``END``) or failed: say so to the peer. True then."""
        if type(ahead) is _Failed:
            self.finished = True
            self._fail(ahead.error)
            return True
        if ahead is END:
            self.finished = True
            self._complete()
            return True
        return False

    def _pump_batches(self, budget: int) -> bool:
        """:meth:`pump` for a source that can ``pull_many``. ``_held`` holds
        the items pulled and not sent; ``_ahead`` says how the source ended
        (``END``, a ``_Failed``) or ``PENDING`` while it has more."""
        pull_many = self._pull_many
        emit_many = self._emit_many
        assert pull_many is not None and emit_many is not None
        held = self._held
        ready = self._ready
        steps = min(self.credit, budget)
        if self._weight:  # a turn's bytes: known once a batch has been weighed
            steps = min(steps, max(1, self.turn_bytes // self._weight))
        sent = 0
        try:
            while sent < steps:
                if self._ahead is PENDING and len(held) <= steps - sent:
                    if ready is not None and not ready() and not held:
                        return True  # the transport is behind: resume on a later turn
                    # A batch of about BATCH_BYTES, and one more item: it says
                    # whether the last one sent is the source's last. Memory
                    # stays at a batch beyond what the transport holds.
                    want = min(steps - sent - len(held), _batch_items(self._weight)) + 1
                    try:
                        if not pull_many(held, want):
                            self._ahead = END
                    except Exception as exc:  # sent after the items pulled before it
                        self._ahead = _Failed(exc)
                if not held:
                    break
                # While the source may have more, the last item held stays
                # behind: it is what tells whether the one before it is the
                # last (sent with the completion, not after a REQUEST_N that
                # a consumer asking for exactly N never sends).
                take = min(len(held) - (self._ahead is PENDING), steps - sent)
                final = self._ahead is END and take == len(held)
                body = held[: take - 1] if final else held[:take]
                n = emit_many(body) if body else 0
                if n < len(body):  # the transport is behind: resume on a later turn
                    del held[:n]
                    sent += n
                    return True
                if final:
                    self._emit(held[take - 1], True)
                    n += 1
                self._weight = max(1, weight(held[0]))  # sizes the next batch
                del held[:n]
                sent += n
                if final:
                    self.finished = True
                    return False
        except Exception as exc:  # e.g. an item that is not a valid payload
            self._ahead = _Failed(exc)
            held.clear()
        finally:
            self.credit -= sent
        ahead = self._ahead
        if not held and self._ended(ahead):
            return False
        return self.credit > 0 and (bool(held) or ahead is PENDING)

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


class Pumped(Protocol):
    """What :class:`Outbounds` pumps: an :class:`Outbound`, or a protocol's
    own bulk writer (rsio's packed reader) with the same four members (and,
    if it pulls from a source, ``bind(budget)`` as :meth:`Outbound.bind`)."""

    @property
    def finished(self) -> bool: ...

    def add_credit(self, n: int) -> None: ...

    def pump(self, budget: int) -> bool:
        """Send up to ``budget`` items; True if more could be sent now."""

    def cancel(self) -> None: ...


K = TypeVar("K", int, str)


class Outbounds(Generic[K]):
    """The outbound streams of one connection, by stream key, and which of
    them can send now: the pump every engine runs (on the owning thread).

    A stream is runnable once it has credit; :meth:`poke` (any thread: a
    Publisher or worker thread has items) makes it runnable again and wakes
    the driver through ``wake``. :meth:`pump` gives each runnable stream up
    to ``budget`` items (and, on the batch path, ``turn_bytes`` bytes) per
    turn, so streams share the connection, and stops while ``blocked()``
    (the core's output is full). What the streams'
    Publishers and worker threads hold ahead of sending counts against
    ``sources`` (``LoopConfig.source_budget``, set by :meth:`attach`)."""

    __slots__ = ("_by_key", "_poked", "_runnable", "budget", "sources", "turn_bytes", "wake")

    def __init__(self, budget: int, wake: Callable[[], None] | None = None) -> None:
        self._by_key: dict[K, Pumped] = {}
        self._runnable: set[K] = set()
        self._poked: deque[K] = deque()
        self.budget = budget
        #: The driver's wake-up (set when the engine is attached to one).
        self.wake = wake
        self.sources = SourceBudget()
        #: Bytes each stream queues per turn at most (``LoopConfig.high_water``).
        self.turn_bytes = TURN_BYTES

    def attach(self, driver: object, *, wake: bool = True) -> None:
        """Driven by ``driver``: its wake-up (unless ``wake`` is False: the
        engine wakes it itself) and its ``LoopConfig.source_budget``."""
        if wake:
            self.wake = driver.wake  # type: ignore[attr-defined]
        config = getattr(driver, "config", None)
        if isinstance(config, LoopConfig):
            self.sources.limit = config.source_budget
            self.turn_bytes = config.high_water
            for out in self._by_key.values():
                if isinstance(out, Outbound):
                    out.turn_bytes = config.high_water

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: K) -> bool:
        return key in self._by_key

    @property
    def busy(self) -> bool:
        """A stream may be runnable: :meth:`pump` has work (or a poke to take)."""
        return bool(self._runnable or self._poked)

    def get(self, key: K) -> Pumped | None:
        return self._by_key.get(key)

    def add(self, key: K, out: Pumped, *, runnable: bool) -> None:
        bind = getattr(out, "bind", None)
        if bind is not None:
            bind(self.sources)
        if isinstance(out, Outbound):
            out.turn_bytes = self.turn_bytes
        self._by_key[key] = out
        if runnable:
            self._runnable.add(key)

    def credit(self, key: K, n: int) -> bool:
        """The peer granted ``n`` more items on ``key``; False if no live stream."""
        out = self._by_key.get(key)
        if out is None or out.finished:
            return False
        out.add_credit(n)
        self._runnable.add(key)
        return True

    def poke(self, key: K) -> None:
        """Any thread: ``key``'s source has something; pump it on the next turn."""
        self._poked.append(key)
        wake = self.wake
        if wake is not None:
            wake()

    def remove(self, key: K) -> Pumped | None:
        """Forget ``key`` (ended); returns its stream."""
        self._runnable.discard(key)
        return self._by_key.pop(key, None)

    def cancel(self, key: K) -> None:
        """Stop ``key`` and release its source (the peer cancelled)."""
        out = self.remove(key)
        if out is not None:
            out.cancel()

    def cancel_all(self) -> None:
        outs = list(self._by_key.values())
        self._by_key.clear()
        self._runnable.clear()
        for out in outs:
            out.cancel()

    def pump(
        self, blocked: Callable[[], bool], done: Callable[[K], object] | None = None
    ) -> bool:
        """Pump the runnable streams; True if more could be sent now. A
        stream that finished is removed (``done(key)`` instead, if given)."""
        poked = self._poked
        runnable = self._runnable
        while poked:
            runnable.add(poked.popleft())
        if not runnable:
            return False
        more = False
        budget = self.budget
        for key in list(runnable):
            if blocked():
                return True
            out = self._by_key.get(key)
            if out is None:
                runnable.discard(key)
                continue
            if out.pump(budget):
                more = True
            else:
                runnable.discard(key)
                if out.finished:
                    (done or self.remove)(key)
        return more
