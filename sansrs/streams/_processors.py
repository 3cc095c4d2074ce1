"""A rule-checked Processor base and the operators people need at a boundary.

``ProcessorBase`` is unicast: one downstream Subscriber (rule 1.11 makes more
optional); later Subscribers get ``on_subscribe`` then ``on_error`` (1.9).
All state lives in one drain loop behind a ``Mailbox`` (see ``_serial``), so
upstream signals, downstream requests and cancellations from any thread are
serialized without locks.

Demand: upstream is asked for what downstream demand needs, at most
``buffer_size`` outputs' worth at a time, so the buffer never exceeds
``buffer_size`` outputs (per upstream element an operator may emit several).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from ._api import (
    MAX_DEMAND,
    Subscriber,
    Subscription,
    add_demand,
    check_request_argument,
    require_not_none,
    rule_3_9_error,
)
from ._report import report_cleanup_error, report_subscriber_error
from ._serial import Mailbox

__all__ = ["BatchProcessor", "FilterProcessor", "MapProcessor", "ProcessorBase"]

T = TypeVar("T")
R = TypeVar("R")

_UP_SUB, _UP_NEXT, _UP_ERROR, _UP_COMPLETE, _DOWN_SUB, _REQUEST, _CANCEL = range(7)


class _NoopSubscription:
    __slots__ = ()

    def request(self, n: int) -> None:
        check_request_argument(n)

    def cancel(self) -> None:
        pass


class _DownstreamSubscription:
    __slots__ = ("_cancelled", "_processor")

    def __init__(self, processor: ProcessorBase[object, object]) -> None:
        self._processor: ProcessorBase[object, object] | None = processor
        self._cancelled = False

    def request(self, n: int) -> None:
        check_request_argument(n)
        processor = self._processor
        if self._cancelled or processor is None:
            return  # rule 3.6
        processor._mailbox.post((_REQUEST, n))

    def cancel(self) -> None:
        if self._cancelled:
            return  # rule 3.7
        self._cancelled = True
        processor, self._processor = self._processor, None
        if processor is not None:
            processor._mailbox.post((_CANCEL, None))


class ProcessorBase(Generic[T, R]):
    """Subclasses override ``transform`` (and optionally ``flush`` and ``upstream_per_output``)."""

    #: Upstream elements needed per downstream element (``BatchProcessor``: its size).
    upstream_per_output = 1

    def __init__(self, *, buffer_size: int = 16) -> None:
        if buffer_size < 1:
            raise ValueError(f"buffer_size must be >= 1, got {buffer_size}")
        self._capacity = buffer_size
        self._mailbox: Mailbox[tuple[int, object]] = Mailbox(self._drain)
        self._upstream: Subscription | None = None
        self._upstream_seen = False
        self._upstream_done = False
        self._outstanding = 0  # requested from upstream, not yet received
        self._downstream: Subscriber[R] | None = None
        self._downstream_subscription: _DownstreamSubscription | None = None
        self._downstream_seen = False
        self._downstream_done = False
        self._demand = 0
        self._buffer: deque[R] = deque()
        self._terminal: BaseException | bool | None = None  # True = complete

    # -- operator hooks --------------------------------------------------------

    def transform(self, item: T) -> Iterable[R]:
        """Outputs for one upstream element; raising fails the stream (rule 1.4)."""
        raise NotImplementedError

    def flush(self) -> Iterable[R]:
        """Outputs to emit when upstream completes."""
        return ()

    def pending_inputs(self) -> int:
        """Upstream elements consumed but not yet turned into outputs."""
        return 0

    # -- Subscriber side (upstream) ------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        require_not_none(subscription, "subscription", "2.13")
        self._mailbox.post((_UP_SUB, subscription))

    def on_next(self, item: T) -> None:
        require_not_none(item, "item", "2.13")
        self._mailbox.post((_UP_NEXT, item))

    def on_error(self, error: BaseException) -> None:
        require_not_none(error, "error", "2.13")
        self._mailbox.post((_UP_ERROR, error))

    def on_complete(self) -> None:
        self._mailbox.post((_UP_COMPLETE, None))

    # -- Publisher side (downstream) -----------------------------------------------

    def subscribe(self, subscriber: Subscriber[R]) -> None:
        require_not_none(subscriber, "subscriber", "1.9")
        self._mailbox.post((_DOWN_SUB, subscriber))

    # -- the drainer ---------------------------------------------------------------

    def _drain(self) -> None:
        items = self._mailbox.items
        while True:
            while items:
                kind, value = items.popleft()
                self._handle(kind, value)
            if self._step():
                continue
            if not items:
                return

    def _handle(self, kind: int, value: object) -> None:
        if kind == _UP_SUB:
            assert isinstance(value, Subscription)
            if self._upstream_seen or self._downstream_done:
                try:
                    value.cancel()  # rule 2.5, or nobody is listening any more
                except Exception as exc:
                    report_cleanup_error(exc, value)
            else:
                self._upstream_seen = True
                self._upstream = value
        elif kind == _UP_NEXT:
            self._upstream_next(value)
        elif kind == _UP_ERROR:
            assert isinstance(value, BaseException)
            if not self._upstream_done:
                self._upstream_done = True
                self._upstream = None  # rule 2.4: never called again
                self._buffer.clear()  # rule 4.2: propagate immediately
                self._terminal = value
        elif kind == _UP_COMPLETE:
            if not self._upstream_done:
                self._upstream_done = True
                self._upstream = None
                self._produce(self.flush)
                if self._terminal is None:
                    self._terminal = True
        elif kind == _DOWN_SUB:
            self._subscribe_downstream(value)  # type: ignore[arg-type]
        elif kind == _REQUEST:
            assert isinstance(value, int)
            if self._downstream_done:
                return
            if value <= 0:
                self._fail(rule_3_9_error(value))
            else:
                self._demand = add_demand(self._demand, value)
        elif kind == _CANCEL:
            self._downstream_done = True
            self._downstream = None  # rule 3.13
            self._downstream_subscription = None
            self._buffer.clear()
            self._cancel_upstream()

    def _upstream_next(self, item: object) -> None:
        if self._upstream_done or self._upstream is None:
            return  # rule 2.8: elements may still arrive after cancel
        if self._outstanding <= 0:
            self._fail(RuntimeError(
                "Rule 1.1 violated by upstream: it signalled on_next beyond the requested demand"))
            return
        self._outstanding -= 1
        self._produce(lambda: self.transform(item))  # type: ignore[arg-type]

    def _produce(self, make: Callable[[], Iterable[R]]) -> None:
        try:
            outputs = list(make())
        except Exception as exc:  # the operator failed: rule 1.4
            self._fail(exc)
            return
        if any(output is None for output in outputs):
            self._fail(TypeError(f"{type(self).__name__} produced None, which no Subscriber "
                                 "may receive (rule 2.13)"))
            return
        self._buffer.extend(outputs)

    def _fail(self, error: BaseException) -> None:
        self._cancel_upstream()
        self._buffer.clear()
        if self._terminal is None or self._terminal is True:
            self._terminal = error

    def _cancel_upstream(self) -> None:
        upstream, self._upstream = self._upstream, None
        self._upstream_done = True
        if upstream is not None:
            try:
                upstream.cancel()
            except Exception as exc:  # rule 3.15 broken upstream; we are done with it anyway
                report_cleanup_error(exc, upstream)

    def _subscribe_downstream(self, subscriber: Subscriber[R]) -> None:
        if self._downstream_seen:
            self._call(subscriber, subscriber.on_subscribe, _NoopSubscription())
            self._call(subscriber, subscriber.on_error, RuntimeError(
                f"{type(self).__name__} is unicast and already has a Subscriber (rule 1.11)"))
            return
        self._downstream_seen = True
        self._downstream = subscriber
        subscription = _DownstreamSubscription(self)  # type: ignore[arg-type]
        self._downstream_subscription = subscription
        self._call(subscriber, subscriber.on_subscribe, subscription)

    def _step(self) -> bool:
        """Do one unit of work; False when there is nothing to do until a new message."""
        subscriber = self._downstream
        if subscriber is None or self._downstream_done:
            return False
        terminal = self._terminal
        if isinstance(terminal, BaseException):
            self._signal_terminal(subscriber, terminal)
            return True
        if self._buffer:
            if self._demand == 0:
                return False
            if self._demand != MAX_DEMAND:
                self._demand -= 1
            self._call(subscriber, subscriber.on_next, self._buffer.popleft())
            return True
        if terminal is True:
            self._signal_terminal(subscriber, None)
            return True
        return self._request_upstream()

    def _request_upstream(self) -> bool:
        upstream = self._upstream
        if upstream is None:
            return False
        wanted = min(self._demand, self._capacity) * self.upstream_per_output
        need = wanted - self._outstanding - self.pending_inputs()
        if need <= 0:
            return False
        self._outstanding += need
        try:
            upstream.request(need)
        except Exception as exc:  # the upstream broke rule 3.16: treat it as failed
            self._fail(exc)
        return True

    def _signal_terminal(self, subscriber: Subscriber[R], error: BaseException | None) -> None:
        self._downstream_done = True  # rule 1.7: nothing after this
        self._downstream = None
        subscription, self._downstream_subscription = self._downstream_subscription, None
        if subscription is not None:
            subscription._cancelled = True  # rule 1.6
            subscription._processor = None
        if error is None:
            self._call(subscriber, subscriber.on_complete)
        else:
            self._call(subscriber, subscriber.on_error, error)

    def _call(self, subscriber: object, method: Callable[..., None], *args: object) -> None:
        try:
            method(*args)
        except Exception as exc:  # rule 2.13: treat as cancelled
            if subscriber is self._downstream:
                self._handle(_CANCEL, None)
            report_subscriber_error(exc, subscriber)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(buffer_size={self._capacity})"


class MapProcessor(ProcessorBase[T, R]):
    """Applies ``function`` to every element."""

    def __init__(self, function: Callable[[T], R], *, buffer_size: int = 16) -> None:
        super().__init__(buffer_size=buffer_size)
        self._function = function

    def transform(self, item: T) -> Iterable[R]:
        return (self._function(item),)


class FilterProcessor(ProcessorBase[T, T]):
    """Passes the elements for which ``predicate`` is true."""

    def __init__(self, predicate: Callable[[T], bool], *, buffer_size: int = 16) -> None:
        super().__init__(buffer_size=buffer_size)
        self._predicate = predicate

    def transform(self, item: T) -> Iterable[T]:
        return (item,) if self._predicate(item) else ()


class BatchProcessor(ProcessorBase[T, list[T]]):
    """Groups elements into lists of ``size``; the last list may be shorter."""

    def __init__(self, size: int, *, buffer_size: int = 16) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        super().__init__(buffer_size=buffer_size)
        self.upstream_per_output = size
        self._size = size
        self._batch: list[T] = []

    def transform(self, item: T) -> Iterable[list[T]]:
        self._batch.append(item)
        if len(self._batch) < self._size:
            return ()
        batch, self._batch = self._batch, []
        return (batch,)

    def flush(self) -> Iterable[list[T]]:
        batch, self._batch = self._batch, []
        return (batch,) if batch else ()

    def pending_inputs(self) -> int:
        return len(self._batch)
