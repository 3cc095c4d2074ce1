"""Streaming and search subscription messages: typed values, decoding, encoding.

Field names and error payloads follow docs/protocols/ditto.md (messages, errors).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final, TypeVar

from .._errors import LocalProtocolError
from . import _envelope as env

__all__ = [
    "COMMAND_ACTIONS",
    "EVENT_ACTIONS",
    "RULE_3_9_MESSAGE",
    "Kind",
    "SearchOptions",
    "SubscribeOptions",
    "check_instant",
    "classify",
    "classify_topic",
    "format_instant",
    "valid_instant",
]

STREAMING: Final = "streaming"
SEARCH: Final = "search"
SUBSCRIBE_PERSISTED: Final = "subscribeForPersistedEvents"
SEARCH_SUBSCRIBE: Final = "subscribe"

COMMAND_ACTIONS: Final = frozenset({"request", "cancel"})
EVENT_ACTIONS: Final = frozenset({"created", "next", "complete", "failed"})

#: Pekko's text for request(n <= 0) (ReactiveStreamsCompliance.scala).
RULE_3_9_MESSAGE: Final = (
    "The number of requested elements must be > 0 (see reactive-streams specification, rule 3.9)"
)
CANCELLED_MESSAGE: Final = (
    "This subscription is considered cancelled. No more messages are processed."
)


class Kind(enum.Enum):
    """Which protocol a subscription speaks."""

    #: ``<ns>/<name>/<group>[/twin]/streaming/<action>``: one event per ``next``.
    STREAMING = "streaming"
    #: ``_/_/things/twin/search/<action>``: one page (array of things) per ``next``.
    SEARCH = "search"

    def error_code(self, suffix: str) -> str:
        """``streaming.subscription.<x>`` or ``thing-search:subscription.<x>``."""
        if self is Kind.STREAMING:
            return f"streaming.subscription.{suffix}"
        return f"thing-search:subscription.{suffix}"


def protocol_error(kind: Kind, message: str) -> env.DittoError:
    return env.DittoError(status=400, error=kind.error_code("protocol.error"), message=message)


def not_found_error(kind: Kind, subscription_id: str) -> env.DittoError:
    return env.DittoError(
        status=404,
        error=kind.error_code("not.found"),
        message=f"No subscription with ID '{subscription_id}' exists.",
    )


def timeout_error(kind: Kind, subscription_id: str) -> env.DittoError:
    return env.DittoError(
        status=408,
        error=kind.error_code("timeout"),
        message=f"The subscription '{subscription_id}' stopped due to a lack of interaction.",
    )


#: What a Publisher failure other than ``DittoException`` becomes (docs/protocols/ditto.md).
INTERNAL_ERROR: Final = env.DittoError(
    status=500,
    error="internalerror",
    message="There was a rare case of an unexpected internal error.",
    description="Please contact the service team or your administrator.",
)


def format_instant(moment: datetime) -> str:
    """Java's ``Instant.toString()``: UTC, ``Z``, fraction in groups of 3 digits, none if 0."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    micros = utc.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"


#: What Java's ``Instant.parse`` (ISO_INSTANT) reads: a date, a time with
#: optional seconds and up to 9 fraction digits, in UTC (``Z``).
_INSTANT: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?[Zz]", re.ASCII
)


def valid_instant(text: str) -> bool:
    """Whether Ditto can read ``text`` as an instant (a real date and time:
    ``2022-13-45T...`` is not)."""
    match = _INSTANT.fullmatch(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(g or 0) for g in match.groups())
    try:
        datetime(year, month, day, hour, minute, second)
    except ValueError:
        return False
    return True


def check_instant(name: str, value: datetime | str | None) -> str | None:
    """``value`` as Ditto reads an instant, checked here: Ditto answers one
    it cannot parse with a 500 that names no subscribe (docs/protocols/ditto.md)."""
    if value is None:
        return None
    if isinstance(value, str):
        if not valid_instant(value):
            raise LocalProtocolError(
                f"{name} must be an ISO-8601 instant in UTC such as "
                f"'2022-10-25T14:00:00Z' (Java's Instant.parse), got {value!r}"
            )
        return value
    if isinstance(value, datetime):
        try:
            return format_instant(value)
        except ValueError as exc:
            raise LocalProtocolError(f"{name}: {exc}") from None
    raise LocalProtocolError(f"{name} must be a datetime or ISO-8601 string, got {value!r}")


S = TypeVar("S")


