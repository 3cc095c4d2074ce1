"""The rsio connection: a sans-IO core, fully bidirectional (either side
publishes and subscribes), for either role. docs/protocols/rsio.md
specifies the wire and this API.

``Connection`` is the public face and the intents; it is composed of parts,
each a class of its own, none inheriting from another (docs/protocols/rsio.md,
"How the connection is built"):

- ``Context`` (``_context.py``): what the parts share: the connection state
  machine, the events, the protocol-error ending, the bytes queued
  (``Output``, ``_output.py``);
- ``SubscriptionTable`` (``_subscriptions.py``): the subscriptions both
  ways, their tombstones and their state tables;
- ``Receiver`` (``_receive.py``): bytes in, messages handled;
- ``Reassembly`` (``_reassembly.py``): split elements received, joined.
"""

from __future__ import annotations

from collections import deque

from .._errors import LocalProtocolError
from ._codec import (
    MAX_VARINT,
    VERSION,
    Cancel,
    ClientHello,
    Goodbye,
    MessageType,
    OnComplete,
    OnError,
    OnSubscribe,
    Request,
    ServerHello,
    Subscribe,
    encode_varint,
)
from ._config import ConnectionConfig, Role
from ._context import Context
from ._fast import VARINT1, VARINT_MORE
from ._reassembly import Reassembly
from ._receive import Receiver
from ._subscriptions import Pub, Sub, SubscriptionTable, add_demand
from ._tables import (
    PUBLICATION_TRANSITIONS,
    ConnectionInput,
    ConnectionState,
    PublicationInput,
    PublicationState,
    SubscriptionInput,
    SubscriptionState,
    hot_path_state,
)
from .events import Event

__all__ = ["Connection"]

_PI = PublicationInput
_SI = SubscriptionInput
_SUBSCRIBED = PublicationState.SUBSCRIBED
# The send paths test the one publication state in which elements may go
# instead of looking the table up (a self-loop; checked at import).
_ACTIVE = hot_path_state(PUBLICATION_TRANSITIONS, frozenset(), _PI.SEND_NEXT)
_v = encode_varint
_PART = bytes((MessageType.ON_NEXT_PART,))
_LAST_PART = bytes((MessageType.ON_NEXT_LAST_PART,))


