"""The Ditto Protocol envelope, its topic grammar and Ditto's error payload.

Parsing uses the stdlib ``json`` (no per-character work in Python); writing
reproduces Ditto's compact form: no whitespace, keys in the order
``ImmutablePayload.toJson`` writes them (docs/protocols/ditto.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ABSENT",
    "CONTENT_TYPE_JSON",
    "MAX_LONG",
    "MIN_LONG",
    "DittoError",
    "DittoException",
    "DittoRemoteError",
    "Envelope",
    "Headers",
    "MessageError",
    "Topic",
    "TopicError",
    "dumps",
    "headers_from_json",
    "item_envelope",
    "loads",
    "new_topic",
    "parse_envelope",
    "parse_topic",
    "same_layout",
    "scan_json",
]

MAX_LONG: Final = 2**63 - 1
MIN_LONG: Final = -(2**63)
CONTENT_TYPE_JSON: Final = "application/json"


class _Absent:
    """Marks a missing ``value`` (distinct from JSON ``null``)."""

    __slots__ = ()
    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Final = _Absent()


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN / Infinity; Ditto's parser does not.
    raise ValueError(f"invalid JSON literal {name}")


def _finite_float(text: str) -> float:
    # 1e999 parses as infinity, which no JSON text can carry back: the
    # answer echoing it could not be written. Refuse it as input instead.
    value = float(text)
    if value - value:  # inf - inf is nan (true), a finite value's 0.0 is false
        raise ValueError(f"JSON number {text[:40]} is out of range")
    return value


# Built once: json.loads / json.dumps with options build a new decoder or
# encoder on every call, a tenth of the cost of a small message.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ASCII_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)
# One JSON value per message, so the encoder's per-call set-up is a fifth
# of a small one's cost (docs/performance.md, "Ditto history into Spark"):
# the C encoder is built once (``encode`` builds one per call); it writes
# exactly what ``encode`` writes.


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_MAKE_ENCODER: Any = json.encoder.c_make_encoder  # type: ignore[attr-defined]
_C_ENCODE: Final[Any] = (
    None
    if _MAKE_ENCODER is None
    # No circular-reference markers: a cycle ends in RecursionError instead
    # of ValueError (callers treat both as "not JSON").
    else _MAKE_ENCODER(
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
)


#: The C encoder's chunks of a value's compact JSON (``"".join`` them), or
#: None where Python has no C encoder: what :func:`dumps` writes, for ASCII
#: text (a batch of items writes them without a call per item).
encode_chunks: Final[Any] = _C_ENCODE

#: ``scan_json(text, index)``: the JSON value that starts at ``index`` and
#: the index after it, by ``loads``'s rules (``StopIteration`` when none
#: starts there, ``ValueError`` or ``RecursionError`` for bad JSON). One C
#: call: ``loads`` adds two regex matches and Python calls around it.
scan_json: Final[Any] = _DECODER.scan_once  # type: ignore[attr-defined]


def loads(text: str) -> Any:
    """Parse JSON text; ``ValueError`` for anything Ditto's parser would reject."""
    try:
        return _DECODER.decode(text)
    except RecursionError as exc:  # deeply nested input
        raise ValueError("JSON nesting too deep") from exc


def dumps(value: Any) -> str:
    """Compact JSON as Ditto writes it (non-ASCII kept, no NaN).

    A lone surrogate (from a peer's ``"\\ud800"``) cannot travel in a UTF-8
    WebSocket text message, so such a message is written with ``\\u`` escapes.
    """
    text: str = _ENCODER.encode(value) if _C_ENCODE is None else "".join(_C_ENCODE(value, 0))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            ascii_text: str = _ASCII_ENCODER.encode(value)
            return ascii_text
    return text


#: Deepest JSON nesting accepted in a header value. Headers are echoed back,
#: and a value nested close to the recursion limit would make writing the
#: answer fail deeper in the stack than parsing it did.
MAX_HEADER_DEPTH: Final = 32


