"""Events an RSocket ``Connection`` reports to the application.

Every event is a frozen, slotted, keyword-only dataclass compared by value.
The receive hot paths build ``PayloadReceived``, ``RequestResponseReceived``
and ``FireAndForgetReceived`` a cheaper way (``_fast.py``); the result is the
same frozen value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "CancelReceived",
    "ConnectionClosing",
    "ConnectionLost",
    "ConnectionTerminated",
    "Disconnected",
    "ErrorReceived",
    "Event",
    "ExtensionReceived",
    "FireAndForgetReceived",
    "FireAndForgetRunReceived",
    "KeepaliveReceived",
    "LeaseReceived",
    "MetadataPushReceived",
    "PayloadReceived",
    "PayloadRunReceived",
    "RequestChannelReceived",
    "RequestNReceived",
    "RequestResponseReceived",
    "RequestStreamReceived",
    "ResumeAccepted",
    "Resumed",
    "SetupReceived",
]


# Declarations alike in shape by design (the duplicates scan lists them): one
# frozen, slotted, keyword-only dataclass per event (docs/architecture.md).


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupReceived:
    """Server: the client's SETUP. Answer with ``accept_setup`` or ``reject_setup``."""

    keepalive_interval: int  # ms
    max_lifetime: int  # ms
    metadata_mime_type: str
    data_mime_type: str
    metadata: bytes | None
    data: bytes
    lease: bool
    major_version: int
    minor_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseReceived:
    """The peer's responder granted ``number_of_requests`` requests for ``ttl`` ms."""

    ttl: int
    number_of_requests: int
    metadata: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestResponseReceived:
    stream_id: int
    data: bytes
    metadata: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FireAndForgetReceived:
    stream_id: int
    data: bytes
    metadata: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestStreamReceived:
    stream_id: int
    data: bytes
    metadata: bytes | None
    initial_n: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestChannelReceived:
    """A channel request; ``data``/``metadata`` are the requester's first item.

    ``complete``: the requester's side is already complete (C flag). Unless it
    is, the application must grant credit with ``request_n`` (the spec's
    mandatory REQUEST_N) before the requester can send more items.
    """

    stream_id: int
    data: bytes
    metadata: bytes | None
    initial_n: int
    complete: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PayloadReceived:
    """A PAYLOAD (reassembled). ``next``: carries an item; ``complete``: the
    sender's side of the stream is complete."""

    stream_id: int
    data: bytes
    metadata: bytes | None
    complete: bool
    next: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PayloadRunReceived:
    """Consecutive PAYLOAD (NEXT, no metadata, not complete, whole) frames on
    one stream, their data in order: what as many ``PayloadReceived`` events
    (``metadata=None``, ``complete=False``, ``next=True``) would carry.
    Reported only with ``ConnectionConfig.payload_runs``."""

    stream_id: int
    data: list[bytes]


@dataclass(frozen=True, slots=True, kw_only=True)
class FireAndForgetRunReceived:
    """Consecutive whole REQUEST_FNF frames, in order, as three lists of one
    length: what as many ``FireAndForgetReceived`` events would carry (item
    ``i``: ``stream_ids[i]``, ``data[i]``, ``metadata[i]``). Reported only
    with ``ConnectionConfig.fnf_runs``."""

    stream_ids: list[int]
    data: list[bytes]
    metadata: list[bytes | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestNReceived:
    stream_id: int
    n: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelReceived:
    stream_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReceived:
    """A stream-level ERROR (stream_id > 0); the stream is terminated."""

    stream_id: int
    error_code: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataPushReceived:
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepaliveReceived:
    """A KEEPALIVE arrived (if ``respond``, the echo is already queued)."""

    respond: bool
    data: bytes
    last_received_position: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtensionReceived:
    """An EXT frame: the extension hook. Unknown extensions are the
    application's to ignore (or to fail with ``close``)."""

    stream_id: int
    extended_type: int
    data: bytes
    metadata: bytes | None
    ignore: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionClosing:
    """ERROR[CONNECTION_CLOSE] received: no new streams; open ones drain."""

    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionTerminated:
    """Terminal: the connection is over (the adapter closes the transport
    after writing what ``data_to_send`` still returns).

    ``error_code``: the code of the ERROR that ended it (CONNECTION_CLOSE
    after a graceful drain, CONNECTION_ERROR, a SETUP rejection code).
    ``by_peer``: the peer sent it (else this end did). (Not to be confused
    with the drivers' exception ``ConnectionClosed``: a call that needs a
    connection that is gone.)
    """

    error_code: int
    message: str
    by_peer: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionLost:
    """Terminal: the transport ended without a closing ERROR, or the peer
    was silent for longer than the max lifetime (``timed_out``)."""

    reason: str
    timed_out: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Disconnected:
    """A resumable session lost its transport (or the peer was silent past
    the max lifetime: ``timed_out``). Not terminal: the streams and the
    retained frames are kept. A client calls ``resume()`` and writes
    ``data_to_send()`` on a new transport; a server keeps the session in its
    ``SessionStore`` until a RESUME names it or it expires. The adapter
    closes the old transport."""

    reason: str
    timed_out: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed:
    """The session continues on a new transport (client: RESUME_OK
    received; server: RESUME accepted, RESUME_OK queued). ``peer_position``
    is the peer's last received position; ``retransmitted`` the bytes of
    retained frames queued again from there."""

    peer_position: int
    retransmitted: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeAccepted:
    """Terminal for a fresh server connection whose first frame was a
    RESUME for a session in the ``SessionStore``: ``session`` (the
    ``Connection`` that served the client before) now owns this transport.
    Drive ``session`` from here on: its ``data_to_send()`` starts with
    RESUME_OK and the retransmitted frames."""

    session: Any


Event = (
    SetupReceived
    | LeaseReceived
    | RequestResponseReceived
    | FireAndForgetReceived
    | FireAndForgetRunReceived
    | RequestStreamReceived
    | RequestChannelReceived
    | PayloadReceived
    | PayloadRunReceived
    | RequestNReceived
    | CancelReceived
    | ErrorReceived
    | MetadataPushReceived
    | KeepaliveReceived
    | ExtensionReceived
    | ConnectionClosing
    | ConnectionTerminated
    | ConnectionLost
    | Disconnected
    | Resumed
    | ResumeAccepted
)