def _check_id(what: str, value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_VARINT:
        raise LocalProtocolError(f"{what} must be an int in 0..2**63-1, got {value!r}")
    return value


class Connection:
    """One rsio connection, client or server role. Our hello is queued by
    the constructor."""

    def __init__(self, role: Role, config: ConnectionConfig | None = None) -> None:
        self.role = role
        self.config = config = config if config is not None else ConnectionConfig()
        self._ctx = ctx = Context(role, config)
        self._out = ctx.output
        self._table = table = SubscriptionTable(ctx)
        self._reassembly = reassembly = Reassembly(ctx, table)
        self._receiver = Receiver(ctx, table, reassembly)
        self._event_queue: deque[Event] = deque()  # taken one by one by next_event
        self._split_size = config.split_size
        self._max_element = config.max_element_size
        hello = ClientHello if ctx.client else ServerHello
        self._out.send(hello(VERSION, tuple(config.extensions)))

    # -- inspection -----------------------------------------------------------
    @property
    def state(self) -> ConnectionState:
        return self._ctx.state

    @property
    def peer_hello(self) -> ClientHello | ServerHello | None:
        """The peer's hello, once received."""
        return self._ctx.peer_hello

    @property
    def output_blocked(self) -> bool:
        """``max_queued_output`` bytes or more wait in ``data_to_send``:
        ``send_next`` / ``send_packed`` refuse until the adapter drains it."""
        out = self._out  # (not out.blocked: drivers ask once per item sent)
        return out.size >= out.limit

    @property
    def queued_output(self) -> int:
        return self._out.size

    def subscription_state(self, subscriber_id: int) -> SubscriptionState:
        """Of a subscription we made: CLOSED when unknown or over."""
        return self._table.subscription_state(subscriber_id)

    def publication_state(self, subscriber_id: int) -> PublicationState:
        """Of the peer's subscription ``subscriber_id``: CLOSED when unknown or over."""
        return self._table.publication_state(subscriber_id)

    def demand_of(self, subscriber_id: int) -> int:
        """Outstanding demand: of the peer's subscription if we publish to it,
        else of ours. 0 when unknown."""
        return self._table.demand_of(subscriber_id)

    @property
    def open_subscriptions(self) -> list[int]:
        return list(self._table.subs)

    @property
    def open_publications(self) -> list[int]:
        return list(self._table.pubs)

    # -- bytes in, bytes out, events ----------------------------------------------
    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the peer (any chunking); ``b""``: the transport ended.

        Raises ``RemoteProtocolError`` when the peer broke the protocol: the
        goodbye is queued in ``data_to_send`` and the connection is CLOSED.
        """
        self._receiver.receive_data(data)

    def connection_lost(self) -> None:
        """The adapter saw the transport die (same as ``receive_data(b"")``)."""
        self._receiver.receive_data(b"")

    def data_to_send(self) -> bytes:
        """Bytes to write to the transport (empty when none)."""
        return self._out.take_bytes()

    def events(self) -> list[Event]:
        """Every event produced so far, oldest first (and forget them)."""
        ctx = self._ctx
        taken = ctx.events
        ctx.events = []
        if not self._event_queue:
            return taken
        result = list(self._event_queue)
        self._event_queue.clear()
        result += taken
        return result

    def next_event(self) -> Event | None:
        """The oldest event not yet taken, or None."""
        ctx = self._ctx
        if ctx.events:  # the queue takes them in order, then gives one
            self._event_queue += ctx.events
            ctx.events = []
        return self._event_queue.popleft() if self._event_queue else None

    def handle_timeout(self, now: float) -> None:
        """rsio has no timers (no keepalive in version 0); kept for drivers."""

    def next_deadline(self) -> float | None:
        return None

    # -- subscriber side ------------------------------------------------------
    def subscribe(self, publisher: str, initial_demand: int = 0) -> int:
        """Subscribe to the peer's ``publisher``; returns the subscriber Id
        (1, 2, 3, ...; sansrs never reuses one)."""
        self._ctx.check_send("subscribe")
        if not isinstance(publisher, str):
            raise LocalProtocolError(f"subscribe: publisher must be a str, got {publisher!r}")
        if type(initial_demand) is not int or initial_demand < 0:
            raise LocalProtocolError(
                f"subscribe: initial_demand must be an int >= 0, got {initial_demand!r}"
            )
        if len(publisher.encode("utf-8", "replace")) > self.config.max_string_size:
            raise LocalProtocolError(
                f"subscribe: the publisher name exceeds max_string_size "
                f"({self.config.max_string_size} bytes)"
            )
        sid = self._table.next_sid
        if sid > MAX_VARINT:
            raise LocalProtocolError("subscribe: no subscriber Id left; open a new connection")
        demand = min(initial_demand, MAX_VARINT)
        try:
            self._out.send(Subscribe(publisher, sid, demand))
        except ValueError as exc:  # a lone surrogate cannot be UTF-8
            raise LocalProtocolError(f"subscribe: {exc}") from None
        self._table.next_sid = sid + 1
        self._table.subs[sid] = Sub(sid, publisher, demand)
        return sid

    def _sub(self, what: str, sid: int) -> Sub:
        self._ctx.check_send(what)
        s = self._table.subs.get(sid)
        if s is None:
            raise LocalProtocolError(f"{what}: subscription {sid!r} is not open")
        return s

    def request(self, subscriber_id: int, n: int) -> None:
        """Ask for ``n`` >= 1 more elements (rule 3.9 forbids n <= 0 and the
        wire cannot carry it); the count saturates at 2**63-1 (rule 3.17)."""
        if type(n) is not int or n < 1:
            raise LocalProtocolError(f"request: n must be an int >= 1 (rule 3.9), got {n!r}")
        s = self._sub("request", subscriber_id)
        self._table.sub_intent(
            s, _SI.SEND_REQUEST, f"request: subscription {subscriber_id} is over"
        )
        if s.demand == MAX_VARINT:
            return  # already unbounded on both sides
        s.demand = add_demand(s.demand, n)
        self._out.send(Request(subscriber_id, min(n, MAX_VARINT)))

    def cancel(self, subscriber_id: int) -> None:
        """Cancel; messages still in flight for it are ignored."""
        s = self._sub("cancel", subscriber_id)
        needs_tomb = s.size is None or s.size > 0
        if needs_tomb and len(self._table.tombs) >= self.config.max_cancelled:
            raise LocalProtocolError(
                f"cancel: {len(self._table.tombs)} cancelled fixed-size subscriptions still await "
                "their end (max_cancelled); close the connection instead"
            )
        self._table.sub_intent(s, _SI.SEND_CANCEL, f"cancel: subscription {subscriber_id} is over")
        self._out.send(Cancel(subscriber_id))
        self._reassembly.drop(s)
        del self._table.subs[subscriber_id]  # a CANCELLED one lives on as its tombstone
        if needs_tomb:
            self._table.tombs[subscriber_id] = s.size

    # -- publisher side ---------------------------------------------------------
    def _pub(self, what: str, sid: int) -> Pub:
        self._ctx.check_send(what)
        p = self._table.pubs.get(sid)
        if p is None:
            raise LocalProtocolError(
                f"{what}: subscriber {sid!r} is not subscribed (cancelled or ended)"
            )
        return p

    def send_on_subscribe(self, subscriber_id: int, element_size: int = 0) -> None:
        """Answer the peer's subscribe; ``element_size`` > 0: fixed-size mode."""
        p = self._pub("send_on_subscribe", subscriber_id)
        if not self._table.pub_allows(p, _PI.SEND_ON_SUBSCRIBE):
            raise LocalProtocolError("send_on_subscribe: onSubscribe was already sent (rule 1.9)")
        if type(element_size) is not int or not 0 <= element_size <= self.config.max_message_size:
            raise LocalProtocolError(
                f"send_on_subscribe: element_size must be in 0..{self.config.max_message_size}"
            )
        self._out.send(OnSubscribe(subscriber_id, element_size))
        self._table.pub_step(p, _PI.SEND_ON_SUBSCRIBE)
        p.size = element_size

    def _refuse_next(self, p: Pub, count: int) -> None:
        if p.state is not _ACTIVE:
            raise LocalProtocolError("send_next: onSubscribe not sent yet (rule 1.9)")
        if self._out.blocked:
            raise LocalProtocolError(
                "send_next: output is blocked (max_queued_output); send data_to_send() first"
            )
        if count > p.demand:
            raise LocalProtocolError(
                f"send_next: {count} element(s) beyond the demand {p.demand} of subscriber "
                f"{p.id} (rule 1.1)"
            )

    def send_next(self, subscriber_id: int, element: bytes) -> None:
        """One element, within demand. In fixed-size mode exactly
        ``element_size`` bytes; a variable-size element longer than
        ``split_size`` is sent as parts."""
        # The hot path (bench_rsio: core_on_next): one lookup of the
        # publication, the pieces appended here, no message object.
        p = self._table.pubs.get(subscriber_id)
        if p is None:
            self._pub("send_next", subscriber_id)
            raise AssertionError  # pragma: no cover - _pub raised
        n = len(element)
        out = self._out
        if p.demand <= 0 or p.state is not _ACTIVE or out.size >= out.limit:
            self._refuse_next(p, 1)
        if n > self._max_element:
            raise LocalProtocolError(
                f"send_next: an element of {n} bytes exceeds max_element_size "
                f"({self._max_element}), which a peer with the same limits refuses"
            )
        size = p.size
        if size:
            if n != size:
                raise LocalProtocolError(
                    f"send_next: element of {n} bytes; this subscription's element_size is {size}"
                )
            out.pieces += (p.head_next, element)
            out.size += n + 2
        elif n <= self._split_size:
            out.pieces += (p.head_next + (VARINT1[n] if n < VARINT_MORE else _v(n)), element)
            out.size += n + 3
        else:
            self._send_split(p, element)
            return  # the first part took the demand
        if p.demand != MAX_VARINT:
            p.demand -= 1

    def _send_split(self, p: Pub, element: bytes) -> None:
        step = self.config.split_size
        eid = p.next_element_id
        p.next_element_id = eid + 1 if eid < MAX_VARINT else 0
        view = memoryview(element)
        n = len(element)
        for start in range(0, n, step):
            self.send_part(p.id, eid, view[start : start + step], last=start + step >= n)

    def send_part(
        self, subscriber_id: int, element_id: int, data: bytes | memoryview, last: bool = False
    ) -> None:
        """One part of a split element; the first part of ``element_id``
        takes one unit of demand. ``last``: the element is complete."""
        p = self._pub("send_part", subscriber_id)
        _check_id("send_part: element_id", element_id)
        out = self._out
        first = element_id not in p.open_parts
        if first:
            if p.state is not _ACTIVE or p.demand <= 0 or out.size >= out.limit:
                self._refuse_next(p, 1)
            if p.demand != MAX_VARINT:
                p.demand -= 1
        elif p.state is not _ACTIVE:
            raise LocalProtocolError("send_part: onSubscribe not sent yet (rule 1.9)")
        if last:
            p.open_parts.discard(element_id)
        else:
            p.open_parts.add(element_id)
        code = _LAST_PART if last else _PART
        head = code + _v(subscriber_id) + _v(element_id) + _v(len(data))
        out.pieces += (head, data)
        out.size += len(head) + len(data)

    def send_packed(self, subscriber_id: int, elements: bytes) -> None:
        """``count`` fixed-size elements back to back (count = len // element_size),
        within demand; sent as one onNextPacked per ``max_message_size``."""
        p = self._pub("send_packed", subscriber_id)
        size = p.size
        if p.state is not _ACTIVE:
            self._refuse_next(p, 1)
        if not size:
            raise LocalProtocolError("send_packed: the subscription is not in fixed-size mode")
        n = len(elements)
        count, rest = divmod(n, size)
        if rest or not count:
            raise LocalProtocolError(
                f"send_packed: {n} bytes is not a positive multiple of element_size {size}"
            )
        out = self._out
        if count > p.demand or out.size >= out.limit:
            self._refuse_next(p, count)
        if p.demand != MAX_VARINT:
            p.demand -= count
        per = self.config.max_message_size // size
        pieces = out.pieces
        head = p.head_packed
        if count <= per:
            pieces += (head + _v(count), elements)
        else:
            view = memoryview(elements)
            step = per * size
            for start in range(0, n, step):
                chunk = view[start : start + step]
                pieces += (head + _v(len(chunk) // size), chunk)
        out.size += n + 4

    def _end(self, what: str, subscriber_id: int) -> Pub:
        p = self._pub(what, subscriber_id)
        if p.state is _SUBSCRIBED:
            self._out.send(OnSubscribe(subscriber_id, 0))  # rule 1.9: onSubscribe first
        self._table.pub_step(p, _PI.SEND_TERMINAL)
        return p

    def send_complete(self, subscriber_id: int) -> None:
        p = self._table.pubs.get(subscriber_id)
        if p is not None and p.open_parts:
            raise LocalProtocolError(
                "send_complete: a split element is in progress; send its last part first"
            )
        self._end("send_complete", subscriber_id)
        self._out.send(OnComplete(subscriber_id))

    def send_error(self, subscriber_id: int, message: str) -> None:
        if not isinstance(message, str):
            raise LocalProtocolError("send_error: message must be a str")
        raw = message.encode("utf-8", "replace")
        if len(raw) > self.config.max_string_size:
            raw = raw[: self.config.max_string_size]
        self._end("send_error", subscriber_id)
        self._out.send(OnError(subscriber_id, raw.decode("utf-8", "ignore")))

    # -- connection ---------------------------------------------------------------
    def close(self, reason: str = "") -> None:
        """Say goodbye: every subscription both ways ends now; ``ConnectionTerminated``
        follows when the peer acknowledges (or the transport ends)."""
        self._ctx.check("close", ConnectionInput.SEND_GOODBYE)
        if not isinstance(reason, str):
            raise LocalProtocolError("close: reason must be a str")
        raw = reason.encode("utf-8", "replace")[: self.config.max_string_size]
        reason = raw.decode("utf-8", "ignore")
        self._out.send(Goodbye(reason))
        self._ctx.transition(ConnectionInput.SEND_GOODBYE)
        self._ctx.close_reason = reason
        # Our publications end now (the goodbye says so); our subscriptions
        # are cancelled by it but stay in the table, so that in-flight
        # fixed-size messages can still be parsed.
        self._table.pubs.clear()
        for s in self._table.subs.values():
            self._table.sub_intent(s, _SI.SEND_CANCEL, "close")