def of_kind(
    streams: Mapping[str, S],
    searches: Mapping[str, S],
    sid: str,
    kind: Kind | None,
    ended: Callable[[S], bool],
) -> S | None:
    """The subscription ``sid`` of ``kind``: Ditto numbers histories and
    searches apart, so an ID alone (``kind`` None) names one only while the
    other kind has no open (not ``ended``) subscription with it; else
    ``LocalProtocolError``. Both roles' ``state_of``, ``request``, ..."""
    if kind is not None:
        return (streams if kind is Kind.STREAMING else searches).get(sid)
    stream, search = streams.get(sid), searches.get(sid)
    if stream is None or search is None:
        return stream if stream is not None else search
    if ended(stream) and not ended(search):
        return search
    if ended(search) and not ended(stream):
        return stream
    raise LocalProtocolError(
        f"a history and a search subscription both have ID {sid!r}: name its kind"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeOptions:
    """The value of ``subscribeForPersistedEvents``; ``None`` = not given.

    Ditto defaults a missing ``fromHistoricalRevision`` to 0 and a missing
    ``toHistoricalRevision`` to Long.MAX; timestamps are ISO-8601 instants.
    """

    from_historical_revision: int | None = None
    to_historical_revision: int | None = None
    from_historical_timestamp: str | None = None
    to_historical_timestamp: str | None = None
    filter: str | None = None

    def to_json(self, *, explicit_range: bool = False) -> dict[str, Any]:
        """The value in Ditto's key order; ``explicit_range`` writes both revisions, like Ditto."""
        out: dict[str, Any] = {}
        lo, hi = self.from_historical_revision, self.to_historical_revision
        if explicit_range:
            lo = 0 if lo is None else lo
            hi = env.MAX_LONG if hi is None else hi
        if lo is not None:
            out["fromHistoricalRevision"] = lo
        if hi is not None:
            out["toHistoricalRevision"] = hi
        if self.from_historical_timestamp is not None:
            out["fromHistoricalTimestamp"] = self.from_historical_timestamp
        if self.to_historical_timestamp is not None:
            out["toHistoricalTimestamp"] = self.to_historical_timestamp
        if self.filter is not None:
            out["filter"] = self.filter
        return out

    @classmethod
    def from_json(cls, value: Any) -> SubscribeOptions:
        if value is env.ABSENT or value is None:
            return cls()
        if not isinstance(value, dict):
            raise env.MessageError(
                env.json_invalid("The value of the subscribe is not a JSON object.")
            )
        revisions = [_long_field(value, key) for key in _REVISION_KEYS]
        strings = []
        for key in ("fromHistoricalTimestamp", "toHistoricalTimestamp", "filter"):
            item = value.get(key)
            if item is not None and not isinstance(item, str):
                raise env.MessageError(env.json_invalid(f"Value for <{key}> is not a string."))
            if item is not None and key != "filter" and not valid_instant(item):
                raise env.MessageError(
                    env.json_invalid(f"Value <{item}> for <{key}> is no instant.")
                )
            strings.append(item)
        return cls(
            from_historical_revision=revisions[0],
            to_historical_revision=revisions[1],
            from_historical_timestamp=strings[0],
            to_historical_timestamp=strings[1],
            filter=strings[2],
        )


_REVISION_KEYS: Final = ("fromHistoricalRevision", "toHistoricalRevision")


def _long_field(value: dict[str, Any], key: str) -> int | None:
    item = value.get(key)
    if item is None:
        return None
    if type(item) is not int or not env.MIN_LONG <= item <= env.MAX_LONG:
        raise env.MessageError(
            env.json_invalid(f"Value <{env.show(item)}> for <{key}> is not of type <long>!")
        )
    return item


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchOptions:
    """The value of a search ``subscribe`` plus the envelope's ``fields``."""

    filter: str | None = None
    options: str | None = None
    namespaces: tuple[str, ...] | None = None
    fields: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.filter is not None:
            out["filter"] = self.filter
        if self.options is not None:
            out["options"] = self.options
        if self.namespaces is not None:
            out["namespaces"] = list(self.namespaces)
        return out

    @classmethod
    def from_envelope(cls, envelope: env.Envelope) -> SearchOptions:
        value = envelope.value
        if value is env.ABSENT or value is None:
            value = {}
        if not isinstance(value, dict):
            raise env.MessageError(
                env.json_invalid("The value of the subscribe is not a JSON object.")
            )
        strings = []
        for key in ("filter", "options"):
            item = value.get(key)
            if item is not None and not isinstance(item, str):
                raise env.MessageError(env.json_invalid(f"Value for <{key}> is not a string."))
            strings.append(item)
        namespaces = value.get("namespaces")
        if namespaces is not None and (
            not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces)
        ):
            raise env.MessageError(
                env.json_invalid("Value for <namespaces> is not an array of strings.")
            )
        return cls(
            filter=strings[0],
            options=strings[1],
            namespaces=None if namespaces is None else tuple(namespaces),
            fields=envelope.fields,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Classified:
    """A streaming/search message: its topic, kind, action and decoded envelope."""

    topic: env.Topic
    kind: Kind
    action: str  # "subscribe" for both subscribe actions


_ClassifiedBuilder: Any = env.same_layout(Classified)


# Alike in shape with the other builders by design (see env.new_topic).

def _classified(topic: env.Topic, kind: Kind, action: str) -> Classified:
    """``Classified(...)`` without the frozen ``__init__`` (as ``env.new_topic``)."""
    c = _new(_ClassifiedBuilder)
    c.topic = topic
    c.kind = kind
    c.action = action
    c.__class__ = Classified
    return c  # type: ignore[no-any-return]


_new = object.__new__


def classify(envelope: env.Envelope) -> Classified | env.Topic:
    """Sort a message: a streaming/search one, or another Ditto topic (returned as is).

    ``MessageError`` with ``protocoladapter:unknown.topicpath`` for a topic that
    breaks the grammar, a ``live`` streaming topic or an unknown action.
    """
    text = envelope.topic
    return _classify_cached(text) if len(text) <= _CACHED_TOPIC else classify_topic(text)


def classify_topic(text: str) -> Classified | env.Topic:
    """:func:`classify` by the topic string."""
    try:
        topic = env.parse_topic(text)
    except env.TopicError:
        raise env.MessageError(env.unknown_topic_path(text)) from None
    if topic.criterion == STREAMING:
        # things: twin only (Ditto answers live, and no channel, as unknown)
        if (topic.group == "things" and topic.channel != "twin") or topic.action is None:
            raise env.MessageError(env.unknown_topic_path(text))
        action = topic.action
        if action == SUBSCRIBE_PERSISTED:
            action = "subscribe"
        elif action not in COMMAND_ACTIONS and action not in EVENT_ACTIONS:
            raise env.MessageError(env.unknown_topic_path(text))
        return _classified(topic, Kind.STREAMING, action)
    if topic.criterion == SEARCH:
        action = topic.action or ""
        if action == "errors":  # _/_/things/search/errors: an error response
            return topic
        placeholders = topic.namespace == "_" and topic.entity_name == "_"
        if (
            topic.group != "things"
            or topic.channel != "twin"
            or not placeholders
            or (
                action != SEARCH_SUBSCRIBE
                and action not in COMMAND_ACTIONS
                and action not in EVENT_ACTIONS
            )
        ):
            raise env.MessageError(env.unknown_topic_path(text))
        return _classified(topic, Kind.SEARCH, action)
    return topic


#: The messages of one subscription share their topic, and parsing it costs
#: as much as the JSON of a small message: results (frozen) are cached for
#: topics up to this long, so a peer cannot make the cache hold much.
_CACHED_TOPIC: Final = 256
_classify_cached: Final = lru_cache(maxsize=256)(classify_topic)


def subscription_id_of(envelope: env.Envelope) -> str:
    value = envelope.value
    if not isinstance(value, dict):
        if value is env.ABSENT or value is None:
            raise env.MessageError(env.json_field_missing("/subscriptionId"))
        raise env.MessageError(env.json_invalid("The value is not a JSON object."))
    sid = value.get("subscriptionId")
    if sid is None:
        raise env.MessageError(env.json_field_missing("/subscriptionId"))
    if not isinstance(sid, str):
        raise env.MessageError(
            env.json_invalid(f"Value <{env.show(sid)}> for <subscriptionId> is not a string.")
        )
    return sid


def demand_of(envelope: env.Envelope) -> int:
    """``demand``; missing is 0 (then rule 3.9), non-long is ``json.invalid``."""
    assert isinstance(envelope.value, dict)
    demand = envelope.value.get("demand")
    if demand is None:
        return 0
    if type(demand) is not int or not env.MIN_LONG <= demand <= env.MAX_LONG:
        raise env.MessageError(
            env.json_invalid(f"Value <{env.show(demand)}> for <demand> is not of type <long>!")
        )
    return demand


def envelope(
    topic: env.Topic, headers: env.Headers, value: Any, *, fields: str | None = None
) -> str:
    return env.Envelope(
        topic=str(topic), headers=headers, path="/", value=value, fields=fields
    ).to_text()
