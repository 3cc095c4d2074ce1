"""Ditto history as a Spark source: ``ws://`` / ``wss://`` URLs for the
readers and the ``sansrs`` data source (docs/spark.md, "Reading Ditto
history").

Work is split **by thing**: partition ``p`` of ``n`` reads the things whose
``crc32(thingId) % n == p``, one ``subscribeForPersistedEvents`` after the
other on one WebSocket connection, each with Ditto demand ``prefetch`` events
(the next ``AHEAD`` subscribed while one is read, each asking for its first
``HEAD_START`` events only until its turn).
A thing's history is one ordered stream in Ditto (revisions are per thing),
so splitting by thing needs no coordination between partitions and keeps
each thing's events in revision order inside one partition; a hash of the ID
(not its position in a listing) keeps the assignment stable when things are
created while the partitions list them.

Rows are the events: ``thingId``, ``revision``, ``timestamp``, ``topic``,
``action``, ``path``, ``value`` (JSON text) and, when the value is a JSON
object, its top-level fields (which never replace the event's own columns).

Needs the ``ws`` extra (wsproto); imported only when a ``ws://`` URL is read.
"""

from __future__ import annotations

import json
import zlib
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from sansrs.ditto import DittoRemoteError

from ..ditto import DittoConnection, connect
from ..ditto.batches import EventBatches
from ..drive.errors import ConnectionClosed
from ._wire import ReadRequest
from .auth import ClientTls
from .errors import SourceError

__all__ = [
    "EVENT_COLUMNS",
    "assigned",
    "event_columns",
    "event_row",
    "latest_revisions",
    "list_things",
    "open_ditto_columns",
    "open_ditto_stream",
]

#: The columns every event row has (the value's fields come on top).
EVENT_COLUMNS = ("thingId", "revision", "timestamp", "topic", "action", "path", "value")
#: Things per search page when the partitions discover the things.
SEARCH_PAGE = 200
#: Events of each thing subscribed ahead asked for while an earlier one is
#: read (its subscription paused until its turn): its first batch is there
#: when the turn comes.
HEAD_START = 128
#: Things subscribed ahead of the one being read, each paused with its head
#: start. One hides the next subscription's round trip behind a thing whose
#: reading takes longer than that; small histories (a few events a thing)
#: are read faster than a round trip, so several are in flight at once
#: (docs/performance.md, "Ditto history into Spark"). Bounds what waits
#: queued beyond the window: AHEAD * HEAD_START events.
AHEAD = 16
_SUBSCRIBE_OPTIONS = ("from_revision", "to_revision", "from_timestamp", "to_timestamp", "filter")
_AUTH_OPTIONS = ("user", "password", "token")


def assigned(thing_id: str, partitions: int) -> int:
    """The partition (of ``partitions``) that reads ``thing_id``'s history."""
    return zlib.crc32(thing_id.encode("utf-8")) % partitions


