"""What a Ditto client subscribes to and its bookkeeping of each
subscription: :class:`SubscribeRequest` (made by :func:`history_request` /
:func:`search_request` from a :class:`HistoryQuery` / :class:`SearchQuery`)
and the :class:`SubscriptionHandle` the client engine keeps per subscription
(its sink, its key and ID, the demand asked before ``created``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from typing_extensions import Unpack

from sansrs.ditto import Kind

from ..drive import streams

__all__ = [
    "HistoryQuery",
    "SearchQuery",
    "SubscribeRequest",
    "SubscriptionHandle",
    "history_request",
    "search_request",
]

Sink = streams.Sink[Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeRequest:
    """What to subscribe to: ``kind`` streaming (history) or search, and the core's arguments."""

    kind: Kind
    arguments: Mapping[str, Any]


class HistoryQuery(TypedDict, total=False):
    """The range and filter of a persisted-events subscription (all optional):
    revisions (negative ``from``: the last n; ``to`` <= 0: the latest) or
    timestamps (``datetime`` or ISO-8601 text), an RQL ``filter``, the
    ``group`` (``"things"`` by default, or ``"policies"``, ``"connections"``)
    and extra Ditto ``headers``."""

    from_revision: int | None
    to_revision: int | None
    from_timestamp: datetime | str | None
    to_timestamp: datetime | str | None
    filter: str | None
    group: str
    headers: Mapping[str, Any] | None


class SearchQuery(TypedDict, total=False):
    """A search subscription (all optional): RQL ``filter``, Ditto's
    ``options`` string (``"size(10),sort(+thingId)"``), ``namespaces``,
    ``fields`` and extra ``headers``."""

    filter: str | None
    options: str | None
    namespaces: Iterable[str] | None
    fields: str | None
    headers: Mapping[str, Any] | None


def _split_entity(entity: str) -> tuple[str, str]:
    namespace, sep, name = entity.partition(":")
    if not sep or not namespace or not name:
        raise ValueError(f"an entity ID is '<namespace>:<name>', not {entity!r}")
    return namespace, name


def history_request(entity: str, **query: Unpack[HistoryQuery]) -> SubscribeRequest:
    """The persisted events of ``entity`` (``"<namespace>:<name>"``)."""
    namespace, name = _split_entity(entity)
    return SubscribeRequest(
        kind=Kind.STREAMING,
        arguments={
            "namespace": namespace,
            "entity_name": name,
            "group": query.get("group", "things"),
            "from_historical_revision": query.get("from_revision"),
            "to_historical_revision": query.get("to_revision"),
            "from_historical_timestamp": query.get("from_timestamp"),
            "to_historical_timestamp": query.get("to_timestamp"),
            "filter": query.get("filter"),
            "headers": query.get("headers"),
        },
    )


def search_request(**query: Unpack[SearchQuery]) -> SubscribeRequest:
    """A search over things."""
    namespaces = query.get("namespaces")
    return SubscribeRequest(
        kind=Kind.SEARCH,
        arguments={
            "filter": query.get("filter"),
            "options": query.get("options"),
            "namespaces": None if namespaces is None else tuple(namespaces),
            "fields": query.get("fields"),
            "headers": query.get("headers"),
        },
    )


class SubscriptionHandle:
    """One subscription this client started (connection thread only)."""

    __slots__ = ("cancelled", "demand", "done", "key", "request", "sid", "sink")

    def __init__(self, request: SubscribeRequest, sink: Sink, demand: int) -> None:
        self.request = request
        self.sink = sink
        self.key: int | None = None
        self.sid: str | None = None
        #: demand asked before ``created`` arrived; requested when it does
        self.demand = demand
        self.cancelled = False
        self.done = False

    def unanswered(self) -> str:
        """For a timeout's message: why no event came, if Ditto has not
        even answered the subscribe (read from the consumer's thread: a
        hint, never a decision)."""
        if self.sid is not None or self.done:
            return ""
        return "Ditto has not answered the subscribe (no 'created')"
