"""The :class:`~.engine.RSocketEngine`'s inbound signals on existing
streams (its methods, bound in the engine's class): items (one, or a run
of them), REQUEST_N, CANCEL and ERROR from the peer, for our requests
(their sinks) or the handler's (its inbound queues and outbound flows)."""

from __future__ import annotations

from .engine_state import EngineState
from .errors import RSocketError
from .fast import new_tuple, plain_payloads
from .types import Payload

__all__ = ["on_cancel", "on_error", "on_payload", "on_payloads", "on_request_n"]


def on_payload(
    self: EngineState, sid: int, data: bytes, metadata: bytes | None, next_: bool, complete: bool
) -> None:
    handle = self._requests.get(sid)
    if handle is not None:
        if next_:
            handle.sink.put(new_tuple(Payload, (data, metadata)))
        if complete:
            handle.inbound_done = True
            handle.sink.finish()
            if handle.outbound is None or handle.outbound.finished:
                del self._requests[sid]
        return
    queue = self._inbound.get(sid)
    if queue is not None:
        if next_:
            queue.put(Payload(data, metadata))
        if complete:
            queue.finish()
            del self._inbound[sid]


def on_payloads(self: EngineState, sid: int, data: list[bytes]) -> None:
    """:meth:`on_payload` for a run of items (none completing; the
    core's ``PayloadRunReceived``): their Payloads made by C calls,
    put in one call (docs/performance.md, "Items at the application's end");
    a blocking stream's queue takes the data itself (``fast.DataRuns``:
    its consumer makes the Payloads as it hands them out)."""
    handle = self._requests.get(sid)
    if handle is not None:
        sink = handle.sink
        # A DataRuns, or an interceptor's observer in front of one.
        put_data = getattr(sink, "put_data", None)
        if put_data is not None:
            put_data(data)
        else:
            sink.put_many(plain_payloads(data))
        return
    queue = self._inbound.get(sid)
    if queue is not None:
        queue.put_many(plain_payloads(data))


def on_request_n(self: EngineState, sid: int, n: int) -> None:
    self._outbounds.credit(sid, n)


def on_cancel(self: EngineState, sid: int) -> None:
    """Requester's CANCEL (ends a responder stream both ways) or a channel
    responder stopping our outbound flow."""
    out = self._outbounds.get(sid)
    if out is not None:
        out.cancel()
        self._outbound_done(sid)
    queue = self._inbound.pop(sid, None)
    if queue is not None:
        queue.close()  # wakes a channel handler iterating its inbound


def on_error(self: EngineState, sid: int, code: int, message: str) -> None:
    error = RSocketError(code, message)
    handle = self._requests.pop(sid, None)
    if handle is not None:
        handle.sink.finish(error)
        if handle.outbound is not None:
            handle.outbound.cancel()
    queue = self._inbound.pop(sid, None)
    if queue is not None:
        queue.finish(error)
    self._outbounds.cancel(sid)
