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

The generic pieces (prefetching iterators, credit-bound outbound, sources)
come from :mod:`..drive.streams`; any driver runs the engines.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypedDict

from typing_extensions import Unpack

from sansrs.ditto import (
    INTERNAL_ERROR,
    DittoClient,
    DittoClientConfig,
    DittoException,
    DittoServer,
    DittoServerConfig,
    Envelope,
    Kind,
    LocalProtocolError,
    RemoteProtocolError,
)
from sansrs.ditto import events as ev
from sansrs.streams import Subscriber, add_demand

from ..drive import streams
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.streams import Outbound, Outbounds, make_source
from ..transport import Transport
from ..transport.websocket import messages as ws
from .history import HistoryRequest, HistorySource

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

_CLOSE: Final = ws.MessageKind.CLOSE.value
_TEXT_RUN: Final = ws.MessageKind.TEXT_RUN.value
_TEXT_LINES: Final = ws.MessageKind.TEXT_LINES.value
_BINARY_RUN: Final = ws.MessageKind.BINARY_RUN.value

#: Items one subscription may send per loop turn, so subscriptions share the loop.
PUMP_BUDGET: Final = 256
#: Bytes of messages queued in one turn above which no subscription is
#: pumped until the driver has taken them (its ``high_water`` then decides).
OUTPUT_HIGH: Final = 256 * 1024

Sink = streams.Sink[Any]


class _RecordEngine(abc.ABC):
    """Records in and out, the WebSocket close handshake, the close reason.
    The roles supply ``_message`` (one text message in), ``_after_messages``
    (the core's events of a read out) and ``_flush_core`` (the core's queued
    messages out)."""

    def __init__(self) -> None:
        self._reader = ws.MessageReader(keep_runs=True)
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._closing: BaseException | None = None
        self._close_sent = False
        self._now = 0.0

    # -- Engine protocol (shared) ---------------------------------------------
    def receive_data(self, data: bytes, now: float) -> None:
        self._now = now
        if not data:
            if self._closing is None:
                self._closing = ConnectionClosed("connection closed by peer (no close message)")
            return
        for kind, payload in self._reader.feed(data):
            if self._closing is not None:
                break
            if kind == _CLOSE:
                code, reason = ws.decode_close(payload)
                self._closing = ConnectionClosed(f"connection closed by peer: {code} {reason}")
                break
            if kind == _TEXT_LINES:  # messages each followed by 0xFF (the common read)
                self._lines(ws.split_lines(payload), now)
            elif kind in (_TEXT_RUN, _BINARY_RUN):  # messages behind their lengths
                self._run(payload, now)
            else:
                self._text(payload, now)
        self._after_messages()
        self._flush_core()

    def _run(self, payload: bytes, now: float) -> None:
        off, end = 0, len(payload)
        parts = []
        while off < end:
            stop = off + 3 + int.from_bytes(payload[off : off + 3], "big")
            parts.append(payload[off + 3 : stop])
            off = stop
        self._lines(parts, now)

    def _lines(self, parts: list[bytes], now: float) -> None:
        """The messages of a run, in order (UTF-8 bytes each)."""
        for part in parts:
            if self._closing is not None:
                break
            self._text(part, now)

    def _text(self, payload: bytes, now: float) -> None:
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:  # a BINARY message that is not text
            self._fail(ws.CloseCode.INVALID_DATA, "Ditto messages are UTF-8 JSON text")
            return
        self._message(text, now)

    def data_to_send(self) -> bytes:
        self._flush_core()
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        self._out_bytes = 0
        return data

    def begin_close(self) -> None:
        self._send_close(ws.CloseCode.NORMAL, "closed by the application")
        if self._closing is None:
            self._closing = ConnectionClosed("connection closed locally")

    def wants_close(self) -> bool:
        return self._closing is not None

    def close_reason(self) -> BaseException | None:
        return self._closing

    # -- helpers --------------------------------------------------------------
    def _send_close(self, code: int, reason: str) -> None:
        if not self._close_sent:
            self._flush_core()
            self._close_sent = True
            self._out.append(ws.encode_close(code, reason))

    def _fail(self, code: int, reason: str) -> None:
        """Close the WebSocket because of the peer; everything outstanding fails."""
        self._send_close(code, reason)
        if self._closing is None:
            self._closing = ConnectionClosed(f"protocol error from peer: {reason}")

    def _queue_messages(self, messages: list[str]) -> None:
        if messages and not self._close_sent:
            # One TEXT_LINES record (each message followed by 0xFF, which
            # UTF-8 never contains): the transport frames each message. One
            # join, no Python step per message here or in the transport: a
            # history stream sends hundreds per turn (docs/performance.md).
            if all(map(str.isascii, messages)):  # ASCII: Latin-1 is its UTF-8
                lines = "\xff".join([*messages, ""]).encode("latin-1")
            else:
                lines = b"\xff".join([*map(str.encode, messages), b""])
            record = ws.encode_lines(lines)
            self._out.append(record)
            self._out_bytes += len(record)

    @abc.abstractmethod
    def _message(self, text: str, now: float) -> None: ...

    @abc.abstractmethod
    def _after_messages(self) -> None:
        """Every message of one read is in: hand on what they caused, as one
        batch (a read's items reach a sink with one ``put_many``)."""

    @abc.abstractmethod
    def _flush_core(self) -> None: ...


