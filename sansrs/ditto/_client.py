"""The client (subscriber) role of the Ditto streaming subscription protocol, sans-IO.

Intents (``subscribe_for_persisted_events``, ``subscribe_search``,
``request``, ``cancel``) queue text messages; Ditto's answers come in through
``receive_message`` and go out as events. A peer that breaks the protocol
(invalid JSON, a ``next`` beyond the demand, rule 1.1) makes
``receive_message`` raise ``RemoteProtocolError`` after the affected
subscription is cancelled; ``failed`` is a normal event whose
``error.exception()`` is a ``DittoRemoteError``.

Its concerns apart (their functions bound here as its methods):
:mod:`._client_intents` (what the application asks, as messages),
:mod:`._client_shortcut` (history items by their learned prefix),
:mod:`._client_state` (a subscription's state, and the client as they see
it); this module keeps what comes in on the full path and its events.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from .._errors import RemoteProtocolError
from ..streams import MAX_DEMAND
from . import _client_intents as intents
from . import _client_shortcut as shortcuts
from . import _envelope as env
from ._client_state import MISS, NEXT_KEEPS, ClientSubscription, Shortcut, waits_for_late_events
from ._config import DittoClientConfig
from ._error_responses import error_of, error_scope, in_scope
from ._fast import new_items, new_next, plain_message
from ._messages import Classified, Kind, classify, of_kind, subscription_id_of
from ._tables import CLIENT_TRANSITIONS, ClientInput, ClientState
from .events import (
    ErrorResponseReceived,
    Event,
    ItemsReceived,
    OtherMessageReceived,
    PageReceived,
    StrayMessageReceived,
    SubscriptionCompleted,
    SubscriptionCreated,
    SubscriptionFailed,
)

__all__ = ["DittoClient"]


class DittoClient:
    """The subscriber side of one connection (one WebSocket)."""

    def __init__(self, config: DittoClientConfig | None = None) -> None:
        self.config = config or DittoClientConfig()
        self._keys = 0
        self._pending: dict[int, ClientSubscription] = {}  # subscribed, awaiting created
        # Ditto numbers persisted-events and search subscriptions with a
        # counter each, both from "0": a subscription is its kind and its ID.
        self._streams: dict[str, ClientSubscription] = {}
        self._searches: dict[str, ClientSubscription] = {}
        # Cancelled subscriptions still accept late events, but Ditto may send
        # none: remember at most max_subscriptions of them, oldest forgotten
        # first (or sooner: when Ditto ends them or gives their ID to another).
        self._cancelled: dict[tuple[Kind, str], None] = {}
        # Subscribes failed by an error Ditto sent without their correlation-id
        # (_on_error_response): one of them may still get its created, which
        # is then cancelled at once. At most max_subscriptions, oldest first.
        self._orphans: dict[int, ClientSubscription] = {}
        self._events: deque[Event] = deque()
        self._out: list[str] = []
        #: Newest first, at most MAX_SHORTCUTS (see _next_shortcut).
        self._shortcuts: list[Shortcut] = []
        self._prefixes: tuple[str, ...] = ()  # theirs, in their order

    # -- sans-IO plumbing ---------------------------------------------------------

    def events(self) -> Iterator[Event]:
        while self._events:
            yield self._events.popleft()

    def take_events(self) -> deque[Event]:
        """Every event so far at once (what ``events()`` yields, without a
        generator step per event)."""
        events, self._events = self._events, deque()
        return events

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    def messages_to_send(self) -> list[str]:
        out, self._out = self._out, []
        return out

    def next_deadline(self) -> float | None:
        return None  # the client keeps no timers; Ditto times idle subscriptions out

    def handle_timeout(self, now: float) -> None:
        return None

    def state_of(self, subscription_id: str, kind: Kind | None = None) -> ClientState:
        """The state of subscription ``subscription_id`` (of ``kind``, which
        may be left out when no subscription of the other kind has that ID)."""
        sub = self._find(subscription_id, kind)
        return ClientState.DONE if sub is None else sub.state

    def _ids(self, kind: Kind) -> dict[str, ClientSubscription]:
        return self._streams if kind is Kind.STREAMING else self._searches

    def _find(self, sid: str, kind: Kind | None) -> ClientSubscription | None:
        return of_kind(self._streams, self._searches, sid, kind, waits_for_late_events)

    # -- intents (._client_intents) ----------------------------------------------

    subscribe_for_persisted_events = intents.subscribe_for_persisted_events
    subscribe_search = intents.subscribe_search
    request = intents.request
    cancel = intents.cancel
    cancel_pending = intents.cancel_pending
    _remember_cancelled = intents.remember_cancelled
    _local_target = intents.local_target

    # -- input --------------------------------------------------------------------

    def receive_message(self, text: str) -> None:
        """Process one message from Ditto; ``RemoteProtocolError`` if it breaks the protocol."""
        if text.startswith(self._prefixes):
            for shortcut in self._shortcuts:
                if text.startswith(shortcut.prefix):
                    if self._next_shortcut(text, shortcut):
                        return
                    break
        if not self._control(text):
            self._receive(text)

    def receive_run(self, texts: Iterable[str]) -> None:
        """``receive_message`` of each text in turn (the messages of one
        read), except that consecutive history items of one subscription
        come out as one ``ItemsReceived`` rather than a ``NextReceived``
        each: one event per run of items instead of one per item. Raises as
        ``receive_message`` at the first message that breaks the protocol;
        the events of the messages before it are queued."""
        texts = texts if isinstance(texts, list) else list(texts)
        events = self._events
        run: ItemsReceived | None = None
        run_sub: ClientSubscription | None = None
        i, end = 0, len(texts)
        while i < end:
            text = texts[i]
            items: Any = MISS
            # One C call tries every prefix: most messages that start with
            # none are a thing's created or complete (_control).
            if text.startswith(self._prefixes):  # a full-path next may have taught one
                for shortcut in self._shortcuts:
                    # At most one prefix matches: they are written by
                    # next_prefix, compact JSON whose topic, headers and
                    # subscription ID each end where their text ends, so no
                    # prefix begins another (their order does not matter).
                    if text.startswith(shortcut.prefix):
                        items = self._shortcut_items(texts, i, shortcut)
                        break
            if items is MISS:
                if not self._control(text):
                    self._receive(text)
                i += 1
                continue
            i += len(items)
            sub = shortcut.sub
            if run is not None and run_sub is sub and events and events[-1] is run:
                run.items.extend(items)
            else:
                run, run_sub = new_items(sub.key, shortcut.sid, items), sub
                events.append(run)

    # -- the learned prefixes (._client_shortcut) -----------------------------------

    _shortcut_items = shortcuts.shortcut_items
    _next_shortcut = shortcuts.next_shortcut
    _shortcut_item = shortcuts.shortcut_item
    _learn_shortcut = shortcuts.learn_shortcut

    def _control(self, text: str) -> bool:
        """A subscription's ``created``, first ``next`` (which teaches the
        shortcut) or ``complete`` as Ditto writes them: True when taken,
        False (nothing changed) to leave the message to the full path.

        Taken only when the full path would find the same: the message is
        a plain envelope (``plain_message``), its topic is the text of the
        subscription's own topic with that action (``sub.base``, written by
        us from checked names, so the topic grammar and its classification
        hold: tests/ditto/test_ditto_control_path.py), and for ``created``
        it answers the oldest pending subscribe by its correlation-id (the
        one ``_match_pending`` returns first). The rest is the full path's
        own code. A history of a few events a thing spends most of its
        client time here (docs/performance.md, "a thing's control path")."""
        parts = plain_message(text, self.config.max_message_size)
        if parts is None:
            return False
        topic, headers, value = parts
        sid = value.get("subscriptionId")
        if type(sid) is not str:
            return False
        found = self._streams.get(sid)
        if found is not None:
            base = found.base
            if topic == base + "next":
                self._on_next(found, sid, value)
                self._learn_shortcut(topic, env.headers_from_json(headers), sid)
                return True
            if topic == base + "complete":
                self._completed(found, sid)
                return True
        found = self._searches.get(sid)
        if found is not None and topic == found.base + "complete":
            self._completed(found, sid)
            return True
        # A created (or a message the full path answers). The oldest pending
        # subscribe: _match_pending's answer when the correlation-id is its
        # own, or none (then the first of the topic's entity, which it is);
        # an ID its kind already has is the full path's (_on_created).
        sub = next(iter(self._pending.values()), None)
        if sub is None or topic != sub.base + "created" or sid in self._ids(sub.kind):
            return False
        parsed = env.headers_from_json(headers)
        correlation = parsed.correlation_id
        if correlation is not None and correlation != sub.correlation_id:
            return False
        self._created(sub, sid, parsed)
        return True

    def _receive(self, text: str) -> None:
        """The full path: any message, every field checked."""
        if len(text) > self.config.max_message_size:
            raise RemoteProtocolError("message exceeds max_message_size", 413)
        try:
            envelope = env.parse_envelope(text)
            classified = classify(envelope)
        except env.MessageError as exc:
            raise RemoteProtocolError(exc.error.message, exc.error.status) from None
        if isinstance(classified, env.Topic):
            if classified.criterion == "errors" or classified.action == "errors":
                self._on_error_response(envelope, classified)
            else:
                self._events.append(OtherMessageReceived(envelope=envelope))
            return
        try:
            self._dispatch(envelope, classified)
        except env.MessageError as exc:
            raise RemoteProtocolError(exc.error.message, exc.error.status) from None
        if classified.action == "next" and classified.kind is Kind.STREAMING:
            self._learn_shortcut(envelope.topic, envelope.headers, subscription_id_of(envelope))

    def _dispatch(self, envelope: env.Envelope, msg: Classified) -> None:
        action = msg.action
        if action not in ("created", "next", "complete", "failed"):
            raise RemoteProtocolError(f"Ditto does not send {action!r}", 400)
        sid = subscription_id_of(envelope)
        if action == "created":
            self._on_created(envelope, msg, sid)
            return
        sub = self._ids(msg.kind).get(sid)
        if sub is None:
            self._events.append(StrayMessageReceived(envelope=envelope))
            return
        value = envelope.value
        assert isinstance(value, dict)
        if action == "next":
            self._on_next(sub, sid, value)
        elif action == "complete":
            self._completed(sub, sid)
        else:
            error = env.DittoError.from_json(value.get("error"))
            self._advance(sub, ClientInput.FAILED)
            self._events.append(SubscriptionFailed(key=sub.key, subscription_id=sid, error=error))

    def _on_created(self, envelope: env.Envelope, msg: Classified, sid: str) -> None:
        sub = self._match_pending(envelope, msg)
        if sub is None:
            self._events.append(StrayMessageReceived(envelope=envelope))
            return
        ids = self._ids(msg.kind)
        holder = ids.get(sid)
        if holder is not None:
            if holder.state is not ClientState.CANCELLED:
                raise RemoteProtocolError(
                    f"created gives {msg.kind.value} subscription ID {sid!r}, "
                    "which a live one has",
                    400,
                )
            # Ditto gave a cancelled subscription's ID to a new one: the old
            # one has ended there, so nothing more comes for it.
            del ids[sid]
            del self._cancelled[(msg.kind, sid)]
            holder.state = ClientState.DONE
        self._created(sub, sid, envelope.headers)

    def _created(self, sub: ClientSubscription, sid: str, headers: env.Headers) -> None:
        if self._pending.pop(sub.key, None) is None:
            del self._orphans[sub.key]
        sub.sid = sid
        self._ids(sub.kind)[sid] = sub
        if sub.state is ClientState.CANCELLED:
            # cancelled before the ID was known: tell Ditto now
            self._remember_cancelled(sub.kind, sid)
            self._send(sub.base, "cancel", {}, {"subscriptionId": sid}, None)
            return
        sub.state = CLIENT_TRANSITIONS[(sub.state, ClientInput.CREATED)]
        self._events.append(SubscriptionCreated(key=sub.key, subscription_id=sid, headers=headers))

    def _completed(self, sub: ClientSubscription, sid: str) -> None:
        self._advance(sub, ClientInput.COMPLETE)
        self._events.append(SubscriptionCompleted(key=sub.key, subscription_id=sid))

    def _match_pending(self, envelope: env.Envelope, msg: Classified) -> ClientSubscription | None:
        """The subscribe a ``created`` answers: by correlation-id, else the
        oldest pending one of the topic's kind and entity; failing both, a
        subscribe an uncorrelated error failed (``_orphans``), alike."""
        correlation_id = envelope.headers.correlation_id
        for subs in (self._pending, self._orphans):
            fallback = None
            for sub in subs.values():
                if correlation_id is not None and sub.correlation_id == correlation_id:
                    return sub
                if fallback is None and sub.kind is msg.kind and _same_entity(sub.topic, msg.topic):
                    fallback = sub
            if fallback is not None:
                return fallback
        return None

    def _on_next(self, sub: ClientSubscription, sid: str, value: dict[str, Any]) -> None:
        cancelled = sub.state is ClientState.CANCELLED
        excess = sub.demand == 0 and not cancelled
        if excess or sub.state not in NEXT_KEEPS:  # the table lookup hashes two enums
            self._advance(sub, ClientInput.NEXT_EXCESS if excess else ClientInput.NEXT)
        if excess:
            self._send(sub.base, "cancel", {}, {"subscriptionId": sid}, None)
            raise RemoteProtocolError(
                f"next beyond the requested demand on {sid!r} (rule 1.1)", 400
            )
        if sub.demand != MAX_DEMAND and sub.demand > 0:
            sub.demand -= 1
        if sub.kind is Kind.SEARCH:
            items = value.get("items")
            if not isinstance(items, list):
                raise env.MessageError(_not_array())
            self._events.append(PageReceived(key=sub.key, subscription_id=sid, items=tuple(items)))
            return
        self._events.append(new_next(sub.key, sid, value.get("item")))

    def _advance(self, sub: ClientSubscription, what: ClientInput) -> None:
        following = CLIENT_TRANSITIONS.get((sub.state, what))
        if following is None:
            raise RemoteProtocolError(
                f"{what.value} not allowed on {sub.sid!r} in {sub.state.value}", 400
            )
        sub.state = following
        if following is ClientState.DONE and sub.sid is not None:
            del self._ids(sub.kind)[sub.sid]
            self._cancelled.pop((sub.kind, sub.sid), None)

    def _on_error_response(self, envelope: env.Envelope, topic: env.Topic) -> None:
        error = error_of(envelope)
        correlation_id = envelope.headers.correlation_id
        if correlation_id is not None:
            for sub in self._pending.values():
                if sub.correlation_id == correlation_id:
                    del self._pending[sub.key]
                    self._events.append(
                        ErrorResponseReceived(key=sub.key, error=error, envelope=envelope)
                    )
                    return
        # Uncorrelated: Ditto loses the command's headers on some errors
        # (a 500 for a timestamp it cannot parse). It answers a subscribe
        # instead of its created, so it fails every pending subscribe that
        # may have caused it: those of the topic's kind and entity (all for
        # Ditto's "unknown" topic), and, when the error has a correlation-id
        # (someone else's), only those sent without one. None waits forever.
        scope = error_scope(topic)
        failed = [
            sub
            for sub in self._pending.values()
            if (correlation_id is None or sub.correlation_id is None)
            and in_scope(sub.kind, sub.topic, scope)
        ]
        if not failed:
            self._events.append(ErrorResponseReceived(key=None, error=error, envelope=envelope))
            return
        limit = self.config.max_subscriptions
        for sub in failed:
            del self._pending[sub.key]
            if sub.state is not ClientState.CANCELLED:
                sub.state = CLIENT_TRANSITIONS[(sub.state, ClientInput.CANCEL)]
            # A good one among them gets its created later: cancelled then.
            self._orphans[sub.key] = sub
            if len(self._orphans) > limit:
                del self._orphans[next(iter(self._orphans))]
            self._events.append(ErrorResponseReceived(key=sub.key, error=error, envelope=envelope))

    # -- output -----------------------------------------------------------------

    _send = intents.send


def _same_entity(a: env.Topic, b: env.Topic) -> bool:
    return (a.namespace, a.entity_name, a.group) == (b.namespace, b.entity_name, b.group)


def _not_array() -> env.DittoError:
    return env.DittoError(
        status=400, error="json.invalid", message="The field <items> is no array."
    )
