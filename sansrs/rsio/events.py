"""Events an rsio ``Connection`` reports (docs/protocols/rsio.md §11).

Every event is a frozen, slotted, keyword-only dataclass compared by value.
The receive hot path builds ``NextReceived`` a cheaper way (``_fast.py``);
the result is the same frozen value.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CancelReceived",
    "CompleteReceived",
    "ConnectionLost",
    "ConnectionTerminated",
    "ErrorReceived",
    "Event",
    "HelloReceived",
    "InvalidRequestReceived",
    "NextPackedReceived",
    "NextReceived",
    "OnSubscribeReceived",
    "RequestReceived",
    "SubscribeReceived",
]


# Declarations alike in shape by design (the duplicates scan lists them): one
# frozen, slotted, keyword-only dataclass per event (docs/architecture.md).


@dataclass(frozen=True, slots=True, kw_only=True)
class HelloReceived:
    """The peer's hello (version 0); ``extensions``: the Ids it announced."""

    version: int
    extensions: tuple[int, ...]


# -- the peer subscribes to us (we publish) ------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeReceived:
    """Answer with ``send_on_subscribe`` (or ``send_error``)."""

    subscriber_id: int
    publisher: str
    initial_demand: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestReceived:
    """``demand`` more elements (the core's count saturates at 2**63-1)."""

    subscriber_id: int
    demand: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelReceived:
    """The subscription is over; stop publishing to it."""

    subscriber_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidRequestReceived:
    """request(0): the core answered onError (rule 3.9); the subscription is over."""

    subscriber_id: int
    message: str


# -- we subscribed (the peer publishes) ----------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OnSubscribeReceived:
    """``element_size`` > 0: fixed-size mode."""

    subscriber_id: int
    element_size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NextReceived:
    """One element (a split element arrives joined)."""

    subscriber_id: int
    element: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class NextPackedReceived:
    """``count`` fixed-size elements, ``elements`` holding them back to back."""

    subscriber_id: int
    elements: bytes
    count: int
    element_size: int

    def split(self) -> list[bytes]:
        size = self.element_size
        data = self.elements
        return [data[i : i + size] for i in range(0, len(data), size)]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteReceived:
    subscriber_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReceived:
    subscriber_id: int
    error: str


# -- connection -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionTerminated:
    """Terminal: goodbye exchanged (``by_peer``: the peer said it first), or a
    protocol error (``error_code`` != 0, an ``ErrorCode``; we sent goodbye).
    Every subscription, both ways, is over. (Not to be confused with the
    drivers' exception ``ConnectionClosed``: a call that needs a connection
    that is gone.)"""

    reason: str
    by_peer: bool
    error_code: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionLost:
    """Terminal: the transport ended without goodbye."""

    reason: str


Event = (
    HelloReceived
    | SubscribeReceived
    | RequestReceived
    | CancelReceived
    | InvalidRequestReceived
    | OnSubscribeReceived
    | NextReceived
    | NextPackedReceived
    | CompleteReceived
    | ErrorReceived
    | ConnectionTerminated
    | ConnectionLost
)
