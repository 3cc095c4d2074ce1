"""The rsio state machines as data (docs/protocols/rsio.md §11, state tables).

A missing (state, input) pair is not allowed: a local intent raises
``LocalProtocolError``, a received message is a protocol error. A pair in
an ``*_IGNORED`` set is allowed but its message is parsed and dropped.
The connection changes a state only by looking its table up.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from ._fast import identity_hash

__all__ = [
    "CONNECTION_IGNORED",
    "CONNECTION_TRANSITIONS",
    "PUBLICATION_TRANSITIONS",
    "SUBSCRIPTION_IGNORED",
    "SUBSCRIPTION_TRANSITIONS",
    "ConnectionInput",
    "ConnectionState",
    "PublicationInput",
    "PublicationState",
    "SubscriptionInput",
    "SubscriptionState",
    "hot_path_state",
]



# State machines as data, alike in shape by design (the duplicates scan lists
# them with the other protocol's): states, inputs, then the table.


@identity_hash  # table lookups (_fast.py)
class ConnectionState(enum.Enum):
    AWAITING_HELLO = "awaiting-hello"  # our hello sent, the peer's not received
    OPEN = "open"
    CLOSING = "closing"  # our goodbye sent, waiting for its acknowledgement
    CLOSED = "closed"


@identity_hash  # table lookups (_fast.py)
class ConnectionInput(enum.Enum):
    RECV_HELLO = "recv-hello"
    RECV_STREAM = "recv-stream"  # any subscription message
    RECV_GOODBYE = "recv-goodbye"
    RECV_GOODBYE_ACK = "recv-goodbye-ack"
    SEND_STREAM = "send-stream"
    SEND_GOODBYE = "send-goodbye"
    PROTOCOL_ERROR = "protocol-error"
    EOF = "eof"


_C = ConnectionState
_CI = ConnectionInput

CONNECTION_TRANSITIONS: dict[tuple[ConnectionState, ConnectionInput], ConnectionState] = {
    (_C.AWAITING_HELLO, _CI.RECV_HELLO): _C.OPEN,
    (_C.AWAITING_HELLO, _CI.RECV_GOODBYE): _C.CLOSED,
    (_C.AWAITING_HELLO, _CI.SEND_STREAM): _C.AWAITING_HELLO,  # optimistic sending
    (_C.AWAITING_HELLO, _CI.SEND_GOODBYE): _C.CLOSING,
    (_C.AWAITING_HELLO, _CI.PROTOCOL_ERROR): _C.CLOSED,
    (_C.AWAITING_HELLO, _CI.EOF): _C.CLOSED,
    (_C.OPEN, _CI.RECV_STREAM): _C.OPEN,
    (_C.OPEN, _CI.RECV_GOODBYE): _C.CLOSED,
    (_C.OPEN, _CI.SEND_STREAM): _C.OPEN,
    (_C.OPEN, _CI.SEND_GOODBYE): _C.CLOSING,
    (_C.OPEN, _CI.PROTOCOL_ERROR): _C.CLOSED,
    (_C.OPEN, _CI.EOF): _C.CLOSED,
    (_C.CLOSING, _CI.RECV_HELLO): _C.CLOSING,  # ignored
    (_C.CLOSING, _CI.RECV_STREAM): _C.CLOSING,  # ignored
    (_C.CLOSING, _CI.RECV_GOODBYE): _C.CLOSED,
    (_C.CLOSING, _CI.RECV_GOODBYE_ACK): _C.CLOSED,
    (_C.CLOSING, _CI.PROTOCOL_ERROR): _C.CLOSED,
    (_C.CLOSING, _CI.EOF): _C.CLOSED,
}
#: Closing: the peer's hello and stream messages are parsed and dropped (§7).
CONNECTION_IGNORED = frozenset({(_C.CLOSING, _CI.RECV_HELLO), (_C.CLOSING, _CI.RECV_STREAM)})


@identity_hash  # table lookups (_fast.py)
class SubscriptionState(enum.Enum):
    """A subscription this side made (we are the subscriber)."""

    SUBSCRIBING = "subscribing"  # subscribe sent, no onSubscribe yet
    ACTIVE = "active"
    CANCELLED = "cancelled"  # a tombstone: messages in flight are ignored
    CLOSED = "closed"  # forgotten


@identity_hash  # table lookups (_fast.py)
class SubscriptionInput(enum.Enum):
    RECV_ON_SUBSCRIBE = "recv-on-subscribe"
    RECV_NEXT = "recv-next"  # onNext, onNextPacked, parts
    RECV_TERMINAL = "recv-terminal"  # onComplete, onError
    SEND_REQUEST = "send-request"
    SEND_CANCEL = "send-cancel"


_S = SubscriptionState
_SI = SubscriptionInput

SUBSCRIPTION_TRANSITIONS: dict[
    tuple[SubscriptionState, SubscriptionInput], SubscriptionState
] = {
    (_S.SUBSCRIBING, _SI.RECV_ON_SUBSCRIBE): _S.ACTIVE,
    (_S.SUBSCRIBING, _SI.SEND_REQUEST): _S.SUBSCRIBING,
    (_S.SUBSCRIBING, _SI.SEND_CANCEL): _S.CANCELLED,
    (_S.ACTIVE, _SI.RECV_NEXT): _S.ACTIVE,
    (_S.ACTIVE, _SI.RECV_TERMINAL): _S.CLOSED,
    (_S.ACTIVE, _SI.SEND_REQUEST): _S.ACTIVE,
    (_S.ACTIVE, _SI.SEND_CANCEL): _S.CANCELLED,
    (_S.CANCELLED, _SI.RECV_ON_SUBSCRIBE): _S.CANCELLED,  # ignored (size recorded)
    (_S.CANCELLED, _SI.RECV_NEXT): _S.CANCELLED,  # ignored
    (_S.CANCELLED, _SI.RECV_TERMINAL): _S.CLOSED,  # ignored, tombstone dropped
}
#: A cancelled subscription's messages in flight are parsed and dropped (§5.4).
SUBSCRIPTION_IGNORED = frozenset(
    {
        (_S.CANCELLED, _SI.RECV_ON_SUBSCRIBE),
        (_S.CANCELLED, _SI.RECV_NEXT),
        (_S.CANCELLED, _SI.RECV_TERMINAL),
    }
)


@identity_hash  # table lookups (_fast.py)
class PublicationState(enum.Enum):
    """A subscription the peer made to one of our publishers."""

    SUBSCRIBED = "subscribed"  # subscribe received, onSubscribe not sent yet
    ACTIVE = "active"
    CLOSED = "closed"  # forgotten


@identity_hash  # table lookups (_fast.py)
class PublicationInput(enum.Enum):
    SEND_ON_SUBSCRIBE = "send-on-subscribe"
    SEND_NEXT = "send-next"
    SEND_TERMINAL = "send-terminal"
    RECV_REQUEST = "recv-request"
    RECV_CANCEL = "recv-cancel"


_P = PublicationState
_PI = PublicationInput

PUBLICATION_TRANSITIONS: dict[tuple[PublicationState, PublicationInput], PublicationState] = {
    (_P.SUBSCRIBED, _PI.SEND_ON_SUBSCRIBE): _P.ACTIVE,
    (_P.SUBSCRIBED, _PI.SEND_TERMINAL): _P.CLOSED,  # onSubscribe(id, 0) sent first
    (_P.SUBSCRIBED, _PI.RECV_REQUEST): _P.SUBSCRIBED,
    (_P.SUBSCRIBED, _PI.RECV_CANCEL): _P.CLOSED,
    (_P.ACTIVE, _PI.SEND_NEXT): _P.ACTIVE,
    (_P.ACTIVE, _PI.SEND_TERMINAL): _P.CLOSED,
    (_P.ACTIVE, _PI.RECV_REQUEST): _P.ACTIVE,
    (_P.ACTIVE, _PI.RECV_CANCEL): _P.CLOSED,
}



State = TypeVar("State", bound=enum.Enum)
Input = TypeVar("Input", bound=enum.Enum)


def hot_path_state(
    table: dict[tuple[State, Input], State],
    ignored: frozenset[tuple[State, Input]],
    inp: Input,
) -> State:
    """The one state in which ``table`` handles ``inp`` (allowed, not
    ignored) and stays: what a hot path tests instead of looking the table
    up. Raises at import if the table ever says otherwise."""
    states = {state for (state, i) in table if i is inp and (state, i) not in ignored}
    if len(states) != 1:
        raise ValueError(f"{inp} is handled in {len(states)} states; the hot path assumes one")
    (state,) = states
    if table[state, inp] is not state:
        raise ValueError(f"{inp} leaves {state}; the hot path assumes it stays")
    return state
