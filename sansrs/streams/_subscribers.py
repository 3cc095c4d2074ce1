"""A Subscriber that collects what it receives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ._api import MAX_DEMAND, Subscription, require_not_none

__all__ = ["CollectingSubscriber"]

T = TypeVar("T")


class CollectingSubscriber(Generic[T]):
    """Collects elements into ``items``; records ``completed`` / ``error``.

    ``prefetch`` is the demand kept outstanding: requested at subscription and
    replenished when half of it has arrived (``MAX_DEMAND``, the default, asks
    for everything at once, rule 3.17). ``on_done(self)`` runs after the
    terminal signal; adapters use it to wake a waiting thread (the core has no
    threads). ``cancel()`` may be called from any thread (rule 3.5 makes the
    subscription's ``cancel`` thread-safe).

    Rules kept: 2.1 (demand before elements), 2.3 (nothing called on the
    Subscription from ``on_complete``/``on_error``), 2.5 (a second
    ``on_subscribe`` is cancelled), 2.8 (``on_next`` after ``cancel`` is
    ignored), 2.13 (``None`` arguments raise ``TypeError``).
    """

    __slots__ = (
        "__weakref__",
        "_cancelled",
        "_on_done",
        "_prefetch",
        "_received_since_request",
        "_subscription",
        "completed",
        "error",
        "items",
    )

    def __init__(
        self,
        *,
        prefetch: int = MAX_DEMAND,
        on_done: Callable[[CollectingSubscriber[T]], None] | None = None,
    ) -> None:
        if prefetch <= 0:
            raise ValueError(f"prefetch must be > 0, got {prefetch}")
        self._prefetch = min(prefetch, MAX_DEMAND)
        self._on_done = on_done
        self._subscription: Subscription | None = None
        self._received_since_request = 0
        self._cancelled = False
        self.items: list[T] = []
        self.completed = False
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        """True after ``on_complete`` or ``on_error``."""
        return self.completed or self.error is not None

    def on_subscribe(self, subscription: Subscription) -> None:
        require_not_none(subscription, "subscription", "2.13")
        if self._subscription is not None or self._cancelled or self.done:
            subscription.cancel()  # rule 2.5
            return
        self._subscription = subscription
        subscription.request(self._prefetch)

    def on_next(self, item: T) -> None:
        require_not_none(item, "item", "2.13")
        if self._cancelled or self.done:
            return  # rule 2.8
        self.items.append(item)
        subscription = self._subscription
        if self._prefetch == MAX_DEMAND or subscription is None:
            return
        self._received_since_request += 1
        if self._received_since_request >= (self._prefetch + 1) // 2:
            n, self._received_since_request = self._received_since_request, 0
            subscription.request(n)

    def on_error(self, error: BaseException) -> None:
        require_not_none(error, "error", "2.13")
        self.error = error
        self._finish()

    def on_complete(self) -> None:
        self.completed = True
        self._finish()

    def cancel(self) -> None:
        """Cancel the subscription (rule 2.6); safe to call more than once."""
        self._cancelled = True
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.cancel()

    def _finish(self) -> None:
        self._subscription = None  # rule 2.4: it is cancelled now; never called again
        if self._on_done is not None:
            self._on_done(self)
