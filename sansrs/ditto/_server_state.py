"""What :class:`~._server.DittoServer` is made of, as its concerns kept in
modules of their own see it: a subscription's state
(:class:`ServerSubscription`, its state from ``SERVER_TRANSITIONS``), the
Subscriber it relays its Publisher through (:class:`Relaying`), and the
server as :mod:`._server_intents` (what the application decides),
:mod:`._server_upstream` (the application's Publisher, its items as
``next`` messages) and :mod:`._server_output` (the messages it writes) work
on it. Their functions are the server's methods (bound in its class, so the
calls stay the calls they were); this protocol is the server they are typed
against, without importing it (no cycle)."""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Protocol

from ..streams import Publisher, Subscription
from . import _envelope as env
from ._config import DittoServerConfig
from ._fast import topic_base
from ._messages import Kind
from ._tables import SERVER_TRANSITIONS, ServerInput, ServerState
from .events import Event

__all__ = [
    "NEXT_KEEPS",
    "DittoServerState",
    "Relaying",
    "ServerSubscription",
    "ended",
]


#: States an item (UP_NEXT) leaves as they are, read from the table: the
#: hot path skips the lookup for them (docs/performance.md).
NEXT_KEEPS: Final = tuple(  # a tuple: "in" compares by identity, no enum hash
    state for (state, what), after in SERVER_TRANSITIONS.items()
    if what is ServerInput.UP_NEXT and after is state
)


class Relaying(Protocol):
    """The core's Subscriber to a subscription's Publisher
    (:class:`~._server_upstream.Relay`), as the server sees it."""

    upstream: Subscription | None


class ServerSubscription:
    __slots__ = (
        "base",
        "deadline",
        "failure",
        "headers",
        "id",
        "kind",
        "next_prefix",
        "outstanding",
        "pending_demand",
        "publisher",
        "relay",
        "state",
        "topic",
    )

    def __init__(self, sid: str, kind: Kind, topic: env.Topic, headers: env.Headers) -> None:
        self.id = sid
        self.kind = kind
        self.topic = topic
        self.base = topic_base(topic)  # its messages' topic text: base + action
        self.headers = headers  # of the latest subscribe/request/cancel
        self.state = ServerState.PENDING
        self.publisher: Publisher[Any] | None = None
        self.failure: env.DittoError | None = None
        self.relay: Relaying | None = None
        self.pending_demand = 0  # requested before the Publisher's on_subscribe
        self.outstanding = 0  # requested and not yet delivered (rule 1.1)
        self.next_prefix: str | None = None  # see _fast.next_prefix
        self.deadline = float("-inf")  # no timer entry yet


def ended(sub: ServerSubscription) -> bool:
    return sub.state is ServerState.ZOMBIE


class DittoServerState(Protocol):
    """The :class:`~._server.DittoServer` as its parts see it."""

    config: DittoServerConfig
    _counters: dict[Kind, int]
    _events: deque[Event]
    _out: list[str]

    def _find(self, sid: str, kind: Kind | None) -> ServerSubscription | None: ...
    def _issued(self, sid: str, kind: Kind | None) -> bool: ...
    def _application_target(
        self, sid: str, what: ServerInput, kind: Kind | None
    ) -> ServerSubscription | None: ...
    def _transition(self, sub: ServerSubscription, what: ServerInput) -> None: ...
    def _start(self, sub: ServerSubscription) -> None: ...
    def _call_upstream(
        self, sub: ServerSubscription, upstream: Subscription, n: int
    ) -> None: ...
    def _prefix_of(self, sub: ServerSubscription) -> str: ...
    def _on_upstream_next(self, sub: ServerSubscription, item: Any) -> None: ...
    def _on_upstream_next_many(self, sub: ServerSubscription, items: list[Any]) -> None: ...
    def _end_in_run(self, sub: ServerSubscription, sent: int, what: ServerInput) -> None: ...
    def _end(
        self,
        sub: ServerSubscription,
        what: ServerInput,
        error: env.DittoError | None,
        reason: str,
        *,
        upstream_done: bool = False,
    ) -> None: ...
    def _touch(self, sub: ServerSubscription) -> None: ...
    def _headers(self, headers: env.Headers) -> env.Headers: ...
    def _encode(self, sub: ServerSubscription, action: str, value: dict[str, Any]) -> str: ...