# -- client -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeRequest:
    """What to subscribe to: ``kind`` streaming (history) or search, and the core's arguments."""

    kind: Kind
    arguments: Mapping[str, Any]


class HistoryQuery(TypedDict, total=False):
    """The range and filter of a persisted-events subscription (all optional):
    revisions (negative ``from``: the last n; ``to`` <= 0: the latest) or
    timestamps (``datetime`` or ISO-8601 text), an RQL ``filter``, the
    ``group`` (``"things"`` by default, or ``"policies"``, ``"connections"``)
    and extra Ditto ``headers``."""

    from_revision: int | None
    to_revision: int | None
    from_timestamp: datetime | str | None
    to_timestamp: datetime | str | None
    filter: str | None
    group: str
    headers: Mapping[str, Any] | None


class SearchQuery(TypedDict, total=False):
    """A search subscription (all optional): RQL ``filter``, Ditto's
    ``options`` string (``"size(10),sort(+thingId)"``), ``namespaces``,
    ``fields`` and extra ``headers``."""

    filter: str | None
    options: str | None
    namespaces: Iterable[str] | None
    fields: str | None
    headers: Mapping[str, Any] | None


def _split_entity(entity: str) -> tuple[str, str]:
    namespace, sep, name = entity.partition(":")
    if not sep or not namespace or not name:
        raise ValueError(f"an entity ID is '<namespace>:<name>', not {entity!r}")
    return namespace, name


def history_request(entity: str, **query: Unpack[HistoryQuery]) -> SubscribeRequest:
    """The persisted events of ``entity`` (``"<namespace>:<name>"``)."""
    namespace, name = _split_entity(entity)
    return SubscribeRequest(
        kind=Kind.STREAMING,
        arguments={
            "namespace": namespace,
            "entity_name": name,
            "group": query.get("group", "things"),
            "from_historical_revision": query.get("from_revision"),
            "to_historical_revision": query.get("to_revision"),
            "from_historical_timestamp": query.get("from_timestamp"),
            "to_historical_timestamp": query.get("to_timestamp"),
            "filter": query.get("filter"),
            "headers": query.get("headers"),
        },
    )


def search_request(**query: Unpack[SearchQuery]) -> SubscribeRequest:
    """A search over things."""
    namespaces = query.get("namespaces")
    return SubscribeRequest(
        kind=Kind.SEARCH,
        arguments={
            "filter": query.get("filter"),
            "options": query.get("options"),
            "namespaces": None if namespaces is None else tuple(namespaces),
            "fields": query.get("fields"),
            "headers": query.get("headers"),
        },
    )


class SubscriptionHandle:
    """One subscription this client started (connection thread only)."""

    __slots__ = ("cancelled", "demand", "done", "key", "request", "sid", "sink")

    def __init__(self, request: SubscribeRequest, sink: Sink, demand: int) -> None:
        self.request = request
        self.sink = sink
        self.key: int | None = None
        self.sid: str | None = None
        #: demand asked before ``created`` arrived; requested when it does
        self.demand = demand
        self.cancelled = False
        self.done = False


