"""The subscriptions of one rsio connection, both ways, and their state
tables.

``SubscriptionTable`` is a part of ``Connection``: the subscriptions we made
(``subs``: ``Sub``), the peer's subscriptions to our publishers (``pubs``:
``Pub``), the tombstones of cancelled ones (``tombs``, docs/protocols/rsio.md
§5.4) and the next subscriber Id. Every change of a subscription's or a
publication's state goes through its table here (``sub_step``,
``sub_intent``, ``tomb_step``, ``pub_step``); demand received is taken here
(``take_demand``, rule 1.1). Everything is forgotten when the connection
closes.
"""

from __future__ import annotations

from .._errors import LocalProtocolError
from . import _tables as tables
from ._codec import MAX_VARINT, ErrorCode, MessageType, encode_varint
from ._context import Context

__all__ = ["Partial", "Pub", "Sub", "SubscriptionTable", "add_demand"]

_SUBSCRIBING = tables.SubscriptionState.SUBSCRIBING
_SUB_CLOSED = tables.SubscriptionState.CLOSED
_PUB_CLOSED = tables.PublicationState.CLOSED
_UNEXPECTED = ErrorCode.UNEXPECTED_MESSAGE
_ON_NEXT = bytes((MessageType.ON_NEXT,))
_ON_NEXT_PACKED = bytes((MessageType.ON_NEXT_PACKED,))


class Partial:
    """A split element being joined (``Reassembly``)."""

    __slots__ = ("data", "parts")

    def __init__(self) -> None:
        self.data = bytearray()
        self.parts = 0


class Sub:
    """A subscription we made. ``size``: None until onSubscribe;
    ``partials``: its split elements in progress, by element Id."""

    __slots__ = ("demand", "id", "partials", "publisher", "size", "state")

    def __init__(self, sid: int, publisher: str, demand: int) -> None:
        self.id = sid
        self.publisher = publisher
        self.demand = demand
        self.size: int | None = None
        self.state = _SUBSCRIBING
        self.partials: dict[int, Partial] | None = None


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


class SubscriptionTable:
    """See the module docstring."""

    __slots__ = ("_ctx", "next_sid", "pubs", "subs", "tombs")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self.subs: dict[int, Sub] = {}
        self.pubs: dict[int, Pub] = {}
        #: Cancelled subscriptions whose elementSize is > 0 or unknown (§5.4).
        self.tombs: dict[int, int | None] = {}
        self.next_sid = 1
        ctx.on_closed.append(self.forget)

    # -- inspection ---------------------------------------------------------------
    def subscription_state(self, sid: int) -> tables.SubscriptionState:
        s = self.subs.get(sid)
        if s is not None:
            return s.state
        if sid in self.tombs:
            return tables.SubscriptionState.CANCELLED
        return _SUB_CLOSED

    def publication_state(self, sid: int) -> tables.PublicationState:
        p = self.pubs.get(sid)
        return p.state if p is not None else _PUB_CLOSED

    def demand_of(self, sid: int) -> int:
        p = self.pubs.get(sid)
        if p is not None:
            return p.demand
        s = self.subs.get(sid)
        return s.demand if s is not None else 0

    def size_of(self, sid: int) -> int | None:
        """The element size the decoder parses ``sid``'s messages with."""
        s = self.subs.get(sid)
        if s is not None:
            return s.size
        if sid in self.tombs:
            return self.tombs[sid]
        return 0  # closed or never used: variable size (docs §5.5)

    # -- the subscription and publication tables --------------------------------------
    def sub_step(self, s: Sub, inp: tables.SubscriptionInput, unexpected: str) -> bool:
        """A received message against subscription ``s``'s table: True to
        handle it, False to drop it; a pair the table lacks is a protocol
        error. A subscription that closes is forgotten."""
        key = (s.state, inp)
        nxt = tables.SUBSCRIPTION_TRANSITIONS.get(key)
        if nxt is None:
            self._ctx.fail(_UNEXPECTED, unexpected)
        s.state = nxt
        if nxt is _SUB_CLOSED:
            del self.subs[s.id]
        return key not in tables.SUBSCRIPTION_IGNORED

    def sub_intent(self, s: Sub, inp: tables.SubscriptionInput, refused: str) -> None:
        """A local intent on subscription ``s``: ``LocalProtocolError``
        (``refused``) if its table does not allow it."""
        nxt = tables.SUBSCRIPTION_TRANSITIONS.get((s.state, inp))
        if nxt is None:
            raise LocalProtocolError(refused)
        s.state = nxt

    def tomb_step(self, sid: int, inp: tables.SubscriptionInput) -> None:
        """A message for a tombstone (a cancelled subscription forgotten but
        for its element size, §5.4): the CANCELLED row, which drops it."""
        if tables.SUBSCRIPTION_TRANSITIONS[tables.SubscriptionState.CANCELLED, inp] is _SUB_CLOSED:
            self.tombs.pop(sid, None)

    def pub_allows(self, p: Pub, inp: tables.PublicationInput) -> bool:
        return (p.state, inp) in tables.PUBLICATION_TRANSITIONS

    def pub_step(self, p: Pub, inp: tables.PublicationInput) -> None:
        """Apply the publication table (the caller checked ``pub_allows``
        or the pair is in every row); a publication that closes is forgotten."""
        nxt = p.state = tables.PUBLICATION_TRANSITIONS[p.state, inp]
        if nxt is _PUB_CLOSED:
            del self.pubs[p.id]

    # -- demand -----------------------------------------------------------------------
    def take_demand(self, s: Sub, count: int, what: str) -> None:
        """``count`` elements received on ``s``: within its demand (rule 1.1)."""
        demand = s.demand
        if demand == MAX_VARINT:
            return
        if count > demand:
            self._ctx.fail(
                ErrorCode.DEMAND_EXCEEDED,
                f"{what} beyond the demand {demand} of subscriber {s.id} (rule 1.1)",
            )
        s.demand = demand - count

    def forget(self) -> None:
        """The connection closed: every subscription both ways is over."""
        self.subs.clear()
        self.pubs.clear()
        self.tombs.clear()
