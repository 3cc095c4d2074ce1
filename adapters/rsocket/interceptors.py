"""Interceptors: what an operator's code sees of a connection and of each
request, on the requester and the responder side, under every driver
(docs/interceptors.md).

``connect(url, interceptors=Interceptors(...))`` / ``serve(url, handler,
interceptors=...)`` (and their asyncio twins) install them. A
:class:`ConnectionInterceptor` sees the connection open and close (with the
error, if it ended with one); a :class:`RequestInterceptor` sees each
request start and end, with its :class:`RequestInfo` (model, side, stream
id, route, start time, bytes and items each way) and its :class:`Outcome`
(complete, error with its type, cancel, reject).

Cost: none when no interceptor is installed. The engine's entry points
(requests started here, requests from the peer, the ends of streams) are
decorated on that one engine's instance when its options carry
interceptors (:func:`install`); an engine without any runs exactly the code
it ran before. Installed, the express request-response path (a request
written and its answer read by the application's thread) is off, so every
request passes the points observed here.

Interceptors run on the connection's thread: keep them short and never
block (count, time, hand over to a queue). One that raises does not disturb
the connection: its first failure is logged (ERROR, with the traceback),
later ones at DEBUG.

What interceptors see and implement (``RequestInfo``, ``Outcome``,
``ConnectionInfo``, the two protocols, ``Interceptors``) is
:mod:`.interceptor_types`, re-exported here; this module installs them on
an engine (:func:`install`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from itertools import repeat
from typing import Any, Literal

from sansrs.rsocket import ErrorCode, Role

from .errors import RSocketError
from .interceptor_types import (
    CANCEL,
    COMPLETE,
    ConnectionInfo,
    ConnectionInterceptor,
    Interceptors,
    Model,
    Outcome,
    RequestInfo,
    RequestInterceptor,
    Side,
    composite_route,
    is_composite,
    outcome_of,
    route_of,
)
from .types import Payload

__all__ = [
    "ConnectionInfo",
    "ConnectionInterceptor",
    "Interceptors",
    "Outcome",
    "RequestInfo",
    "RequestInterceptor",
    "install",
    "route_of",
]


#: The engine's request kinds (``RequestHandle.kind``) as interaction models.
_MODELS: dict[str, Model] = {
    "rr": "request_response",
    "stream": "request_stream",
    "channel": "request_channel",
}


# -- the engine's part ------------------------------------------------------------


class _Observed:
    """A requester's sink, observed: counts what arrives and reports the end
    once; everything goes on to the sink it wraps."""

    __slots__ = ("_observer", "info", "inner")

    def __init__(self, inner: Any, info: RequestInfo, observer: _Observer) -> None:
        self.inner = inner
        self.info = info
        self._observer = observer

    def put(self, item: Any) -> None:
        self.info.items_in += 1
        self.info.bytes_in += _size(item)
        self.inner.put(item)

    def put_many(self, items: list[Any]) -> None:
        info = self.info
        info.items_in += len(items)
        # Payloads (data, metadata): summed in C, no Python call per item.
        info.bytes_in += sum(map(len, map(_DATA, items))) + sum(
            map(len, filter(None, map(_METADATA, items)))
        )
        self.inner.put_many(items)

    @property
    def put_data(self) -> Callable[[list[bytes]], None] | None:
        """Items without metadata, by their data, if the sink takes them so
        (``fast.DataRuns``: a blocking stream's); None otherwise."""
        inner = getattr(self.inner, "put_data", None)
        return None if inner is None else self._put_data

    def _put_data(self, data: list[bytes]) -> None:
        info = self.info
        info.items_in += len(data)
        info.bytes_in += sum(map(len, data))
        self.inner.put_data(data)

    def finish(self, error: BaseException | None = None) -> None:
        self._observer.end(self.info, COMPLETE if error is None else outcome_of(error))
        self.inner.finish(error)

    def close(self, error: BaseException | None = None) -> None:
        self._observer.end(self.info, CANCEL)
        if error is None:
            self.inner.close()
        else:
            self.inner.close(error)

    # The answer a blocking caller waits on (a CreditQueue's), if any.
    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


_DATA = operator.itemgetter(0)
_METADATA = operator.itemgetter(1)


def _size(item: Any) -> int:
    """Bytes of a payload (data, metadata), or of plain bytes."""
    if type(item) is bytes:
        return len(item)
    try:
        data, metadata = item[0], item[1]
    except (TypeError, IndexError, KeyError):
        return 0
    return len(data or b"") + len(metadata or b"")


class _Observer:
    """Reports one engine's connection and requests to its interceptors."""

    def __init__(self, interceptors: Interceptors, engine: Any) -> None:
        self.interceptors = interceptors
        self.engine = engine
        #: (interceptor, its bound method): looked up once, called per request.
        self._on_start = tuple((i, i.on_start) for i in interceptors.requests)
        self._on_end = tuple((i, i.on_end) for i in interceptors.requests)
        self.clock = interceptors.clock
        #: Responder requests still running, by stream id.
        self.serving: dict[int, RequestInfo] = {}
        self.connection: ConnectionInfo | None = None
        self.clean = False

    # -- requests ------------------------------------------------------------
    def start(
        self, model: Model, side: Side, sid: int, data: bytes, metadata: bytes | None
    ) -> RequestInfo:
        composite = is_composite(self.engine.conn)
        route = composite_route(metadata) if composite and metadata else None
        info = RequestInfo(model, side, sid, route, self.clock(), metadata, composite)
        size = len(data) + len(metadata or b"")
        if side == "requester":
            info.bytes_out, info.items_out = size, 1
        else:
            info.bytes_in, info.items_in = size, 1
        for interceptor, on_start in self._on_start:
            try:
                on_start(info)
            except Exception:
                self.interceptors.failed(interceptor, "on_start")
        if info.metadata is not metadata and side == "requester":  # rewritten: sent so
            info.bytes_out = len(data) + len(info.metadata or b"")
        return info

    def end(self, info: RequestInfo, outcome: Outcome) -> None:
        if info.ended is not None:
            return  # reported once
        info.ended = self.clock()
        if info.side == "responder":
            self.serving.pop(info.stream_id, None)
        for interceptor, on_end in self._on_end:
            try:
                on_end(info, outcome)
            except Exception:
                self.interceptors.failed(interceptor, "on_end")

    # -- the connection ----------------------------------------------------------
    def opened(self, peer: object) -> None:
        if self.connection is not None:
            return  # a resumed session's next transport: the same connection
        thread = self.engine.thread
        transport = getattr(thread, "transport", None)
        side: Literal["client", "server"] = (
            "client" if self.engine.conn.role is Role.CLIENT else "server"
        )
        self.connection = ConnectionInfo(
            side=side, peer=str(getattr(transport, "peer", "")), opened=self.clock()
        )
        for interceptor in self.interceptors.connection:
            self.interceptors.call(interceptor, "on_open", self.connection)

    def lost(self, error: BaseException) -> None:
        for info in list(self.serving.values()):
            self.end(info, outcome_of(error))
        if self.connection is None:
            return
        reported = None if self.clean else error
        for interceptor in self.interceptors.connection:
            self.interceptors.call(interceptor, "on_close", self.connection, reported)


class _Watch:
    """An outbound stream's items and end (``outbound.stream_outbound``'s
    ``watch``): a responder's answers end its request; a requester
    channel's items only count."""

    __slots__ = ("_observer", "ends", "info")

    def __init__(self, info: RequestInfo, observer: _Observer, ends: bool) -> None:
        self.info = info
        self._observer = observer
        self.ends = ends

    def sent(self, items: int, size: int) -> None:
        self.info.items_out += items
        self.info.bytes_out += size

    def done(self, error: BaseException | None) -> None:
        if self.ends:
            self._observer.end(self.info, outcome_of(error))


def install(engine: Any, interceptors: Interceptors) -> None:
    """Decorate ``engine``'s entry points (on this instance only) to report
    to ``interceptors``. Called by the engine's constructor, before anything
    else holds its methods (the responder's ``new_outbound`` is re-bound)."""
    observer = _Observer(interceptors, engine)
    engine.takes_whole_reads = False  # no express path: every request passes here
    if interceptors.requests:
        _observe_requester(engine, observer)
        _observe_responder(engine, observer)
    _observe_connection(engine, observer)


def _observe_requester(engine: Any, observer: _Observer) -> None:
    start_request = engine.start_request
    start_response = engine.start_response
    cancel = engine.cancel

    def observe(handle: Any, payload: Any) -> Any:
        """``payload``, with the metadata the interceptors left in ``info.metadata``."""
        if type(handle.sink) is _Observed or handle.cancelled:
            return payload  # a lease-held request comes back; a cancelled one goes no further
        model = _MODELS.get(handle.kind, "request_response")
        info = observer.start(model, "requester", 0, payload[0], payload[1])
        handle.sink = _Observed(handle.sink, info, observer)
        return _rewritten(payload, info)

    def observed_start_request(
        handle: Any, payload: Any, initial_n: int, outbound: Any = None
    ) -> None:
        start_request(handle, observe(handle, payload), initial_n, outbound)
        _set_sid(handle)

    def observed_start_response(handle: Any, payload: Any) -> None:
        start_response(handle, observe(handle, payload))
        _set_sid(handle)

    def _set_sid(handle: Any) -> None:
        if handle.sid is not None and type(handle.sink) is _Observed:
            handle.sink.info.stream_id = handle.sid

    def observed_cancel(handle: Any) -> None:
        cancel(handle)
        sink = handle.sink
        if handle.sid is None and type(sink) is _Observed:
            # Not on the wire (waiting for a lease): it ends here, cancelled;
            # the engine never hears of it again.
            observer.end(sink.info, CANCEL)

    fire_and_forget = engine.fire_and_forget
    metadata_push = engine.metadata_push

    def observed_fire_and_forget(payload: Any) -> None:
        if not engine.leases.must_wait():  # (else it comes back here, in turn)
            info = observer.start("fire_and_forget", "requester", 0, payload[0], payload[1])
            payload = _rewritten(payload, info)
            observer.end(info, COMPLETE)
        fire_and_forget(payload)

    def observed_fire_and_forget_many(payloads: list[Any]) -> None:
        for payload in payloads:
            observed_fire_and_forget(payload)

    def observed_fire_and_forget_data(data: list[bytes]) -> None:
        # Plain data framed from the bytes bypasses the two above: seen
        # (and maybe rewritten) one by one as Payloads like the rest.
        observed_fire_and_forget_many([Payload(d) for d in data])

    def observed_metadata_push(metadata: bytes) -> None:
        info = observer.start("metadata_push", "requester", 0, b"", metadata)
        metadata_push(metadata)  # (connection-level: not rewritten)
        observer.end(info, COMPLETE)

    engine.start_request = observed_start_request
    engine.start_response = observed_start_response
    engine.cancel = observed_cancel
    engine.fire_and_forget = observed_fire_and_forget
    engine.fire_and_forget_many = observed_fire_and_forget_many
    engine.fire_and_forget_data = observed_fire_and_forget_data
    engine.metadata_push = observed_metadata_push


def _rewritten(payload: Any, info: RequestInfo) -> Any:
    """``payload`` with ``info.metadata``, if an interceptor replaced it."""
    metadata = info.metadata
    if metadata is payload[1]:
        return payload
    return Payload(payload[0], metadata)


class _CountingConn:
    """The responder's view of the core, counting the answers it sends
    itself (a request-response answered at once); the rest passes through."""

    __slots__ = ("_conn", "_serving")

    def __init__(self, conn: Any, serving: dict[int, RequestInfo]) -> None:
        self._conn = conn
        self._serving = serving

    def send_payload(
        self, stream_id: int, data: bytes, metadata: bytes | None = None, complete: bool = False
    ) -> None:
        self._conn.send_payload(stream_id, data, metadata, complete)
        info = self._serving.get(stream_id)
        if info is not None:
            info.items_out += 1
            info.bytes_out += len(data) + len(metadata or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _observe_responder(engine: Any, observer: _Observer) -> None:
    serving = observer.serving
    engine.responder.conn = _CountingConn(engine.conn, serving)
    new_outbound = engine._new_outbound

    def observed_new_outbound(sid: int, source: Any, credit: int) -> Any:
        info = serving.get(sid)
        if info is not None:
            return new_outbound(sid, source, credit, _Watch(info, observer, ends=True))
        handle = engine._requests.get(sid)
        sink = getattr(handle, "sink", None)
        if type(sink) is _Observed:  # a requester channel's items
            return new_outbound(sid, source, credit, _Watch(sink.info, observer, ends=False))
        return new_outbound(sid, source, credit)

    engine._new_outbound = observed_new_outbound
    engine.responder._new_outbound = observed_new_outbound

    def serve(model: Model, entry: Callable[..., Any]) -> Callable[..., None]:
        def observed(sid: int, data: bytes, metadata: bytes | None, *rest: Any) -> None:
            info = observer.start(model, "responder", sid, data, metadata)
            serving[sid] = info
            context = info.handler_context
            if context is None:
                failed = entry(sid, data, metadata, *rest)
            else:  # an interceptor's context (e.g. its span current) for the handler
                failed = context.run(entry, sid, data, metadata, *rest)
            if failed is not None:
                observer.end(info, outcome_of(failed))
            elif engine._outbounds.get(sid) is None:
                observer.end(info, COMPLETE)  # answered at once (or empty)

        return observed

    engine.on_request_response = serve("request_response", engine.on_request_response)
    engine.on_request_stream = serve("request_stream", engine.on_request_stream)
    engine.on_request_channel = serve("request_channel", engine.on_request_channel)
    on_fire_and_forget = engine.on_fire_and_forget
    on_metadata_push = engine.on_metadata_push

    def fire_in_context(info: RequestInfo, data: bytes, metadata: bytes | None) -> None:
        """The handler takes one fire-and-forget, in the context an
        interceptor gave it if any; ``info`` ends with its outcome."""
        context = info.handler_context
        if context is None:
            failed = on_fire_and_forget(data, metadata)
        else:
            failed = context.run(on_fire_and_forget, data, metadata)
        observer.end(info, outcome_of(failed))

    def observed_fire_and_forget(data: bytes, metadata: bytes | None) -> None:
        info = observer.start("fire_and_forget", "responder", 0, data, metadata)
        fire_in_context(info, data, metadata)

    def observed_metadata_push(metadata: bytes) -> None:
        info = observer.start("metadata_push", "responder", 0, b"", metadata)
        observer.end(info, outcome_of(on_metadata_push(metadata)))

    on_fire_and_forget_run = engine.on_fire_and_forget_run

    def observed_fire_and_forget_run(data: list[bytes], metadata: list[bytes | None]) -> None:
        # Each request of the run starts before the handler takes the run
        # and ends after it, with its own outcome.
        infos = [
            observer.start("fire_and_forget", "responder", 0, d, m)
            for d, m in zip(data, metadata, strict=True)
        ]
        if any(info.handler_context is not None for info in infos):
            # An interceptor gave requests their own context (a span made
            # current): one handler call for many cannot run in each, so
            # the run is handled one request at a time, each in its own.
            for info, d, m in zip(infos, data, metadata, strict=True):
                fire_in_context(info, d, m)
            return
        failed = on_fire_and_forget_run(data, metadata)
        outcomes = repeat(None) if failed is None else failed
        for info, error in zip(infos, outcomes, strict=False):  # (repeat: endless)
            observer.end(info, outcome_of(error))

    engine.on_fire_and_forget = observed_fire_and_forget
    engine.on_fire_and_forget_run = observed_fire_and_forget_run
    engine.on_metadata_push = observed_metadata_push

    on_cancel = engine.on_cancel
    on_error = engine.on_error

    def observed_cancel(sid: int) -> None:
        info = serving.get(sid)
        on_cancel(sid)
        if info is not None:
            observer.end(info, CANCEL)

    def observed_error(sid: int, code: int, message: str) -> None:
        info = serving.get(sid)
        on_error(sid, code, message)
        if info is not None:  # the requester of a channel failed its side
            observer.end(info, outcome_of(RSocketError(code, message)))

    on_payload = engine.on_payload

    def observed_payload(
        sid: int, data: bytes, metadata: bytes | None, next_: bool, complete: bool
    ) -> None:
        info = serving.get(sid)
        if info is not None and next_:  # a channel's inbound item
            info.items_in += 1
            info.bytes_in += len(data) + len(metadata or b"")
        on_payload(sid, data, metadata, next_, complete)

    on_payloads = engine._on_payloads

    def observed_payloads(sid: int, data: list[bytes]) -> None:
        info = serving.get(sid)
        if info is not None:  # a run of a channel's inbound items
            info.items_in += len(data)
            info.bytes_in += sum(map(len, data))
        on_payloads(sid, data)

    engine.on_cancel = observed_cancel
    engine.on_error = observed_error
    engine.on_payload = observed_payload
    engine._on_payloads = observed_payloads


def _observe_connection(engine: Any, observer: _Observer) -> None:
    attach = engine.attach
    begin_close = engine.begin_close
    on_closed = engine.on_closed
    connection_lost = engine.connection_lost

    def observed_attach(thread: Any, peer: object, handler: object = None) -> None:
        attach(thread, peer, handler)
        observer.opened(peer)

    def observed_begin_close() -> None:
        if not engine.wants_close():
            observer.clean = True  # the application's close, not after a failure
        begin_close()

    def observed_closed(code: int, message: str, by_peer: bool) -> None:
        if code == ErrorCode.CONNECTION_CLOSE and not engine.wants_close():
            observer.clean = True
        on_closed(code, message, by_peer)

    def observed_lost(error: BaseException) -> None:
        try:
            connection_lost(error)
        finally:
            observer.lost(engine.close_reason() or error)

    engine.attach = observed_attach
    engine.begin_close = observed_begin_close
    engine.on_closed = observed_closed
    engine.connection_lost = observed_lost
