"""The publisher side of the Ditto engines: :class:`DittoServerEngine`
answers each subscribe from a :class:`~.history.HistorySource` and pulls its
result through :class:`~..drive.streams.Outbound` strictly within the
subscriber's demand; :func:`headers_of` gives a history source the
upgrade request's HTTP headers."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from sansrs.ditto import (
    INTERNAL_ERROR,
    DittoException,
    DittoServer,
    DittoServerConfig,
    Envelope,
    Kind,
)
from sansrs.ditto import events as ev
from sansrs.streams import Subscriber

from ..drive.engine import Driver
from ..drive.streams import Outbound, Outbounds, make_source
from ..transport import Transport
from .history import HistoryRequest, HistorySource
from .records import RecordEngine

__all__ = ["OUTPUT_HIGH", "PUMP_BUDGET", "DittoServerEngine", "headers_of"]

log = logging.getLogger("sansrs.adapters.ditto")

#: Items one subscription may send per loop turn, so subscriptions share the loop.
PUMP_BUDGET: Final = 256
#: Bytes of messages queued in one turn above which no subscription is
#: pumped until the driver has taken them (its ``high_water`` then decides).
OUTPUT_HIGH: Final = 256 * 1024


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


class DittoServerEngine(RecordEngine):
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
