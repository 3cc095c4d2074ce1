"""The :class:`~.engine.RSocketEngine`'s application intents (its methods,
bound in the engine's class): what the peer objects (:mod:`.peer`) hand
over on the connection's thread: requests started (and a request-response
answered whole from a read), fire-and-forgets one at a time or many,
METADATA_PUSH, a LEASE, REQUEST_N and CANCEL on our requests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from sansrs.rsocket import ErrorCode

from ..drive.errors import ConnectionClosed
from ..drive.streams import PublisherSource, ThreadedSource, is_publisher
from . import core
from .engine_state import EngineState, RequestHandle
from .errors import RSocketError
from .fast import new_tuple, plain_payloads
from .types import Payload

__all__ = [
    "adopt_response",
    "cancel",
    "fire_and_forget",
    "fire_and_forget_data",
    "fire_and_forget_many",
    "metadata_push",
    "refused",
    "request_more",
    "send_lease",
    "start_request",
    "start_response",
    "take_answer",
]


def start_request(
    self: EngineState,
    handle: RequestHandle,
    payload: Payload,
    initial_n: int,
    outbound: Iterable[object] | None = None,
) -> None:
    if handle.cancelled:
        return
    if self._closing is not None:  # going away: fail now, with the reason
        handle.sink.finish(self._closing)
        return
    if self.leases.must_wait():
        again = lambda: self.start_request(handle, payload, initial_n, outbound)  # noqa: E731
        self.leases.wait(again, handle)
        return
    conn = self.conn
    try:
        if handle.kind == "rr":
            sid = conn.request_response(payload.data, payload.metadata)
        elif handle.kind == "stream":
            sid = conn.request_stream(payload.data, payload.metadata, initial_n=initial_n)
        else:
            sid = conn.request_channel(
                payload.data, payload.metadata, initial_n=initial_n, complete=outbound is None
            )
    except core.LocalProtocolError as exc:
        self._refused(handle, exc)
        return
    handle.sid = sid
    self._requests[sid] = handle
    if handle.kind == "channel" and outbound is not None:
        source: ThreadedSource[Any] | PublisherSource[Any]
        if is_publisher(outbound):  # e.g. the asyncio adapter's async iterables
            source = PublisherSource(outbound, lambda: self._poke(sid))
        else:
            source = ThreadedSource(outbound, lambda: self._poke(sid), f"sansrs-channel-{sid}")
        handle.outbound = self._new_outbound(sid, source, 0)


def start_response(self: EngineState, handle: RequestHandle, payload: Payload) -> None:
    """:meth:`start_request` for a request-response (``handle.kind == "rr"``),
    trimmed for pipelines that start one per answer received."""
    if self.leases.in_force() or handle.cancelled or self._closing is not None:
        self.start_request(handle, payload, 1)  # leases (it may wait), or the end
        return
    try:
        sid = self.conn.request_response(payload[0], payload[1])
    except core.LocalProtocolError as exc:
        self._refused(handle, exc)
        return
    handle.sid = sid
    self._requests[sid] = handle


def adopt_response(self: EngineState, handle: RequestHandle, sid: int) -> None:
    """A request-response (``handle``) the core started with
    ``request_response_frame`` (the express latency path, the frame
    written by the caller): from here on it is a request like any other,
    its answer (or error) for ``handle.sink``."""
    handle.sid = sid
    self._requests[sid] = handle


def take_answer(
    self: EngineState, handle: RequestHandle, data: bytes, now: float
) -> Payload | None:
    """``data`` read while ``handle`` (a request-response) is the only
    request outstanding: when it is exactly that request's answer the
    core takes it without an event (its state as if fed) and the answer
    is returned, the request forgotten here; None: anything else, to be
    fed as usual."""
    sid = handle.sid
    if sid is None or self._records is not None:
        return None
    answer = self.conn.take_answer(data, sid, now)
    if answer is None:
        return None
    self._now = now
    del self._requests[sid]
    return new_tuple(Payload, (answer, None))


def refused(self: EngineState, handle: RequestHandle, exc: core.LocalProtocolError) -> None:
    # (A known reason to close was checked before the core was asked.)
    if self.conn.state is core.ConnectionState.CLOSED:
        handle.sink.finish(ConnectionClosed(f"connection closed: {exc.message}"))
    else:  # e.g. no stream ID left, or the peer is closing
        handle.sink.finish(RSocketError(ErrorCode.REJECTED, exc.message))


def fire_and_forget(self: EngineState, payload: Payload) -> None:
    if self.leases.must_wait():
        self.leases.wait(lambda: self.fire_and_forget(payload), None)
        return
    self.conn.request_fnf(payload.data, payload.metadata)


def fire_and_forget_many(self: EngineState, payloads: list[Payload]) -> None:
    """A batch of fire-and-forgets, in order (see ``queues.Batcher``)."""
    if self.leases.in_force():
        for payload in payloads:  # leases: each may have to wait its turn
            self.fire_and_forget(payload)
        return
    conn = self.conn
    sent = 0
    if set(map(itemgetter(1), payloads)) == {None}:  # no metadata: one piece
        sent = conn.request_fnf_many(list(map(itemgetter(0), payloads)))
    request_fnf = conn.request_fnf
    for payload in payloads[sent:] if sent else payloads:
        request_fnf(payload.data, payload.metadata)


def fire_and_forget_data(self: EngineState, data: list[bytes]) -> None:
    """:meth:`fire_and_forget_many` of Payloads without metadata, given
    by their data: one piece by C calls, no Payload made unless the
    frame-by-frame path is needed (leases, a resumable session, ...)."""
    sent = 0 if self.leases.in_force() else self.conn.request_fnf_many(data)
    if sent < len(data):
        rest = data[sent:] if sent else data
        self.fire_and_forget_many(plain_payloads(rest))


def metadata_push(self: EngineState, metadata: bytes) -> None:
    self.conn.metadata_push(metadata)


def send_lease(self: EngineState, ttl: float, requests: int) -> None:
    self.conn.send_lease(core.milliseconds(ttl), requests)


def request_more(self: EngineState, handle: RequestHandle, n: int) -> None:
    sid = handle.sid
    if sid is not None and self._requests.get(sid) is handle and handle.kind != "rr":
        # The core may already have seen the stream end in a batch whose
        # events are still being dispatched: then there is nothing to ask.
        with contextlib.suppress(core.LocalProtocolError):
            self.conn.request_n(sid, n)


def cancel(self: EngineState, handle: RequestHandle) -> None:
    handle.cancelled = True
    sid = handle.sid
    if sid is None or self._requests.get(sid) is not handle:
        return
    del self._requests[sid]
    handle.sink.close()
    if handle.outbound is not None:
        self._outbounds.cancel(sid)
    with contextlib.suppress(core.LocalProtocolError):  # already ended in the core
        self.conn.cancel(sid)
