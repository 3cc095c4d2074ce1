"""Binds the sans-IO rsio core (:mod:`sansrs.rsio`) to the protocol-agnostic
driver (:mod:`.threads`): the rsio-specific part of the adapters. Everything
here runs on the connection's owning thread.

Both directions at once, as the protocol is bidirectional:

- the peer subscribes to *our* publishers (``publishers``: names to
  Publishers); each subscription is an :class:`~..drive.streams.Outbound` pulled
  within the peer's demand. A publisher with ``element_size`` > 0 is served
  in fixed-size mode: elements pulled in one turn leave as one onNextPacked.
  A publisher that also offers ``packed_reader()`` (an :class:`ElementReader`)
  is read in bulk, without a Python call per element.
- we subscribe to the peer's publishers; elements go to a sink (a
  :class:`~.queues.CreditQueue` behind an iterator, or a Subscriber).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from sansrs.rsio import (
    Connection,
    ConnectionConfig,
    ConnectionState,
    LocalProtocolError,
    RemoteProtocolError,
    Role,
    SubscriptionState,
)
from sansrs.rsio import events as ev
from sansrs.streams import MAX_DEMAND, add_demand

from ..drive.endpoints import message_framed
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.streams import Outbound, Outbounds, Pumped, SourceBudget, make_source
from ..transport import Transport
from ..transport.sniff import SHOWN, describe_bytes
from ..transport.websocket import messages as ws
from .errors import RsioError
from .types import ElementReader, Publishers

__all__ = ["RsioEngine", "Subscription", "engine_factory"]

log = logging.getLogger("sansrs.adapters.rsio")

#: Elements one publication may send per loop turn, so publications share the loop.
PUMP_BUDGET = 8192
#: Elements read from a packed reader per onNextPacked (64 KiB of 8-byte elements).
PACKED_CHUNK = 8192
#: Largest WebSocket message sent (rsio bytes carry no meaning in message
#: boundaries, docs §1; 1 MiB stays well under any peer's message limit).
WS_MESSAGE = 1024 * 1024
#: Subscriptions of ours the core can still cancel.
_CANCELLABLE = (SubscriptionState.SUBSCRIBING, SubscriptionState.ACTIVE)


class Subscription:
    """One subscription this side made: ``sink`` receives its elements
    (``packed``: whole onNextPacked payloads as one item each)."""

    __slots__ = ("cancelled", "element_size", "name", "packed", "sid", "sink")

    def __init__(self, name: str, sink: Any, packed: bool = False) -> None:
        self.name = name
        self.sink = sink
        self.packed = packed
        self.sid: int | None = None
        self.element_size = -1  # unknown until onSubscribe
        self.cancelled = False


class _PackedOut:
    """A publication read in bulk from an :class:`ElementReader`: elements
    pulled in one go leave as one onNextPacked, without a Python call each."""

    __slots__ = ("conn", "credit", "finished", "reader", "sid", "size")

    def __init__(
        self, conn: Connection, sid: int, reader: ElementReader, size: int, credit: int
    ) -> None:
        self.conn = conn
        self.sid = sid
        self.reader = reader
        self.size = size
        self.credit = credit
        self.finished = False

    def add_credit(self, n: int) -> None:
        self.credit = add_demand(self.credit, n)

    def cancel(self) -> None:
        if not self.finished:
            self.finished = True
            with contextlib.suppress(Exception):
                self.reader.close()

    def pump(self, budget: int) -> bool:
        if self.finished:
            return False
        conn, sid = self.conn, self.sid
        budget *= 8  # packed elements are cheap: bytes, not Python calls
        while self.credit > 0 and budget > 0 and not conn.output_blocked:
            n = min(self.credit, PACKED_CHUNK, budget)
            try:
                data = self.reader.read(n)
            except Exception as exc:
                log.error("publication to subscriber %d: its element reader raised", sid,
                          exc_info=exc)
                self.cancel()
                conn.send_error(sid, f"{type(exc).__name__}: {exc}")
                return False
            if not data:
                self.cancel()
                conn.send_complete(sid)
                return False
            try:
                conn.send_packed(sid, data)  # validates the size and the demand
            except LocalProtocolError as exc:
                self.cancel()
                conn.send_error(sid, f"the element reader misbehaved: {exc.message}")
                return False
            sent = len(data) // self.size
            if self.credit != MAX_DEMAND:  # unbounded demand is not counted down
                self.credit -= sent
            budget -= sent
        return self.credit > 0 and not self.finished


class _PackingOut:
    """An :class:`Outbound` of fixed-size elements: what one pump pulls
    leaves as one onNextPacked (``flush``)."""

    __slots__ = ("flush", "out")

    def __init__(self, out: Outbound[Any], flush: Callable[[], None]) -> None:
        self.out = out
        self.flush = flush

    @property
    def finished(self) -> bool:
        return self.out.finished

    def add_credit(self, n: int) -> None:
        self.out.add_credit(n)

    def bind(self, budget: SourceBudget) -> None:
        self.out.bind(budget)

    def pump(self, budget: int) -> bool:
        busy = self.out.pump(budget)
        self.flush()
        return busy

    def cancel(self) -> None:
        self.out.cancel()


def _is_single(value: object) -> bool:
    return isinstance(value, bytes | bytearray | memoryview | str)


class RsioEngine:
    """The :class:`~..drive.engine.Engine` for one rsio connection, either role."""

    def __init__(
        self,
        role: Role,
        publishers: Publishers | None = None,
        config: ConnectionConfig | None = None,
        *,
        message_framed: bool = False,
    ) -> None:
        self.conn = Connection(role, config)
        self.publishers = publishers
        #: A message transport (WebSocket): rsio bytes travel in BINARY records.
        self._reader = ws.MessageReader() if message_framed else None
        self.thread: Driver | None = None
        self._subs: dict[int, Subscription] = {}
        #: subscribe_packed on a stream that is not fixed-size, decided at the
        #: end of the dispatch that saw its onSubscribe: an onError right
        #: behind it (an unknown name) is the answer the user should see.
        self._not_packed: dict[int, Subscription] = {}
        #: Our publications the peer subscribed to, pumped within its demand.
        self._outbounds: Outbounds[int] = Outbounds(PUMP_BUDGET)
        self._packs: dict[int, list[bytes]] = {}
        self._closing: BaseException | None = None
        self._close_started = False
        self._out_records: list[bytes] = []  # message mode: records after the core's bytes
        #: The peer's first bytes (a few): what an error shows when the peer
        #: turned out not to speak rsio (an RSocket or HTTP server).
        self._opening = b""

    def attach(self, thread: Driver) -> None:
        self.thread = thread
        self._outbounds.attach(thread)

    # -- Engine protocol (driver loop) -------------------------------------------
    def receive_data(self, data: bytes, now: float) -> None:
        if self._reader is None or not data:
            self._feed(data)
        else:
            for kind, payload in self._reader.feed(data):
                if kind == ws.MessageKind.BINARY:
                    self._feed(payload)
                elif kind == ws.MessageKind.CLOSE:
                    self._feed(b"")  # the WebSocket is closing: the transport ends
                else:  # TEXT: rsio is binary (docs §1)
                    self._out_records.append(
                        ws.encode_close(ws.CloseCode.UNSUPPORTED_DATA, "rsio messages are binary")
                    )
                    self._closing = ConnectionClosed("peer sent a text message")
                if self._closing is not None:
                    break
        self._dispatch()

    def _feed(self, data: bytes) -> None:
        if len(self._opening) < SHOWN:
            self._opening += data[: SHOWN * 4]
        try:
            self.conn.receive_data(data)
        except RemoteProtocolError as exc:
            # The core queued goodbye and ConnectionTerminated; earlier events count.
            self._closing = ConnectionClosed(
                f"protocol error from peer: {exc.message}{self._not_rsio()}"
            )

    def unexpected_input(self) -> str:
        """Client: why nothing came, for a timeout's message: the peer's
        hello never came (it sent nothing at all, or bytes that are not
        rsio); empty once it did."""
        if self.conn.role is not Role.CLIENT or self.conn.peer_hello is not None:
            return ""
        if not self._opening:
            return (
                "the peer has sent nothing since the connection opened"
                " (an rsio server? a WebSocket one needs a ws:// URL)"
            )
        return f"no rsio hello from the peer, only {describe_bytes(self._opening, _guess)}"

    def _not_rsio(self) -> str:
        """The peer's first bytes, when its hello never came: maybe it
        speaks another protocol (what they look like)."""
        if self.conn.peer_hello is not None or not self._opening:
            return ""
        return f"; its first bytes: {describe_bytes(self._opening, _guess)}"

    def data_to_send(self) -> bytes:
        data = self.conn.data_to_send()
        if self._reader is None:
            return data
        out = self._out_records
        if data:
            step = WS_MESSAGE
            out.insert(0, ws.encode_binaries(data[i : i + step] for i in range(0, len(data), step)))
        if not out:
            return b""
        joined = b"".join(out)
        out.clear()
        return joined

    def next_deadline(self) -> float | None:
        return None

    def handle_timeout(self, now: float) -> None:
        pass

    @property
    def handshaken(self) -> bool:
        """False while a server waits for the client's hello: the driver
        loops drop a client that never sends one after
        ``LoopConfig.handshake_timeout``."""
        conn = self.conn
        return conn.role is Role.CLIENT or conn.state is not ConnectionState.AWAITING_HELLO

    def wants_close(self) -> bool:
        return self._closing is not None

    def close_reason(self) -> BaseException | None:
        return self._closing

    def begin_close(self) -> None:
        """Say goodbye; the driver waits (bounded) for the acknowledgement."""
        if self._close_started:
            return
        self._close_started = True
        self._drop_all()
        if self.conn.state in (ConnectionState.OPEN, ConnectionState.AWAITING_HELLO):
            self.conn.close("closed by the application")
        elif self._closing is None:
            self._closing = ConnectionClosed("connection closed locally")

    def pump(self) -> bool:
        self._dispatch()
        return self._outbounds.pump(self._output_blocked, self._drop_outbound)

    def _output_blocked(self) -> bool:
        return self.conn.output_blocked

    def connection_lost(self, error: BaseException) -> None:
        if self._closing is not None:
            error = self._closing
        for sub in self._subs.values():
            sub.sink.finish(error)
        self._subs.clear()
        self._drop_all()

    # -- application intents (on this thread) ------------------------------------
    def start_subscription(self, sub: Subscription, demand: int) -> None:
        if sub.cancelled:
            return
        try:
            sid = self.conn.subscribe(sub.name, demand)
        except LocalProtocolError as exc:
            sub.sink.finish(self._closing or ConnectionClosed(f"connection closed: {exc.message}"))
            return
        sub.sid = sid
        self._subs[sid] = sub

    def request_more(self, sub: Subscription, n: int) -> None:
        sid = sub.sid
        if sid is not None and self._subs.get(sid) is sub:
            # The stream may have ended in a batch still being dispatched.
            with contextlib.suppress(LocalProtocolError):
                self.conn.request(sid, n)

    def cancel(self, sub: Subscription) -> None:
        sub.cancelled = True
        sid = sub.sid
        if sid is None or self._subs.get(sid) is not sub:
            return
        del self._subs[sid]
        sub.sink.close()
        self._cancel_core(sid)

    def _cancel_core(self, sid: int) -> None:
        if self.conn.subscription_state(sid) not in _CANCELLABLE:
            return  # over already (its end was in the same read): nothing to cancel
        try:
            self.conn.cancel(sid)
        except LocalProtocolError as exc:
            if self.conn.state is ConnectionState.OPEN:
                # Too many cancelled fixed-size subscriptions pending: the
                # only safe way out is to end the connection.
                log.warning("%s; closing the connection", exc.message)
                self.begin_close()

    # -- dispatch -------------------------------------------------------------------
    def _dispatch(self) -> None:
        events = self.conn.events()
        while events:
            for event in events:
                t = type(event)
                if t is ev.NextPackedReceived:
                    assert isinstance(event, ev.NextPackedReceived)
                    sub = self._subs.get(event.subscriber_id)
                    if sub is not None:
                        if sub.packed:
                            sub.sink.put(event.elements)
                        else:
                            sub.sink.put_many(event.split())
                elif t is ev.NextReceived:
                    assert isinstance(event, ev.NextReceived)
                    sub = self._subs.get(event.subscriber_id)
                    if sub is not None:
                        sub.sink.put(event.element)
                else:
                    self._on_event(event)
            events = self.conn.events()  # handlers may have caused more
        if self._not_packed:
            self._refuse_not_packed()

    def _refuse_not_packed(self) -> None:
        """Fail each subscribe_packed whose stream turned out not fixed-size
        (and no onError came with it): that subscription only, cancelled."""
        refused = list(self._not_packed.items())
        self._not_packed.clear()
        for sid, sub in refused:
            sub.sink.finish(
                ValueError(
                    f"{sub.name!r} is not a fixed-size stream (its publisher declares no "
                    "element_size); use subscribe() for it"
                )
            )
            self._cancel_core(sid)

    def _on_event(self, event: ev.Event) -> None:
        if isinstance(event, ev.SubscribeReceived):
            self._on_subscribe(event.subscriber_id, event.publisher, event.initial_demand)
        elif isinstance(event, ev.RequestReceived):
            self._outbounds.credit(event.subscriber_id, event.demand)
        elif isinstance(event, ev.CancelReceived | ev.InvalidRequestReceived):
            self._drop_outbound(event.subscriber_id)
        elif isinstance(event, ev.OnSubscribeReceived):
            sub = self._subs.get(event.subscriber_id)
            if sub is not None:
                sub.element_size = event.element_size
                if sub.packed and not event.element_size:
                    # Its elements (if any) are dropped from here on; an
                    # onError in this read still reaches the user.
                    sub.cancelled = True
                    del self._subs[event.subscriber_id]
                    self._not_packed[event.subscriber_id] = sub
        elif isinstance(event, ev.CompleteReceived):
            sub = self._subs.pop(event.subscriber_id, None)
            if sub is not None:
                sub.sink.finish()
        elif isinstance(event, ev.ErrorReceived):
            sub = self._subs.pop(event.subscriber_id, None) or self._not_packed.pop(
                event.subscriber_id, None
            )
            if sub is not None:
                sub.sink.finish(RsioError(event.error))
        elif isinstance(event, ev.ConnectionTerminated):
            who = "peer" if event.by_peer else "this end"
            reason = f": {event.reason}" if event.reason else ""
            self._closing = self._closing or ConnectionClosed(
                f"connection closed by {who}{reason}"
            )
        elif isinstance(event, ev.ConnectionLost):
            self._closing = self._closing or ConnectionClosed(
                f"connection lost: {event.reason}{self._not_rsio()}"
            )

    # -- publishing -------------------------------------------------------------------
    def _lookup(self, name: str) -> Any:
        table = self.publishers
        if table is None:
            return None
        if callable(table) and not isinstance(table, Mapping):
            return table(name)
        return table.get(name)

    def _on_subscribe(self, sid: int, name: str, demand: int) -> None:
        conn = self.conn
        try:
            publisher = self._lookup(name)
        except Exception as exc:
            log.exception("publisher lookup for %r failed", name)
            conn.send_error(sid, f"{type(exc).__name__}: {exc}")
            return
        if publisher is None:
            conn.send_error(sid, f"no publisher named {name!r}")
            return
        size = getattr(publisher, "element_size", 0)
        size = size if type(size) is int and size > 0 else 0
        opener = getattr(publisher, "packed_reader", None)
        try:
            if size and callable(opener):
                reader = opener()
                conn.send_on_subscribe(sid, size)
                out: Pumped = _PackedOut(conn, sid, reader, size, demand)
            else:
                notify = lambda: self._outbounds.poke(sid)  # noqa: E731
                source = make_source(publisher, is_single=_is_single, notify=notify)
                conn.send_on_subscribe(sid, size)
                out = self._new_outbound(sid, name, source, size, demand)
        except Exception as exc:
            log.error("publisher %r (subscriber %d) failed to start", name, sid, exc_info=exc)
            with contextlib.suppress(LocalProtocolError):
                conn.send_error(sid, f"{type(exc).__name__}: {exc}")
            return
        self._outbounds.add(sid, out, runnable=demand > 0)

    def _new_outbound(self, sid: int, name: str, source: Any, size: int, demand: int) -> Pumped:
        conn = self.conn
        send_next = conn.send_next
        pack: list[bytes] = []
        if size:
            self._packs[sid] = pack

        def emit(item: object, last: bool) -> None:
            if isinstance(item, str):
                data = item.encode("utf-8")
            elif isinstance(item, bytes | bytearray | memoryview):
                data = bytes(item)
            else:  # an rsio element is bytes; bytes(5) would be 5 zero bytes
                raise TypeError(f"an rsio element must be bytes or str, not {type(item).__name__}")
            if size:
                if len(data) != size:
                    raise ValueError(f"element of {len(data)} bytes; element_size is {size}")
                pack.append(data)
            else:
                send_next(sid, data)
            if last:  # the source ended right behind this item
                complete()

        def complete() -> None:
            self._flush_pack(sid)
            self._packs.pop(sid, None)
            with contextlib.suppress(LocalProtocolError):
                conn.send_complete(sid)

        def fail(exc: BaseException) -> None:
            # The subscriber gets onError with the message; the operator the traceback.
            log.error("publisher %r (subscriber %d) failed", name, sid, exc_info=exc)
            self._flush_pack(sid)
            self._packs.pop(sid, None)
            with contextlib.suppress(LocalProtocolError):
                conn.send_error(sid, f"{type(exc).__name__}: {exc}")

        def ready() -> bool:
            return not conn.output_blocked

        out: Outbound[Any] = Outbound(source, emit, complete, fail, demand, ready)
        return _PackingOut(out, lambda: self._flush_pack(sid)) if size else out

    def _flush_pack(self, sid: int) -> None:
        pack = self._packs.get(sid)
        if pack:
            data = b"".join(pack)
            pack.clear()
            self.conn.send_packed(sid, data)

    def _drop_outbound(self, sid: int) -> None:
        self._outbounds.cancel(sid)
        self._packs.pop(sid, None)

    def _drop_all(self) -> None:
        self._outbounds.cancel_all()
        self._packs.clear()


def _guess(data: bytes) -> str | None:
    """An RSocket frame on stream 0 where rsio was expected (RSocket spec:
    Frame Header Format; an ERROR says why), with its length (TCP) or
    without (one WebSocket message)."""
    for at, end in ((3, 3 + int.from_bytes(data[:3], "big")), (0, len(data))):
        if len(data) < at + 6 or data[at : at + 4] != b"\0\0\0\0":
            continue
        kind = data[at + 4] >> 2
        if kind not in (0x02, 0x03, 0x0B):  # LEASE, KEEPALIVE, ERROR
            continue
        said = ""
        if kind == 0x0B and len(data) >= at + 10:  # ERROR: its code and message
            text = data[at + 10 : end].decode("utf-8", "replace")
            said = f" (ERROR {int.from_bytes(data[at + 6 : at + 10], 'big'):#x}: {text!r})"
        return f"an RSocket frame{said}: an RSocket server? (sansrs.adapters.rsocket)"
    return None


def engine_factory(
    role: Role, publishers: Publishers | None, config: ConnectionConfig | None
) -> Callable[[Transport], RsioEngine]:
    """The ``new_engine`` of every ``connect`` / ``serve`` (sync and asyncio):
    one engine per transport, told whether the transport frames messages."""

    def new_engine(transport: Transport) -> RsioEngine:
        return RsioEngine(role, publishers, config, message_framed=message_framed(transport))

    return new_engine
