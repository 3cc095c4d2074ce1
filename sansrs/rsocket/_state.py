"""The connection state machine of RSocket as data (docs/rsocket.md, State
tables): ``Context.transition`` runs it, so a missing pair can never happen
silently."""

from __future__ import annotations

import enum

from ._fast import identity_hash

__all__ = ["CONNECTION_TRANSITIONS", "ConnectionInput", "ConnectionState"]


# State machines as data, alike in shape by design (the duplicates scan lists
# them with the other protocol's): states, inputs, then the table.


@identity_hash  # table lookups (_fast.py)
class ConnectionState(enum.Enum):
    AWAITING_SETUP = "awaiting-setup"  # client: setup() not called; server: no SETUP yet
    SETUP_RECEIVED = "setup-received"  # server: the application must accept or reject
    ESTABLISHED = "established"
    CLOSING = "closing"  # CONNECTION_CLOSE sent or received: draining
    CLOSED = "closed"
    DISCONNECTED = "disconnected"  # resumable session without a transport
    RESUMING = "resuming"  # client: RESUME sent, waiting for RESUME_OK


@identity_hash  # table lookups (_fast.py)
class ConnectionInput(enum.Enum):
    SEND_SETUP = "send-setup"
    RECV_SETUP = "recv-setup"
    ACCEPT = "accept"
    REJECT = "reject"
    CLOSE = "close"  # CONNECTION_CLOSE sent or received
    DRAINED = "drained"  # the last stream terminated while closing
    FATAL = "fatal"  # a connection error, either way, or keepalive timeout
    EOF = "eof"  # the transport ended
    DETACH = "detach"  # a resumable session lost its transport
    SEND_RESUME = "send-resume"  # client: RESUME on a new transport
    RESUMED = "resumed"  # RESUME_OK received (client) / RESUME accepted (server)
    HANDOFF = "handoff"  # server: a first-frame RESUME went to its session


_C = ConnectionState
_CI = ConnectionInput

#: (state, input) -> next state; a missing pair is not allowed.
CONNECTION_TRANSITIONS: dict[tuple[ConnectionState, ConnectionInput], ConnectionState] = {
    (_C.AWAITING_SETUP, _CI.SEND_SETUP): _C.ESTABLISHED,
    (_C.AWAITING_SETUP, _CI.RECV_SETUP): _C.SETUP_RECEIVED,
    (_C.AWAITING_SETUP, _CI.REJECT): _C.CLOSED,
    (_C.AWAITING_SETUP, _CI.FATAL): _C.CLOSED,
    (_C.AWAITING_SETUP, _CI.EOF): _C.CLOSED,
    (_C.SETUP_RECEIVED, _CI.ACCEPT): _C.ESTABLISHED,
    (_C.SETUP_RECEIVED, _CI.REJECT): _C.CLOSED,
    (_C.SETUP_RECEIVED, _CI.FATAL): _C.CLOSED,
    (_C.SETUP_RECEIVED, _CI.EOF): _C.CLOSED,
    (_C.ESTABLISHED, _CI.CLOSE): _C.CLOSING,
    (_C.ESTABLISHED, _CI.REJECT): _C.CLOSED,  # client: the server rejected SETUP
    (_C.ESTABLISHED, _CI.FATAL): _C.CLOSED,
    (_C.ESTABLISHED, _CI.EOF): _C.CLOSED,
    (_C.CLOSING, _CI.CLOSE): _C.CLOSING,
    (_C.CLOSING, _CI.DRAINED): _C.CLOSED,
    (_C.CLOSING, _CI.REJECT): _C.CLOSED,  # client: SETUP rejected after a close began
    (_C.CLOSING, _CI.FATAL): _C.CLOSED,
    (_C.CLOSING, _CI.EOF): _C.CLOSED,
    # Resumption (spec: Resuming Operation); docs/rsocket.md.
    (_C.AWAITING_SETUP, _CI.HANDOFF): _C.CLOSED,
    (_C.ESTABLISHED, _CI.DETACH): _C.DISCONNECTED,
    (_C.DISCONNECTED, _CI.SEND_RESUME): _C.RESUMING,
    (_C.DISCONNECTED, _CI.RESUMED): _C.ESTABLISHED,
    (_C.DISCONNECTED, _CI.FATAL): _C.CLOSED,
    (_C.RESUMING, _CI.RESUMED): _C.ESTABLISHED,
    (_C.RESUMING, _CI.DETACH): _C.DISCONNECTED,
    (_C.RESUMING, _CI.REJECT): _C.CLOSED,
    (_C.RESUMING, _CI.FATAL): _C.CLOSED,
}
