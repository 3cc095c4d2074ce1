"""Bytes in: the rsio parser and the handling of every received message.

``Receiver`` is the part of ``Connection`` that takes what the transport
delivers. Every complete message is parsed per ``receive_data``; onNext
and onNextPacked of active subscriptions are parsed inline (the hot path),
the rest through the reference decoder and dispatched to their handlers
here (the split element parts to ``Reassembly``). A large message is waited
for by collecting chunks (``chunks``, ``buffered``) until the size it needs
(``need``) has arrived, then joined once.
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
from ._context import Context
from ._fast import ON_NEXT, ON_NEXT_PACKED, VARINT_MORE, next_event
from ._reassembly import Reassembly
from ._subscriptions import Pub, Sub, SubscriptionTable, add_demand
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


class Receiver:
    """Bytes in (``receive_data``), messages handled, events out."""

    __slots__ = ("_ctx", "_reassembly", "_table", "buffered", "chunks", "need")

    def __init__(self, ctx: Context, table: SubscriptionTable, reassembly: Reassembly) -> None:
        self._ctx = ctx
        self._table = table
        self._reassembly = reassembly
        # Input not yet parsed: chunks, their total size, and the size the
        # first message needs (known once its lengths are read).
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.need = 1
        ctx.on_closed.append(self._drop_input)

    def receive_data(self, data: bytes) -> None:
        """See ``Connection.receive_data``."""
        ctx = self._ctx
        if ctx.state is _CLOSED:
            if ctx.error is not None:
                raise ctx.error
            return
        if not data:
            self._eof()
            return
        chunks = self.chunks
        chunks.append(data)
        self.buffered += len(data)
        if self.buffered < self.need:
            return  # a large message is still arriving: no join yet
        buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.chunks = []
        self.buffered = 0
        self.need = 1
        pos = self._parse(buf)
        if pos < len(buf) and ctx.state is not _CLOSED:
            rest = buf[pos:]
            self.chunks = [rest]
            self.buffered = len(rest)

    def _drop_input(self) -> None:
        self.chunks = []
        self.buffered = 0

    def _eof(self) -> None:
        ctx = self._ctx
        partial = self.buffered > 0
        closing = ctx.state is _CLOSING
        ctx.transition(_CI.EOF)
        if closing:  # our goodbye was out: the end of the transport ends it
            ctx.events.append(
                ConnectionTerminated(reason=ctx.close_reason, by_peer=False, error_code=0)
            )
            return
        reason = "the transport ended without goodbye"
        if partial:
            reason += " (inside a message)"
        ctx.events.append(ConnectionLost(reason=reason))

    # -- parsing ----------------------------------------------------------------
    def _parse(self, buf: bytes) -> int:
        """Handle every complete message; return where the incomplete one starts."""
        ctx = self._ctx
        pos = 0
        end = len(buf)
        subs = self._table.subs
        events = ctx.events
        limits = ctx.limits
        max_msg = limits.max_message_size
        size_of = self._table.size_of
        is_open = ctx.state is _HANDLES_STREAMS
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
                            self.need = stop - pos
                            return pos
                        event: NextReceived | NextPackedReceived
                        if packed:
                            assert size  # (checked above)
                            what = f"onNextPacked of {count} elements"
                            self._table.take_demand(s, count, what)
                            event = NextPackedReceived(
                                subscriber_id=sid,
                                elements=buf[p:stop],
                                count=count,
                                element_size=size,
                            )
                        else:
                            # take_demand(s, 1, "onNext"), inlined: once per
                            # element (bench_rsio: core_on_next).
                            demand = s.demand
                            if demand != MAX_VARINT:
                                if demand == 0:
                                    ctx.fail(
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
                state = ctx.state
                if state is _CLOSED:
                    return end  # goodbye exchanged: nothing after it counts
                is_open = state is _HANDLES_STREAMS
            else:
                return pos
            # Fell out of the hot path on bad input: let the decoder explain it.
            decode_message(buf, pos, size_of, limits)
            raise AssertionError("the decoder accepted what the hot path refused")
        except Incomplete as inc:
            self.need = inc.need - pos
            return pos
        except RemoteProtocolError as exc:
            if ctx.state is _CLOSED:
                raise
            ctx.raise_error(exc)

    # -- handling -----------------------------------------------------------------
    def _handle(self, msg: codec.Message) -> None:
        ctx = self._ctx
        t = type(msg)
        if t is codec.ClientHello or t is codec.ServerHello:
            self._on_hello(msg)  # type: ignore[arg-type]
            return
        if t is codec.Goodbye:
            assert isinstance(msg, codec.Goodbye)
            self._on_goodbye(msg.reason)
            return
        if t is codec.GoodbyeAck:
            if ctx.transition(_CI.RECV_GOODBYE_ACK) is None:
                ctx.fail(_UNEXPECTED, "goodbyeAck without our goodbye")
            ctx.events.append(
                ConnectionTerminated(reason=ctx.close_reason, by_peer=False, error_code=0)
            )
            return
        if not ctx.received(_CI.RECV_STREAM, f"{t.__name__} before the peer's hello"):
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
            p = self._table.pubs.get(msg.subscriber_id)
            if p is not None:
                self._table.pub_step(p, _PI.RECV_CANCEL)
                ctx.events.append(CancelReceived(subscriber_id=msg.subscriber_id))
        elif t is codec.OnSubscribe:
            assert isinstance(msg, codec.OnSubscribe)
            self._on_on_subscribe(msg)
        elif t is codec.OnNextPart or t is codec.OnNextLastPart:
            self._on_part(msg, t is codec.OnNextLastPart)  # type: ignore[arg-type]
        else:
            assert isinstance(msg, codec.OnComplete | codec.OnError)
            self._on_terminal(msg)

    def _on_hello(self, msg: codec.ClientHello | codec.ServerHello) -> None:
        ctx = self._ctx
        if not ctx.received(_CI.RECV_HELLO, "a second hello"):
            return
        expected = codec.ServerHello if ctx.client else codec.ClientHello
        if type(msg) is not expected:
            ctx.fail(_UNEXPECTED, f"{type(msg).__name__} received by a {ctx.role.value}")
        if msg.version != VERSION:
            ctx.fail(
                ErrorCode.UNSUPPORTED_VERSION,
                f"unsupported version {msg.version} (this end speaks version {VERSION})",
            )
        ctx.transition(_CI.RECV_HELLO)
        ctx.peer_hello = msg
        ctx.events.append(HelloReceived(version=msg.version, extensions=msg.extensions))

    def _on_goodbye(self, reason: str) -> None:
        ctx = self._ctx
        ctx.transition(_CI.RECV_GOODBYE)
        ctx.output.send(codec.GoodbyeAck(""))
        ctx.events.append(ConnectionTerminated(reason=reason, by_peer=True, error_code=0))

    # -- we publish ---------------------------------------------------------------
    def _on_subscribe_msg(self, msg: codec.Subscribe) -> None:
        ctx = self._ctx
        sid = msg.subscriber_id
        pubs = self._table.pubs
        if sid in pubs:
            ctx.fail(_UNEXPECTED, f"subscribe on subscriber Id {sid}, which is in use")
        if len(pubs) >= ctx.config.max_subscriptions:
            # Not a connection error: refuse this one subscription (docs §9).
            ctx.output.send(codec.OnSubscribe(sid, 0))
            ctx.output.send(codec.OnError(sid, "too many subscriptions on this connection"))
            return
        demand = msg.initial_demand
        pubs[sid] = Pub(sid, msg.publisher, demand)
        ctx.events.append(
            SubscribeReceived(subscriber_id=sid, publisher=msg.publisher, initial_demand=demand)
        )

    def _on_request(self, sid: int, n: int) -> None:
        ctx = self._ctx
        table = self._table
        p = table.pubs.get(sid)
        if p is None:
            return  # may have crossed our onComplete/onError (docs §5.3)
        if n == 0:  # we end it with onError
            if p.state is tables.PublicationState.SUBSCRIBED:
                ctx.output.send(codec.OnSubscribe(sid, 0))  # rule 1.9: onSubscribe first
            table.pub_step(p, _PI.SEND_TERMINAL)
            ctx.output.send(codec.OnError(sid, _RULE_3_9))
            ctx.events.append(InvalidRequestReceived(subscriber_id=sid, message=_RULE_3_9))
            return
        table.pub_step(p, _PI.RECV_REQUEST)
        p.demand = add_demand(p.demand, n)
        ctx.events.append(RequestReceived(subscriber_id=sid, demand=n))

    # -- we subscribed ------------------------------------------------------------
    def _unknown(self, sid: int, what: str, inp: tables.SubscriptionInput) -> None:
        """A publisher message for an Id not in our table (docs §5.5): never
        used, a tombstone (its CANCELLED row), or over (ignored)."""
        table = self._table
        if sid >= table.next_sid:
            self._ctx.fail(_UNEXPECTED, f"{what} for subscriber Id {sid}, which was never used")
        if sid not in table.tombs:
            return
        if table.tombs[sid] is None and inp is not _SI.RECV_ON_SUBSCRIBE:
            # Cancelled before its onSubscribe: what only follows one (1.9).
            self._ctx.fail(
                _UNEXPECTED, f"{what} before onSubscribe for subscriber {sid} (rule 1.9)"
            )
        table.tomb_step(sid, inp)

    def _closing_on_subscribe(self, msg: codec.OnSubscribe) -> None:
        s = self._table.subs.get(msg.subscriber_id)
        if s is not None and s.size is None:
            s.size = msg.element_size
        self._tomb_size(msg)

    def _tomb_size(self, msg: codec.OnSubscribe) -> None:
        tombs = self._table.tombs
        sid = msg.subscriber_id
        if sid in tombs and tombs[sid] is None:
            if msg.element_size:
                tombs[sid] = msg.element_size
            else:
                del tombs[sid]  # variable size: parseable without a tombstone

    def _on_on_subscribe(self, msg: codec.OnSubscribe) -> None:
        sid = msg.subscriber_id
        s = self._table.subs.get(sid)
        if s is None:
            tombs = self._table.tombs
            if sid in tombs and tombs[sid] is not None:
                self._ctx.fail(_UNEXPECTED, f"a second onSubscribe for subscriber {sid}")
            self._unknown(sid, "onSubscribe", _SI.RECV_ON_SUBSCRIBE)
            self._tomb_size(msg)
            return
        rule = f"a second onSubscribe for subscriber {sid}"
        self._table.sub_step(s, _SI.RECV_ON_SUBSCRIBE, rule)
        s.size = msg.element_size
        self._ctx.events.append(
            OnSubscribeReceived(subscriber_id=sid, element_size=msg.element_size)
        )

    def _active(self, sid: int, what: str) -> Sub | None:
        s = self._table.subs.get(sid)
        if s is None:
            self._unknown(sid, what, _SI.RECV_NEXT)
            return None
        rule = f"{what} before onSubscribe for subscriber {sid} (rule 1.9)"
        return s if self._table.sub_step(s, _SI.RECV_NEXT, rule) else None

    def _on_next(self, msg: codec.OnNext | codec.OnNextPacked) -> None:
        """Off the hot path: messages for subscriptions not ACTIVE (or unknown)."""
        sid = msg.subscriber_id
        s = self._active(sid, type(msg).__name__)
        if s is None:
            return
        assert s.size is not None
        events = self._ctx.events
        if type(msg) is codec.OnNext:
            self._table.take_demand(s, 1, "onNext")
            events.append(NextReceived(subscriber_id=sid, element=msg.element))
        else:
            assert isinstance(msg, codec.OnNextPacked)
            count = len(msg.elements) // s.size
            self._table.take_demand(s, count, "onNextPacked")
            events.append(
                NextPackedReceived(
                    subscriber_id=sid, elements=msg.elements, count=count, element_size=s.size
                )
            )

    def _on_part(self, msg: codec.OnNextPart | codec.OnNextLastPart, last: bool) -> None:
        what = "onNextLastPart" if last else "onNextPart"
        s = self._active(msg.subscriber_id, what)
        if s is not None:
            self._reassembly.add(s, msg.element_id, msg.data, last, what)

    def _on_terminal(self, msg: codec.OnComplete | codec.OnError) -> None:
        ctx = self._ctx
        sid = msg.subscriber_id
        complete = type(msg) is codec.OnComplete
        name = "onComplete" if complete else "onError"
        s = self._table.subs.get(sid)
        if s is None:
            self._unknown(sid, name, _SI.RECV_TERMINAL)
            return
        rule = f"{name} before onSubscribe for subscriber {sid} (rule 1.9)"
        if not self._table.sub_step(s, _SI.RECV_TERMINAL, rule):
            return
        if complete and s.partials:
            ctx.fail(
                _UNEXPECTED, f"onComplete with a split element in progress on subscriber {sid}"
            )
        self._reassembly.drop(s)
        if complete:
            ctx.events.append(CompleteReceived(subscriber_id=sid))
        else:
            assert isinstance(msg, codec.OnError)
            ctx.events.append(ErrorReceived(subscriber_id=sid, error=msg.error))


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    return _decode_varint_slow(buf, pos)
