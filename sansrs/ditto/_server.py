"""The server (publisher) role of the Ditto streaming subscription protocol, sans-IO.

One ``DittoServer`` is one connection (one WebSocket). Text messages in
(``receive_message``), events out (``events``), Ditto's answers out
(``messages_to_send``). For each subscribe the application hands over a
``sansrs.streams.Publisher`` (``accept``) or an error (``reject``); the core
subscribes its own Subscriber to that Publisher at the first ``request``
(Ditto's ``lazify``: no ``complete``/``failed`` before the first request) and
relays the remote demand to it.

Threading (docs/architecture.md, Threads): the core is driven by one thread. A Publisher that
signals from another thread must be marshalled onto it by the adapter.
Signals delivered synchronously inside ``Subscription.request`` are fine: the
core updates its state before every call into the Publisher.
"""

from __future__ import annotations

import contextlib
import heapq
from collections import deque
from collections.abc import Iterator
from itertools import repeat
from typing import Any, Final

from .._errors import LocalProtocolError
from ..streams import MAX_DEMAND, Publisher, Subscription, add_demand
from . import _envelope as env
from ._config import DittoServerConfig
from ._fast import message_text, next_prefix, plain_message, topic_base
from ._messages import (
    CANCELLED_MESSAGE,
    INTERNAL_ERROR,
    RULE_3_9_MESSAGE,
    Classified,
    Kind,
    SearchOptions,
    SubscribeOptions,
    classify,
    demand_of,
    not_found_error,
    of_kind,
    protocol_error,
    subscription_id_of,
    timeout_error,
)
from ._tables import SERVER_TRANSITIONS, ServerInput, ServerState
from .events import (
    Event,
    InvalidMessage,
    OtherMessageReceived,
    SubscribeReceived,
    SubscriptionClosed,
)

__all__ = ["DittoServer"]




#: States an item (UP_NEXT) leaves as they are, read from the table: the
#: hot path skips the lookup for them (docs/performance.md).
_NEXT_KEEPS: Final = tuple(  # a tuple: "in" compares by identity, no enum hash
    state for (state, what), after in SERVER_TRANSITIONS.items()
    if what is ServerInput.UP_NEXT and after is state
)


class _Subscription:
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
        self.relay: _Relay | None = None
        self.pending_demand = 0  # requested before the Publisher's on_subscribe
        self.outstanding = 0  # requested and not yet delivered (rule 1.1)
        self.next_prefix: str | None = None  # see _fast.next_prefix
        self.deadline = float("-inf")  # no timer entry yet


class _Relay:
    """The core's Subscriber to one application Publisher."""

    __slots__ = ("_server", "_sub", "upstream")

    def __init__(self, server: DittoServer, sub: _Subscription) -> None:
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


#: Where Ditto answers what it cannot attribute to an entity (text that is
#: not JSON, a message too large to read).
_FALLBACK_TOPIC: Final = env.Topic(
    namespace="unknown", entity_name="unknown", group="things", channel="twin", criterion="errors"
)


