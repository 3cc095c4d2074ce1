"""The Ditto streaming subscription state machines as data
(docs/protocols/ditto.md, state tables): a subscription's states on the
client and on the server, and the (state, input) -> next state tables that
``DittoClient`` and ``DittoServer`` look each change up in. A missing pair
is not allowed (see each table).
"""

from __future__ import annotations

import enum
from typing import Final

from ._fast import identity_hash

__all__ = [
    "CLIENT_TRANSITIONS",
    "SERVER_TRANSITIONS",
    "ClientInput",
    "ClientState",
    "ServerInput",
    "ServerState",
]


# State machines as data, alike in shape by design (the duplicates scan lists
# them with the other protocols'): states, inputs, then the table.


@identity_hash  # table lookups (_fast.py)
class ClientState(enum.Enum):
    SUBSCRIBING = "subscribing"  # subscribe sent, no created yet
    CREATED = "created"  # created, nothing requested yet
    ACTIVE = "active"  # requested at least once
    CANCELLED = "cancelled"  # cancel sent; late events are still accepted
    DONE = "done"  # complete / failed received; forgotten


@identity_hash  # table lookups (_fast.py)
class ClientInput(enum.Enum):
    CREATED = "created"
    NEXT = "next"  # within demand
    NEXT_EXCESS = "next-excess"  # beyond demand (rule 1.1)
    COMPLETE = "complete"
    FAILED = "failed"
    REQUEST = "request"  # local intent
    CANCEL = "cancel"  # local intent


_C = ClientState
_CI = ClientInput
#: (state, input) -> next state. A missing local intent is ``LocalProtocolError``;
#: a missing remote input is a protocol violation (``RemoteProtocolError``).
# Tables as data, alike in shape by design with the other role's (the
# duplicates scan lists them).
CLIENT_TRANSITIONS: Final[dict[tuple[ClientState, ClientInput], ClientState]] = {
    (_C.SUBSCRIBING, _CI.CREATED): _C.CREATED,
    (_C.SUBSCRIBING, _CI.CANCEL): _C.CANCELLED,
    (_C.CREATED, _CI.REQUEST): _C.ACTIVE,
    (_C.CREATED, _CI.CANCEL): _C.CANCELLED,
    (_C.CREATED, _CI.COMPLETE): _C.DONE,  # tolerated: Ditto would wait for a request
    (_C.CREATED, _CI.FAILED): _C.DONE,  # the idle timeout may fail before a request
    (_C.CREATED, _CI.NEXT_EXCESS): _C.DONE,
    (_C.ACTIVE, _CI.REQUEST): _C.ACTIVE,
    (_C.ACTIVE, _CI.CANCEL): _C.CANCELLED,
    (_C.ACTIVE, _CI.NEXT): _C.ACTIVE,
    (_C.ACTIVE, _CI.NEXT_EXCESS): _C.DONE,
    (_C.ACTIVE, _CI.COMPLETE): _C.DONE,
    (_C.ACTIVE, _CI.FAILED): _C.DONE,
    # After a cancel, buffered events may still arrive (README section 4).
    (_C.CANCELLED, _CI.NEXT): _C.CANCELLED,
    (_C.CANCELLED, _CI.NEXT_EXCESS): _C.CANCELLED,
    (_C.CANCELLED, _CI.COMPLETE): _C.DONE,
    (_C.CANCELLED, _CI.FAILED): _C.DONE,
    (_C.CANCELLED, _CI.CANCEL): _C.CANCELLED,
    (_C.CANCELLED, _CI.CREATED): _C.CANCELLED,
}


@identity_hash  # table lookups (_fast.py)
class ServerState(enum.Enum):
    PENDING = "pending"  # created sent; no decision, no request
    PENDING_REQUESTED = "pending-requested"  # requested before the application decided
    READY = "ready"  # a Publisher is waiting for the first request
    REJECTED = "rejected"  # an error is waiting for the first request
    ACTIVE = "active"  # the Publisher is subscribed; demand is relayed
    ZOMBIE = "zombie"  # ended; a request is "considered cancelled"
    GONE = "gone"  # forgotten; its ID is unknown


@identity_hash  # table lookups (_fast.py)
class ServerInput(enum.Enum):
    REQUEST = "request"  # request with demand > 0
    BAD_REQUEST = "bad-request"  # request with demand <= 0 (rule 3.9)
    CANCEL = "cancel"
    ACCEPT = "accept"  # application: Publisher
    REJECT = "reject"  # application: error
    UP_NEXT = "up-next"  # Publisher: on_next within demand
    UP_NEXT_EXCESS = "up-next-excess"  # Publisher: on_next beyond demand (rule 1.1)
    UP_COMPLETE = "up-complete"
    UP_ERROR = "up-error"
    IDLE = "idle"  # idle timeout
    EXPIRE = "expire"  # zombie timeout


_S = ServerState
_SI = ServerInput
_ENDS: Final = {_SI.BAD_REQUEST: _S.ZOMBIE, _SI.CANCEL: _S.ZOMBIE, _SI.IDLE: _S.ZOMBIE}

#: (state, input) -> next state. A missing pair is API misuse (``accept`` twice)
#: or impossible (a Publisher signal before it was subscribed).
# Tables as data, alike in shape by design with the other role's (the
# duplicates scan lists them).
SERVER_TRANSITIONS: Final[dict[tuple[ServerState, ServerInput], ServerState]] = {
    **{(_S.PENDING, i): s for i, s in _ENDS.items()},
    (_S.PENDING, _SI.REQUEST): _S.PENDING_REQUESTED,
    (_S.PENDING, _SI.ACCEPT): _S.READY,
    (_S.PENDING, _SI.REJECT): _S.REJECTED,
    **{(_S.PENDING_REQUESTED, i): s for i, s in _ENDS.items()},
    (_S.PENDING_REQUESTED, _SI.REQUEST): _S.PENDING_REQUESTED,
    (_S.PENDING_REQUESTED, _SI.ACCEPT): _S.ACTIVE,
    (_S.PENDING_REQUESTED, _SI.REJECT): _S.ZOMBIE,
    **{(_S.READY, i): s for i, s in _ENDS.items()},
    (_S.READY, _SI.REQUEST): _S.ACTIVE,
    **{(_S.REJECTED, i): s for i, s in _ENDS.items()},
    (_S.REJECTED, _SI.REQUEST): _S.ZOMBIE,
    **{(_S.ACTIVE, i): s for i, s in _ENDS.items()},
    (_S.ACTIVE, _SI.REQUEST): _S.ACTIVE,
    (_S.ACTIVE, _SI.UP_NEXT): _S.ACTIVE,
    (_S.ACTIVE, _SI.UP_NEXT_EXCESS): _S.ZOMBIE,
    (_S.ACTIVE, _SI.UP_COMPLETE): _S.ZOMBIE,
    (_S.ACTIVE, _SI.UP_ERROR): _S.ZOMBIE,
    # A zombie answers requests, ignores late signals, and is forgotten at EXPIRE
    # (its only timer: it has no idle timeout any more).
    **{(_S.ZOMBIE, i): _S.ZOMBIE for i in ServerInput if i not in (_SI.EXPIRE, _SI.IDLE)},
    (_S.ZOMBIE, _SI.EXPIRE): _S.GONE,
}
