"""Bytes in: the rsio parser and the handling of every received message.

Every complete message is parsed per ``receive_data``; onNext and
onNextPacked of active subscriptions are parsed inline (the hot path), the
rest through the reference decoder. A large message is waited for by
collecting chunks until the size it needs has arrived, then joined once.
"""

from __future__ import annotations

from .._errors import RemoteProtocolError
from . import _codec as codec
from . import _tables as tables
from ._codec import (
    MAX_VARINT,
    VERSION,
    ErrorCode,
    Incomplete,
    _decode_varint_slow,
    decode_message,
    decode_varint,
)
from ._core import ConnectionCore, Pub, Sub, _Partial, add_demand
from ._fast import ON_NEXT, ON_NEXT_PACKED, VARINT_MORE, next_event
from ._tables import hot_path_state
from .events import (
    CancelReceived,
    CompleteReceived,
    ConnectionLost,
    ConnectionTerminated,
    ErrorReceived,
    HelloReceived,
    InvalidRequestReceived,
    NextPackedReceived,
    NextReceived,
    OnSubscribeReceived,
    RequestReceived,
    SubscribeReceived,
)

__all__ = ["Receiver"]

_OPEN = tables.ConnectionState.OPEN
_CLOSING = tables.ConnectionState.CLOSING
_CLOSED = tables.ConnectionState.CLOSED
_CI = tables.ConnectionInput
_SI = tables.SubscriptionInput
_PI = tables.PublicationInput
# The hot path of ``_parse`` does not look the tables up: it tests the one
# connection state in which stream messages are handled, and the one
# subscription state in which elements are (both self-loops; checked here).
_HANDLES_STREAMS = hot_path_state(
    tables.CONNECTION_TRANSITIONS, tables.CONNECTION_IGNORED, _CI.RECV_STREAM
)
_TAKES_ELEMENTS = hot_path_state(
    tables.SUBSCRIPTION_TRANSITIONS, tables.SUBSCRIPTION_IGNORED, _SI.RECV_NEXT
)
_UNEXPECTED = ErrorCode.UNEXPECTED_MESSAGE
_RULE_3_9 = "Rule 3.9: request(n) with n <= 0 is not allowed"


