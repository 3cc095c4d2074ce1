"""The client (subscriber) role of the Ditto streaming subscription protocol, sans-IO.

Intents (``subscribe_for_persisted_events``, ``subscribe_search``,
``request``, ``cancel``) queue text messages; Ditto's answers come in through
``receive_message`` and go out as events. A peer that breaks the protocol
(invalid JSON, a ``next`` beyond the demand, rule 1.1) makes
``receive_message`` raise ``RemoteProtocolError`` after the affected
subscription is cancelled; ``failed`` is a normal event whose
``error.exception()`` is a ``DittoRemoteError``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from .._errors import LocalProtocolError, RemoteProtocolError
from ..streams import MAX_DEMAND, add_demand
from . import _envelope as env
from ._config import DittoClientConfig
from ._error_responses import error_of, error_scope, in_scope
from ._fast import message_text, new_items, new_next, next_prefix, plain_message, topic_base
from ._messages import (
    SUBSCRIBE_PERSISTED,
    Classified,
    Kind,
    SearchOptions,
    SubscribeOptions,
    check_instant,
    classify,
    of_kind,
    subscription_id_of,
)
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




#: States an item (NEXT) leaves as they are, read from the table: the hot
#: path skips the lookup for them (docs/performance.md).
_NEXT_KEEPS: Final = tuple(  # a tuple: "in" compares by identity, no enum hash
    state for (state, what), after in CLIENT_TRANSITIONS.items()
    if what is ClientInput.NEXT and after is state
)


class _ClientSubscription:
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


class _Shortcut:
    """What every ``next`` of one streaming subscription starts with (see
    ``DittoClient._next_shortcut``), learned from one that took the full path."""

    __slots__ = ("cut", "hits", "prefix", "sid", "sub")

    def __init__(self, prefix: str, sid: str, sub: _ClientSubscription) -> None:
        self.prefix = prefix
        self.cut = len(prefix)
        self.sid = sid
        self.sub = sub
        self.hits = 0


#: A subscription whose learned shortcuts missed this many times in a row
#: (its ``next`` messages differ in their headers) learns no more of them.
_MAX_SHORTCUT_MISSES: Final = 4
#: Subscriptions whose shortcuts are kept (tried in turn on every message).
_MAX_SHORTCUTS: Final = 4
#: "No item": the message is left to the full path.
_MISS: Final = object()


class DittoClient:
    """The subscriber side of one connection (one WebSocket)."""

    def __init__(self, config: DittoClientConfig | None = None) -> None:
        self.config = config or DittoClientConfig()
        self._keys = 0
        self._pending: dict[int, _ClientSubscription] = {}  # subscribed, awaiting created
        # Ditto numbers persisted-events and search subscriptions with a
        # counter each, both from "0": a subscription is its kind and its ID.
        self._streams: dict[str, _ClientSubscription] = {}
        self._searches: dict[str, _ClientSubscription] = {}
        # Cancelled subscriptions still accept late events, but Ditto may send
        # none: remember at most max_subscriptions of them, oldest forgotten
        # first (or sooner: when Ditto ends them or gives their ID to another).
        self._cancelled: dict[tuple[Kind, str], None] = {}
        # Subscribes failed by an error Ditto sent without their correlation-id
        # (_on_error_response): one of them may still get its created, which
        # is then cancelled at once. At most max_subscriptions, oldest first.
        self._orphans: dict[int, _ClientSubscription] = {}
        self._events: deque[Event] = deque()
        self._out: list[str] = []
        #: Newest first, at most _MAX_SHORTCUTS (see _next_shortcut).
        self._shortcuts: list[_Shortcut] = []
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

    def _ids(self, kind: Kind) -> dict[str, _ClientSubscription]:
        return self._streams if kind is Kind.STREAMING else self._searches

    def _find(self, sid: str, kind: Kind | None) -> _ClientSubscription | None:
        return of_kind(self._streams, self._searches, sid, kind, _waits_for_late_events)

    # -- intents ----------------------------------------------------------------

    def subscribe_for_persisted_events(
        self,
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
        return self._subscribe(
            Kind.STREAMING,
            topic,
            SUBSCRIBE_PERSISTED,
            options.to_json(explicit_range=explicit_range),
            headers,
            None,
        )

    def subscribe_search(
        self,
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
        return self._subscribe(Kind.SEARCH, topic, "subscribe", search.to_json(), headers, fields)

    def _subscribe(
        self,
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
        sub = _ClientSubscription(key, kind, topic, correlation_id)
        self._pending[key] = sub
        self._send(sub.base, action, out_headers.to_json(), value, fields)
        return key

    def request(
        self,
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
        self,
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

    def cancel_pending(self, key: int) -> None:
        """Cancel subscribe ``key`` before its ``created`` arrived; the cancel goes out with it."""
        sub = self._pending.get(key)
        if sub is None:
            raise LocalProtocolError(f"no subscribe {key} awaits its created")
        sub.state = CLIENT_TRANSITIONS[(sub.state, ClientInput.CANCEL)]

    def _remember_cancelled(self, kind: Kind, sid: str) -> None:
        self._cancelled[(kind, sid)] = None
        if len(self._cancelled) > self.config.max_subscriptions:
            oldest_kind, oldest = next(iter(self._cancelled))
            del self._cancelled[(oldest_kind, oldest)]
            del self._ids(oldest_kind)[oldest]

    def _local_target(
        self, sid: str, what: ClientInput, kind: Kind | None
    ) -> _ClientSubscription:
        sub = self._find(sid, kind)
        if sub is None:
            raise LocalProtocolError(f"no open subscription {sid!r}")
        if (sub.state, what) not in CLIENT_TRANSITIONS:
            raise LocalProtocolError(f"{what.value} not allowed for {sid!r} in {sub.state.value}")
        return sub

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
        run_sub: _ClientSubscription | None = None
        i, end = 0, len(texts)
        while i < end:
            text = texts[i]
            items: Any = _MISS
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
            if items is _MISS:
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

    def _shortcut_items(self, texts: list[str], i: int, shortcut: _Shortcut) -> Any:
        """``_shortcut_item`` of ``texts[i]`` and of the texts after it while
        each is taken: their items (at least one), or ``_MISS``. What one at
        a time checks per message is checked once where it cannot change
        between them (the state and demand only change on the full path;
        the size limit holds for the longest), and the demand is counted
        once for them all."""
        sub = shortcut.sub
        demand = sub.demand
        if sub.state is not ClientState.ACTIVE or not demand:
            return _MISS
        stop_at = len(texts) if demand == MAX_DEMAND else min(len(texts), i + demand)
        if max(map(len, texts[i:stop_at])) > self.config.max_message_size:
            item = self._shortcut_item(texts[i], shortcut)  # one at a time, then
            return _MISS if item is _MISS else [item]
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
            return _MISS
        if demand != MAX_DEMAND:
            sub.demand = demand - len(items)
        shortcut.hits += len(items)
        return items

    def _next_shortcut(self, text: str, shortcut: _Shortcut) -> bool:
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
        if item is _MISS:
            return False
        self._events.append(new_next(shortcut.sub.key, shortcut.sid, item))
        return True

    def _shortcut_item(self, text: str, shortcut: _Shortcut) -> Any:
        """The item of ``text`` taken by ``shortcut`` (its demand counted),
        or ``_MISS``: the full path must decide (see ``_next_shortcut``)."""
        sub = shortcut.sub
        size = len(text)
        if (
            sub.state is not ClientState.ACTIVE
            or not sub.demand
            or size > self.config.max_message_size
            or not text.endswith("}}")
        ):
            return _MISS
        try:
            item, stop = env.scan_json(text, shortcut.cut)
        except (StopIteration, ValueError, RecursionError):
            return _MISS
        if stop != size - 2:  # whitespace or more after the item: the full path decides
            return _MISS
        if sub.demand != MAX_DEMAND:
            sub.demand -= 1
        shortcut.hits += 1
        return item

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

    def _learn_shortcut(self, topic: str, headers: env.Headers, sid: str) -> None:
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
        if sub.misses < _MAX_SHORTCUT_MISSES:
            prefix = next_prefix(topic, headers, sid)
            if prefix:
                kept.insert(0, _Shortcut(prefix, sid, sub))
                del kept[_MAX_SHORTCUTS:]
        self._prefixes = tuple([shortcut.prefix for shortcut in kept])

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

    def _created(self, sub: _ClientSubscription, sid: str, headers: env.Headers) -> None:
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

    def _completed(self, sub: _ClientSubscription, sid: str) -> None:
        self._advance(sub, ClientInput.COMPLETE)
        self._events.append(SubscriptionCompleted(key=sub.key, subscription_id=sid))

    def _match_pending(self, envelope: env.Envelope, msg: Classified) -> _ClientSubscription | None:
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

    def _on_next(self, sub: _ClientSubscription, sid: str, value: dict[str, Any]) -> None:
        cancelled = sub.state is ClientState.CANCELLED
        excess = sub.demand == 0 and not cancelled
        if excess or sub.state not in _NEXT_KEEPS:  # the table lookup hashes two enums
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

    def _advance(self, sub: _ClientSubscription, what: ClientInput) -> None:
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

    def _send(
        self, base: str, action: str, headers: dict[str, Any], value: Any, fields: str | None
    ) -> None:
        """``Envelope(topic=base + action, ...).to_text()``, without building
        the topic and envelope (see ``_fast.message_text``)."""
        self._out.append(message_text(base + action, headers, value, fields))


def _headers_json(headers: Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if headers is None else env.Headers(headers).to_json()


def _waits_for_late_events(sub: _ClientSubscription) -> bool:
    return sub.state is ClientState.CANCELLED  # only waiting for late events


def _check_names(namespace: str, entity_name: str) -> None:
    for what in (namespace, entity_name):
        if not isinstance(what, str) or not what or "/" in what:
            raise LocalProtocolError(f"invalid namespace or entity name {what!r}")


def _same_entity(a: env.Topic, b: env.Topic) -> bool:
    return (a.namespace, a.entity_name, a.group) == (b.namespace, b.entity_name, b.group)


def _not_array() -> env.DittoError:
    return env.DittoError(
        status=400, error="json.invalid", message="The field <items> is no array."
    )
