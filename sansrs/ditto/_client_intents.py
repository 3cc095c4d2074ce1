"""What the application asks of a :class:`~._client.DittoClient` (its
methods, bound in its class): subscribe (history or search), request,
cancel, each checked against the subscription's state and queued as the
message Ditto expects."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .._errors import LocalProtocolError
from ..streams import MAX_DEMAND, add_demand
from . import _envelope as env
from ._client_state import ClientSubscription, DittoClientState
from ._fast import message_text
from ._messages import SUBSCRIBE_PERSISTED, Kind, SearchOptions, SubscribeOptions, check_instant
from ._tables import CLIENT_TRANSITIONS, ClientInput, ClientState

__all__ = [
    "cancel",
    "cancel_pending",
    "local_target",
    "remember_cancelled",
    "request",
    "send",
    "subscribe",
    "subscribe_for_persisted_events",
    "subscribe_search",
]


def subscribe_for_persisted_events(
    self: DittoClientState,
    namespace: str,
    entity_name: str,
    *,
    group: str = "things",
    from_historical_revision: int | None = None,
    to_historical_revision: int | None = None,
    from_historical_timestamp: datetime | str | None = None,
    to_historical_timestamp: datetime | str | None = None,
    filter: str | None = None,
    headers: Mapping[str, Any] | None = None,
    explicit_range: bool = False,
) -> int:
    """Queue ``subscribeForPersistedEvents``; returns the local key of the subscription.

    Negative ``from`` revisions mean "the last n", ``to`` <= 0 "the latest /
    nth most recent". ``explicit_range`` writes both revisions even when
    not given, as Ditto's own serializer does.
    """
    if group not in ("things", "policies"):
        raise LocalProtocolError("history streaming exists for things and policies only")
    if filter is not None and group != "things":
        raise LocalProtocolError("the filter option is supported for things only")
    for name, value in (
        ("from_historical_revision", from_historical_revision),
        ("to_historical_revision", to_historical_revision),
    ):
        if value is not None and (
            type(value) is not int or not env.MIN_LONG <= value <= env.MAX_LONG
        ):
            raise LocalProtocolError(f"{name} must be an int64, got {value!r}")
    options = SubscribeOptions(
        from_historical_revision=from_historical_revision,
        to_historical_revision=to_historical_revision,
        from_historical_timestamp=check_instant(
            "from_historical_timestamp", from_historical_timestamp
        ),
        to_historical_timestamp=check_instant(
            "to_historical_timestamp", to_historical_timestamp
        ),
        filter=filter,
    )
    _check_names(namespace, entity_name)
    topic = env.new_topic(
        namespace, entity_name, group, "twin" if group == "things" else None, "streaming"
    )
    return subscribe(
        self,
        Kind.STREAMING,
        topic,
        SUBSCRIBE_PERSISTED,
        options.to_json(explicit_range=explicit_range),
        headers,
        None,
    )


def subscribe_search(
    self: DittoClientState,
    *,
    filter: str | None = None,
    options: str | None = None,
    namespaces: list[str] | tuple[str, ...] | None = None,
    fields: str | None = None,
    headers: Mapping[str, Any] | None = None,
) -> int:
    """Queue a search ``subscribe``; ``next`` then brings pages (``PageReceived``)."""
    search = SearchOptions(
        filter=filter,
        options=options,
        namespaces=None if namespaces is None else tuple(namespaces),
        fields=fields,
    )
    topic = env.Topic(
        namespace="_", entity_name="_", group="things", channel="twin", criterion="search"
    )
    return subscribe(self, Kind.SEARCH, topic, "subscribe", search.to_json(), headers, fields)


def subscribe(
    self: DittoClientState,
    kind: Kind,
    topic: env.Topic,
    action: str,
    value: dict[str, Any],
    headers: Mapping[str, Any] | None,
    fields: str | None,
) -> int:
    open_now = (
        len(self._pending) + len(self._streams) + len(self._searches) - len(self._cancelled)
    )
    if open_now >= self.config.max_subscriptions:
        raise LocalProtocolError(f"at most {self.config.max_subscriptions} subscriptions")
    out_headers = env.Headers(headers)
    correlation_id = out_headers.correlation_id
    if correlation_id is None and self.config.correlation_ids is not None:
        out_headers = out_headers.with_header("correlation-id", self.config.correlation_ids())
        correlation_id = out_headers.correlation_id
    key = self._keys
    self._keys += 1
    sub = ClientSubscription(key, kind, topic, correlation_id)
    self._pending[key] = sub
    self._send(sub.base, action, out_headers.to_json(), value, fields)
    return key


def request(
    self: DittoClientState,
    subscription_id: str,
    demand: int,
    *,
    headers: Mapping[str, Any] | None = None,
    kind: Kind | None = None,
) -> None:
    """Queue ``request``; ``demand`` in 1..2**63-1 (rule 3.9 is the caller's duty here).

    ``kind``: the subscription's (``SubscriptionCreated`` answers subscribe
    ``key``, whose kind the caller knows); needed only when a history
    and a search subscription have the same ID, as Ditto numbers each
    kind from "0"."""
    if type(demand) is not int or not 1 <= demand <= MAX_DEMAND:
        raise LocalProtocolError(
            f"demand must be in 1..{MAX_DEMAND} (rule 3.9), got {demand!r}"
        )
    sub = self._local_target(subscription_id, ClientInput.REQUEST, kind)
    sub.state = CLIENT_TRANSITIONS[(sub.state, ClientInput.REQUEST)]
    sub.demand = add_demand(sub.demand, demand)
    value = {"subscriptionId": subscription_id, "demand": demand}
    self._send(sub.base, "request", _headers_json(headers), value, None)


def cancel(
    self: DittoClientState,
    subscription_id: str,
    *,
    headers: Mapping[str, Any] | None = None,
    kind: Kind | None = None,
) -> None:
    """Queue ``cancel`` (no answer comes; late events may still arrive);
    ``kind`` as for ``request``."""
    sub = self._local_target(subscription_id, ClientInput.CANCEL, kind)
    if sub.state is ClientState.CANCELLED:
        return  # rule 3.7: idempotent
    sub.state = CLIENT_TRANSITIONS[(sub.state, ClientInput.CANCEL)]
    self._remember_cancelled(sub.kind, subscription_id)
    self._send(
        sub.base, "cancel", _headers_json(headers), {"subscriptionId": subscription_id}, None
    )


def cancel_pending(self: DittoClientState, key: int) -> None:
    """Cancel subscribe ``key`` before its ``created`` arrived; the cancel goes out with it."""
    sub = self._pending.get(key)
    if sub is None:
        raise LocalProtocolError(f"no subscribe {key} awaits its created")
    sub.state = CLIENT_TRANSITIONS[(sub.state, ClientInput.CANCEL)]


def remember_cancelled(self: DittoClientState, kind: Kind, sid: str) -> None:
    self._cancelled[(kind, sid)] = None
    if len(self._cancelled) > self.config.max_subscriptions:
        oldest_kind, oldest = next(iter(self._cancelled))
        del self._cancelled[(oldest_kind, oldest)]
        del self._ids(oldest_kind)[oldest]


def local_target(
    self: DittoClientState, sid: str, what: ClientInput, kind: Kind | None
) -> ClientSubscription:
    sub = self._find(sid, kind)
    if sub is None:
        raise LocalProtocolError(f"no open subscription {sid!r}")
    if (sub.state, what) not in CLIENT_TRANSITIONS:
        raise LocalProtocolError(f"{what.value} not allowed for {sid!r} in {sub.state.value}")
    return sub


def send(
    self: DittoClientState,
    base: str,
    action: str,
    headers: dict[str, Any],
    value: Any,
    fields: str | None,
) -> None:
    """``Envelope(topic=base + action, ...).to_text()``, without building
    the topic and envelope (see ``_fast.message_text``)."""
    self._out.append(message_text(base + action, headers, value, fields))


def _headers_json(headers: Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if headers is None else env.Headers(headers).to_json()


def _check_names(namespace: str, entity_name: str) -> None:
    for what in (namespace, entity_name):
        if not isinstance(what, str) or not what or "/" in what:
            raise LocalProtocolError(f"invalid namespace or entity name {what!r}")

