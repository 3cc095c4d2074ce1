"""Events the Ditto cores report. Frozen, slotted, keyword-only dataclasses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._envelope import DittoError, Envelope, Headers, Topic, item_envelope
from ._messages import Kind, SearchOptions, SubscribeOptions

__all__ = [
    "ErrorResponseReceived",
    "Event",
    "InvalidMessage",
    "ItemsReceived",
    "NextReceived",
    "OtherMessageReceived",
    "PageReceived",
    "StrayMessageReceived",
    "SubscribeReceived",
    "SubscriptionClosed",
    "SubscriptionCompleted",
    "SubscriptionCreated",
    "SubscriptionFailed",
]

# -- server role ---------------------------------------------------------------


# Declarations alike in shape by design (the duplicates scan lists them): one
# frozen, slotted, keyword-only dataclass per event (docs/architecture.md).


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeReceived:
    """Server: a subscribe; ``created`` is already queued. Answer with ``accept`` or ``reject``.

    ``options`` is ``SubscribeOptions`` (streaming) or ``SearchOptions`` (search).
    """

    subscription_id: str
    kind: Kind
    topic: Topic
    headers: Headers
    options: SubscribeOptions | SearchOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionClosed:
    """Server: the subscription ended; ``reason`` is cancelled, completed,
    failed or timeout. ``kind`` with ``subscription_id`` names it (Ditto
    numbers history and search subscriptions apart)."""

    subscription_id: str
    reason: str
    error: DittoError | None = None
    kind: Kind


@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidMessage:
    """Server: a message was answered with Ditto's error response (or ``failed``)."""

    error: DittoError


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherMessageReceived:
    """A well-formed Ditto Protocol message that is not a subscription message."""

    envelope: Envelope


# -- client role ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionCreated:
    """Client: Ditto answered subscribe ``key`` with ``created``."""

    key: int
    subscription_id: str
    headers: Headers


@dataclass(frozen=True, slots=True, kw_only=True)
class NextReceived:
    """Client: one streamed item; ``envelope`` is the item parsed as a Ditto message, or None."""

    key: int
    subscription_id: str
    item: Any

    @property
    def envelope(self) -> Envelope | None:
        """``item`` as an ``Envelope``, or None if it is not a Ditto message;
        built when read (a history reader that wants the item as it came,
        e.g. a Spark row, never pays for it: docs/performance.md, "Ditto
        history into Spark")."""
        return item_envelope(self.item)


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemsReceived:
    """Client (``DittoClient.receive_run`` only): consecutive streamed items
    of one subscription, in order; what as many ``NextReceived`` would say."""

    key: int
    subscription_id: str
    items: list[Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class PageReceived:
    """Client (search): one page of things."""

    key: int
    subscription_id: str
    items: tuple[Any, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionCompleted:
    key: int
    subscription_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionFailed:
    """Client: ``failed``; ``error.exception()`` is the typed ``DittoRemoteError``."""

    key: int
    subscription_id: str
    error: DittoError


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorResponseReceived:
    """Client: an error response (``.../errors`` topic); ``key`` when it answers a subscribe."""

    key: int | None
    error: DittoError
    envelope: Envelope


@dataclass(frozen=True, slots=True, kw_only=True)
class StrayMessageReceived:
    """Client: an event for no subscription we know (e.g. late after a cancel)."""

    envelope: Envelope


Event = (
    SubscribeReceived
    | SubscriptionClosed
    | InvalidMessage
    | OtherMessageReceived
    | SubscriptionCreated
    | NextReceived
    | ItemsReceived
    | PageReceived
    | SubscriptionCompleted
    | SubscriptionFailed
    | ErrorResponseReceived
    | StrayMessageReceived
)
