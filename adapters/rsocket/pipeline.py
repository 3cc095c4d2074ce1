"""Pipelined request-responses: many REQUEST_RESPONSEs outstanding on one
connection, answers in request order, without a Publisher per request.

:meth:`~.peer.RSocketPeer.request_response_many` is the application
side; :class:`ResponsePipeline` lives on the connection's owning thread. The
application hands requests over in batches; the owning thread keeps up to
``in_flight`` of them on the wire and starts the next one the moment an
answer arrives, so the window stays full without a thread hand-off per
request. Answers travel back through one :class:`~.queues.CreditQueue`, a
turn's worth at a time, whose capacity is exactly the number of requests
handed over: the I/O side never waits and memory stays bounded by twice the
window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ..drive.errors import ConnectionClosed
from ..drive.queues import CreditQueue
from .engine import RequestHandle, RSocketEngine
from .types import Payload

__all__ = ["Answer", "ResponsePipeline"]

#: One answer: the request's position (0, 1, ... in the order handed over)
#: and its payload (None: completed empty) or the error it ended with.
Answer = tuple[int, Payload | BaseException | None]


class _Slot(RequestHandle):
    """One pipelined request: the engine's handle, and its own sink."""

    __slots__ = ("done", "index", "payload", "pipeline")

    def __init__(self, pipeline: ResponsePipeline, index: int) -> None:
        # RequestHandle's fields, set here: one of these per request.
        self.kind = "rr"
        self.sink = self  # type: ignore[assignment]
        self.sid: int | None = None
        self.cancelled = False
        self.inbound_done = False
        self.outbound = None
        self.pipeline = pipeline
        self.index = index
        self.payload: Payload | None = None
        self.done = False

    def put(self, item: Payload) -> None:
        self.payload = item

    def put_many(self, items: Iterable[Payload]) -> None:
        for item in items:  # a REQUEST_RESPONSE answer is one payload
            self.payload = item

    def finish(self, error: BaseException | None = None) -> None:
        if not self.done:
            self.done = True
            self.pipeline._answered(self, error)

    def close(self) -> None:
        self.done = True  # cancelled: nobody waits for this answer any more


class ResponsePipeline:
    """Owning-thread half of one ``request_response_many`` call."""

    def __init__(self, engine: RSocketEngine, in_flight: int, answers: CreditQueue[Answer]) -> None:
        self.window = in_flight
        self._engine = engine
        self._answers = answers
        self._pending: deque[Payload] = deque()
        self._next_index = 0  # of the next request to start
        self._active: dict[int, _Slot] = {}
        self._ready: list[Answer] = []  # answered this turn, not yet handed over
        self._flush_scheduled = False
        self._failed: BaseException | None = None
        self._cancelled = False
        self._filling = False

    @property
    def active(self) -> int:
        """Requests on the wire now (owning thread's view; for tests)."""
        return len(self._active)

    def feed(self, batch: list[Payload]) -> None:
        """Owning thread: queue requests (in order) and start what fits."""
        if self._cancelled:
            return
        self._pending.extend(batch)
        if self._failed is not None:  # the connection went away: answer at once
            self._fail_pending(self._failed)
            return
        self._fill()

    def cancel(self) -> None:
        """Owning thread: the application stopped reading; CANCEL what is out."""
        self._cancelled = True
        self._pending.clear()
        cancel = self._engine.cancel
        for handle in list(self._active.values()):
            cancel(handle)
        self._active.clear()

    def _fill(self) -> None:
        # start_response may answer at once (a refused request), which lands
        # in _answered; the flag keeps that from recursing back in here.
        if self._filling or self._cancelled:
            return
        self._filling = True
        try:
            pending = self._pending
            active = self._active
            start = self._engine.start_response
            window = self.window
            index = self._next_index
            while pending and len(active) < window:
                handle = _Slot(self, index)
                active[index] = handle
                index += 1
                self._next_index = index
                start(handle, pending.popleft())
        finally:
            self._filling = False

    def _answered(self, slot: _Slot, error: BaseException | None) -> None:
        del self._active[slot.index]
        if error is None:
            self._ready.append((slot.index, slot.payload))
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._engine.after_events(self._flush)
            return
        # Errors go at once: after connection_lost no turn follows.
        self._ready.append((slot.index, error))
        if isinstance(error, ConnectionClosed) and not self._cancelled:
            # No later request can start: answer every waiting one with the reason.
            self._failed = error
            self._fail_pending(error)
        self._flush()

    def _flush(self) -> None:
        """This turn's answers to the application at once, then refill the window."""
        self._flush_scheduled = False
        if self._ready:
            self._answers.put_many(self._ready)
            self._ready = []
        if self._pending:
            self._fill()

    def _fail_pending(self, error: BaseException) -> None:
        pending = self._pending
        index = self._next_index
        failed: list[Answer] = [(index + i, error) for i in range(len(pending))]
        pending.clear()
        self._next_index = index + len(failed)
        self._answers.put_many(failed)
