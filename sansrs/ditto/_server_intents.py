"""What the application decides for a :class:`~._server.DittoServer`
subscription (its methods, bound in its class): serve it from a Publisher
(``accept``) or fail it (``reject``), each checked against the
subscription's state; a subscription that already ended ignores both."""

from __future__ import annotations

from typing import Any

from .._errors import LocalProtocolError
from ..streams import Publisher
from . import _envelope as env
from ._messages import Kind
from ._server_state import DittoServerState, ServerSubscription
from ._tables import SERVER_TRANSITIONS, ServerInput, ServerState

__all__ = ["accept", "application_target", "issued", "reject"]


def accept(
    self: DittoServerState,
    subscription_id: str,
    publisher: Publisher[Any],
    *,
    kind: Kind | None = None,
) -> None:
    """Serve ``subscription_id`` from ``publisher`` (subscribed at the first request).

    ``kind``: the subscription's (``SubscribeReceived.kind``), needed when
    a history and a search subscription have the same ID (Ditto numbers
    each kind from "0"). A subscription that already ended (cancel,
    timeout) ignores this.
    """
    sub = self._application_target(subscription_id, ServerInput.ACCEPT, kind)
    if sub is None:
        return
    if publisher is None:
        raise TypeError("publisher must not be None")
    sub.publisher = publisher
    self._transition(sub, ServerInput.ACCEPT)
    if sub.state is ServerState.ACTIVE:
        self._start(sub)


def reject(
    self: DittoServerState,
    subscription_id: str,
    error: env.DittoError,
    *,
    kind: Kind | None = None,
) -> None:
    """Fail ``subscription_id`` with ``error`` (sent after the first
    request, as Ditto does); ``kind`` as for ``accept``."""
    sub = self._application_target(subscription_id, ServerInput.REJECT, kind)
    if sub is None:
        return
    if sub.state is ServerState.PENDING_REQUESTED:
        self._end(sub, ServerInput.REJECT, error, "failed")
    else:
        sub.failure = error
        self._transition(sub, ServerInput.REJECT)


def application_target(
    self: DittoServerState, sid: str, what: ServerInput, kind: Kind | None
) -> ServerSubscription | None:
    sub = self._find(sid, kind)
    if sub is None:
        if not self._issued(sid, kind):
            raise LocalProtocolError(f"no subscription {sid!r} was created")
        return None  # ended and forgotten
    if sub.state is ServerState.ZOMBIE:
        return None
    if (sub.state, what) not in SERVER_TRANSITIONS:
        raise LocalProtocolError(f"{what.value} not allowed for {sid!r} in {sub.state.value}")
    return sub


def issued(self: DittoServerState, sid: str, kind: Kind | None) -> bool:
    if self.config.id_factory is not None:
        return True  # cannot tell: treat as ended
    if not (sid.isascii() and sid.isdigit() and len(sid) <= 20):
        return False
    kinds = (kind,) if kind is not None else tuple(self._counters)
    return any(int(sid) < self._counters[k] for k in kinds)

