"""Shared state of an rsio connection: tables, output queue, events and the
protocol-error path. ``Receiver`` (bytes in) and ``Connection`` (intents)
build on it."""

from __future__ import annotations

from collections import deque
from typing import NoReturn

from .._errors import LocalProtocolError, RemoteProtocolError
from . import _tables as tables
from ._codec import (
    MAX_VARINT,
    VERSION,
    ClientHello,
    ErrorCode,
    Goodbye,
    Message,
    MessageType,
    ServerHello,
    encode_message,
    encode_varint,
)
from ._config import ConnectionConfig, Role
from .events import ConnectionTerminated, Event

__all__ = ["ConnectionCore"]

_SUBSCRIBING = tables.SubscriptionState.SUBSCRIBING
_UNEXPECTED = ErrorCode.UNEXPECTED_MESSAGE
_ON_NEXT = bytes((MessageType.ON_NEXT,))
_ON_NEXT_PACKED = bytes((MessageType.ON_NEXT_PACKED,))


class _Partial:
    """A split element being joined."""

    __slots__ = ("data", "parts")

    def __init__(self) -> None:
        self.data = bytearray()
        self.parts = 0


class Sub:
    """A subscription we made. ``size``: None until onSubscribe."""

    __slots__ = ("demand", "id", "partials", "publisher", "size", "state")

    def __init__(self, sid: int, publisher: str, demand: int) -> None:
        self.id = sid
        self.publisher = publisher
        self.demand = demand
        self.size: int | None = None
        self.state = _SUBSCRIBING
        self.partials: dict[int, _Partial] | None = None


class Pub:
    """The peer's subscription to one of our publishers."""

    __slots__ = (
        "demand",
        "head_next",
        "head_packed",
        "id",
        "next_element_id",
        "open_parts",
        "publisher",
        "size",
        "state",
    )

    def __init__(self, sid: int, publisher: str, demand: int) -> None:
        self.id = sid
        self.publisher = publisher
        self.demand = demand
        self.size = 0
        self.state = tables.PublicationState.SUBSCRIBED
        vid = encode_varint(sid)
        # Every onNext / onNextPacked to it starts with these (code + Id).
        self.head_next = _ON_NEXT + vid
        self.head_packed = _ON_NEXT_PACKED + vid
        self.next_element_id = 0
        self.open_parts: set[int] = set()


def add_demand(demand: int, n: int) -> int:
    """Rule 3.17: saturate at 2**63-1 (then unbounded)."""
    total = demand + n
    return total if total < MAX_VARINT else MAX_VARINT