def _no_default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``json.dumps(value, separators=(",", ":"))`` builds an encoder per call, a
# third of a row's cost here (docs/performance.md, "Ditto history into
# Spark"); the C encoder built once writes the same text.
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_ENCODE: Any = (
    None
    if _MAKE_ENCODER is None
    else _MAKE_ENCODER(
        None, _no_default, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
)


def _value_json(value: Any) -> str:
    if _ENCODE is None:
        return json.dumps(value, separators=(",", ":"))
    return "".join(_ENCODE(value, 0))


#: Topic -> (thingId, action): a thing's events share their topic, so each
#: is split once (at most _MAX_TOPICS kept; others are split every time).
_TOPICS: dict[str, tuple[str | None, str]] = {}
_MAX_TOPICS = 4096
_ABSENT = object()


def _topic_columns(topic: str) -> tuple[str | None, str]:
    columns = _TOPICS.get(topic)
    if columns is None:
        parts = topic.split("/")
        columns = (f"{parts[0]}:{parts[1]}" if len(parts) > 2 else None, parts[-1])
        if len(_TOPICS) < _MAX_TOPICS:
            _TOPICS[topic] = columns
    return columns


def event_row(event: Mapping[str, Any], *, value_text: bool = True) -> dict[str, Any]:
    """One Ditto event message as a row (see the module docstring).
    ``value_text=False``: column ``value`` is None instead of the value's
    JSON text (for a reader that does not read it: writing it is a third of
    a row's cost)."""
    get = event.get
    topic = get("topic", "")
    if type(topic) is not str:
        topic = str(topic)
    thing, action = _TOPICS.get(topic) or _topic_columns(topic)
    value = get("value", _ABSENT)
    columns = {
        "thingId": thing,
        "revision": get("revision"),
        "timestamp": get("timestamp"),
        "topic": topic,
        "action": action,
        "path": get("path"),
        "value": None if value is _ABSENT or not value_text else _value_json(value),
    }
    if isinstance(value, dict):  # its fields, under the event's own columns
        return {**value, **columns}
    return columns


_FROM_TOPIC = {"thingId": 0, "action": 1}
_AS_STORED = ("revision", "timestamp", "path")


def event_columns(events: list[Mapping[str, Any]], fields: Sequence[str]) -> dict[str, list[Any]]:
    """``fields`` of the rows of ``events``, a list per field: what reading
    those keys of each :func:`event_row` gives (missing: None), without
    building the rows (for Arrow record batches, docs/performance.md).
    Column ``value`` is the JSON text, written only if asked for."""
    columns: dict[str, list[Any]] = {}
    topics: list[str] | None = None
    values: list[Any] | None = None
    for name in fields:
        if name in _AS_STORED:
            columns[name] = [e.get(name) for e in events]
        elif name == "value":
            columns[name] = [
                None if (v := e.get("value", _ABSENT)) is _ABSENT else _value_json(v)
                for e in events
            ]
        elif name in _FROM_TOPIC or name == "topic":
            if topics is None:
                topics = [_topic_of(e) for e in events]
            if name == "topic":
                columns[name] = topics
            else:
                at = _FROM_TOPIC[name]
                columns[name] = [(_TOPICS.get(t) or _topic_columns(t))[at] for t in topics]
        else:  # a field of the value, when it is an object
            if values is None:
                values = [e.get("value") for e in events]
            columns[name] = [v.get(name) if isinstance(v, dict) else None for v in values]
    return columns


def _topic_of(event: Mapping[str, Any]) -> str:
    topic = event.get("topic", "")
    return topic if type(topic) is str else str(topic)


def _connect(
    url: str, options: Mapping[str, Any], timeout: float, tls: ClientTls | None
) -> DittoConnection:
    """A Ditto session as the options say (auth); ``wss://`` with ``tls``'s
    CA, client certificate and host name check (None: the system's CAs)."""
    user, password, token = (
        None if options.get(k) is None else str(options[k]) for k in _AUTH_OPTIONS
    )
    secure = tls.connect_options() if tls is not None and url.startswith("wss://") else {}
    return connect(
        url, user=user, password=password, token=token, connect_timeout=timeout, **secure
    )


def _source_error(url: str, request: ReadRequest | None, what: str) -> Exception:

    where = f"source {url}" + ("" if request is None else f" partition {request.partition}")
    return SourceError(f"{where}: {what}")


def _in_namespace(thing_id: str, namespace: str) -> bool:
    return namespace in ("", "*") or thing_id.split(":", 1)[0] == namespace


def list_things(
    ditto: DittoConnection, namespace: str, options: Mapping[str, Any], timeout: float
) -> list[str]:
    """The thing IDs to read, sorted: option ``things`` if given, else a
    search (``search_filter``, the namespace ``route`` unless ``*``)."""
    listed = options.get("things")
    if listed is not None:
        if isinstance(listed, str) or not isinstance(listed, list):
            raise ValueError("option 'things' must be a list of thing IDs")
        return sorted({str(t) for t in listed if _in_namespace(str(t), namespace)})
    pages = ditto.search(
        filter=options.get("search_filter"),
        options=f"size({SEARCH_PAGE}),sort(+thingId)",
        namespaces=None if namespace in ("", "*") else [namespace],
        fields="thingId",
        timeout=timeout,
    )
    with pages:
        return sorted({str(thing["thingId"]) for page in pages for thing in page})


def _row_without_value_text(event: Mapping[str, Any]) -> dict[str, Any]:
    return event_row(event, value_text=False)


def open_ditto_stream(
    url: str,
    request: ReadRequest,
    prefetch: int,
    timeout: float,
    *,
    columns: Collection[str] | None = None,
    tls: ClientTls | None = None,
) -> Iterator[list[Any]]:
    """The stream opener for ``ws://`` / ``wss://`` (``STREAM_OPENERS``):
    the events of this partition's things, as row batches of at most
    ``prefetch // 2`` events (what one Ditto ``request(n)`` replenishes),
    taken a batch at a time (``persisted_event_batches``).

    ``request.route`` is the namespace (``*``: all). Options: ``things``,
    ``search_filter``, the subscription's ``from_revision``, ``to_revision``,
    ``from_timestamp``, ``to_timestamp``, ``filter``, auth ``user`` /
    ``password`` / ``token``, and for streaming reads ``start`` / ``end``
    (thing ID -> last revision read: events ``start < revision <= end``).
    ``columns``: the columns the caller reads, if it knows (without
    ``value`` among them, rows carry no JSON text of the value). ``tls``:
    for ``wss://``, the CA to trust and a client certificate."""
    row = event_row if columns is None or "value" in columns else _row_without_value_text
    for events in _event_batches(url, request, prefetch, timeout, tls):
        yield list(map(row, events))  # a C loop per batch


def open_ditto_columns(
    url: str,
    request: ReadRequest,
    prefetch: int,
    timeout: float,
    fields: Sequence[str],
    tls: ClientTls | None = None,
) -> Iterator[dict[str, list[Any]]]:
    """:func:`open_ditto_stream`'s batches as columns: ``fields`` of the
    rows (:func:`event_columns`), for a reader that builds Arrow record
    batches from columns instead of rows."""
    for events in _event_batches(url, request, prefetch, timeout, tls):
        yield event_columns(events, fields)


def _event_batches(
    url: str, request: ReadRequest, prefetch: int, timeout: float, tls: ClientTls | None
) -> Iterator[list[Any]]:
    """The events of this partition's things, a batch at a time (see
    :func:`open_ditto_stream`)."""
    options = request.options
    start: Mapping[str, int] | None = options.get("start")
    end: Mapping[str, int] | None = options.get("end")
    base = {k: options[k] for k in _SUBSCRIBE_OPTIONS if options.get(k) is not None}
    with _connect(url, options, timeout, tls) as ditto:
        try:
            if end is not None:
                things = sorted(t for t in end if _in_namespace(t, request.route))
            else:
                things = list_things(ditto, request.route, options, timeout)
            yield from _histories(ditto, list(_reads(things, request, base, start, end)),
                                  prefetch, timeout)
        except DittoRemoteError as exc:
            raise _source_error(url, request, f"{exc.status} {exc}") from None
        except ConnectionClosed as exc:
            raise _source_error(url, request, f"connection lost: {exc}") from None


def _histories(
    ditto: DittoConnection,
    reads: list[tuple[str, dict[str, Any]]],
    prefetch: int,
    timeout: float,
) -> Iterator[list[Any]]:
    """The histories of ``reads`` in turn, a batch at a time. While one is
    read, the next ``AHEAD`` are subscribed paused with a head start
    (``persisted_event_batches(..., paused=True, head_start=HEAD_START)``):
    each is ``created`` and its first events are queued by the time it is
    read, so each thing but the first starts without a round trip, even when
    the things before it took less than one to read; the rest of its window
    is asked for at its turn (the rows stay in thing order)."""

    def subscribe(thing: str, bounds: dict[str, Any], paused: bool) -> EventBatches:
        return ditto.persisted_event_batches(
            thing, prefetch=prefetch, timeout=timeout, paused=paused,
            head_start=HEAD_START, **bounds
        )

    ahead: deque[EventBatches] = deque()  # reads[i + 1], reads[i + 2], ...
    try:
        for i, (thing, bounds) in enumerate(reads):
            paused = bool(ahead)
            batches = ahead.popleft() if paused else subscribe(thing, bounds, False)
            with batches:  # cancelled if the reader stops within it
                for j in range(i + 1 + len(ahead), min(i + 1 + AHEAD, len(reads))):
                    ahead.append(subscribe(*reads[j], True))
                if paused:
                    yield from _read_paused(batches, partial(subscribe, thing, bounds, False))
                else:
                    yield from batches
    finally:
        for waiting in ahead:
            waiting.close()


def _read_paused(batches: EventBatches, again: Callable[[], EventBatches]) -> Iterator[list[Any]]:
    """The batches of a subscription that waited paused; if it failed before
    its first batch (Ditto ends a subscription idle too long with 408), those
    of ``again()`` instead, whose answer stands."""
    try:
        first = next(batches)
    except StopIteration:
        return
    except DittoRemoteError:
        with again() as batches_again:
            yield from batches_again
        return
    yield first
    yield from batches


def _reads(
    things: list[str],
    request: ReadRequest,
    base: Mapping[str, Any],
    start: Mapping[str, int] | None,
    end: Mapping[str, int] | None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(thing, subscribe options) of each thing of this partition, in order."""
    for thing in things:
        if assigned(thing, request.partitions) != request.partition:
            continue
        bounds = dict(base)
        if end is not None:
            # Offsets hold the last revision read; a thing missing from
            # ``start`` is read from revision 1 (Ditto's first; a
            # to-revision of 0 would mean "the latest" to Ditto).
            lo = int((start or {}).get(thing, 0))
            hi = int(end[thing])
            if hi <= lo:
                continue
            bounds.update(from_revision=lo + 1, to_revision=hi)
        yield thing, bounds


def latest_revisions(
    url: str,
    namespace: str,
    options: Mapping[str, Any],
    timeout: float,
    tls: ClientTls | None = None,
) -> dict[str, int]:
    """Thing ID -> latest revision, for the things the reader reads (the
    streaming reader's latest offset). One ``fromHistoricalRevision: -1``
    subscription per thing: it answers with exactly the latest event."""
    out: dict[str, int] = {}
    with _connect(url, options, timeout, tls) as ditto:
        try:
            for thing in list_things(ditto, namespace, options, timeout):
                with ditto.subscribe_for_persisted_events(
                    thing, from_revision=-1, prefetch=1, timeout=timeout
                ) as events:
                    revisions = [int(e.get("revision", 0)) for e in events]
                out[thing] = max(revisions, default=0)
        except DittoRemoteError as exc:
            raise _source_error(url, None, f"{exc.status} {exc}") from None
        except ConnectionClosed as exc:
            raise _source_error(url, None, f"connection lost: {exc}") from None
    return out
