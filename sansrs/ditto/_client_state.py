"""What :class:`~._client.DittoClient` is made of, as its concerns kept in
modules of their own see it: a subscription's state (:class:`ClientSubscription`,
its state from ``CLIENT_TRANSITIONS``), a learned ``next`` prefix
(:class:`Shortcut`) and its limits, and the client as :mod:`._client_intents`
(what the application asks) and :mod:`._client_shortcut` (the learned
prefixes) work on it. Their functions are the client's methods (bound in its
class, so the calls stay the calls they were); this protocol is the client
they are typed against, without importing it (no cycle)."""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Protocol

from . import _envelope as env
from ._config import DittoClientConfig
from ._fast import topic_base
from ._messages import Kind
from ._tables import CLIENT_TRANSITIONS, ClientInput, ClientState
from .events import Event

__all__ = [
    "MAX_SHORTCUTS",
    "MAX_SHORTCUT_MISSES",
    "MISS",
    "NEXT_KEEPS",
    "ClientSubscription",
    "DittoClientState",
    "Shortcut",
    "waits_for_late_events",
]


#: States an item (NEXT) leaves as they are, read from the table: the hot
#: path skips the lookup for them (docs/performance.md).
NEXT_KEEPS: Final = tuple(  # a tuple: "in" compares by identity, no enum hash
    state for (state, what), after in CLIENT_TRANSITIONS.items()
    if what is ClientInput.NEXT and after is state
)


class ClientSubscription:
    __slots__ = (
        "base", "correlation_id", "demand", "key", "kind", "misses", "sid", "state", "topic"
    )

    def __init__(self, key: int, kind: Kind, topic: env.Topic, correlation_id: str | None) -> None:
        self.key = key
        self.kind = kind
        self.topic = topic  # with criterion, no action
        self.base = topic_base(topic)  # its messages' topic text: base + action
        self.correlation_id = correlation_id
        self.sid: str | None = None
        self.state = ClientState.SUBSCRIBING
        self.demand = 0
        self.misses = 0  # next-message shortcuts learned for it that never matched


class Shortcut:
    """What every ``next`` of one streaming subscription starts with (see
    ``DittoClient._next_shortcut``), learned from one that took the full path."""

    __slots__ = ("cut", "hits", "prefix", "sid", "sub")

    def __init__(self, prefix: str, sid: str, sub: ClientSubscription) -> None:
        self.prefix = prefix
        self.cut = len(prefix)
        self.sid = sid
        self.sub = sub
        self.hits = 0


#: A subscription whose learned shortcuts missed this many times in a row
#: (its ``next`` messages differ in their headers) learns no more of them.
MAX_SHORTCUT_MISSES: Final = 4
#: Subscriptions whose shortcuts are kept (tried in turn on every message).
MAX_SHORTCUTS: Final = 4
#: "No item": the message is left to the full path.
MISS: Final = object()


def waits_for_late_events(sub: ClientSubscription) -> bool:
    return sub.state is ClientState.CANCELLED  # only waiting for late events


class DittoClientState(Protocol):
    """The :class:`~._client.DittoClient` as its parts see it."""

    config: DittoClientConfig
    _keys: int
    _pending: dict[int, ClientSubscription]
    _streams: dict[str, ClientSubscription]
    _searches: dict[str, ClientSubscription]
    _cancelled: dict[tuple[Kind, str], None]
    _events: deque[Event]
    _out: list[str]
    _shortcuts: list[Shortcut]
    _prefixes: tuple[str, ...]

    def _ids(self, kind: Kind) -> dict[str, ClientSubscription]: ...
    def _find(self, sid: str, kind: Kind | None) -> ClientSubscription | None: ...
    def _local_target(
        self, sid: str, what: ClientInput, kind: Kind | None
    ) -> ClientSubscription: ...
    def _remember_cancelled(self, kind: Kind, sid: str) -> None: ...
    def _send(
        self, base: str, action: str, headers: dict[str, Any], value: Any, fields: str | None
    ) -> None: ...
    def _shortcut_item(self, text: str, shortcut: Shortcut) -> Any: ...