class ConnectionCore:
    def __init__(self, role: Role, config: ConnectionConfig | None = None) -> None:
        self.role = role
        self.config = config = config if config is not None else ConnectionConfig()
        self._limits = config.decode_limits
        self._client = role is Role.CLIENT
        self._state = tables.ConnectionState.AWAITING_HELLO
        self._events: list[Event] = []
        self._event_queue: deque[Event] = deque()
        self._out: list[bytes | memoryview] = []
        self._out_size = 0
        self._max_out = config.max_queued_output
        self._split_size = config.split_size
        self._max_element = config.max_element_size
        # Input not yet parsed: chunks, their total size, and the size the
        # first message needs (known once its lengths are read).
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._need = 1
        self._subs: dict[int, Sub] = {}
        self._pubs: dict[int, Pub] = {}
        #: Cancelled subscriptions whose elementSize is > 0 or unknown (docs §5.4).
        self._tombs: dict[int, int | None] = {}
        self._next_sid = 1
        self._splits = 0  # split elements in progress (receiving)
        self._split_bytes = 0
        self._error: RemoteProtocolError | None = None
        self._close_reason = ""
        self.peer_hello: ClientHello | ServerHello | None = None
        hello = ClientHello if self._client else ServerHello
        self._queue(encode_message(hello(VERSION, tuple(config.extensions))))

    # -- inspection -----------------------------------------------------------
    @property
    def state(self) -> tables.ConnectionState:
        return self._state

    @property
    def output_blocked(self) -> bool:
        return self._out_size >= self._max_out

    @property
    def queued_output(self) -> int:
        return self._out_size

    def subscription_state(self, subscriber_id: int) -> tables.SubscriptionState:
        """Of a subscription we made: CLOSED when unknown or over."""
        s = self._subs.get(subscriber_id)
        if s is not None:
            return s.state
        if subscriber_id in self._tombs:
            return tables.SubscriptionState.CANCELLED
        return tables.SubscriptionState.CLOSED

    def publication_state(self, subscriber_id: int) -> tables.PublicationState:
        """Of the peer's subscription ``subscriber_id``: CLOSED when unknown or over."""
        p = self._pubs.get(subscriber_id)
        return p.state if p is not None else tables.PublicationState.CLOSED

    def demand_of(self, subscriber_id: int) -> int:
        """Outstanding demand: of the peer's subscription if we publish to it,
        else of ours. 0 when unknown."""
        p = self._pubs.get(subscriber_id)
        if p is not None:
            return p.demand
        s = self._subs.get(subscriber_id)
        return s.demand if s is not None else 0

    @property
    def open_subscriptions(self) -> list[int]:
        return list(self._subs)

    @property
    def open_publications(self) -> list[int]:
        return list(self._pubs)

    # -- output and events ------------------------------------------------------
    def data_to_send(self) -> bytes:
        out = self._out
        if not out:
            return b""
        self._out = []
        self._out_size = 0
        return out[0] if len(out) == 1 and type(out[0]) is bytes else b"".join(out)

    def events(self) -> list[Event]:
        queued = self._event_queue
        events = self._events
        self._events = []
        if queued:
            result = list(queued)
            queued.clear()
            result.extend(events)
            return result
        return events

    def next_event(self) -> Event | None:
        if self._events:
            self._event_queue.extend(self._events)
            self._events = []
        return self._event_queue.popleft() if self._event_queue else None

    def handle_timeout(self, now: float) -> None:
        """rsio has no timers (no keepalive in version 0); kept for drivers."""

    def next_deadline(self) -> float | None:
        return None

    # -- plumbing -------------------------------------------------------------------
    def _queue(self, data: bytes) -> None:
        self._out.append(data)
        self._out_size += len(data)

    def _send(self, msg: Message, element_size: int = 0) -> None:
        self._queue(encode_message(msg, element_size))

    # -- the state tables: every state changes here, from its table ----------------
    def _transition(self, inp: tables.ConnectionInput) -> tables.ConnectionState | None:
        """Apply the connection table; None (nothing changed) if not allowed."""
        nxt = tables.CONNECTION_TRANSITIONS.get((self._state, inp))
        if nxt is not None:
            self._state = nxt
        return nxt

    def _check_connection(self, what: str, inp: tables.ConnectionInput) -> None:
        """A local intent the connection table must allow."""
        if (self._state, inp) not in tables.CONNECTION_TRANSITIONS:
            raise LocalProtocolError(f"{what}: the connection is {self._state.value}")

    def _check_send(self, what: str) -> None:
        self._check_connection(what, tables.ConnectionInput.SEND_STREAM)

    def _received(self, inp: tables.ConnectionInput, unexpected: str) -> bool:
        """A received message against the connection table: True to handle
        it, False to drop it (an ignored pair); a pair the table lacks is a
        protocol error (``unexpected`` says why). The state changes when the
        handler applies ``_transition``."""
        key = (self._state, inp)
        if key not in tables.CONNECTION_TRANSITIONS:
            self._fail(_UNEXPECTED, unexpected)
        return key not in tables.CONNECTION_IGNORED

    def _sub_step(self, s: Sub, inp: tables.SubscriptionInput, unexpected: str) -> bool:
        """A received message against subscription ``s``'s table: True to
        handle it, False to drop it; a pair the table lacks is a protocol
        error. A subscription that closes is forgotten."""
        key = (s.state, inp)
        nxt = tables.SUBSCRIPTION_TRANSITIONS.get(key)
        if nxt is None:
            self._fail(_UNEXPECTED, unexpected)
        s.state = nxt
        if nxt is tables.SubscriptionState.CLOSED:
            del self._subs[s.id]
        return key not in tables.SUBSCRIPTION_IGNORED

    def _sub_intent(self, s: Sub, inp: tables.SubscriptionInput, refused: str) -> None:
        """A local intent on subscription ``s``: ``LocalProtocolError`` if
        its table does not allow it."""
        nxt = tables.SUBSCRIPTION_TRANSITIONS.get((s.state, inp))
        if nxt is None:
            raise LocalProtocolError(refused)
        s.state = nxt

    def _tomb_step(self, sid: int, inp: tables.SubscriptionInput) -> None:
        """A message for a tombstone (a cancelled subscription forgotten but
        for its element size, §5.4): the CANCELLED row, which drops it."""
        if (
            tables.SUBSCRIPTION_TRANSITIONS[tables.SubscriptionState.CANCELLED, inp]
            is tables.SubscriptionState.CLOSED
        ):
            self._tombs.pop(sid, None)

    def _pub_allows(self, p: Pub, inp: tables.PublicationInput) -> bool:
        return (p.state, inp) in tables.PUBLICATION_TRANSITIONS

    def _pub_step(self, p: Pub, inp: tables.PublicationInput) -> None:
        """Apply the publication table (the caller checked ``_pub_allows``
        or the pair is in every row); a publication that closes is forgotten."""
        nxt = p.state = tables.PUBLICATION_TRANSITIONS[p.state, inp]
        if nxt is tables.PublicationState.CLOSED:
            del self._pubs[p.id]

    def _fail(self, code: ErrorCode, message: str) -> NoReturn:
        """A protocol error: goodbye (unless ours is already out), close, raise."""
        error = RemoteProtocolError(message, int(code))
        self._raise(error)

    def _raise(self, error: RemoteProtocolError) -> NoReturn:
        reason = f"protocol error: {error.message}"
        if self._state is not tables.ConnectionState.CLOSING:
            self._send(Goodbye(_clip(reason, self.config.max_string_size)))
        self._transition(tables.ConnectionInput.PROTOCOL_ERROR)
        self._forget_all()
        self._error = error
        self._events.append(
            ConnectionTerminated(reason=reason, by_peer=False, error_code=error.error_code)
        )
        raise error

    def _forget_all(self) -> None:
        self._subs.clear()
        self._pubs.clear()
        self._tombs.clear()
        self._chunks = []
        self._buffered = 0
        self._splits = 0
        self._split_bytes = 0


def _clip(text: str, limit: int) -> str:
    """Trim a reason so that its UTF-8 fits the peer's (and our) string limit."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore")
