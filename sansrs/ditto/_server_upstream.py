"""The application's Publisher of one :class:`~._server.DittoServer`
subscription (its methods, bound in its class): subscribed by the core's
own Subscriber (:class:`Relay`) at the first ``request`` (Ditto's
``lazify``), the remote demand relayed to it, and its items written as
``next`` messages, one at a time or a batch at once
(docs/performance.md, "Ditto history into Spark")."""

from __future__ import annotations

from itertools import repeat
from typing import Any

from ..streams import MAX_DEMAND, Subscription
from . import _envelope as env
from ._fast import next_prefix
from ._messages import INTERNAL_ERROR, Kind
from ._server_state import NEXT_KEEPS, DittoServerState, ServerSubscription
from ._tables import ServerInput, ServerState

__all__ = [
    "Relay",
    "call_upstream",
    "end_in_run",
    "item_json",
    "on_upstream_next",
    "on_upstream_next_many",
    "prefix_of",
    "start",
]


class Relay:
    """The core's Subscriber to one application Publisher."""

    __slots__ = ("_server", "_sub", "upstream")

    def __init__(self, server: DittoServerState, sub: ServerSubscription) -> None:
        self._server = server
        self._sub = sub
        self.upstream: Subscription | None = None

    def _current(self) -> bool:
        return self._sub.relay is self and self._sub.state is ServerState.ACTIVE

    def on_subscribe(self, subscription: Subscription) -> None:
        if self.upstream is not None or not self._current():
            subscription.cancel()  # rule 2.5, or already ended
            return
        self.upstream = subscription
        n, self._sub.pending_demand = self._sub.pending_demand, 0
        if n:
            self._server._call_upstream(self._sub, subscription, n)

    def on_next(self, item: Any) -> None:
        if self._current():
            self._server._on_upstream_next(self._sub, item)

    def on_next_many(self, items: list[Any]) -> None:
        """``on_next`` of each item in turn, in one call: an adapter that
        pulls its Publisher's items in batches hands them over like this
        (the same checks per item; docs/performance.md, "Ditto history into
        Spark")."""
        if self._current():
            self._server._on_upstream_next_many(self._sub, items)

    def on_error(self, error: BaseException) -> None:
        if self._current():
            failure = error.error if isinstance(error, env.DittoException) else INTERNAL_ERROR
            self._server._end(
                self._sub, ServerInput.UP_ERROR, failure, "failed", upstream_done=True
            )

    def on_complete(self) -> None:
        if self._current():
            self._server._end(
                self._sub, ServerInput.UP_COMPLETE, None, "completed", upstream_done=True
            )


def start(self: DittoServerState, sub: ServerSubscription) -> None:
    """ACTIVE: subscribe the relay to the Publisher (lazily, at the first request)."""
    relay = Relay(self, sub)
    sub.relay = relay
    publisher, sub.publisher = sub.publisher, None
    assert publisher is not None
    try:
        publisher.subscribe(relay)
    except Exception:  # a Publisher must not raise (1.9); fail the subscription instead
        if sub.state is ServerState.ACTIVE and sub.relay is relay:
            self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")


def call_upstream(
    self: DittoServerState, sub: ServerSubscription, upstream: Subscription, n: int
) -> None:
    try:
        upstream.request(n)
    except Exception:  # rule 3.16 says it returns normally; do not let it escape
        if sub.state is ServerState.ACTIVE:
            self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")


def prefix_of(self: DittoServerState, sub: ServerSubscription) -> str:
    prefix = sub.next_prefix
    if prefix is None and sub.kind is not Kind.SEARCH:
        topic = sub.base + "next"
        prefix = sub.next_prefix = next_prefix(topic, self._headers(sub.headers), sub.id)
    return prefix or ""


def on_upstream_next_many(
    self: DittoServerState, sub: ServerSubscription, items: list[Any]
) -> None:
    """``_on_upstream_next`` for each item in turn, the lookups hoisted:
    the same messages, state and timers (tests/ditto/test_ditto_fast_paths.py)."""
    prefix = self._prefix_of(sub)
    if not prefix:
        for item in items:
            if sub.relay is None or sub.state is not ServerState.ACTIVE:
                return  # ended by an item before
            self._on_upstream_next(sub, item)
        return
    # ACTIVE here (the relay checked): an item keeps it (NEXT_KEEPS).
    out = self._out
    outstanding = sub.outstanding
    encode = env.encode_chunks
    if (
        encode is not None
        and (outstanding == MAX_DEMAND or outstanding >= len(items))
        and not any(map(isinstance, items, repeat(env.Envelope)))
    ):
        # The common batch: all within the demand, plain JSON values,
        # ASCII: the texts the loop below writes, without its checks and
        # calls per item. Anything else (an item that is not JSON, text
        # that dumps must look at) is left to that loop.
        try:
            texts = [f"{prefix}{''.join(encode(item, 0))}}}}}" for item in items]
        except (TypeError, ValueError, RecursionError):
            texts = []
        if texts and all(map(str.isascii, texts)):  # O(1) each: no join
            out += texts
            if outstanding != MAX_DEMAND:
                sub.outstanding = outstanding - len(texts)
            self._touch(sub)
            return
    dumps = env.dumps
    envelope_type = env.Envelope
    sent = 0
    for item in items:
        if sub.outstanding <= 0:
            self._end_in_run(sub, sent, ServerInput.UP_NEXT_EXCESS)
            return
        try:
            text = prefix + dumps(
                item.to_json() if isinstance(item, envelope_type) else item
            ) + "}}"
        except (TypeError, ValueError, RecursionError):  # not JSON: the Publisher's fault
            self._end_in_run(sub, sent, ServerInput.UP_ERROR)
            return
        if sub.outstanding != MAX_DEMAND:  # rule 3.17: MAX is unbounded
            sub.outstanding -= 1
        out.append(text)
        sent += 1
    if sent:
        self._touch(sub)


def end_in_run(
    self: DittoServerState, sub: ServerSubscription, sent: int, what: ServerInput
) -> None:
    if sent:
        self._touch(sub)  # as the items before did, one by one
    self._end(sub, what, INTERNAL_ERROR, "failed")


def on_upstream_next(self: DittoServerState, sub: ServerSubscription, item: Any) -> None:
    if sub.outstanding <= 0:
        self._end(sub, ServerInput.UP_NEXT_EXCESS, INTERNAL_ERROR, "failed")
        return
    prefix = self._prefix_of(sub)
    try:
        if prefix:  # the same text as _encode's, one dumps of the item (_fast.py)
            text = prefix + env.dumps(item_json(item)) + "}}"
        else:
            value: dict[str, Any] = {"subscriptionId": sub.id}
            if sub.kind is Kind.SEARCH:
                if not isinstance(item, list | tuple):
                    self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")
                    return
                value["items"] = [item_json(i) for i in item]
            else:
                value["item"] = item_json(item)
            text = self._encode(sub, "next", value)
    except (TypeError, ValueError, RecursionError):  # not JSON: the Publisher's fault
        self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")
        return
    if sub.outstanding != MAX_DEMAND:  # rule 3.17: MAX is unbounded
        sub.outstanding -= 1
    if sub.state not in NEXT_KEEPS:  # the table lookup hashes two enums
        self._transition(sub, ServerInput.UP_NEXT)
    self._touch(sub)
    self._out.append(text)


def item_json(item: Any) -> Any:
    return item.to_json() if isinstance(item, env.Envelope) else item