class Receiver(ConnectionCore):
    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the peer (any chunking); ``b""``: the transport ended.

        Raises ``RemoteProtocolError`` when the peer broke the protocol: the
        goodbye is queued in ``data_to_send`` and the connection is CLOSED.
        """
        if self._state is _CLOSED:
            if self._error is not None:
                raise self._error
            return
        if not data:
            self._eof()
            return
        chunks = self._chunks
        chunks.append(data)
        self._buffered += len(data)
        if self._buffered < self._need:
            return  # a large message is still arriving: no join yet
        buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._chunks = []
        self._buffered = 0
        self._need = 1
        pos = self._parse(buf)
        if pos < len(buf) and self._state is not _CLOSED:
            rest = buf[pos:]
            self._chunks = [rest]
            self._buffered = len(rest)

    def connection_lost(self) -> None:
        """The adapter saw the transport die (same as ``receive_data(b"")``)."""
        self.receive_data(b"")

    def _eof(self) -> None:
        partial = self._buffered > 0
        closing = self._state is _CLOSING
        self._transition(_CI.EOF)
        self._forget_all()
        if closing:  # our goodbye was out: the end of the transport ends it
            self._events.append(
                ConnectionTerminated(reason=self._close_reason, by_peer=False, error_code=0)
            )
            return
        reason = "the transport ended without goodbye"
        if partial:
            reason += " (inside a message)"
        self._events.append(ConnectionLost(reason=reason))

    # -- parsing ----------------------------------------------------------------
    def _parse(self, buf: bytes) -> int:
        """Handle every complete message; return where the incomplete one starts."""
        pos = 0
        end = len(buf)
        subs = self._subs
        events = self._events
        limits = self._limits
        max_msg = limits.max_message_size
        size_of = self._size_of
        is_open = self._state is _HANDLES_STREAMS
        try:
            while pos < end:
                t = buf[pos]
                if ON_NEXT <= t <= ON_NEXT_PACKED and is_open:  # the two codes are adjacent
                    # Hot path: an element of an active subscription. Its
                    # varints (Id, length) are read inline, one-byte form
                    # first: twice per element, so not through a call
                    # (bench_rsio: core_on_next); alike on purpose.
                    p = pos + 1
                    b = buf[p] if p < end else VARINT_MORE
                    if b < VARINT_MORE:
                        sid = b
                        p += 1
                    else:
                        sid, p = _varint(buf, p)
                    s = subs.get(sid)
                    if s is not None and s.state is _TAKES_ELEMENTS:
                        size = s.size
                        packed = t == ON_NEXT_PACKED
                        if packed:
                            count, p = decode_varint(buf, p)  # once per packed message
                            if count == 0 or not size:
                                break  # error path: the reference decoder reports it
                            n = count * size
                        elif size:
                            n = size
                        else:
                            b = buf[p] if p < end else VARINT_MORE
                            if b < VARINT_MORE:
                                n = b
                                p += 1
                            else:
                                n, p = _varint(buf, p)
                        if n > max_msg:
                            break
                        stop = p + n
                        if stop > end:
                            self._need = stop - pos
                            return pos
                        event: NextReceived | NextPackedReceived
                        if packed:
                            assert size  # (checked above)
                            self._take_demand(s, count, f"onNextPacked of {count} elements")
                            event = NextPackedReceived(
                                subscriber_id=sid,
                                elements=buf[p:stop],
                                count=count,
                                element_size=size,
                            )
                        else:
                            # _take_demand(s, 1, "onNext"), inlined: once per
                            # element (bench_rsio: core_on_next).
                            demand = s.demand
                            if demand != MAX_VARINT:
                                if demand == 0:
                                    self._fail(
                                        ErrorCode.DEMAND_EXCEEDED,
                                        f"onNext beyond the demand of subscriber {sid} (rule 1.1)",
                                    )
                                s.demand = demand - 1
                            event = next_event(sid, buf[p:stop])
                        events.append(event)
                        pos = stop
                        continue
                msg, p = decode_message(buf, pos, size_of, limits)
                self._handle(msg)
                pos = p
                state = self._state
                if state is _CLOSED:
                    return end  # goodbye exchanged: nothing after it counts
                is_open = state is _HANDLES_STREAMS
            else:
                return pos
            # Fell out of the hot path on bad input: let the decoder explain it.
            decode_message(buf, pos, size_of, limits)
            raise AssertionError("the decoder accepted what the hot path refused")
        except Incomplete as inc:
            self._need = inc.need - pos
            return pos
        except RemoteProtocolError as exc:
            if self._state is _CLOSED:
                raise
            self._raise(exc)

    def _size_of(self, sid: int) -> int | None:
        s = self._subs.get(sid)
        if s is not None:
            return s.size
        if sid in self._tombs:
            return self._tombs[sid]
        return 0  # closed or never used: variable size (docs §5.5)

    # -- handling -----------------------------------------------------------------
    def _handle(self, msg: codec.Message) -> None:
        t = type(msg)
        if t is codec.ClientHello or t is codec.ServerHello:
            self._on_hello(msg)  # type: ignore[arg-type]
            return
        if t is codec.Goodbye:
            assert isinstance(msg, codec.Goodbye)
            self._on_goodbye(msg.reason)
            return
        if t is codec.GoodbyeAck:
            if self._transition(_CI.RECV_GOODBYE_ACK) is None:
                self._fail(_UNEXPECTED, "goodbyeAck without our goodbye")
            self._forget_all()
            self._events.append(
                ConnectionTerminated(reason=self._close_reason, by_peer=False, error_code=0)
            )
            return
        if not self._received(_CI.RECV_STREAM, f"{t.__name__} before the peer's hello"):
            if t is codec.OnSubscribe:  # (its element size still lets us parse what follows)
                assert isinstance(msg, codec.OnSubscribe)
                self._closing_on_subscribe(msg)
            return  # parsed and ignored (docs §7)
        if t is codec.OnNext or t is codec.OnNextPacked:
            self._on_next(msg)  # type: ignore[arg-type]
        elif t is codec.Request:
            assert isinstance(msg, codec.Request)
            self._on_request(msg.subscriber_id, msg.demand)
        elif t is codec.Subscribe:
            assert isinstance(msg, codec.Subscribe)
            self._on_subscribe_msg(msg)
        elif t is codec.Cancel:
            assert isinstance(msg, codec.Cancel)
            p = self._pubs.get(msg.subscriber_id)
            if p is not None:
                self._pub_step(p, _PI.RECV_CANCEL)
                self._events.append(CancelReceived(subscriber_id=msg.subscriber_id))
        elif t is codec.OnSubscribe:
            assert isinstance(msg, codec.OnSubscribe)
            self._on_on_subscribe(msg)
        elif t is codec.OnNextPart or t is codec.OnNextLastPart:
            self._on_part(msg, t is codec.OnNextLastPart)  # type: ignore[arg-type]
        else:
            assert isinstance(msg, codec.OnComplete | codec.OnError)
            self._on_terminal(msg)

    def _on_hello(self, msg: codec.ClientHello | codec.ServerHello) -> None:
        if not self._received(_CI.RECV_HELLO, "a second hello"):
            return
        expected = codec.ServerHello if self._client else codec.ClientHello
        if type(msg) is not expected:
            self._fail(_UNEXPECTED, f"{type(msg).__name__} received by a {self.role.value}")
        if msg.version != VERSION:
            self._fail(
                ErrorCode.UNSUPPORTED_VERSION,
                f"unsupported version {msg.version} (this end speaks version {VERSION})",
            )
        self._transition(_CI.RECV_HELLO)
        self.peer_hello = msg
        self._events.append(HelloReceived(version=msg.version, extensions=msg.extensions))

    def _on_goodbye(self, reason: str) -> None:
        self._transition(_CI.RECV_GOODBYE)
        self._send(codec.GoodbyeAck(""))
        self._forget_all()
        self._events.append(ConnectionTerminated(reason=reason, by_peer=True, error_code=0))

    # -- we publish ---------------------------------------------------------------
    def _on_subscribe_msg(self, msg: codec.Subscribe) -> None:
        sid = msg.subscriber_id
        pubs = self._pubs
        if sid in pubs:
            self._fail(_UNEXPECTED, f"subscribe on subscriber Id {sid}, which is in use")
        if len(pubs) >= self.config.max_subscriptions:
            # Not a connection error: refuse this one subscription (docs §9).
            self._send(codec.OnSubscribe(sid, 0))
            self._send(codec.OnError(sid, "too many subscriptions on this connection"))
            return
        demand = msg.initial_demand
        pubs[sid] = Pub(sid, msg.publisher, demand)
        self._events.append(
            SubscribeReceived(subscriber_id=sid, publisher=msg.publisher, initial_demand=demand)
        )

    def _on_request(self, sid: int, n: int) -> None:
        p = self._pubs.get(sid)
        if p is None:
            return  # may have crossed our onComplete/onError (docs §5.3)
        if n == 0:  # we end it with onError
            if p.state is tables.PublicationState.SUBSCRIBED:
                self._send(codec.OnSubscribe(sid, 0))  # rule 1.9: onSubscribe first
            self._pub_step(p, _PI.SEND_TERMINAL)
            self._send(codec.OnError(sid, _RULE_3_9))
            self._events.append(InvalidRequestReceived(subscriber_id=sid, message=_RULE_3_9))
            return
        self._pub_step(p, _PI.RECV_REQUEST)
        p.demand = add_demand(p.demand, n)
        self._events.append(RequestReceived(subscriber_id=sid, demand=n))

    # -- we subscribed ------------------------------------------------------------
    def _unknown(self, sid: int, what: str, inp: tables.SubscriptionInput) -> None:
        """A publisher message for an Id not in our table (docs §5.5): never
        used, a tombstone (its CANCELLED row), or over (ignored)."""
        if sid >= self._next_sid:
            self._fail(_UNEXPECTED, f"{what} for subscriber Id {sid}, which was never used")
        if sid not in self._tombs:
            return
        if self._tombs[sid] is None and inp is not _SI.RECV_ON_SUBSCRIBE:
            # Cancelled before its onSubscribe: what only follows one (1.9).
            self._fail(_UNEXPECTED, f"{what} before onSubscribe for subscriber {sid} (rule 1.9)")
        self._tomb_step(sid, inp)

    def _closing_on_subscribe(self, msg: codec.OnSubscribe) -> None:
        s = self._subs.get(msg.subscriber_id)
        if s is not None and s.size is None:
            s.size = msg.element_size
        self._tomb_size(msg)

    def _tomb_size(self, msg: codec.OnSubscribe) -> None:
        sid = msg.subscriber_id
        if sid in self._tombs and self._tombs[sid] is None:
            if msg.element_size:
                self._tombs[sid] = msg.element_size
            else:
                del self._tombs[sid]  # variable size: parseable without a tombstone

    def _on_on_subscribe(self, msg: codec.OnSubscribe) -> None:
        sid = msg.subscriber_id
        s = self._subs.get(sid)
        if s is None:
            if sid in self._tombs and self._tombs[sid] is not None:
                self._fail(_UNEXPECTED, f"a second onSubscribe for subscriber {sid}")
            self._unknown(sid, "onSubscribe", _SI.RECV_ON_SUBSCRIBE)
            self._tomb_size(msg)
            return
        self._sub_step(s, _SI.RECV_ON_SUBSCRIBE, f"a second onSubscribe for subscriber {sid}")
        s.size = msg.element_size
        self._events.append(OnSubscribeReceived(subscriber_id=sid, element_size=msg.element_size))

    def _active(self, sid: int, what: str) -> Sub | None:
        s = self._subs.get(sid)
        if s is None:
            self._unknown(sid, what, _SI.RECV_NEXT)
            return None
        rule = f"{what} before onSubscribe for subscriber {sid} (rule 1.9)"
        return s if self._sub_step(s, _SI.RECV_NEXT, rule) else None

    def _take_demand(self, s: Sub, count: int, what: str) -> None:
        demand = s.demand
        if demand == MAX_VARINT:
            return
        if count > demand:
            self._fail(
                ErrorCode.DEMAND_EXCEEDED,
                f"{what} beyond the demand {demand} of subscriber {s.id} (rule 1.1)",
            )
        s.demand = demand - count

    def _on_next(self, msg: codec.OnNext | codec.OnNextPacked) -> None:
        """Off the hot path: messages for subscriptions not ACTIVE (or unknown)."""
        sid = msg.subscriber_id
        s = self._active(sid, type(msg).__name__)
        if s is None:
            return
        assert s.size is not None
        if type(msg) is codec.OnNext:
            self._take_demand(s, 1, "onNext")
            self._events.append(NextReceived(subscriber_id=sid, element=msg.element))
        else:
            assert isinstance(msg, codec.OnNextPacked)
            count = len(msg.elements) // s.size
            self._take_demand(s, count, "onNextPacked")
            self._events.append(
                NextPackedReceived(
                    subscriber_id=sid, elements=msg.elements, count=count, element_size=s.size
                )
            )

    def _on_part(self, msg: codec.OnNextPart | codec.OnNextLastPart, last: bool) -> None:
        sid = msg.subscriber_id
        what = "onNextLastPart" if last else "onNextPart"
        s = self._active(sid, what)
        if s is None:
            return
        cfg = self.config
        partials = s.partials
        part = partials.get(msg.element_id) if partials is not None else None
        data = msg.data
        if part is None:
            self._take_demand(s, 1, f"a split element ({what})")
            if last:
                self._deliver(s, data)
                return
            if self._splits >= cfg.max_split_elements:
                self._fail(
                    ErrorCode.LIMIT_EXCEEDED,
                    f"more than {cfg.max_split_elements} split elements in progress",
                )
            part = _Partial()
            if partials is None:
                partials = s.partials = {}
            partials[msg.element_id] = part
            self._splits += 1
        part.parts += 1
        if part.parts > cfg.max_element_parts:
            self._fail(
                ErrorCode.LIMIT_EXCEEDED,
                f"a split element of more than {cfg.max_element_parts} parts",
            )
        if len(part.data) + len(data) > cfg.max_element_size:
            self._fail(
                ErrorCode.LIMIT_EXCEEDED,
                f"a split element larger than {cfg.max_element_size} bytes",
            )
        if self._split_bytes + len(data) > cfg.max_split_buffer:
            self._fail(
                ErrorCode.LIMIT_EXCEEDED,
                f"more than {cfg.max_split_buffer} bytes of split elements in progress",
            )
        part.data += data
        self._split_bytes += len(data)
        if last:
            assert partials is not None
            del partials[msg.element_id]
            self._splits -= 1
            self._split_bytes -= len(part.data)
            self._deliver(s, bytes(part.data))

    def _deliver(self, s: Sub, element: bytes) -> None:
        if s.size and len(element) != s.size:
            self._fail(
                _UNEXPECTED,
                f"a split element of {len(element)} bytes on subscriber {s.id}, whose "
                f"elementSize is {s.size}",
            )
        if len(element) > self.config.max_element_size:
            self._fail(
                ErrorCode.LIMIT_EXCEEDED,
                f"a split element larger than {self.config.max_element_size} bytes",
            )
        self._events.append(NextReceived(subscriber_id=s.id, element=element))

    def _drop_partials(self, s: Sub) -> None:
        if s.partials:
            for part in s.partials.values():
                self._splits -= 1
                self._split_bytes -= len(part.data)
        s.partials = None

    def _on_terminal(self, msg: codec.OnComplete | codec.OnError) -> None:
        sid = msg.subscriber_id
        complete = type(msg) is codec.OnComplete
        name = "onComplete" if complete else "onError"
        s = self._subs.get(sid)
        if s is None:
            self._unknown(sid, name, _SI.RECV_TERMINAL)
            return
        rule = f"{name} before onSubscribe for subscriber {sid} (rule 1.9)"
        if not self._sub_step(s, _SI.RECV_TERMINAL, rule):
            return
        if complete and s.partials:
            self._fail(
                _UNEXPECTED, f"onComplete with a split element in progress on subscriber {sid}"
            )
        self._drop_partials(s)
        if complete:
            self._events.append(CompleteReceived(subscriber_id=sid))
        else:
            assert isinstance(msg, codec.OnError)
            self._events.append(ErrorReceived(subscriber_id=sid, error=msg.error))


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    return _decode_varint_slow(buf, pos)
