"""A Subscriber that records every signal, for the stream-model rule tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sansrs.streams import Subscription


class Recorder:
    """Records ``("subscribe"|"next"|"error"|"complete", value)`` in order.

    ``request_on_subscribe`` is requested from ``on_subscribe``; ``on_next_hook``
    runs after each element is recorded.
    """

    def __init__(self, request_on_subscribe: int = 0,
                 on_next_hook: Callable[[Recorder, Any], None] | None = None) -> None:
        self.events: list[tuple[str, Any]] = []
        self.subscription: Subscription | None = None
        self._initial = request_on_subscribe
        self._hook = on_next_hook

    def on_subscribe(self, subscription: Subscription) -> None:
        self.events.append(("subscribe", None))
        self.subscription = subscription
        if self._initial:
            subscription.request(self._initial)

    def on_next(self, item: Any) -> None:
        self.events.append(("next", item))
        if self._hook is not None:
            self._hook(self, item)

    def on_error(self, error: BaseException) -> None:
        self.events.append(("error", error))

    def on_complete(self) -> None:
        self.events.append(("complete", None))

    @property
    def items(self) -> list[Any]:
        return [value for kind, value in self.events if kind == "next"]

    @property
    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    @property
    def error(self) -> BaseException | None:
        errors = [value for kind, value in self.events if kind == "error"]
        return errors[0] if errors else None

    def request(self, n: int) -> None:
        assert self.subscription is not None
        self.subscription.request(n)

    def cancel(self) -> None:
        assert self.subscription is not None
        self.subscription.cancel()
