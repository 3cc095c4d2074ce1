"""A subscription consumed a batch at a time: :class:`EventBatches`, what
``DittoConnection.persisted_event_batches`` returns.

The item iterator (``drive.streams.StreamIterator``) hands events out one
``__next__`` at a time; a consumer that treats events in bulk (the Spark
reader turns each into a row) pays that Python call per event for nothing.
Here one ``__next__`` takes every event queued (up to half the window), and
the demand is renewed per batch: the same credit rules, one call per batch
(docs/performance.md, "Ditto history into Spark").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..drive.queues import CreditQueue, EndOfStream, refill_batch

__all__ = ["EventBatches"]


class EventBatches:
    """Blocking iterator of event lists (each non-empty, at most half of
    ``prefetch`` events, in the order Ditto sent them).

    Whoever creates it has already granted ``prefetch`` on ``queue`` and
    asked for it with the subscribe (or, ``paused``, asked for only
    ``head_start`` of it and leaves the rest to the first ``next``:
    ``request_more(prefetch - head_start)``). Once half the window has been handed
    out, that many are granted again and ``request_more(n)`` asks Ditto for
    them: at most ``prefetch`` events are queued, plus the batch the
    consumer holds. ``timeout`` bounds each wait. ``close()`` (or leaving a
    ``with`` block) cancels a subscription that has not ended. Consume from
    one thread at a time."""

    def __init__(
        self,
        queue: CreditQueue[Any],
        prefetch: int,
        request_more: Callable[[int], None],
        cancel: Callable[[], None],
        timeout: float | None = None,
        *,
        paused: bool = False,
        head_start: int = 0,
        explain: Callable[[], str] | None = None,
    ) -> None:
        if prefetch <= 0:
            raise ValueError("prefetch must be positive")
        self._queue = queue
        self._prefetch = prefetch
        #: Granted but not all asked of Ditto yet: the first ``next`` asks.
        self._paused = paused
        self._head = head_start
        self._refill = refill_batch(prefetch, None)
        self._consumed = 0
        self._request_more = request_more
        self._cancel = cancel
        self._timeout = timeout
        #: What a timeout's message adds (Ditto never answered the subscribe).
        self._explain = explain
        self._finished = False

    def __iter__(self) -> EventBatches:
        return self

    def __next__(self) -> list[Any]:
        if self._finished:
            raise StopIteration
        queue = self._queue
        if self._paused:
            self._paused = False
            if not queue.done and self._prefetch > self._head:
                self._request_more(self._prefetch - self._head)
        try:
            batch = queue.get_batch(self._timeout, self._refill)
        except EndOfStream:
            self._finished = True
            raise StopIteration from None
        except TimeoutError as exc:  # the subscription goes on: the caller may wait again
            why = self._explain() if self._explain is not None else ""
            if why:
                raise TimeoutError(f"{exc}: {why}") from None
            raise
        except BaseException:
            self._finished = True
            raise
        self._consumed += len(batch)
        if self._consumed >= self._refill:
            n, self._consumed = self._consumed, 0
            if not queue.done:
                queue.grant(n)
                self._request_more(n)
        return batch

    def close(self) -> None:
        """Cancel the subscription if it is still running; idempotent."""
        if self._finished:
            return
        self._finished = True
        if not self._queue.done:
            self._queue.close()
            self._cancel()

    def __enter__(self) -> EventBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