def _shallow(value: Any) -> bool:
    """True when ``value`` nests at most ``MAX_HEADER_DEPTH`` deep (iterative walk)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_HEADER_DEPTH:
            return False
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return True


def show(value: Any) -> str:
    """A value for an error message: scalars as JSON (cut at 100), containers by kind."""
    if isinstance(value, dict):
        return "JSON object"
    if isinstance(value, list):
        return "JSON array"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 100 else text[:100] + "..."


class MessageError(ValueError):
    """A message does not follow the Ditto Protocol; carries the error to answer with."""

    def __init__(self, error: DittoError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True, slots=True, kw_only=True)
class DittoError:
    """A ``DittoRuntimeException`` as JSON: ``status``, ``error``, ``message`` and the optionals."""

    status: int
    error: str
    message: str
    description: str | None = None
    href: str | None = None

    def exception(self) -> DittoRemoteError:
        """This error as a typed exception (``error_code`` = ``status``)."""
        return DittoRemoteError(self)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "error": self.error, "message": self.message}
        if self.description is not None:
            out["description"] = self.description
        if self.href is not None:
            out["href"] = self.href
        return out

    @classmethod
    def from_json(cls, value: Any) -> DittoError:
        """Read an error object; ``MessageError`` (json.invalid) if it is not one."""
        if not isinstance(value, dict):
            raise MessageError(json_invalid("The error is not a JSON object."))
        status = value.get("status")
        if type(status) is not int:
            raise MessageError(json_invalid("The error has no integer 'status'."))
        optional: dict[str, str | None] = {}
        for key in ("error", "message", "description", "href"):
            item = value.get(key)
            if item is not None and not isinstance(item, str):
                raise MessageError(json_invalid(f"The error field '{key}' is not a string."))
            optional[key] = item
        return cls(
            status=status,
            error=optional["error"] or "",
            message=optional["message"] or "",
            description=optional["description"],
            href=optional["href"],
        )


class DittoException(Exception):
    """An error Ditto reports (a ``DittoError``: ``status``, ``code``,
    ``message``, ``description``, ``href``): an application error, e.g. 404
    for an unknown thing, never a protocol violation (that is
    ``RemoteProtocolError``). ``error_code`` is the status, as in the core's
    ``ProtocolError``s; ``message`` is ``"<code>: <message>"``.

    A server's Publisher signals it to fail a subscription with ``error``; a
    client receives a ``DittoRemoteError``."""

    def __init__(self, error: DittoError) -> None:
        self.message = f"{error.error}: {error.message}"
        super().__init__(self.message)
        self.error = error
        self.status = self.error_code = error.status
        self.code = error.error
        self.description = error.description
        self.href = error.href


class DittoRemoteError(DittoException):
    """Ditto answered with an error (``failed``, or an error response)."""


JSON_INVALID_DESCRIPTION: Final = (
    "Check if the JSON was valid (e.g. on https://jsonlint.com) and if it was in required format."
)


def _bad_request(error: str, message: str, description: str) -> DittoError:
    return DittoError(status=400, error=error, message=message, description=description)


def json_invalid(message: str) -> DittoError:
    return _bad_request("json.invalid", message, JSON_INVALID_DESCRIPTION)


def json_field_missing(pointer: str) -> DittoError:
    return _bad_request(
        "json.field.missing",
        f"JSON did not include required <{pointer}> field!",
        "Check if all required JSON fields were set.",
    )


def unknown_topic_path(topic: str) -> DittoError:
    return _bad_request(
        "protocoladapter:unknown.topicpath",
        f"The topic path '{topic}' is not supported.",
        "Check if you specified a correct topic path.",
    )


class Headers(Mapping[str, Any]):
    """Ditto headers: names case-insensitive, case-preserving, insertion-ordered.

    Values are any JSON value (the schema allows booleans and arrays).
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        # lower-cased name -> (name as given, value)
        self._items: dict[str, tuple[str, Any]] = {}
        if items:
            for name, value in items.items():
                self._items[name.lower()] = (name, value)

    def __getitem__(self, name: str) -> Any:
        return self._items[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):  # names compare case-insensitively
            return {k: v for k, (_, v) in self._items.items()} == {
                k: v for k, (_, v) in other._items.items()
            }
        if isinstance(other, Mapping):
            return self == Headers(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items))

    def __repr__(self) -> str:
        return f"Headers({self.to_json()!r})"

    def with_header(self, name: str, value: Any) -> Headers:
        """A copy with ``name`` set; an existing name keeps its spelling and position."""
        copy = Headers()
        copy._items = dict(self._items)
        key = name.lower()
        old = copy._items.get(key)
        copy._items[key] = (old[0] if old else name, value)
        return copy

    def to_json(self) -> dict[str, Any]:
        return dict(self._items.values())

    @property
    def correlation_id(self) -> str | None:
        item = self._items.get("correlation-id")  # Mapping.get costs a KeyError
        return item[1] if item is not None and isinstance(item[1], str) else None


