"""The learned-prefix path of a :class:`~._client.DittoClient`'s history
items (its methods, bound in its class): the text every ``next`` of one
subscription starts with, learned from one the full path parsed, then each
item taken by parsing the item alone, one at a time or a run at once
(docs/performance.md, "Ditto history into Spark")."""

from __future__ import annotations

from typing import Any

from ..streams import MAX_DEMAND
from . import _envelope as env
from ._client_state import MAX_SHORTCUT_MISSES, MAX_SHORTCUTS, MISS, DittoClientState, Shortcut
from ._fast import new_next, next_prefix
from ._tables import ClientState

__all__ = ["learn_shortcut", "next_shortcut", "shortcut_item", "shortcut_items"]


def shortcut_items(self: DittoClientState, texts: list[str], i: int, shortcut: Shortcut) -> Any:
    """``_shortcut_item`` of ``texts[i]`` and of the texts after it while
    each is taken: their items (at least one), or ``MISS``. What one at
    a time checks per message is checked once where it cannot change
    between them (the state and demand only change on the full path;
    the size limit holds for the longest), and the demand is counted
    once for them all."""
    sub = shortcut.sub
    demand = sub.demand
    if sub.state is not ClientState.ACTIVE or not demand:
        return MISS
    stop_at = len(texts) if demand == MAX_DEMAND else min(len(texts), i + demand)
    if max(map(len, texts[i:stop_at])) > self.config.max_message_size:
        item = self._shortcut_item(texts[i], shortcut)  # one at a time, then
        return MISS if item is MISS else [item]
    prefix, cut = shortcut.prefix, shortcut.cut
    scan = env.scan_json
    items: list[Any] = []
    take = items.append
    j = i
    try:
        while j < stop_at:
            text = texts[j]
            if not text.startswith(prefix):
                break
            item, stop = scan(text, cut)
            if text[stop:] != "}}":  # whitespace or more after the item
                break
            take(item)
            j += 1
    except (StopIteration, ValueError, RecursionError):
        pass  # not one JSON value: the full path decides
    if not items:
        return MISS
    if demand != MAX_DEMAND:
        sub.demand = demand - len(items)
    shortcut.hits += len(items)
    return items


def next_shortcut(self: DittoClientState, text: str, shortcut: Shortcut) -> bool:
    """A history ``next`` by its learned prefix: True when taken, False
    to leave the message to the full path (``_receive``).

    ``text`` is ``prefix + item + "}}"``: the prefix is the text of the
    envelope up to the item, written from an earlier ``next`` of the
    subscription that the full path parsed and checked (topic, headers,
    ``path``, ``subscriptionId``), so only the item is left to parse,
    and it is taken only when it parses as one JSON value (then the
    whole message is that envelope with that item, what the full path
    would find). Anything else (another subscription, a state or demand
    the table must see, bad JSON) takes the full path, which answers it
    as before. Per event this saves parsing the envelope around the
    item, classifying its topic and the field checks
    (docs/performance.md, "Ditto history into Spark")."""
    item = self._shortcut_item(text, shortcut)
    if item is MISS:
        return False
    self._events.append(new_next(shortcut.sub.key, shortcut.sid, item))
    return True


def shortcut_item(self: DittoClientState, text: str, shortcut: Shortcut) -> Any:
    """The item of ``text`` taken by ``shortcut`` (its demand counted),
    or ``MISS``: the full path must decide (see ``_next_shortcut``)."""
    sub = shortcut.sub
    size = len(text)
    if (
        sub.state is not ClientState.ACTIVE
        or not sub.demand
        or size > self.config.max_message_size
        or not text.endswith("}}")
    ):
        return MISS
    try:
        item, stop = env.scan_json(text, shortcut.cut)
    except (StopIteration, ValueError, RecursionError):
        return MISS
    if stop != size - 2:  # whitespace or more after the item: the full path decides
        return MISS
    if sub.demand != MAX_DEMAND:
        sub.demand -= 1
    shortcut.hits += 1
    return item


def learn_shortcut(self: DittoClientState, topic: str, headers: env.Headers, sid: str) -> None:
    """After a history ``next`` took the full path: its prefix, for the next ones."""
    sub = self._streams.get(sid)
    if sub is None or sub.state is not ClientState.ACTIVE:
        return
    kept = []
    for old in self._shortcuts:
        if old.sub is sub:
            sub.misses = sub.misses + 1 if old.hits == 0 else 0
        elif old.sub.state is ClientState.ACTIVE:
            kept.append(old)
    self._shortcuts = kept
    if sub.misses < MAX_SHORTCUT_MISSES:
        prefix = next_prefix(topic, headers, sid)
        if prefix:
            kept.insert(0, Shortcut(prefix, sid, sub))
            del kept[MAX_SHORTCUTS:]
    self._prefixes = tuple([shortcut.prefix for shortcut in kept])