class DittoClientEngine(_RecordEngine):
    """The :class:`~..drive.engine.Engine` of one client connection (one WebSocket)."""

    def __init__(self, config: DittoClientConfig | None = None) -> None:
        super().__init__()
        self.core = DittoClient(config)
        self._by_key: dict[int, SubscriptionHandle] = {}

    @property
    def open_subscriptions(self) -> int:
        """Subscriptions started and not ended (inspection, for tests and stats)."""
        return len(self._by_key)

    # -- Engine protocol ------------------------------------------------------
    def pump(self) -> bool:
        return False  # the client sends no items; requests go out as they are made

    def next_deadline(self) -> float | None:
        return self.core.next_deadline()

    def handle_timeout(self, now: float) -> None:
        self.core.handle_timeout(now)

    def connection_lost(self, error: BaseException) -> None:
        if self._closing is not None:
            error = self._closing
        handles = list(self._by_key.values())
        self._by_key.clear()
        for handle in handles:
            handle.done = True
            handle.sink.finish(error)

    def _flush_core(self) -> None:
        self._queue_messages(self.core.messages_to_send())

    def _message(self, text: str, now: float) -> None:
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
        elif isinstance(event, ev.StrayMessageReceived):
            log.warning("message from Ditto for no subscription: %s", event.envelope.topic)
        else:
            log.debug("ignored message from Ditto: %r", event)

    def _end(self, key: int, error: BaseException | None) -> None:
        handle = self._by_key.pop(key, None)
        if handle is not None:
            handle.done = True
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
        self._flush_core()

    def request_more(self, handle: SubscriptionHandle, n: int) -> None:
        if handle.done or handle.cancelled:
            return
        if handle.sid is None:
            handle.demand = add_demand(handle.demand, n)
            return
        try:  # noqa: SIM105 - as in _on_event
            self.core.request(handle.sid, n, kind=handle.request.kind)
        except LocalProtocolError:
            pass  # ended in a batch not yet consumed
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
        with contextlib.suppress(LocalProtocolError):  # it ended meanwhile
            if handle.sid is None:
                self.core.cancel_pending(handle.key)
            else:
                self.core.cancel(handle.sid, kind=handle.request.kind)
        self._flush_core()


# -- server -----------------------------------------------------------------------


def _is_single(result: object) -> bool:
    """A history source's result that is one item rather than an iterable of items."""
    return isinstance(result, dict | str | bytes | Envelope)


def _key(kind: Kind, sid: str) -> str:
    """A served subscription's key: its kind and ID (Ditto numbers each kind from "0")."""
    return f"{kind.value}/{sid}"


class _Upstream:
    """The Publisher the core subscribes to (at the first request): it relays
    the core's demand to an :class:`Outbound`, which the engine pumps."""

    def __init__(self, engine: DittoServerEngine, sid: str) -> None:
        self._engine = engine
        self._sid = sid
        self.subscriber: Subscriber[Any] | None = None
        self.outbound: Outbound[Any] | None = None

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscriber = subscriber
        # Pumped from now on only: a source that already ended before the
        # core subscribed must not complete into nobody.
        if self.outbound is not None:
            self._engine._outbounds.add(self._sid, self.outbound, runnable=False)
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        self._engine._outbounds.credit(self._sid, n)

    def cancel(self) -> None:
        out = self.outbound
        if out is not None:
            out.cancel()
        self._engine._forget(self._sid)


