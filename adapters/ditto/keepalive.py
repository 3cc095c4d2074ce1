"""Keeping a slow consumer's subscription alive through Ditto's idle timeout
(engine side, connection thread only).

Ditto ends a subscription with ``failed`` 408 (``streaming.subscription.timeout``)
after 60 s without interaction; a consumer that holds a full prefetch window
for longer than that (it works long on each event or page) loses its
subscription although nothing is wrong. A request is an interaction, but a
request beyond the window would break back-pressure. So, when keep-alive is
on, one unit of each window is *withheld*: granted by the consumer, not yet
asked of Ditto. If ``interval`` seconds pass after a subscription's last
request, the withheld unit is requested then, from within the window; each
later request of the consumer withholds one unit again. A consumer that
stays away longer than ``interval`` plus Ditto's timeout still gets the 408
(the session's iterators then renew the subscription after the last
revision: docs/protocols/ditto.md, "Idle timeouts").
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class _Handle(Protocol):
    """What keep-alive reads of a subscription (the engine's SubscriptionHandle)."""

    done: bool
    cancelled: bool


SubscriptionHandle = TypeVar("SubscriptionHandle", bound=_Handle)

__all__ = ["DEFAULT_KEEPALIVE", "KeepAlive"]

#: Seconds after a request at which the withheld unit is sent: well inside
#: Ditto's 60 s (``streaming.search-idle-timeout``).
DEFAULT_KEEPALIVE = 45.0


class KeepAlive(Generic[SubscriptionHandle]):
    """The withheld units and their timers. ``request(handle, n)`` asks
    Ditto for ``n`` more (the engine's); ``clock`` is monotonic seconds."""

    def __init__(self, interval: float, clock: Callable[[], float],
                 request: Callable[[SubscriptionHandle, int], None]) -> None:
        if not interval > 0:
            raise ValueError("keepalive must be positive")
        self.interval = interval
        self._clock = clock
        self._request = request
        self._withheld: dict[SubscriptionHandle, int] = {}
        self._due: dict[SubscriptionHandle, float] = {}
        self._heap: list[tuple[float, int, SubscriptionHandle]] = []
        self._seq = itertools.count()
        #: withheld units sent on their timer (inspection)
        self.sent = 0

    def withhold(self, handle: SubscriptionHandle, n: int) -> int:
        """Of ``n`` units granted, how many to ask for now (one kept back
        if none is)."""
        if n >= 2 and not self._withheld.get(handle):
            self._withheld[handle] = 1
            return n - 1
        return n

    def requested(self, handle: SubscriptionHandle) -> None:
        """A request went out for ``handle``: its timer starts again (if a
        unit is withheld: otherwise there is nothing to send when it fires)."""
        if not self._withheld.get(handle):
            self._due.pop(handle, None)
            return
        at = self._clock() + self.interval
        self._due[handle] = at
        heapq.heappush(self._heap, (at, next(self._seq), handle))

    def forget(self, handle: SubscriptionHandle) -> None:
        self._withheld.pop(handle, None)
        self._due.pop(handle, None)

    def _live(self, at: float, handle: SubscriptionHandle) -> bool:
        return self._due.get(handle) == at and not (handle.done or handle.cancelled)

    def next_deadline(self) -> float | None:
        heap = self._heap
        while heap and not self._live(heap[0][0], heap[0][2]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def handle_timeout(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, _, handle = heapq.heappop(heap)
            if not self._live(at, handle):
                continue
            del self._due[handle]
            units = self._withheld.pop(handle, 0)
            if units:
                self.sent += 1
                self._request(handle, units)
