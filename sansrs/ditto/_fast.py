"""Hot paths of the Ditto cores: one ``next`` message per streamed item, so
its cost per item decides how fast history reaches Spark
(docs/performance.md, "Ditto history into Spark"; ``benchmarks/bench_ditto.py
--only core`` measures the cores alone).

- :func:`new_next`: the event built through a same-layout builder (as
  :mod:`._envelope` builds parsed envelopes): a plain class with the same
  slots is filled with plain stores and becomes the frozen class by
  ``__class__`` assignment (the frozen ``__init__`` costs an
  ``object.__setattr__`` per field);
- :func:`next_prefix`: the JSON text of a subscription's ``next`` messages
  up to the item, written once per subscription (the topic, headers and
  subscription ID are the same in every one), so each item costs one
  ``dumps`` of the item alone;
- :func:`message_text` and :func:`topic_base`: a message the client sends
  (``subscribe``, ``request``, ``cancel``) written from its subscription's
  topic text, kept from its subscribe, without a ``Topic`` and an
  ``Envelope`` built for each (about 230 instructions a message: three a
  thing for a history of a few events, docs/performance.md, "a thing's
  control path");
- :func:`plain_message`: the fields of a ``created``, ``next`` or
  ``complete`` as Ditto writes them (topic, headers, value, nothing else),
  for the client's control path (``DittoClient._control``): one C scan and
  a few type checks instead of the envelope, its topic's grammar and the
  dispatch, about 500 instructions a message, three a thing
  (docs/performance.md, "a thing's control path");
- :func:`identity_hash`: the state enums of the tables (``_tables``) hashed
  by identity, as in the other two protocols (two hashes a table lookup,
  a few a message: docs/performance.md, "a thing's control path").

The parsed values' own builders (``Envelope``, ``Topic``: ``_envelope``;
``Classified``: ``_messages``) live with them: those modules come before
this one.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Final

from .._enums import identity_hash
from ._envelope import _CONTAINERS, _NO_HEADERS, Headers, Topic, dumps, same_layout, scan_json
from .events import ItemsReceived, NextReceived

__all__ = [
    "identity_hash",
    "message_text",
    "new_items",
    "new_next",
    "next_prefix",
    "plain_message",
    "topic_base",
]

_new = object.__new__
_NextBuilder: Any = same_layout(NextReceived)
_ItemsBuilder: Any = same_layout(ItemsReceived)


def new_next(key: int, subscription_id: str, item: Any) -> NextReceived:
    """``NextReceived(...)`` without the frozen ``__init__``."""
    e = _new(_NextBuilder)
    e.key = key
    e.subscription_id = subscription_id
    e.item = item
    e.__class__ = NextReceived
    return e  # type: ignore[no-any-return]


# Alike in shape with new_next by design (the duplicates scan lists them):
# one builder per event, plain stores, no loop over field names.
def new_items(key: int, subscription_id: str, items: list[Any]) -> ItemsReceived:
    """``ItemsReceived(...)`` without the frozen ``__init__``."""
    e = _new(_ItemsBuilder)
    e.key = key
    e.subscription_id = subscription_id
    e.items = items
    e.__class__ = ItemsReceived
    return e  # type: ignore[no-any-return]


def next_prefix(topic: str, headers: Headers, subscription_id: str) -> str:
    """The text of a ``next`` message before its item: ``prefix + dumps(item)
    + "}}"`` is the message ``Envelope(...).to_text()`` writes. Empty when the
    prefix is not ASCII: :func:`~._envelope.dumps` may then have to write
    the whole message with ``\\u`` escapes, so it must see all of it."""
    text = dumps(
        {
            "topic": topic,
            "headers": headers.to_json(),
            "path": "/",
            "value": {"subscriptionId": subscription_id, "item": 0},
        }
    )
    if not text.isascii() or not text.endswith("0}}"):
        return ""
    return text[:-3]


def topic_base(topic: Topic) -> str:
    """The text of ``topic.with_action(topic.criterion, action)`` before the
    action: ``topic_base(t) + action`` is that topic's text."""
    channel = "twin/" if topic.group == "things" else ""
    return f"{topic.namespace}/{topic.entity_name}/{topic.group}/{channel}{topic.criterion}/"


def message_text(
    topic: str, headers: dict[str, Any], value: Any, fields: str | None = None
) -> str:
    """``Envelope(topic=topic, headers=Headers(headers), path="/",
    value=value, fields=fields).to_text()`` (``headers`` as ``to_json``
    gives them), without building the envelope."""
    out = {"topic": topic, "headers": headers, "path": "/", "value": value}
    if fields is not None:
        out["fields"] = fields
    return dumps(out)


#: The fields of a plain subscription message.
_PLAIN_KEYS: Final = frozenset({"topic", "headers", "path", "value"})


def plain_message(
    text: str, max_size: int
) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """``(topic, headers, value)`` of ``text`` when it is one compact JSON
    object with no fields but ``topic`` (a string), ``headers`` (an object
    whose values are no objects or arrays), ``path`` (a string) and
    ``value`` (an object): then ``parse_envelope(text)`` is the envelope of
    these (``headers`` as ``headers_from_json`` makes them, and ``path``),
    its checks passed. None for anything else, left to the full path
    (which answers errors), and for a text longer than ``max_size``."""
    if len(text) > max_size:
        return None
    try:
        obj, end = scan_json(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) or type(obj) is not dict or not obj.keys() <= _PLAIN_KEYS:
        return None
    get = obj.get
    topic, headers, value = get("topic"), get("headers", _NO_HEADERS), get("value")
    if (
        type(topic) is not str
        or type(headers) is not dict
        or type(value) is not dict
        or type(get("path", "/")) is not str
        # nested header values: the depth check is the full path's
        or any(map(isinstance, headers.values(), repeat(_CONTAINERS)))
    ):
        return None
    return topic, headers, value


