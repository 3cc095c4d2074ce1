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

Its concerns apart (their functions bound here as its methods):
:mod:`._server_intents` (what the application decides: ``accept``,
``reject``), :mod:`._server_upstream` (the application's Publisher: its
relay, the demand, its items as ``next`` messages), :mod:`._server_output`
(the messages it writes), :mod:`._server_state` (a subscription's state,
and the server as they see it); this module keeps what comes in, the
timers and the state changes.
"""

from __future__ import annotations

import contextlib
import heapq
from collections import deque
from collections.abc import Iterator

from ..streams import add_demand
from . import _envelope as env
from . import _server_intents as intents
from . import _server_output as output
from . import _server_upstream as upstream
from ._config import DittoServerConfig
from ._fast import plain_message
from ._messages import (
    CANCELLED_MESSAGE,
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
from ._server_state import ServerSubscription, ended
from ._tables import SERVER_TRANSITIONS, ServerInput, ServerState
from .events import (
    Event,
    InvalidMessage,
    OtherMessageReceived,
    SubscribeReceived,
    SubscriptionClosed,
)

__all__ = ["DittoServer"]


class DittoServer:
    """Ditto's side of streaming (and search) subscriptions on one connection."""

    def __init__(self, config: DittoServerConfig | None = None) -> None:
        self.config = config or DittoServerConfig()
        # Ditto numbers persisted-events subscriptions (its
        # StreamingSubscriptionManager) and search subscriptions (the search
        # SubscriptionManager) with a counter each, both from "0": a
        # subscription is its kind and its ID.
        self._streams: dict[str, ServerSubscription] = {}
        self._searches: dict[str, ServerSubscription] = {}
        self._by_kind: dict[str, dict[str, ServerSubscription]] = {
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

    def _ids(self, kind: Kind) -> dict[str, ServerSubscription]:
        return self._streams if kind is Kind.STREAMING else self._searches

    def _find(self, sid: str, kind: Kind | None) -> ServerSubscription | None:
        return of_kind(self._streams, self._searches, sid, kind, ended)

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
        self, sub: ServerSubscription, action: str, headers: env.Headers, demand: int
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
        sub = ServerSubscription(
            sid, msg.kind, msg.topic.with_action(msg.kind.value, None), headers
        )
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

    def _on_request(self, sub: ServerSubscription, n: int) -> None:
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

    # -- application intents (._server_intents) -----------------------------------

    accept = intents.accept
    reject = intents.reject
    _application_target = intents.application_target
    _issued = intents.issued

    # -- the application's Publisher (._server_upstream) ----------------------------

    _start = upstream.start
    _call_upstream = upstream.call_upstream
    _prefix_of = upstream.prefix_of
    _on_upstream_next_many = upstream.on_upstream_next_many
    _end_in_run = upstream.end_in_run
    _on_upstream_next = upstream.on_upstream_next

    # -- state changes --------------------------------------------------------------


    def _transition(self, sub: ServerSubscription, what: ServerInput) -> None:
        sub.state = SERVER_TRANSITIONS[(sub.state, what)]

    def _end(
        self,
        sub: ServerSubscription,
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

    def _forget(self, sub: ServerSubscription) -> None:
        self._transition(sub, ServerInput.EXPIRE)
        del self._ids(sub.kind)[sub.id]
        self._zombies.pop((sub.kind, sub.id), None)

    def _touch(self, sub: ServerSubscription) -> None:
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

    # -- output (._server_output) ----------------------------------------------------

    _topic = output.topic_of
    _headers = output.with_content_type
    _encode = output.encode
    _send = output.send
    _send_failed = output.send_failed
    _error_response = output.error_response


def _unknown_command(topic: str) -> env.DittoError:
    return env.DittoError(
        status=400,
        error="protocoladapter:unknown.command",
        message=f"The topic path '{topic}' is not a command this endpoint accepts.",
    )
