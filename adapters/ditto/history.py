"""History sources for the Ditto server adapter (``sansrs.adapters.ditto.serve``).

A :class:`HistorySource` turns one subscription request into a Publisher or
an iterable of items; the server pulls it only within the subscriber's demand
(``drive.streams.Outbound``), so an iterable that reads lazily (as
:class:`JsonLinesHistory` does) never holds more than the demand in memory.
Raise :class:`~sansrs.ditto.DittoException` from ``open`` to fail the
subscription with a given Ditto error (sent after the first request, as
Ditto does).

Events are Ditto Protocol messages as Ditto streams them in ``next`` items:
``{"topic": "<ns>/<name>/things/twin/events/modified", "headers": {...},
"path": "/attributes/x", "value": ..., "revision": 6, "timestamp": "..."}``.

Two sources come with sansrs: :class:`InMemoryHistory` (tests, small data)
and :class:`JsonLinesHistory` (one event per line of a file). Both serve the
streaming protocol (``subscribeForPersistedEvents``: revision and timestamp
ranges, negative revisions, RQL ``filter``) and the older search protocol
(the latest state of each thing, folded from its events, in pages).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

from sansrs.ditto import (
    DittoError,
    DittoException,
    Headers,
    Kind,
    SearchOptions,
    SubscribeOptions,
    Topic,
    TopicError,
    parse_topic,
)
from sansrs.streams import Publisher

from .rql import Predicate, RqlError, parse_rql

__all__ = [
    "HistoryRequest",
    "HistorySource",
    "InMemoryHistory",
    "JsonLinesHistory",
    "entity_of",
    "select_events",
]

MAX_LONG: Final = 2**63 - 1
DEFAULT_PAGE_SIZE: Final = 25
MAX_PAGE_SIZE: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryRequest:
    """One subscribe, as the server hands it to a :class:`HistorySource`.

    ``topic`` is the subscribe's topic; ``options`` ``SubscribeOptions``
    (streaming) or ``SearchOptions`` (search); ``headers`` the Ditto headers of
    the subscribe; ``connection_headers`` the HTTP headers of the WebSocket
    upgrade (names lower-case), e.g. to scope the history to the caller.
    """

    subscription_id: str
    kind: Kind
    topic: Topic
    options: SubscribeOptions | SearchOptions
    headers: Headers
    connection_headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def entity_id(self) -> str:
        return self.topic.entity_id


class HistorySource(Protocol):
    """Where a Ditto server's history comes from."""

    def open(self, request: HistoryRequest) -> Publisher[Any] | Iterable[Any]:
        """Items for ``request``: a Publisher, or an iterable pulled within demand.

        Streaming: each item is one event (a Ditto Protocol message as JSON, or
        an ``Envelope``). Search: each item is one page (a list of things).
        Raise ``DittoException`` to fail the subscription with that error.
        """
        ...