class DittoServer:
    """Ditto's side of streaming (and search) subscriptions on one connection."""

    def __init__(self, config: DittoServerConfig | None = None) -> None:
        self.config = config or DittoServerConfig()
        # Ditto numbers persisted-events subscriptions (its
        # StreamingSubscriptionManager) and search subscriptions (the search
        # SubscriptionManager) with a counter each, both from "0": a
        # subscription is its kind and its ID.
        self._streams: dict[str, _Subscription] = {}
        self._searches: dict[str, _Subscription] = {}
        self._by_kind: dict[str, dict[str, _Subscription]] = {
            Kind.STREAMING.value: self._streams,
            Kind.SEARCH.value: self._searches,
        }
        self._counters = {Kind.STREAMING: 0, Kind.SEARCH: 0}
        # insertion-ordered: oldest first
        self._zombies: dict[tuple[Kind, str], None] = {}
        self._events: deque[Event] = deque()
        self._out: list[str] = []
        self._timers: list[tuple[float, str, str]] = []  # (deadline, kind value, ID)
        self._now = 0.0
        self._correlations = 0  # correlation-ids made without a factory

    # -- sans-IO plumbing ---------------------------------------------------------

    def events(self) -> Iterator[Event]:
        while self._events:
            yield self._events.popleft()

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def messages_to_send(self) -> list[str]:
        out, self._out = self._out, []
        return out

    def state_of(self, subscription_id: str, kind: Kind | None = None) -> ServerState:
        """The state of subscription ``subscription_id`` of ``kind`` (which
        may be left out when no subscription of the other kind has that ID)."""
        sub = self._find(subscription_id, kind)
        return ServerState.GONE if sub is None else sub.state

    def _ids(self, kind: Kind) -> dict[str, _Subscription]:
        return self._streams if kind is Kind.STREAMING else self._searches

    def _find(self, sid: str, kind: Kind | None) -> _Subscription | None:
        return of_kind(self._streams, self._searches, sid, kind, _ended)

    def _open_now(self) -> int:
        return len(self._streams) + len(self._searches)

    def next_deadline(self) -> float | None:
        timers = self._timers
        by_kind = self._by_kind
        while timers:
            deadline, kind, sid = timers[0]
            sub = by_kind[kind].get(sid)
            if sub is not None and sub.deadline == deadline:
                return deadline
            heapq.heappop(timers)  # stale entry
        return None

    def handle_timeout(self, now: float) -> None:
        self._now = now
        while self._timers and self._timers[0][0] <= now:
            deadline, kind, sid = heapq.heappop(self._timers)
            sub = self._by_kind[kind].get(sid)
            if sub is None or sub.deadline != deadline:
                continue
            if sub.state is ServerState.ZOMBIE:
                self._forget(sub)
            else:
                self._end(sub, ServerInput.IDLE, timeout_error(sub.kind, sid), "timeout")

    # -- input --------------------------------------------------------------------

    def receive_message(self, text: str, *, now: float | None = None) -> None:
        """Process one text message. Never raises on any input text."""
        if now is not None:
            self._now = now
        if not self._control(text):
            self._receive(text)

    def _control(self, text: str) -> bool:
        """A ``request`` of a subscription as clients write it: True when
        taken, False (nothing changed) to leave it to the full path
        (``_receive``). Taken only when the full path would find the same:
        a plain envelope (``plain_message``) with the subscription's own
        topic text (``sub.base``, from its parsed subscribe: the grammar
        holds) and a demand in 1..2**63-1; the rest is the full path's own
        code (``_command``). Twice a thing for a history of a few events
        (docs/performance.md, "a thing's control path");
        tests/ditto/test_ditto_control_path.py holds it to the full path."""
        parts = plain_message(text, self.config.max_message_size)
        if parts is None:
            return False
        topic, headers, value = parts
        sid, demand = value.get("subscriptionId"), value.get("demand")
        if type(sid) is not str or type(demand) is not int or not 0 < demand <= env.MAX_LONG:
            return False
        sub = self._streams.get(sid)
        if sub is None or topic != sub.base + "request":
            sub = self._searches.get(sid)
            if sub is None or topic != sub.base + "request":
                return False
        self._command(sub, "request", env.headers_from_json(headers), demand)
        return True

    def _receive(self, text: str) -> None:
        """The full path: any message, every field checked."""
        if len(text) > self.config.max_message_size:
            error = env.DittoError(
                status=413,
                error="message.too.large",
                message=f"The message exceeds the maximum of {self.config.max_message_size}.",
            )
            self._error_response(None, None, error)
            return
        envelope: env.Envelope | None = None
        try:
            envelope = env.parse_envelope(text)
            classified = classify(envelope)
            if isinstance(classified, env.Topic):
                self._events.append(OtherMessageReceived(envelope=envelope))
                return
            self._dispatch(envelope, classified)
        except env.MessageError as exc:
            self._error_response(envelope, envelope.headers if envelope else None, exc.error)

    def _dispatch(self, envelope: env.Envelope, msg: Classified) -> None:
        action = msg.action
        if action == "subscribe":
            self._on_subscribe(envelope, msg)
            return
        if action not in ("request", "cancel"):
            # An event sent to the server: Ditto's adapter has no command for it.
            self._error_response(envelope, envelope.headers, _unknown_command(envelope.topic))
            return
        sid = subscription_id_of(envelope)
        demand = demand_of(envelope) if action == "request" else 0
        sub = self._ids(msg.kind).get(sid)
        headers = envelope.headers
        if sub is None:
            error = not_found_error(msg.kind, sid)
            self._send_failed(msg.topic.with_action(msg.kind.value, "failed"), headers, sid, error)
            self._events.append(InvalidMessage(error=error))
            return
        self._command(sub, action, headers, demand)

    def _command(
        self, sub: _Subscription, action: str, headers: env.Headers, demand: int
    ) -> None:
        """A ``request`` (``demand``) or ``cancel`` of a known subscription."""
        sub.headers = headers  # later events carry the latest request's headers
        sub.next_prefix = None
        if sub.state is ServerState.ZOMBIE:
            if action == "request":
                error = protocol_error(sub.kind, CANCELLED_MESSAGE)
                self._send_failed(self._topic(sub, "failed"), headers, sub.id, error)
                self._events.append(InvalidMessage(error=error))
            return
        self._touch(sub)
        if action == "cancel":
            self._end(sub, ServerInput.CANCEL, None, "cancelled")
        elif demand <= 0:
            error = protocol_error(sub.kind, RULE_3_9_MESSAGE)
            self._end(sub, ServerInput.BAD_REQUEST, error, "failed")
            self._events.append(InvalidMessage(error=error))
        else:
            self._on_request(sub, demand)

    def _on_subscribe(self, envelope: env.Envelope, msg: Classified) -> None:
        options: SubscribeOptions | SearchOptions
        if msg.kind is Kind.STREAMING:
            options = SubscribeOptions.from_json(envelope.value)
            if options.filter is not None and msg.topic.group != "things":
                raise env.MessageError(
                    env.DittoError(
                        status=400,
                        error="json.invalid",
                        message="The option <filter> is only supported for things.",
                    )
                )
        else:
            options = SearchOptions.from_envelope(envelope)
        if self._open_now() - len(self._zombies) >= self.config.max_subscriptions:
            error = env.DittoError(
                status=429,
                error=msg.kind.error_code("limit.exceeded"),
                message=f"At most {self.config.max_subscriptions} subscriptions may be open.",
            )
            self._error_response(envelope, envelope.headers, error)
            return
        sid = self._new_id(msg.kind)
        headers = envelope.headers
        if headers.correlation_id is None and self.config.correlation_id_header:
            # Ditto gives a command without one a generated correlation-id,
            # which its created (and the events until a request) carry.
            headers = headers.with_header("correlation-id", self._new_correlation_id())
        sub = _Subscription(sid, msg.kind, msg.topic.with_action(msg.kind.value, None), headers)
        self._ids(msg.kind)[sid] = sub
        self._touch(sub)
        self._send(sub, "created", {"subscriptionId": sid})
        self._events.append(
            SubscribeReceived(
                subscription_id=sid,
                kind=msg.kind,
                topic=msg.topic,
                headers=headers,
                options=options,
            )
        )

    def _on_request(self, sub: _Subscription, n: int) -> None:
        sub.outstanding = add_demand(sub.outstanding, n)
        state = sub.state
        if state is ServerState.ACTIVE:
            relay = sub.relay
            if relay is not None and relay.upstream is not None:
                self._call_upstream(sub, relay.upstream, n)
            else:
                sub.pending_demand = add_demand(sub.pending_demand, n)
            return
        sub.pending_demand = add_demand(sub.pending_demand, n)
        if state is ServerState.REJECTED:
            assert sub.failure is not None
            self._end(sub, ServerInput.REQUEST, sub.failure, "failed")
            return
        self._transition(sub, ServerInput.REQUEST)
        if sub.state is ServerState.ACTIVE:
            self._start(sub)

    # -- application intents ------------------------------------------------------

    def accept(
        self, subscription_id: str, publisher: Publisher[Any], *, kind: Kind | None = None
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
        self, subscription_id: str, error: env.DittoError, *, kind: Kind | None = None
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

    def _application_target(
        self, sid: str, what: ServerInput, kind: Kind | None
    ) -> _Subscription | None:
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

    def _issued(self, sid: str, kind: Kind | None) -> bool:
        if self.config.id_factory is not None:
            return True  # cannot tell: treat as ended
        if not (sid.isascii() and sid.isdigit() and len(sid) <= 20):
            return False
        kinds = (kind,) if kind is not None else tuple(self._counters)
        return any(int(sid) < self._counters[k] for k in kinds)

    # -- state changes --------------------------------------------------------------

    def _transition(self, sub: _Subscription, what: ServerInput) -> None:
        sub.state = SERVER_TRANSITIONS[(sub.state, what)]

    def _start(self, sub: _Subscription) -> None:
        """ACTIVE: subscribe the relay to the Publisher (lazily, at the first request)."""
        relay = _Relay(self, sub)
        sub.relay = relay
        publisher, sub.publisher = sub.publisher, None
        assert publisher is not None
        try:
            publisher.subscribe(relay)
        except Exception:  # a Publisher must not raise (1.9); fail the subscription instead
            if sub.state is ServerState.ACTIVE and sub.relay is relay:
                self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")

    def _call_upstream(self, sub: _Subscription, upstream: Subscription, n: int) -> None:
        try:
            upstream.request(n)
        except Exception:  # rule 3.16 says it returns normally; do not let it escape
            if sub.state is ServerState.ACTIVE:
                self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")

    def _prefix_of(self, sub: _Subscription) -> str:
        prefix = sub.next_prefix
        if prefix is None and sub.kind is not Kind.SEARCH:
            topic = sub.base + "next"
            prefix = sub.next_prefix = next_prefix(topic, self._headers(sub.headers), sub.id)
        return prefix or ""

    def _on_upstream_next_many(self, sub: _Subscription, items: list[Any]) -> None:
        """``_on_upstream_next`` for each item in turn, the lookups hoisted:
        the same messages, state and timers (tests/ditto/test_ditto_fast_paths.py)."""
        prefix = self._prefix_of(sub)
        if not prefix:
            for item in items:
                if sub.relay is None or sub.state is not ServerState.ACTIVE:
                    return  # ended by an item before
                self._on_upstream_next(sub, item)
            return
        # ACTIVE here (the relay checked): an item keeps it (_NEXT_KEEPS).
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

    def _end_in_run(self, sub: _Subscription, sent: int, what: ServerInput) -> None:
        if sent:
            self._touch(sub)  # as the items before did, one by one
        self._end(sub, what, INTERNAL_ERROR, "failed")

    def _on_upstream_next(self, sub: _Subscription, item: Any) -> None:
        if sub.outstanding <= 0:
            self._end(sub, ServerInput.UP_NEXT_EXCESS, INTERNAL_ERROR, "failed")
            return
        prefix = self._prefix_of(sub)
        try:
            if prefix:  # the same text as _encode's, one dumps of the item (_fast.py)
                text = prefix + env.dumps(_item_json(item)) + "}}"
            else:
                value: dict[str, Any] = {"subscriptionId": sub.id}
                if sub.kind is Kind.SEARCH:
                    if not isinstance(item, list | tuple):
                        self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")
                        return
                    value["items"] = [_item_json(i) for i in item]
                else:
                    value["item"] = _item_json(item)
                text = self._encode(sub, "next", value)
        except (TypeError, ValueError, RecursionError):  # not JSON: the Publisher's fault
            self._end(sub, ServerInput.UP_ERROR, INTERNAL_ERROR, "failed")
            return
        if sub.outstanding != MAX_DEMAND:  # rule 3.17: MAX is unbounded
            sub.outstanding -= 1
        if sub.state not in _NEXT_KEEPS:  # the table lookup hashes two enums
            self._transition(sub, ServerInput.UP_NEXT)
        self._touch(sub)
        self._out.append(text)

    def _end(
        self,
        sub: _Subscription,
        what: ServerInput,
        error: env.DittoError | None,
        reason: str,
        *,
        upstream_done: bool = False,
    ) -> None:
        """A transition into ZOMBIE: send the terminal event, cancel upstream, arm the timer."""
        self._transition(sub, what)
        if what is ServerInput.UP_COMPLETE:
            self._send(sub, "complete", {"subscriptionId": sub.id})
        elif error is not None:
            self._send_failed(self._topic(sub, "failed"), sub.headers, sub.id, error)
        relay = sub.relay
        sub.relay = None
        sub.publisher = None
        self._zombies[(sub.kind, sub.id)] = None
        sub.deadline = self._now + self.config.zombie_timeout
        heapq.heappush(self._timers, (sub.deadline, sub.kind.value, sub.id))
        if len(self._zombies) > self.config.max_zombies:
            oldest_kind, oldest = next(iter(self._zombies))
            self._forget(self._ids(oldest_kind)[oldest])
        self._events.append(
            SubscriptionClosed(subscription_id=sub.id, reason=reason, error=error, kind=sub.kind)
        )
        if relay is not None and relay.upstream is not None and not upstream_done:
            # rule 3.15: cancel returns normally; if it does not, nothing is left to signal
            with contextlib.suppress(Exception):
                relay.upstream.cancel()

    def _forget(self, sub: _Subscription) -> None:
        self._transition(sub, ServerInput.EXPIRE)
        del self._ids(sub.kind)[sub.id]
        self._zombies.pop((sub.kind, sub.id), None)

    def _touch(self, sub: _Subscription) -> None:
        deadline = self._now + self.config.idle_timeout
        if deadline == sub.deadline:
            # Its entry is in the heap already. Without this check every item
            # sent at the same ``now`` (a whole batch) pushed a duplicate that
            # the compaction below could not drop, which made it run on every
            # push: quadratic time in the items per batch.
            return
        sub.deadline = deadline
        timers = self._timers
        heapq.heappush(timers, (deadline, sub.kind.value, sub.id))
        if len(timers) > 4 * self._open_now() + 64:  # drop stale entries now and then
            by_kind = self._by_kind
            self._timers = [
                (d, k, s) for d, k, s in timers if s in by_kind[k] and by_kind[k][s].deadline == d
            ]
            heapq.heapify(self._timers)

    def _new_id(self, kind: Kind) -> str:
        factory = self.config.id_factory
        counter = self._counters[kind]
        sid = factory() if factory is not None else str(counter)
        counter += 1
        ids = self._ids(kind)
        while sid in ids:  # an injected factory repeated itself
            sid = f"{sid}-{counter}"
            counter += 1
        self._counters[kind] = counter
        return sid

    def _new_correlation_id(self) -> str:
        factory = self.config.correlation_ids
        if factory is not None:
            return factory()
        self._correlations += 1
        return f"sansrs-{self._correlations - 1}"

    # -- output -----------------------------------------------------------------

    def _topic(self, sub: _Subscription, action: str) -> env.Topic:
        return sub.topic.with_action(sub.kind.value, action)

    def _headers(self, headers: env.Headers) -> env.Headers:
        if self.config.content_type_header:
            return headers.with_header("content-type", env.CONTENT_TYPE_JSON)
        return headers

    def _encode(self, sub: _Subscription, action: str, value: dict[str, Any]) -> str:
        return message_text(sub.base + action, self._headers(sub.headers).to_json(), value)

    def _send(self, sub: _Subscription, action: str, value: dict[str, Any]) -> None:
        self._out.append(self._encode(sub, action, value))

    def _send_failed(
        self, topic: env.Topic, headers: env.Headers, sid: str, error: env.DittoError
    ) -> None:
        value = {"subscriptionId": sid, "error": error.to_json()}
        self._out.append(
            env.Envelope(
                topic=str(topic), headers=self._headers(headers), path="/", value=value
            ).to_text()
        )

    def _error_response(
        self, envelope: env.Envelope | None, headers: env.Headers | None, error: env.DittoError
    ) -> None:
        """Ditto's answer to a malformed command: an error response on an ``errors`` topic."""
        topic = _FALLBACK_TOPIC
        if envelope is not None:
            try:
                parsed = env.parse_topic(envelope.topic)
            except env.TopicError:
                pass
            else:
                topic = parsed.with_action("errors", None)
                if parsed.criterion == "search":
                    topic = env.Topic(
                        namespace="_",
                        entity_name="_",
                        group="things",
                        channel=None,
                        criterion="search",
                        action="errors",
                    )
        out_headers = env.Headers()
        correlation_id = headers.get("correlation-id") if headers is not None else None
        if correlation_id is not None:
            out_headers = out_headers.with_header("correlation-id", correlation_id)
        self._out.append(
            env.Envelope(
                topic=str(topic),
                headers=out_headers,
                path="/",
                value=error.to_json(),
                status=error.status,
            ).to_text()
        )
        self._events.append(InvalidMessage(error=error))


def _ended(sub: _Subscription) -> bool:
    return sub.state is ServerState.ZOMBIE


def _item_json(item: Any) -> Any:
    return item.to_json() if isinstance(item, env.Envelope) else item


def _unknown_command(topic: str) -> env.DittoError:
    return env.DittoError(
        status=400,
        error="protocoladapter:unknown.command",
        message=f"The topic path '{topic}' is not a command this endpoint accepts.",
    )
