"""A :class:`~._connection.Connection`'s own frames, on stream 0 (its
methods, bound in its class): METADATA_PUSH, LEASE, KEEPALIVE, EXT, and
its close (graceful: the open streams drain; or at once)."""

from __future__ import annotations

from .._errors import LocalProtocolError
from . import _frames as fr
from ._connection_state import ConnectionParts
from ._frames import ErrorCode
from ._state import ConnectionInput, ConnectionState

__all__ = ["close", "metadata_push", "send_extension", "send_keepalive", "send_lease"]

_CI = ConnectionInput
_ESTABLISHED = ConnectionState.ESTABLISHED


def metadata_push(self: ConnectionParts, metadata: bytes) -> None:
    self._ctx.check_can_request("metadata_push")
    if len(metadata) + 6 > self.config.fragment_size:
        raise LocalProtocolError(
            "metadata_push: metadata exceeds the frame size (not fragmentable)"
        )
    self._out.queue(fr.MetadataPushFrame(metadata))


def send_lease(
    self: ConnectionParts, ttl: int, number_of_requests: int, metadata: bytes | None = None
) -> None:
    """Grant the peer's requester ``number_of_requests`` requests for ``ttl`` ms."""
    leases = self._leases
    if not leases.enabled:
        raise LocalProtocolError("send_lease: leases were not negotiated in SETUP")
    self._ctx.check_can_request("send_lease")
    self._out.queue(fr.LeaseFrame(ttl, number_of_requests, metadata))  # validates the ranges
    leases.ours.grant(self._ctx.now, ttl, number_of_requests)
    leases.last_grant = (ttl, number_of_requests, metadata)  # sent again on resumption


def send_keepalive(self: ConnectionParts, data: bytes = b"") -> None:
    """KEEPALIVE with R (the client's timer sends them; a server may too)."""
    self._ctx.check_can_request("send_keepalive")
    self._ctx.queue_keepalive_request(data)


def send_extension(
    self: ConnectionParts,
    extended_type: int,
    data: bytes = b"",
    metadata: bytes | None = None,
    *,
    stream_id: int = 0,
    ignore: bool = True,
) -> None:
    """Send an EXT frame (by default with I, so peers that do not know it skip it)."""
    self._ctx.check_can_request("send_extension")
    self._out.queue(fr.ExtFrame(stream_id, extended_type, data, metadata, ignore))


def close(
    self: ConnectionParts, message: str = "", *, error_code: int = ErrorCode.CONNECTION_CLOSE
) -> None:
    """Close the connection.

    CONNECTION_CLOSE (default): graceful; no new streams, open ones drain,
    then ``ConnectionTerminated``. CONNECTION_ERROR: at once.
    """
    ctx = self._ctx
    ctx.check_open("close")
    if self._resume.close_detached():
        # No transport (or not resumed yet): nothing can drain.
        error_code = ErrorCode.CONNECTION_ERROR
    state = ctx.state
    if error_code == ErrorCode.CONNECTION_CLOSE and (
        state is _ESTABLISHED or state is ConnectionState.CLOSING
    ):
        if state is ConnectionState.CLOSING:
            return
        self._out.queue_error(0, ErrorCode.CONNECTION_CLOSE, message)
        ctx.begin_close(message, False, drained=not self._by_id)
        return
    if error_code not in (ErrorCode.CONNECTION_CLOSE, ErrorCode.CONNECTION_ERROR):
        raise LocalProtocolError(f"close: {error_code:#x} is not a connection error code")
    if not (self._client and state is ConnectionState.AWAITING_SETUP):
        # (A client that never sent SETUP has nothing to tell the server.)
        self._out.queue_error(0, ErrorCode.CONNECTION_ERROR, message)
    ctx.end(_CI.FATAL, ErrorCode.CONNECTION_ERROR, message, by_peer=False)