def entity_of(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(group, "<ns>:<name>")`` of an event message, or None if it has no usable topic."""
    topic = event.get("topic")
    if not isinstance(topic, str):
        return None
    try:
        parsed = parse_topic(topic)
    except TopicError:
        return None
    return parsed.group, parsed.entity_id


def thing_not_found(entity_id: str) -> DittoException:
    """Ditto's answer for a thing that does not exist (or may not be read)."""
    return _entity_not_found("things:thing.notfound", "Thing", entity_id)


def policy_not_found(entity_id: str) -> DittoException:
    """Ditto's answer for a policy that does not exist (or may not be read)."""
    return _entity_not_found("policies:policy.notfound", "Policy", entity_id)


def _entity_not_found(error: str, kind: str, entity_id: str) -> DittoException:
    return DittoException(
        DittoError(
            status=404,
            error=error,
            message=f"The {kind} with ID '{entity_id}' could not be found or requester had "
            "insufficient permissions to access it.",
            description=f"Check if the ID of your requested {kind} was correct and you have "
            "sufficient permissions.",
        )
    )


def _invalid_filter(filter_text: str, reason: str, search: bool) -> DittoException:
    return DittoException(
        DittoError(
            status=400,
            error="thing-search:search.option.invalid" if search else "rql.expression.invalid",
            message=f"The RQL expression '{filter_text[:100]}' is invalid: {reason}",
            description="Check the RQL syntax of the filter.",
        )
    )


def _compile_filter(text: str | None, search: bool) -> Predicate | None:
    if text is None:
        return None
    try:
        return parse_rql(text)
    except RqlError as exc:
        raise _invalid_filter(text, str(exc), search) from None


def _instant(text: str) -> datetime | None:
    if not text.endswith(("Z", "z")):
        return None
    try:
        return datetime.fromisoformat(text[:-1] + "+00:00")
    except ValueError:
        return None


def _revision(event: Mapping[str, Any]) -> int:
    revision = event.get("revision")
    return revision if type(revision) is int else 0


def _set_path(target: dict[str, Any], path: str, value: Any) -> None:
    parts = [p for p in path.split("/") if p]
    if not parts:
        if isinstance(value, dict):
            target.update(value)
        return
    node = target
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def _delete_path(target: dict[str, Any], path: str) -> None:
    parts = [p for p in path.split("/") if p]
    node: Any = target
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if parts and isinstance(node, dict):
        node.pop(parts[-1], None)


def filter_view(event: Mapping[str, Any], entity_id: str) -> dict[str, Any]:
    """The object an RQL ``filter`` sees for one event: a partial thing.

    As Ditto's ``ThingEventToThingConverter``: the event's value placed at its
    path, plus ``thingId``, ``_revision`` and ``_modified``.
    """
    view: dict[str, Any] = {}
    if "value" in event:
        _set_path(view, str(event.get("path", "/")), event["value"])
    view["thingId"] = entity_id
    view["_revision"] = _revision(event)
    if isinstance(event.get("timestamp"), str):
        view["_modified"] = event["timestamp"]
    return view


def select_events(
    events: Iterable[Mapping[str, Any]],
    options: SubscribeOptions,
    entity_id: str,
    latest_revision: int,
) -> Iterator[Mapping[str, Any]]:
    """The events of one entity that ``options`` asks for, lazily, in stored order.

    Revisions: missing ``from`` is 0, missing ``to`` Long.MAX; a negative
    ``from`` -n means the last n revisions (``latest - n + 1``); ``to`` <= 0
    means ``latest + to`` (0 the latest, -1 the one before). Timestamps bound
    inclusively; an event without a timestamp is left out when either bound is
    given. ``filter`` is RQL over :func:`filter_view`.
    """
    lo = options.from_historical_revision
    hi = options.to_historical_revision
    lo = 0 if lo is None else (latest_revision + lo + 1 if lo < 0 else lo)
    hi = MAX_LONG if hi is None else (latest_revision + hi if hi <= 0 else hi)
    t_lo = _instant(options.from_historical_timestamp or "")
    t_hi = _instant(options.to_historical_timestamp or "")
    timed = options.from_historical_timestamp is not None or (
        options.to_historical_timestamp is not None
    )
    predicate = _compile_filter(options.filter, search=False)  # errors now, not at a pull
    if not timed and predicate is None:
        return _select_revisions(events, lo, hi)
    return _select(events, entity_id, lo, hi, timed, t_lo, t_hi, predicate)


def _select_revisions(
    events: Iterable[Mapping[str, Any]], lo: int, hi: int
) -> Iterator[Mapping[str, Any]]:
    """:func:`_select` by revision alone (no timestamps, no filter: the
    common history read), one step per event instead of a call and checks."""
    for event in events:
        revision = event.get("revision")
        if lo <= (revision if type(revision) is int else 0) <= hi:
            yield event


def _select(
    events: Iterable[Mapping[str, Any]],
    entity_id: str,
    lo: int,
    hi: int,
    timed: bool,
    t_lo: datetime | None,
    t_hi: datetime | None,
    predicate: Predicate | None,
) -> Iterator[Mapping[str, Any]]:
    for event in events:
        revision = _revision(event)
        if not lo <= revision <= hi:
            continue
        if timed:
            stamp = event.get("timestamp")
            moment = _instant(stamp) if isinstance(stamp, str) else None
            if moment is None or (t_lo is not None and moment < t_lo):
                continue
            if t_hi is not None and moment > t_hi:
                continue
        if predicate is not None and not predicate(filter_view(event, entity_id)):
            continue
        yield event


def fold_things(events: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The latest state of every thing, folded from its events (for search).

    ``created``/``modified`` at ``/`` replace the thing, at a deeper path set
    that part; ``deleted`` at ``/`` removes the thing, deeper removes the part.
    """
    things: dict[str, dict[str, Any]] = {}
    for event in events:
        entity = entity_of(event)
        if entity is None or entity[0] != "things":
            continue
        thing_id = entity[1]
        action = str(event.get("topic", "")).rsplit("/", 1)[-1]
        path = str(event.get("path", "/"))
        root = not [p for p in path.split("/") if p]
        if action == "deleted":
            if root:
                things.pop(thing_id, None)
            elif thing_id in things:
                _delete_path(things[thing_id], path)
            continue
        if "value" not in event:
            continue
        if root:
            value = event["value"]
            things[thing_id] = dict(value) if isinstance(value, dict) else {}
        else:
            _set_path(things.setdefault(thing_id, {}), path, event["value"])
        things[thing_id]["thingId"] = thing_id
    return things


def _search_option_invalid() -> DittoException:
    return DittoException(
        DittoError(
            status=400,
            error="thing-search:search.option.invalid",
            message="The search options are invalid.",
            description="At least one provided option is invalid.",
        )
    )


def _parse_search_options(text: str | None) -> tuple[int, list[tuple[str, bool]]]:
    """``size(n)`` and ``sort(+a,-b)`` (Ditto's search options); page size default 25, max 200."""
    size, sort = DEFAULT_PAGE_SIZE, [("thingId", True)]
    if not text:
        return size, sort
    rest = text.strip()
    while rest:
        name, sep, tail = rest.partition("(")
        args, sep2, rest = tail.partition(")")
        if not sep or not sep2:
            raise _search_option_invalid()
        rest = rest.lstrip(", ")
        name = name.strip()
        if name == "size":
            if not args.strip().isdigit() or not 1 <= int(args) <= MAX_PAGE_SIZE:
                raise _search_option_invalid()
            size = int(args)
        elif name == "sort":
            keys = [a.strip() for a in args.split(",")]
            if not keys or any(len(k) < 2 or k[0] not in "+-" for k in keys):
                raise _search_option_invalid()
            sort = [(k[1:].strip("/"), k[0] == "+") for k in keys]
        elif name != "cursor":  # cursors are ours to ignore: one subscription pages on
            raise _search_option_invalid()
    return size, sort


def _select_fields(thing: dict[str, Any], fields: str | None) -> dict[str, Any]:
    if not fields:
        return thing
    out: dict[str, Any] = {}
    for selector in fields.split(","):
        parts = tuple(p for p in selector.strip().split("/") if p)
        node: Any = thing
        for part in parts:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        if parts and node is not None:
            _set_path(out, "/".join(parts), node)
    return out


def _sort_key(path: str) -> Any:
    parts = [p for p in path.split("/") if p]

    def key(thing: dict[str, Any]) -> tuple[int, str, Any]:
        node: Any = thing
        for part in parts:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, bool) or node is None:
            return (2, "", "")
        if isinstance(node, int | float):
            return (0, "", node)
        return (1, str(node), "")

    return key


def search_pages(
    things: Mapping[str, dict[str, Any]], options: SearchOptions
) -> Iterator[list[dict[str, Any]]]:
    """Pages of the things matching a search subscribe (filter, namespaces, sort, fields)."""
    size, sort = _parse_search_options(options.options)
    predicate = _compile_filter(options.filter, search=True)
    namespaces = None if options.namespaces is None else set(options.namespaces)
    hits = [
        thing
        for thing_id, thing in things.items()
        if (namespaces is None or thing_id.split(":", 1)[0] in namespaces)
        and (predicate is None or predicate(thing))
    ]
    for path, ascending in reversed(sort):  # stable sorts, least significant key first
        hits.sort(key=_sort_key(path), reverse=not ascending)
    fields = options.fields
    pages = range(0, len(hits), size)
    return ([_select_fields(t, fields) for t in hits[i : i + size]] for i in pages)


class InMemoryHistory:
    """Events kept in a list (tests, small data). ``append`` may be called any time."""

    def __init__(self, events: Iterable[Mapping[str, Any]] = ()) -> None:
        self._events: list[Mapping[str, Any]] = []
        self._by_entity: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for event in events:
            self.append(event)

    def append(self, event: Mapping[str, Any]) -> None:
        entity = entity_of(event)
        if entity is None:
            raise ValueError(f"not an event message (no entity topic): {event!r:.100}")
        self._events.append(event)
        self._by_entity.setdefault(entity, []).append(event)

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        if request.kind is Kind.SEARCH:
            assert isinstance(request.options, SearchOptions)
            return search_pages(fold_things(self._events), request.options)
        assert isinstance(request.options, SubscribeOptions)
        events = self._by_entity.get((request.topic.group, request.entity_id))
        if not events:
            raise _not_found(request)
        latest = max(_revision(e) for e in events)
        return select_events(list(events), request.options, request.entity_id, latest)


def _not_found(request: HistoryRequest) -> DittoException:
    if request.topic.group == "policies":
        return policy_not_found(request.entity_id)
    return thing_not_found(request.entity_id)


class JsonLinesHistory:
    """Events read from a JSON-lines file, one Ditto Protocol event message a line.

    The file is read and indexed once, when constructed: for each entity its
    latest revision and where its lines start (one 8-byte offset per event).
    A streaming subscription then reads and parses only its entity's lines,
    lazily, within the subscriber's demand; it never re-reads the file, so a
    flood of subscribes costs what their own events cost, not the file's size
    each. The first search subscription folds the whole file into
    the latest state of every thing, kept for the searches after it.

    What it is for: an embedded history of up to a few million events (the
    index is about 8 bytes per event and a few hundred bytes per entity: 10
    million events, 80 MB); the file must not change while it is served
    (append-only writers are not seen: construct a new one). Larger or live
    histories want a :class:`HistorySource` over a database.

    Blank lines and lines starting with ``#`` are skipped; a line that is not
    an event message makes the constructor raise ``ValueError`` naming the
    line.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._latest: dict[tuple[str, str], int] = {}
        self._offsets: dict[tuple[str, str], array[int]] = {}
        self._things: dict[str, dict[str, Any]] | None = None
        for number, offset, event in self._read():
            entity = entity_of(event)
            if entity is None:
                raise ValueError(f"{self.path}:{number}: not an event message (no entity topic)")
            self._latest[entity] = max(self._latest.get(entity, 0), _revision(event))
            offsets = self._offsets.get(entity)
            if offsets is None:
                offsets = self._offsets[entity] = array("q")
            offsets.append(offset)

    def _read(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(line number, byte offset of the line, event) of every event line."""
        with self.path.open("rb") as lines:
            offset = 0
            for number, raw in enumerate(lines, 1):
                start, offset = offset, offset + len(raw)
                text = raw.strip()
                if not text or text.startswith(b"#"):
                    continue
                yield number, start, self._parse(text, number)

    def _parse(self, text: bytes, number: int) -> dict[str, Any]:
        try:
            event = json.loads(text.decode("utf-8"))
        except ValueError as exc:  # UnicodeDecodeError is one
            raise ValueError(f"{self.path}:{number}: invalid JSON: {exc}") from None
        if not isinstance(event, dict):
            raise ValueError(f"{self.path}:{number}: not a JSON object")
        return event

    def _events_of(self, entity: tuple[str, str]) -> Iterator[dict[str, Any]]:
        """The entity's events, each line read and parsed as it is pulled."""
        offsets = self._offsets[entity]
        with self.path.open("rb") as lines:
            for offset in offsets:
                lines.seek(offset)
                yield self._parse(lines.readline().strip(), 0)

    def open(self, request: HistoryRequest) -> Iterable[Any]:
        if request.kind is Kind.SEARCH:
            assert isinstance(request.options, SearchOptions)
            if self._things is None:  # once: the file does not change
                self._things = fold_things(event for _, _, event in self._read())
            return search_pages(self._things, request.options)
        assert isinstance(request.options, SubscribeOptions)
        entity = (request.topic.group, request.entity_id)
        if entity not in self._latest:
            raise _not_found(request)
        return select_events(
            self._events_of(entity), request.options, request.entity_id, self._latest[entity]
        )