class DittoServerEngine(_RecordEngine):
    """The :class:`~..drive.engine.Engine` of one server connection (one WebSocket)."""

    def __init__(
        self,
        source: HistorySource,
        config: DittoServerConfig | None = None,
        *,
        connection_headers: Mapping[str, str] | None = None,
        threaded_sources: bool = False,
    ) -> None:
        super().__init__()
        self.core = DittoServer(config)
        self.source = source
        #: pull iterables on a worker thread per subscription (sources that block)
        self.threaded_sources = threaded_sources
        self.connection_headers: Mapping[str, str] = connection_headers or {}
        self._upstreams: dict[str, _Upstream] = {}
        #: Subscriptions the core has subscribed to, pumped within their demand.
        self._outbounds: Outbounds[str] = Outbounds(PUMP_BUDGET)

    @property
    def open_subscriptions(self) -> int:
        return len(self._upstreams)

    def attach(self, driver: Driver) -> None:
        """Driven by ``driver``: Publishers signalling from other threads wake
        it; sources see the WebSocket upgrade's headers."""
        self._outbounds.attach(driver)
        self.connection_headers = _LazyHeaders(driver.transport)

    def credit_of(self, sid: str, kind: Kind = Kind.STREAMING) -> int:
        """Items the subscriber of ``kind`` subscription ``sid`` has asked for
        and not yet received (inspection)."""
        upstream = self._upstreams.get(_key(kind, sid))
        out = upstream.outbound if upstream is not None else None
        return 0 if out is None else out.credit

    # -- Engine protocol ------------------------------------------------------
    def next_deadline(self) -> float | None:
        return self.core.next_deadline()

    def handle_timeout(self, now: float) -> None:
        self._now = now
        self.core.handle_timeout(now)
        self._dispatch()

    def pump(self) -> bool:
        more = self._outbounds.pump(self._output_full)
        self._dispatch()
        return more

    def _output_full(self) -> bool:
        """This turn has queued ``OUTPUT_HIGH`` bytes: let the driver take
        them (and stop pumping while the socket does not drain)."""
        self._flush_core()
        return self._out_bytes >= OUTPUT_HIGH

    def connection_lost(self, error: BaseException) -> None:
        upstreams = list(self._upstreams.values())
        self._upstreams.clear()
        self._outbounds.cancel_all()
        for upstream in upstreams:
            if upstream.outbound is not None:
                upstream.outbound.cancel()

    def _flush_core(self) -> None:
        self._queue_messages(self.core.messages_to_send())

    def _message(self, text: str, now: float) -> None:
        self.core.receive_message(text, now=now)  # never raises

    def _after_messages(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        for event in self.core.events():
            if isinstance(event, ev.SubscribeReceived):
                self._on_subscribe(event)
            elif isinstance(event, ev.SubscriptionClosed):
                self._forget(_key(event.kind, event.subscription_id))
            elif isinstance(event, ev.InvalidMessage):
                log.debug("answered an invalid message: %s", event.error)

    def _forget(self, sid: str) -> None:
        upstream = self._upstreams.pop(sid, None)
        self._outbounds.remove(sid)
        if upstream is not None and upstream.outbound is not None:
            upstream.outbound.cancel()

    def _on_subscribe(self, event: ev.SubscribeReceived) -> None:
        sid, kind = event.subscription_id, event.kind
        key = _key(kind, sid)
        request = HistoryRequest(
            subscription_id=sid,
            kind=event.kind,
            topic=event.topic,
            options=event.options,
            headers=event.headers,
            connection_headers=self.connection_headers,
        )
        try:
            result = self.source.open(request)
            source = make_source(
                result,
                is_single=_is_single,
                notify=lambda: self._outbounds.poke(key),
                threaded=(
                    f"sansrs-ditto-source-{kind.value}-{sid}" if self.threaded_sources else None
                ),
            )
        except DittoException as exc:
            self.core.reject(sid, exc.error, kind=kind)
            return
        except Exception:
            log.exception("history source failed for %s subscription %s", kind.value, sid)
            self.core.reject(sid, INTERNAL_ERROR, kind=kind)
            return
        upstream = _Upstream(self, key)

        def emit(item: Any, last: bool) -> None:
            subscriber = upstream.subscriber
            assert subscriber is not None
            subscriber.on_next(item)
            if last:
                subscriber.on_complete()

        def emit_many(items: list[Any]) -> int:
            # The core's Subscriber takes a batch in one call (its
            # on_next_many); one on_next each otherwise.
            subscriber: Any = upstream.subscriber
            assert subscriber is not None
            many = getattr(subscriber, "on_next_many", None)
            if many is not None:
                many(items)
            else:
                for item in items:
                    subscriber.on_next(item)
            return len(items)

        def complete() -> None:
            if upstream.subscriber is not None:
                upstream.subscriber.on_complete()

        def fail(exc: BaseException) -> None:
            if upstream.subscriber is not None:
                # A DittoException keeps its error; anything else is Ditto's 500.
                upstream.subscriber.on_error(exc)

        upstream.outbound = Outbound(source, emit, complete, fail, 0, emit_many=emit_many)
        self._upstreams[key] = upstream
        self.core.accept(sid, upstream, kind=kind)


def headers_of(request: Any) -> dict[str, str]:
    """The upgrade request's headers, names lower-case."""
    out: dict[str, str] = {}
    for name, value in getattr(request, "headers", ()):
        key = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        out[key.lower()] = text
    return out


class _LazyHeaders(Mapping[str, str]):
    """The upgrade request's headers, read from the transport when first asked
    (the handshake completes after the connection thread has started)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._headers: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._headers is None:
            request = getattr(self._transport, "request", None)
            self._headers = headers_of(request) if request is not None else {}
        return self._headers

    def __getitem__(self, name: str) -> str:
        return self._get()[name.lower()]

    def __iter__(self) -> Any:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())
