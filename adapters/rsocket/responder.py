"""The responder part of :class:`~.engine.RSocketEngine`: requests
from the peer go to the application's handler, and what it returns (a value,
an iterable, a generator or a Publisher) becomes the answer, pulled only
within the requester's credit. Runs on the connection's owning thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from itertools import groupby, repeat
from operator import attrgetter
from typing import Any

from sansrs.rsocket import ErrorCode

from ..drive.queues import CreditQueue
from ..drive.streams import IteratorSource, Outbound, StreamIterator, make_source
from . import core
from .errors import RSocketError, error_for_exception
from .fast import as_payload, new_request, new_requests
from .interceptors import route_of
from .types import Payload, Request, is_single_value

__all__ = ["CHANNEL_PREFETCH", "Responder"]

log = logging.getLogger("sansrs.adapters.rsocket")

#: Channel inbound requested at a time unless the handler sets ``channel_prefetch``.
CHANNEL_PREFETCH = 256
#: What a fire-and-forget or a metadata push without a handler ends with (never sent).
_NO_FIRE_AND_FORGET = RSocketError(ErrorCode.REJECTED, "no handler for fire_and_forget")
_NO_METADATA_PUSH = RSocketError(ErrorCode.REJECTED, "no handler for metadata_push")
_METADATA = attrgetter("metadata")


#: Requests handed to ``fire_and_forget_many`` per call at most: a read's
#: run (thousands of 16-byte frames) as lists this short lets each list die
#: before the garbage collector's first generation fills (700 tracked
#: objects), so no collection promotes them (``bench_tcp.py`` rows
#: ``fnf16``, ``fnf16m``: the server's collections).
FNF_RUN_PART = 512


class Responder:
    """Requests from the peer, answered by the application's handler.

    A part of :class:`~.engine.RSocketEngine`, composed rather than inherited:
    the engine hands it the core connection and the few engine services it
    needs (open an outbound stream within credit, wake the loop for a stream,
    run a call on the owning thread, the table of channel inbounds), and
    :meth:`bind` gives it the handler and the peer requests come from.
    """

    __slots__ = (
        "_call_soon",
        "_inbound",
        "_methods",
        "_new_outbound",
        "_poke",
        "conn",
        "handler",
        "peer",
    )

    def __init__(
        self,
        conn: core.Connection,
        *,
        new_outbound: Callable[[int, Any, int], Outbound[Any]],
        poke: Callable[[int], None],
        call_soon: Callable[[Callable[[], None]], None],
        inbound: dict[int, CreditQueue[Payload]],
    ) -> None:
        self.conn = conn
        self._new_outbound = new_outbound
        self._poke = poke
        self._call_soon = call_soon
        self._inbound = inbound
        self.handler: object = None
        self.peer: object = None
        #: Handler methods looked up once per handler (see _handler_method).
        self._methods: dict[str, Callable[..., Any] | None] = {}

    def bind(self, handler: object, peer: object) -> None:
        """Answer with ``handler``; requests carry ``peer`` (``Request.peer``)."""
        if handler is not self.handler:
            self._methods.clear()
        self.handler = handler
        self.peer = peer

    def _handler_method(self, name: str) -> Callable[..., Any] | None:
        methods = self._methods
        if name in methods:
            return methods[name]
        method = getattr(self.handler, name, None)
        found = method if callable(method) else None
        if found is None and name == "fire_and_forget":
            # A handler that takes them many at a time takes one as a list of one.
            many = getattr(self.handler, "fire_and_forget_many", None)
            if callable(many):
                found = lambda request: many([request])  # noqa: E731
        methods[name] = found
        return found

    def _request(self, data: bytes, metadata: bytes | None) -> Request:
        return new_request(data, metadata, self.peer)

    def _reject_missing(self, sid: int, name: str) -> RSocketError:
        error = RSocketError(ErrorCode.REJECTED, f"no handler for {name}")
        self._answer_error(sid, error)
        return error

    def _route_of(self, metadata: bytes | None) -> str | None:
        """The request's route, for a log line (the request has failed already)."""
        return route_of(self.conn, metadata)

    def _handler_failed(
        self, kind: str, sid: int, metadata: bytes | None, exc: BaseException
    ) -> None:
        """One log line per failed request, on the server's log: an exception
        is logged at ERROR with its traceback; an RSocketError the handler
        raised on purpose (its answer, e.g. REJECTED) only at DEBUG."""
        route = self._route_of(metadata)
        where = f"{kind} on stream {sid}" + (f" (route {route!r})" if route is not None else "")
        if isinstance(exc, RSocketError):
            log.debug("%s answered with %s", where, exc)
        else:
            log.error("%s: the handler raised; the requester gets APPLICATION_ERROR", where,
                      exc_info=exc)

    def _answer_error(self, sid: int, exc: BaseException) -> None:
        """ERROR on ``sid`` for a failed handler, unless the requester
        cancelled meanwhile (CANCEL in the same read as its request: the
        core has closed the stream and nobody wants an answer, nor an error)."""
        if self.conn.stream_state(sid) is None:
            return
        code, message = error_for_exception(exc)
        self.conn.send_error(sid, code, message)

    def on_request_response(
        self, sid: int, data: bytes, metadata: bytes | None
    ) -> BaseException | None:
        """None: answered, or its answer opened as an outbound stream; the
        exception it failed with (for interceptors, docs/interceptors.md)."""
        method = self._handler_method("request_response")
        if method is None:
            return self._reject_missing(sid, "request_response")
        try:
            result = method(self._request(data, metadata))
            if type(result) is not Payload:  # (the common answer skips all this)
                if result is not None and callable(getattr(result, "subscribe", None)):
                    source = make_source(
                        result, is_single=is_single_value, notify=lambda: self._poke(sid)
                    )
                    self._new_outbound(sid, source, 1)
                    return None
                if result is None:
                    self.conn.send_complete(sid)
                    return None
                result = as_payload(result)
        except Exception as exc:
            self._handler_failed("request_response", sid, metadata, exc)
            self._answer_error(sid, exc)
            return exc
        try:
            self.conn.send_payload(sid, result[0], result[1], complete=True)
        except core.LocalProtocolError as exc:
            if not self._answer_later(sid, result):  # e.g. an answer too large
                self._handler_failed("request_response", sid, metadata, exc)
                self._answer_error(sid, exc)
                return exc
        return None

    def _answer_later(self, sid: int, answer: Payload) -> bool:
        """The core refused a request-response's answer: the requester
        cancelled meanwhile (nobody wants it), or the output is full
        (``max_queued_output``: the answers to one read of many small
        requests can pass it while the peer reads slowly). Then it goes
        out as a one-item stream, pumped when the output has room, as a
        Publisher's answer is: never an error the handler did not raise.
        False: refused for another reason (the answer itself: an error)."""
        conn = self.conn
        if conn.stream_state(sid) is None:
            log.debug("request_response on stream %d: cancelled before its answer", sid)
            return True
        if not conn.output_blocked:
            return False
        self._new_outbound(sid, IteratorSource((answer,)), 1)
        return True

    def on_fire_and_forget(self, data: bytes, metadata: bytes | None) -> BaseException | None:
        method = self._handler_method("fire_and_forget")
        if method is None:  # dropped (nothing to answer): REJECTED for interceptors
            return _NO_FIRE_AND_FORGET
        try:
            method(self._request(data, metadata))
        except Exception as exc:
            self._fire_and_forget_failed(metadata, exc)
            return exc
        return None

    def on_fire_and_forget_run(
        self, data: list[bytes], metadata: list[bytes | None]
    ) -> list[BaseException | None] | None:
        """A run of fire-and-forgets (the core's ``FireAndForgetRunReceived``),
        in order, in parts of at most :data:`FNF_RUN_PART` (see
        :meth:`_fire_and_forget_part`). None: every one was handled; else the
        outcome of each (None or the exception it failed with), for
        interceptors."""
        if len(data) <= FNF_RUN_PART:
            return self._fire_and_forget_part(data, metadata)
        # Outcomes are listed only from the first part with a failure on (a
        # None per request and a pass over them were ~5 % of the server's
        # time on bench_tcp.py row fnf16m, where none fails). A part's
        # outcomes, when listed, hold a failure.
        outcomes: list[BaseException | None] | None = None
        for start in range(0, len(data), FNF_RUN_PART):
            end = start + FNF_RUN_PART
            failed = self._fire_and_forget_part(data[start:end], metadata[start:end])
            if failed is not None:
                if outcomes is None:
                    outcomes = [None] * start
                outcomes += failed
            elif outcomes is not None:
                outcomes += repeat(None, min(end, len(data)) - start)
        return outcomes

    def _fire_and_forget_part(
        self, data: list[bytes], metadata: list[bytes | None]
    ) -> list[BaseException | None] | None:
        """Part of a run of fire-and-forgets, in order: the handler's
        ``fire_and_forget_many(requests)`` once. If
        it returns ``NotImplemented`` (a Router whose run does not all go to
        one place that takes lists), each span of consecutive requests with
        the same metadata is offered to it the same way, and what it
        declines again goes to ``fire_and_forget`` one by one, as does
        everything for a handler without ``fire_and_forget_many``. None:
        every one was handled; else the outcome of each (None or the
        exception it failed with: all of a list whose call raised), for
        interceptors."""
        many = self._handler_method("fire_and_forget_many")
        requests = new_requests(data, metadata, self.peer)
        if many is None:
            return self._one_by_one(requests)
        taken, failed = self._many(many, requests)
        if taken:
            return failed
        if len(set(metadata)) == 1:
            return self._one_by_one(requests)
        outcomes: list[BaseException | None] = []
        for _, group in groupby(requests, _METADATA):
            span = list(group)
            taken, failed = self._many(many, span)
            if not taken:
                failed = self._one_by_one(span)
            outcomes += repeat(None, len(span)) if failed is None else failed
        return outcomes if any(outcomes) else None

    def _many(
        self, many: Callable[..., Any], requests: list[Request]
    ) -> tuple[bool, list[BaseException | None] | None]:
        """``many(requests)``: (False, None) if it declined them; else (True,
        None), or (True, the exception for each) if it raised (logged once)."""
        try:
            if many(requests) is NotImplemented:
                return False, None
        except Exception as exc:
            routes = sorted({r for r in map(self._route_of, map(_METADATA, requests)) if r})
            on = f" (routes {', '.join(map(repr, routes))})" if routes else ""
            log.error("fire_and_forget_many of %d requests%s: the handler raised",
                      len(requests), on, exc_info=exc)
            return True, [exc] * len(requests)
        return True, None

    def _one_by_one(self, requests: list[Request]) -> list[BaseException | None] | None:
        """``fire_and_forget`` for each of ``requests``, in order: one that
        raises is logged and stops none of the others."""
        method = self._handler_method("fire_and_forget")
        if method is None:  # dropped (nothing to answer): REJECTED for interceptors
            return [_NO_FIRE_AND_FORGET] * len(requests)
        failed: list[BaseException | None] | None = None
        for i, request in enumerate(requests):
            try:
                method(request)
            except Exception as exc:
                self._fire_and_forget_failed(request.metadata, exc)
                if failed is None:
                    failed = [None] * len(requests)
                failed[i] = exc
        return failed

    def _fire_and_forget_failed(self, metadata: bytes | None, exc: BaseException) -> None:
        route = self._route_of(metadata)
        on = f" (route {route!r})" if route is not None else ""
        log.error("fire_and_forget%s: the handler raised", on, exc_info=exc)

    def on_metadata_push(self, metadata: bytes) -> BaseException | None:
        method = self._handler_method("metadata_push")
        if method is None:
            return _NO_METADATA_PUSH
        try:
            method(metadata)
        except Exception as exc:
            log.exception("metadata_push handler failed")
            return exc
        return None

    def on_request_stream(
        self, sid: int, data: bytes, metadata: bytes | None, n: int
    ) -> BaseException | None:
        method = self._handler_method("request_stream")
        if method is None:
            return self._reject_missing(sid, "request_stream")
        try:
            result = method(self._request(data, metadata))
            source = make_source(
                result, is_single=is_single_value, notify=lambda: self._poke(sid)
            )
        except Exception as exc:
            self._handler_failed("request_stream", sid, metadata, exc)
            self._answer_error(sid, exc)
            return exc
        self._new_outbound(sid, source, n)
        return None

    def _channel_window(self, metadata: bytes | None) -> tuple[int, int | None]:
        """A channel's inbound window: the handler's ``channel_window(metadata)``
        (per route, for a Router), else its ``channel_prefetch`` /
        ``channel_batch``, else :data:`CHANNEL_PREFETCH`."""
        handler = self.handler
        window = getattr(handler, "channel_window", None)
        if callable(window):
            prefetch, batch = window(metadata)
            return int(prefetch), batch
        return (
            int(getattr(handler, "channel_prefetch", CHANNEL_PREFETCH)),
            getattr(handler, "channel_batch", None),
        )

    def on_request_channel(
        self, sid: int, data: bytes, metadata: bytes | None, n: int, complete: bool
    ) -> BaseException | None:
        method = self._handler_method("request_channel")
        if method is None:
            return self._reject_missing(sid, "request_channel")
        prefetch, batch = self._channel_window(metadata)
        queue: CreditQueue[Payload] = CreditQueue(granted=prefetch)
        self._inbound[sid] = queue
        conn = self.conn

        # The handler consumes ``inbound`` on its worker thread; demand and
        # cancel go back through the connection thread. The stream may have
        # ended in the core meanwhile: then there is nothing to send.
        def more(k: int) -> None:
            def send() -> None:
                if self._inbound.get(sid) is queue:
                    with contextlib.suppress(core.LocalProtocolError):
                        conn.request_n(sid, k)

            self._call_soon(send)

        def cancel_inbound() -> None:
            def send() -> None:
                if self._inbound.pop(sid, None) is queue:
                    # A channel responder's CANCEL stops only the requester's
                    # flow; our outbound flow goes on.
                    with contextlib.suppress(core.LocalProtocolError):
                        conn.cancel(sid)

            self._call_soon(send)

        inbound: StreamIterator[Payload] = StreamIterator(
            queue, prefetch, more, cancel_inbound, None, batch
        )
        if complete:
            queue.finish()
            del self._inbound[sid]
        else:
            # The requester's COMPLETE may sit in the same read, already seen
            # by the core: then there is nothing left to ask for.
            with contextlib.suppress(core.LocalProtocolError):
                conn.request_n(sid, prefetch)
        try:
            result = method(self._request(data, metadata), inbound)
            source = make_source(
                result,
                is_single=is_single_value,
                notify=lambda: self._poke(sid),
                threaded=f"sansrs-channel-{sid}",
            )
        except Exception as exc:
            self._inbound.pop(sid, None)
            queue.close()
            self._handler_failed("request_channel", sid, metadata, exc)
            self._answer_error(sid, exc)
            return exc
        self._new_outbound(sid, source, n)
        return None
