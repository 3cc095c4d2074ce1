"""The rsio state machines as data (docs/protocols/rsio.md §11, state tables).

A missing (state, input) pair is not allowed: a local intent raises
``LocalProtocolError``, a received message is a protocol error unless the
connection handles it as "ignored" (documented per table).
"""

from __future__ import annotations

import enum

__all__ = [
    "CONNECTION_TRANSITIONS",
    "PUBLICATION_TRANSITIONS",
    "SUBSCRIPTION_TRANSITIONS",
    "ConnectionInput",
    "ConnectionState",
    "PublicationInput",
    "PublicationState",
    "SubscriptionInput",
    "SubscriptionState",
]


class ConnectionState(enum.Enum):
    AWAITING_HELLO = "awaiting-hello"  # our hello sent, the peer's not received
    OPEN = "open"
    CLOSING = "closing"  # our goodbye sent, waiting for its acknowledgement
    CLOSED = "closed"


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


class SubscriptionState(enum.Enum):
    """A subscription this side made (we are the subscriber)."""

    SUBSCRIBING = "subscribing"  # subscribe sent, no onSubscribe yet
    ACTIVE = "active"
    CANCELLED = "cancelled"  # a tombstone: messages in flight are ignored
    CLOSED = "closed"  # forgotten


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


class PublicationState(enum.Enum):
    """A subscription the peer made to one of our publishers."""

    SUBSCRIBED = "subscribed"  # subscribe received, onSubscribe not sent yet
    ACTIVE = "active"
    CLOSED = "closed"  # forgotten


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