class TopicError(ValueError):
    """The topic string does not follow the grammar."""


_GROUPS: Final = frozenset({"things", "policies", "connections"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Topic:
    """``<namespace>/<entityName>/<group>[/<channel>]/<criterion>[/<action>]``.

    ``channel`` is ``"twin"``, ``"live"`` or ``None`` (policies and connections
    have none; a things topic may leave it out). ``action`` may contain ``/``
    (message subjects); it is ``None`` for criteria without one (``errors``).
    """

    namespace: str
    entity_name: str
    group: str
    channel: str | None
    criterion: str
    action: str | None = None

    def __str__(self) -> str:
        parts = [self.namespace, self.entity_name, self.group]
        if self.channel is not None:
            parts.append(self.channel)
        parts.append(self.criterion)
        if self.action is not None:
            parts.append(self.action)
        return "/".join(parts)

    @property
    def entity_id(self) -> str:
        """``<namespace>:<entityName>`` (``entityIdFrom``)."""
        return f"{self.namespace}:{self.entity_name}"

    def with_action(self, criterion: str, action: str | None) -> Topic:
        """Same entity, ``twin`` channel for things (Ditto always emits twin topics)."""
        channel = "twin" if self.group == "things" else None
        return new_topic(self.namespace, self.entity_name, self.group, channel, criterion, action)


def same_layout(cls: type) -> Any:
    """A plain class with the slots of ``cls`` (a frozen, slotted dataclass)
    in the same order: filled with plain stores, it becomes a ``cls`` by
    ``__class__`` assignment (the layouts are the same), a fifth of the
    frozen ``__init__``'s cost (one ``object.__setattr__`` per field)."""
    return type(f"_{cls.__name__}Builder", (), {"__slots__": cls.__dict__["__slots__"]})


_TopicBuilder: Any = same_layout(Topic)


# Alike in shape with the other builders by design (the duplicates scan
# lists them): one per class, plain stores, no loop over field names.

def new_topic(
    namespace: str,
    entity_name: str,
    group: str,
    channel: str | None,
    criterion: str,
    action: str | None = None,
) -> Topic:
    """``Topic(...)`` without the frozen ``__init__`` (every message the
    cores parse or write has a topic: docs/performance.md, "a thing's
    control path")."""
    t = _new(_TopicBuilder)
    t.namespace = namespace
    t.entity_name = entity_name
    t.group = group
    t.channel = channel
    t.criterion = criterion
    t.action = action
    t.__class__ = Topic
    return t  # type: ignore[no-any-return]


def parse_topic(text: str) -> Topic:
    parts = text.split("/")
    if len(parts) < 4 or not parts[0] or not parts[1]:
        raise TopicError(f"topic {text!r} has too few segments")
    namespace, name, group = parts[0], parts[1], parts[2]
    if group not in _GROUPS:
        raise TopicError(f"unknown group {group!r}")
    rest = parts[3:]
    channel: str | None = None
    if rest[0] in ("twin", "live"):
        if group != "things":
            raise TopicError(f"group {group!r} takes no channel")
        channel, rest = rest[0], rest[1:]
    if not rest or not rest[0]:
        raise TopicError(f"topic {text!r} has no criterion")
    action = "/".join(rest[1:]) if len(rest) > 1 else None
    return new_topic(namespace, name, group, channel, rest[0], action)


#: Envelope keys after ``value`` in the order Ditto writes them.
_TRAILING_KEYS: Final = ("extra", "status", "revision", "timestamp", "metadata", "fields")


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """One Ditto Protocol message: absent fields are ``None``, absent ``value`` is ``ABSENT``."""

    topic: str
    headers: Headers
    path: str = "/"
    value: Any = ABSENT
    extra: Any = None
    status: int | None = None
    revision: int | None = None
    timestamp: str | None = None
    metadata: Any = None
    fields: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "topic": self.topic,
            "headers": self.headers.to_json(),
            "path": self.path,
        }
        if self.value is not ABSENT:
            out["value"] = self.value
        for key in _TRAILING_KEYS:
            item = getattr(self, key)
            if item is not None:
                out[key] = item
        return out

    def to_text(self) -> str:
        return dumps(self.to_json())


def envelope_from_json(obj: Any) -> Envelope:
    """Build an ``Envelope`` from a parsed object; ``MessageError`` when it is not one.

    Every message and every streamed item goes through here: the checks are
    written out field by field and the value is built through a same-layout
    builder (see ``_EnvelopeBuilder``), which halves the cost per message
    (docs/performance.md, "Ditto history into Spark")."""
    if not isinstance(obj, dict):
        raise MessageError(json_invalid("The Ditto Protocol message is not a JSON object."))
    get = obj.get
    topic = get("topic")
    if type(topic) is not str:
        if topic is None:
            raise MessageError(json_field_missing("/topic"))
        if not isinstance(topic, str):
            raise MessageError(json_invalid("The field 'topic' is not a string."))
    headers = get("headers", _NO_HEADERS)
    if not isinstance(headers, dict):
        raise MessageError(json_invalid("The field 'headers' is not a JSON object."))
    for value in headers.values():
        if isinstance(value, _CONTAINERS) and not _shallow(value):
            raise MessageError(json_invalid("A header value is nested too deeply."))
    path = get("path", "/")
    if not isinstance(path, str):
        raise MessageError(json_invalid("The field 'path' is not a string."))
    status = get("status")
    if status is not None and type(status) is not int:
        raise MessageError(json_invalid("The field 'status' is not an integer."))
    revision = get("revision")
    if revision is not None and type(revision) is not int:
        raise MessageError(json_invalid("The field 'revision' is not an integer."))
    timestamp = get("timestamp")
    if timestamp is not None and not isinstance(timestamp, str):
        raise MessageError(json_invalid("The field 'timestamp' is not a string."))
    fields = get("fields")
    if fields is not None and not isinstance(fields, str):
        raise MessageError(json_invalid("The field 'fields' is not a string."))
    e = _new(_EnvelopeBuilder)
    e.topic = topic
    e.headers = headers_from_json(headers)
    e.path = path
    e.value = get("value", ABSENT)
    e.extra = get("extra")
    e.status = status
    e.revision = revision
    e.timestamp = timestamp
    e.metadata = get("metadata")
    e.fields = fields
    e.__class__ = Envelope
    return e  # type: ignore[no-any-return]


_new = object.__new__
_NO_HEADERS: Final[dict[str, Any]] = {}
_CONTAINERS: Final = (dict, list)
_EnvelopeBuilder: Any = same_layout(Envelope)


def headers_from_json(headers: dict[str, Any]) -> Headers:
    """``Headers(headers)`` of a parsed JSON object, without the ``Mapping``
    calls (its values already checked)."""
    parsed = _new(Headers)
    parsed._items = {name.lower(): (name, value) for name, value in headers.items()}
    return parsed


def item_envelope(item: Any) -> Envelope | None:
    """A streamed item as an ``Envelope`` when it is a Ditto Protocol message
    (an object with a string ``topic`` that passes the checks), else None."""
    if isinstance(item, dict) and isinstance(item.get("topic"), str):
        try:
            return envelope_from_json(item)
        except MessageError:
            return None
    return None


def parse_envelope(text: str) -> Envelope:
    """Parse one text message; ``MessageError`` carries Ditto's error for bad input."""
    try:
        obj = loads(text)
    except ValueError:
        excerpt = text if len(text) <= 100 else text[:100] + "..."
        raise MessageError(json_invalid(f"Failed to parse JSON string '{excerpt}'!")) from None
    return envelope_from_json(obj)
