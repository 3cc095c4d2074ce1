"""Binds the sans-IO Ditto cores to a driver loop: the Ditto-specific part of the
adapters. Everything here runs on the connection's owning thread.

Ditto speaks text messages over a WebSocket (``/ws/2``). The WebSocket
transport hands the engine *message records* (:mod:`..transport.websocket.messages`): one TEXT
record per message, a CLOSE record when the WebSocket closes. The engines
turn records into core calls and core output into records.

- :class:`DittoClientEngine`: the subscriber side. Each subscription feeds a
  sink (a :class:`~.queues.CreditQueue` behind a blocking iterator, or a
  :class:`~..drive.publishers.SubscriberSink` behind a Publisher).
- :class:`DittoServerEngine`: the publisher side. Each subscribe is answered
  from a :class:`~.history.HistorySource`; its result is pulled through
  :class:`~..drive.streams.Outbound` strictly within the subscriber's demand.

Their concerns apart: :mod:`.records` (the records in and out, the close:
what both roles share), :mod:`.subscriptions` (what a client subscribes to,
its handle per subscription), :mod:`.server_engine` (the publisher side);
this module is the subscriber side and imports them all (one import path).
The generic pieces (prefetching iterators, credit-bound outbound, sources)
come from :mod:`..drive.streams`; any driver runs the engines.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from sansrs.ditto import (
    DittoClient,
    DittoClientConfig,
    Kind,
    LocalProtocolError,
    RemoteProtocolError,
)
from sansrs.ditto import events as ev
from sansrs.streams import add_demand

from ..drive.errors import ConnectionClosed
from ..transport.websocket import messages as ws
from .keepalive import KeepAlive
from .live import LiveEvents
from .records import RecordEngine
from .server_engine import DittoServerEngine, headers_of
from .subscriptions import (
    HistoryQuery,
    SearchQuery,
    SubscribeRequest,
    SubscriptionHandle,
    history_request,
    search_request,
)
from .tokens import TokenRefresher, jwt_token_message

__all__ = [
    "DittoClientEngine",
    "DittoServerEngine",
    "HistoryQuery",
    "SearchQuery",
    "SubscribeRequest",
    "SubscriptionHandle",
    "headers_of",
    "history_request",
    "search_request",
]

log = logging.getLogger("sansrs.adapters.ditto")


class DittoClientEngine(RecordEngine):
    """The :class:`~..drive.engine.Engine` of one client connection (one WebSocket)."""

    def __init__(self, config: DittoClientConfig | None = None) -> None:
        super().__init__()
        self.core = DittoClient(config)
        self._by_key: dict[int, SubscriptionHandle] = {}
        #: the token schedule (``connect(token=<callable>)``), set by the peer
        self.tokens: TokenRefresher | None = None
        #: live change notifications (``START-SEND-EVENTS``): the taps and their session
        self.live = LiveEvents(self._queue_messages)
        #: withheld demand sent before Ditto's idle timeout (``connect(keepalive=)``)
        self.keepalive: KeepAlive[SubscriptionHandle] | None = None

    def keep_alive(self, interval: float, clock: Callable[[], float]) -> None:
        """Turn keep-alive on (:mod:`.keepalive`), before any subscribe."""
        self.keepalive = KeepAlive(interval, clock, self._keepalive_request)

    def _keepalive_request(self, handle: SubscriptionHandle, n: int) -> None:
        if handle.sid is not None:
            with contextlib.suppress(LocalProtocolError):  # it ended meanwhile
                self.core.request(handle.sid, n, kind=handle.request.kind)
            self._requested(handle)

    def _requested(self, handle: SubscriptionHandle) -> None:
        if self.keepalive is not None:
            self.keepalive.requested(handle)

    @property
    def open_subscriptions(self) -> int:
        """Subscriptions started and not ended (inspection, for tests and stats)."""
        return len(self._by_key)

    # -- Engine protocol ------------------------------------------------------
    def pump(self) -> bool:
        return False  # the client sends no items; requests go out as they are made

    def next_deadline(self) -> float | None:
        deadlines = [self.core.next_deadline()]
        if self.tokens is not None:
            deadlines.append(self.tokens.next_deadline())
        if self.keepalive is not None:
            deadlines.append(self.keepalive.next_deadline())
        return min((d for d in deadlines if d is not None), default=None)

    def handle_timeout(self, now: float) -> None:
        self._now = now
        self.core.handle_timeout(now)
        if self.tokens is not None:
            self.tokens.handle_timeout(now, self._token_fetched)
        if self.keepalive is not None:
            self.keepalive.handle_timeout(now)
            self._flush_core()

    def refresh_token(self) -> bool:
        """Ask the provider for a token now and send it (on demand); False
        without a provider or while a fetch is under way."""
        return self.tokens is not None and self.tokens.refresh_now(self._token_fetched)

    def _token_fetched(self, result: str | BaseException) -> None:
        tokens = self.tokens
        if tokens is None or self._closing is not None:
            return
        if isinstance(result, str):
            try:
                message = jwt_token_message(result)
            except ValueError as exc:
                tokens.failed(exc, self._now)
                return
            self._queue_messages([message])
            tokens.fetched(result, self._now)
        else:
            tokens.failed(result, self._now)

    def connection_lost(self, error: BaseException) -> None:
        if self._closing is not None:
            error = self._closing
        handles = list(self._by_key.values())
        self._by_key.clear()
        for handle in handles:
            handle.done = True
            handle.sink.finish(error)
        self.live.finish(error)

    def _flush_core(self) -> None:
        self._queue_messages(self.core.messages_to_send())

    def _message(self, text: str, now: float) -> None:
        if text[:1] != "{" and self.live.active and self.live.control(text):
            return  # a WebSocket binding answer (START-SEND-EVENTS:ACK)
        try:
            self.core.receive_message(text)
        except RemoteProtocolError as exc:
            self._protocol_error(exc)

    def _lines(self, parts: list[bytes], now: float) -> None:
        # A history stream's messages come here, a few hundred per read: the
        # core takes them in one call and reports consecutive items as one
        # event (DittoClient.receive_run, docs/performance.md).
        bad = None
        try:
            texts = list(map(bytes.decode, parts))  # UTF-8, a C loop
        except UnicodeDecodeError:
            texts = []
            for part in parts:
                try:
                    texts.append(part.decode("utf-8"))
                except UnicodeDecodeError:
                    bad = part
                    break
        if self.live.active:  # binding answers are not Ditto Protocol JSON
            texts = self.live.take_controls(texts)
        try:
            self.core.receive_run(texts)
        except RemoteProtocolError as exc:
            self._protocol_error(exc)
            return
        if bad is not None:
            self._text(bad, now)  # fails the connection, after the messages before it

    def _protocol_error(self, exc: RemoteProtocolError) -> None:
        # Ditto broke the protocol (invalid JSON, more items than asked,
        # rule 1.1): nothing on this connection can be trusted any more.
        self._dispatch()
        self._fail(ws.CloseCode.POLICY_VIOLATION, f"Ditto protocol error: {exc.message}")
        self._closing = ConnectionClosed(f"protocol error from Ditto: {exc.message}")
        self._closing.__cause__ = exc

    def _after_messages(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        """Core events to sinks; consecutive items of one subscription as one batch."""
        by_key = self._by_key
        batch: list[Any] = []
        batch_handle: SubscriptionHandle | None = None
        next_received, page_received = ev.NextReceived, ev.PageReceived
        items_received = ev.ItemsReceived
        for event in self.core.take_events():
            kind = type(event)  # identity tests: a union isinstance costs more per item
            if kind is items_received:
                run: Any = event
                handle = by_key.get(run.key)
                if handle is None:
                    continue  # cancelled: late items are dropped
                if handle is batch_handle:
                    batch.extend(run.items)
                    continue
                if batch_handle is not None:
                    batch_handle.sink.put_many(batch)
                batch, batch_handle = run.items, handle  # the core's list, handed on
                continue
            if kind is next_received or kind is page_received:
                item_event: Any = event
                handle = by_key.get(item_event.key)
                if handle is None:
                    continue  # cancelled: late items are dropped
                item = item_event.item if kind is next_received else list(item_event.items)
                if handle is batch_handle:
                    batch.append(item)
                    continue
                if batch_handle is not None:
                    batch_handle.sink.put_many(batch)
                batch, batch_handle = [item], handle
                continue
            if batch_handle is not None:
                batch_handle.sink.put_many(batch)
                batch, batch_handle = [], None
            self._on_event(event)
        if batch_handle is not None:
            batch_handle.sink.put_many(batch)

    def _on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.SubscriptionCreated):
            handle = self._by_key.get(event.key)
            if handle is None:
                return
            handle.sid = event.subscription_id
            if handle.demand:
                demand, handle.demand = handle.demand, 0
                # It may have ended already, in the same read (created, then
                # failed). A suppress costs 25 bytecode instructions, once or
                # twice a thing (docs/performance.md, "a thing's control path").
                try:  # noqa: SIM105 - see above
                    self.core.request(event.subscription_id, demand, kind=handle.request.kind)
                except LocalProtocolError:
                    pass
                self._requested(handle)
        elif isinstance(event, ev.SubscriptionCompleted):
            self._end(event.key, None)
        elif isinstance(event, ev.SubscriptionFailed):
            self._end(event.key, event.error.exception())
        elif isinstance(event, ev.ErrorResponseReceived):
            # With or without a correlation-id: the core names every pending
            # subscribe it may answer (DittoClient._on_error_response).
            if event.key is not None:
                self._end(event.key, event.error.exception())
            else:
                log.warning("error response from Ditto for no pending subscribe: %s", event.error)
        elif isinstance(event, ev.OtherMessageReceived) and self.live.active:
            self.live.event(event.envelope)
        elif isinstance(event, ev.StrayMessageReceived):
            topic = event.envelope.topic
            # A "failed" for a subscription that is over is Ditto's answer to
            # a request that crossed its end (complete, cancel): routine.
            level = logging.DEBUG if topic.endswith("/failed") else logging.WARNING
            log.log(level, "message from Ditto for no subscription: %s", topic)
        else:
            log.debug("ignored message from Ditto: %r", event)

    def _end(self, key: int, error: BaseException | None) -> None:
        handle = self._by_key.pop(key, None)
        if handle is not None:
            handle.done = True
            if self.keepalive is not None:
                self.keepalive.forget(handle)
            handle.sink.finish(error)

    # -- application intents (handed over by the peers) --------------------
    def subscribe(self, handle: SubscriptionHandle) -> None:
        """Send the subscribe; ``handle.demand`` is requested once ``created`` arrives."""
        if handle.cancelled or handle.done:
            return
        if self._closing is not None:
            handle.done = True
            handle.sink.finish(self._closing)
            return
        args = dict(handle.request.arguments)
        try:
            if handle.request.kind is Kind.SEARCH:
                key = self.core.subscribe_search(**args)
            else:
                key = self.core.subscribe_for_persisted_events(**args)
        except LocalProtocolError as exc:
            handle.done = True
            handle.sink.finish(exc)
            return
        handle.key = key
        self._by_key[key] = handle
        if self.keepalive is not None:
            handle.demand = self.keepalive.withhold(handle, handle.demand)
        self._flush_core()

    def request_more(self, handle: SubscriptionHandle, n: int) -> None:
        if handle.done or handle.cancelled:
            return
        if self.keepalive is not None:
            n = self.keepalive.withhold(handle, n)
        if handle.sid is None:
            handle.demand = add_demand(handle.demand, n)
            return
        try:  # noqa: SIM105 - as in _on_event
            self.core.request(handle.sid, n, kind=handle.request.kind)
        except LocalProtocolError:
            pass  # ended in a batch not yet consumed
        self._requested(handle)
        self._flush_core()

    def cancel(self, handle: SubscriptionHandle) -> None:
        if handle.cancelled:
            return
        handle.cancelled = True
        handle.sink.close()
        if handle.done or handle.key is None:
            return
        handle.done = True
        self._by_key.pop(handle.key, None)
        if self.keepalive is not None:
            self.keepalive.forget(handle)
        with contextlib.suppress(LocalProtocolError):  # it ended meanwhile
            if handle.sid is None:
                self.core.cancel_pending(handle.key)
            else:
                self.core.cancel(handle.sid, kind=handle.request.kind)
        self._flush_core()

