"""A correct asynchronous Publisher (one worker thread per subscription).

It checks the kit against the timing it is built for: signals arrive on
another thread, after the call that caused them has returned.
"""

from __future__ import annotations

import queue
import threading

from sansrs.streams import (
    MAX_DEMAND,
    RULE_3_9,
    IllegalArgumentError,
    Subscriber,
    add_demand,
    require_not_none,
)

_CANCEL = object()


class AsyncRangePublisher:
    def __init__(self, count: int | None) -> None:
        self.count = count

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        require_not_none(subscriber, "subscriber", "1.9")
        subscription = _AsyncSubscription(self.count)
        threading.Thread(target=subscription.run, args=(subscriber,), daemon=True).start()

    def __repr__(self) -> str:
        return f"AsyncRangePublisher({self.count})"


class _AsyncSubscription:
    def __init__(self, count: int | None) -> None:
        self.count = count
        self.inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.cancelled = False

    def request(self, n: int) -> None:
        if not self.cancelled:
            self.inbox.put(n)

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.inbox.put(_CANCEL)

    def run(self, subscriber: Subscriber[int]) -> None:
        """The worker: the only thread that ever signals ``subscriber`` (rule 1.3)."""
        subscriber.on_subscribe(self)
        sent, demand = 0, 0
        if self.count == 0:
            subscriber.on_complete()
            return
        while True:
            message = self.inbox.get()
            if message is _CANCEL or self.cancelled:
                return  # the thread ends and drops its reference (rule 3.13)
            assert isinstance(message, int)
            if message <= 0:
                self.cancelled = True
                subscriber.on_error(IllegalArgumentError(f"{RULE_3_9} Got {message}."))
                return
            demand = add_demand(demand, message)
            while demand > 0 and not self.cancelled and self.inbox.empty():
                if demand != MAX_DEMAND:
                    demand -= 1
                sent += 1
                subscriber.on_next(sent)
                if sent == self.count:
                    self.cancelled = True
                    subscriber.on_complete()
                    return
