"""The requests of a :class:`~._connection.Connection` (its methods, bound
in its class): REQUEST_RESPONSE, REQUEST_FNF (one, or a run of them),
REQUEST_STREAM and REQUEST_CHANNEL, each on a new stream ID the lease
allows; a request that fits one frame is packed directly (the hot path),
a larger one goes through the ``Fragmenter``."""

from __future__ import annotations

from .._errors import LocalProtocolError
from . import _frames as fr
from ._connection_state import ConnectionParts
from ._connection_state import check_n as _check_n
from ._fast import (
    T_REQUEST_FNF,
    T_REQUEST_RESPONSE,
    pack_prefix_header,
    queue_fnf_run,
)
from ._frames import FLAG_METADATA, MAX_REQUEST_N
from ._streams import StreamKind, add_credit

__all__ = [
    "next_stream_id",
    "queue_whole_request",
    "request_channel",
    "request_fnf",
    "request_fnf_many",
    "request_response",
    "request_response_frame",
    "request_stream",
]

_RR = StreamKind.REQUEST_RESPONSE


def next_stream_id(self: ConnectionParts, what: str) -> int:
    ctx = self._ctx
    if not self._resume.detached:  # detached: requests go out after resumption
        ctx.check_can_request(what)
    leases = self._leases
    if leases.enabled and leases.peer.available(ctx.now) <= 0:
        raise LocalProtocolError(f"{what}: no lease allows a request now (spec: Lease Semantics)")
    sid = self._streams.ids.next_id(self._by_id)
    if sid is None:
        raise LocalProtocolError(f"{what}: no stream ID left; open a new connection")
    if leases.enabled:
        leases.peer.use(ctx.now)
    return sid


def queue_whole_request(
    self: ConnectionParts, sid: int, type_flags: int, data: bytes, metadata: bytes | None
) -> bool:
    """Hot path of a REQUEST_RESPONSE / REQUEST_FNF that fits one frame
    (with metadata: a routed request's composite metadata): the header
    packed directly, no frame object. False: not such a request."""
    if type(data) is not bytes:
        return False
    if metadata is None:
        if len(data) > self._out.fast_request_max:
            return False
        n = 6 + len(data)
        head = pack_prefix_header(n >> 16, n & 0xFFFF, sid, type_flags)
    else:
        if type(metadata) is not bytes:
            return False
        m = len(metadata)
        if m + len(data) > self._out.fast_request_max:
            return False
        n = 9 + m + len(data)
        # Header, metadata length and metadata in one piece: retained
        # frames are two pieces each (_retained.py).
        tf = type_flags | FLAG_METADATA
        head = pack_prefix_header(n >> 16, n & 0xFFFF, sid, tf) + m.to_bytes(3, "big") + metadata
    self._out.queue_pieces((head, data), n)
    return True


def request_response(self: ConnectionParts, data: bytes, metadata: bytes | None = None) -> int:
    sid = self._next_stream_id("request_response")
    if not self._queue_whole_request(sid, T_REQUEST_RESPONSE, data, metadata):
        self._fragments.queue_request(fr.RequestResponseFrame(sid, data, metadata))
    self._streams.open_requester(sid, _RR, 1)
    return sid


def request_response_frame(
    self: ConnectionParts, data: bytes, metadata: bytes | None = None
) -> tuple[int, bytes] | None:
    """``request_response`` then ``data_to_send``, in one call, while the
    request is the only output: ``(stream ID, the bytes to write)``; write
    them before anything ``data_to_send`` returns later. None (nothing
    changed) when the request would not be one whole frame alone (too
    large, output queued, a resumable session, leases, not established,
    data or metadata not bytes): use ``request_response``. The
    latency path of a blocking request-response (``_latency.py``).
    """
    return self._latency.request_frame(data, metadata)


def request_fnf(self: ConnectionParts, data: bytes, metadata: bytes | None = None) -> int:
    sid = self._next_stream_id("request_fnf")
    if not self._queue_whole_request(sid, T_REQUEST_FNF, data, metadata):
        self._fragments.queue_request(fr.RequestFnfFrame(sid, data, metadata))
    return sid


def request_fnf_many(self: ConnectionParts, items: list[bytes]) -> int:
    """``request_fnf`` for each of ``items`` (data, no metadata), the
    same frames on the same stream IDs, or nothing: returns how many
    were queued, ``len(items)`` or 0 where the one-by-one path is needed
    (an item not ``bytes`` or too large for one frame, leases, a
    resumable session, stream IDs about to wrap); the caller then sends
    them with ``request_fnf``. Raises as ``request_fnf`` would for the
    first item when no request can be made. The batch form of
    ``request_fnf``'s first path: ``_fast.queue_fnf_run``."""
    if not items:
        return 0
    out = self._out
    if (
        self._resume.detached
        or self._leases.enabled
        or out.retain is not None
        or set(map(type, items)) != {bytes}
        or max(map(len, items)) > out.fast_request_max
    ):
        return 0
    self._ctx.check_can_request("request_fnf")
    stream_ids = self._streams.ids.take_run(len(items))
    if stream_ids is None:
        return 0
    queue_fnf_run(out, stream_ids, items)
    return len(items)


def request_stream(
    self: ConnectionParts, data: bytes, metadata: bytes | None = None, *, initial_n: int
) -> int:
    _check_n("request_stream: initial_n", initial_n)
    sid = self._next_stream_id("request_stream")
    self._fragments.queue_request(
        fr.RequestStreamFrame(sid, min(initial_n, MAX_REQUEST_N), data, metadata)
    )
    self._streams.open_requester(sid, StreamKind.REQUEST_STREAM, add_credit(0, initial_n))
    return sid


def request_channel(
    self: ConnectionParts,
    data: bytes,
    metadata: bytes | None = None,
    *,
    initial_n: int,
    complete: bool = False,
) -> int:
    """Open a channel; ``data`` is our first item. Further items need the
    responder's REQUEST_N; ``complete`` ends our side at once."""
    _check_n("request_channel: initial_n", initial_n)
    sid = self._next_stream_id("request_channel")
    frame = fr.RequestChannelFrame(
        sid, min(initial_n, MAX_REQUEST_N), data, metadata, complete=complete
    )
    self._fragments.queue_request(frame)
    self._streams.open_requester(
        sid, StreamKind.REQUEST_CHANNEL, add_credit(0, initial_n), complete=complete
    )
    return sid
