"""The four Reactive Streams interfaces as ``typing.Protocol``s, and shared rule helpers.

Snake_case names of the Java interfaces (reactive-streams-jvm 1.0). Where the
Java rules demand a ``NullPointerException`` (1.9, 2.13) sansrs raises
``TypeError``; where they demand an ``IllegalArgumentException`` (3.9) a
``IllegalArgumentError`` (a ``ValueError``) is *signalled* through ``on_error``.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

__all__ = [
    "MAX_DEMAND",
    "RULE_3_9",
    "IllegalArgumentError",
    "Processor",
    "Publisher",
    "Subscriber",
    "Subscription",
    "add_demand",
    "check_request_argument",
    "require_not_none",
    "rule_3_9_error",
]

#: Rule 3.17: demand is counted up to 2**63-1 (java.lang.Long.MAX_VALUE);
#: a demand at this value is treated as "effectively unbounded".
MAX_DEMAND = 2**63 - 1

RULE_3_9 = (
    "Rule 3.9: While the Subscription is not cancelled, Subscription.request(long n) "
    "MUST signal onError with a java.lang.IllegalArgumentException if the argument is <= 0."
)

T_contra = TypeVar("T_contra", contravariant=True)
T_co = TypeVar("T_co", covariant=True)


class IllegalArgumentError(ValueError):
    """Java's IllegalArgumentException: signalled via ``on_error`` for ``request(n <= 0)``."""


@runtime_checkable
class Subscription(Protocol):
    """The link between one Publisher and one Subscriber (section 3 of the spec)."""

    def request(self, n: int) -> None:
        """Add ``n`` to the demand; ``n <= 0`` makes the Publisher signal ``on_error`` (3.9)."""

    def cancel(self) -> None:
        """Ask the Publisher to stop signalling and drop its references (3.12, 3.13)."""


@runtime_checkable
class Subscriber(Protocol[T_contra]):
    """Receives ``on_subscribe on_next* (on_error | on_complete)?`` (section 2)."""

    def on_subscribe(self, subscription: Subscription) -> None: ...

    def on_next(self, item: T_contra) -> None: ...

    def on_error(self, error: BaseException) -> None: ...

    def on_complete(self) -> None: ...


@runtime_checkable
class Publisher(Protocol[T_co]):
    """A provider of sequenced elements, published according to demand (section 1)."""

    def subscribe(self, subscriber: Subscriber[T_co]) -> None: ...


@runtime_checkable
class Processor(Subscriber[T_contra], Publisher[T_co], Protocol[T_contra, T_co]):
    """Both a Subscriber and a Publisher, obeying the contracts of both (4.1)."""


def require_not_none(value: object, what: str, rule: str) -> None:
    """Raise ``TypeError`` (Java: NullPointerException) when ``value`` is None."""
    if value is None:
        raise TypeError(f"{what} must not be None (Reactive Streams rule {rule})")


def add_demand(current: int, n: int) -> int:
    """Rule 3.17: demand saturates at ``MAX_DEMAND`` instead of overflowing."""
    total = current + n
    return MAX_DEMAND if total >= MAX_DEMAND else total


def check_request_argument(n: object) -> None:
    """``request(n)`` with a non-integer is a programming error, raised at once."""
    if n is None or isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"Subscription.request(n) needs an int, got {n!r}")


def rule_3_9_error(n: int) -> IllegalArgumentError:
    return IllegalArgumentError(f"{RULE_3_9} Got request({n}).")
