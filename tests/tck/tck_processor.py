"""A hand-rolled multicast identity Processor, correct unless a ``ProcessorBugs`` flag is on.

Written without sansrs.streams' building blocks: a lock and a work-in-progress
counter serialize everything (the usual "drain loop"), each Subscriber has a
bounded queue, and upstream is asked for what the fullest queue has room for.
Upstream is requested only once a Subscriber is there, so a cold upstream's
elements are not lost.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from sansrs.streams import (
    MAX_DEMAND,
    RULE_3_9,
    IllegalArgumentError,
    Subscriber,
    Subscription,
    add_demand,
)
from tests.tck.tck_correct import WorkLoop


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessorBugs:
    error_first_only: bool = False  # on_error reaches the first Subscriber only (rule 1.4)
    complete_after_error: bool = False  # on_complete after on_error downstream (rule 1.7)
    request_upstream_once: bool = False  # asks upstream for 1 element, once (rule 4.1)
    swallow_error: bool = False  # an upstream error becomes on_complete (rule 4.2)


class _Downstream:
    def __init__(self, processor: BroadcastProcessor, subscriber: Subscriber[int]) -> None:
        self.processor = processor
        self.subscriber: Subscriber[int] | None = subscriber
        self.queue: deque[int] = deque()
        self.demand = 0
        self.bad: int | None = None
        self.done = False

    def request(self, n: int) -> None:
        with self.processor.lock:
            if self.done:
                return
            if n <= 0:
                self.bad = n
            else:
                self.demand = add_demand(self.demand, n)
        self.processor.drain()

    def cancel(self) -> None:
        with self.processor.lock:
            self.done = True
            self.subscriber = None
            self.queue.clear()
        self.processor.drain()


class BroadcastProcessor:
    def __init__(self, buffer_size: int, bugs: ProcessorBugs | None = None) -> None:
        self.capacity = buffer_size
        self.bugs = bugs or ProcessorBugs()
        self.lock = threading.Lock()
        self.loop = WorkLoop(self._work)
        self.upstream: Subscription | None = None
        self.outstanding = 0
        self.requested_once = False
        self.downstream: list[_Downstream] = []
        self.joining: list[_Downstream] = []
        self.terminal: BaseException | bool | None = None  # True: completed

    def __repr__(self) -> str:
        return f"BroadcastProcessor({self.capacity})"

    # -- upstream -------------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("subscription must not be None (rule 2.13)")
        with self.lock:
            first = self.upstream is None and self.terminal is None
            if first:
                self.upstream = subscription
        if not first:
            subscription.cancel()  # rule 2.5
            return
        self.drain()

    def on_next(self, item: int) -> None:
        if item is None:
            raise TypeError("item must not be None (rule 2.13)")
        with self.lock:
            self.outstanding -= 1
            for down in self.downstream:
                if not down.done:
                    down.queue.append(item)
        self.drain()

    def on_error(self, error: BaseException) -> None:
        if error is None:
            raise TypeError("error must not be None (rule 2.13)")
        with self.lock:
            self.upstream = None
            if self.terminal is None:
                self.terminal = True if self.bugs.swallow_error else error
                if not self.bugs.swallow_error:
                    for down in self.downstream:
                        down.queue.clear()  # rule 4.2: at once
        self.drain()

    def on_complete(self) -> None:
        with self.lock:
            self.upstream = None
            if self.terminal is None:
                self.terminal = True
        self.drain()

    # -- downstream ---------------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        if subscriber is None:
            raise TypeError("subscriber must not be None (rule 1.9)")
        with self.lock:
            self.joining.append(_Downstream(self, subscriber))
        self.drain()

    # -- the drain loop: one thread at a time ----------------------------------------------------

    def drain(self) -> None:
        self.loop.schedule()

    def _work(self) -> None:
        while self._step():
            pass

    def _step(self) -> bool:
        """One signal or one upstream request; False when there is nothing to do."""
        with self.lock:
            if self.joining:
                down = self.joining.pop(0)
                self.downstream.append(down)
                action: tuple[str, object, object] | None = ("subscribe", down.subscriber, down)
            else:
                action = self._next_action()
        if action is None:
            return False
        kind, target, value = action  # signals go out outside the lock
        if kind == "request":
            target.request(value)  # type: ignore[attr-defined]
        elif kind == "cancel":
            target.cancel()  # type: ignore[attr-defined]
        elif kind == "subscribe":
            target.on_subscribe(value)  # type: ignore[attr-defined]
        elif kind == "next":
            target.on_next(value)  # type: ignore[attr-defined]
        elif kind == "error":
            target.on_error(value)  # type: ignore[attr-defined]
            if self.bugs.complete_after_error:
                target.on_complete()  # type: ignore[attr-defined]
        else:
            target.on_complete()  # type: ignore[attr-defined]
        return True

    def _next_action(self) -> tuple[str, object, object] | None:
        terminal = self.terminal
        for index, down in enumerate(self.downstream):
            subscriber = down.subscriber
            if down.done or subscriber is None:
                continue
            if down.bad is not None:
                down.done, down.subscriber = True, None
                return ("error", subscriber, IllegalArgumentError(f"{RULE_3_9} Got {down.bad}."))
            if isinstance(terminal, BaseException):
                down.done, down.subscriber = True, None
                if self.bugs.error_first_only and index > 0:
                    continue
                return ("error", subscriber, terminal)
            if down.queue and down.demand > 0:
                if down.demand != MAX_DEMAND:
                    down.demand -= 1
                return ("next", subscriber, down.queue.popleft())
            if terminal is True and not down.queue:
                down.done, down.subscriber = True, None
                return ("complete", subscriber, None)
        return self._upstream_request()

    def _upstream_request(self) -> tuple[str, object, object] | None:
        live = [d for d in self.downstream if not d.done]
        upstream = self.upstream
        if upstream is None or self.terminal is not None:
            return None
        if not live:
            if not self.downstream:
                return None
            self.upstream, self.terminal = None, True  # every Subscriber left: so do we
            return ("cancel", upstream, None)
        room = self.capacity - max(len(d.queue) for d in live) - self.outstanding
        if self.bugs.request_upstream_once:
            if self.requested_once:
                return None
            self.requested_once, room = True, 1
        if room <= 0:
            return None
        self.outstanding += room
        return ("request", upstream, room)
