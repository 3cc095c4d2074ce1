"""Our side of one RSocket stream as a :class:`~..drive.streams.Outbound`:
the items a handler's source (or a requester channel's) yields become the
core's PAYLOAD, COMPLETE and ERROR frames on that stream, within the
stream's credit (the pump is :class:`~..drive.streams.Outbounds`).

Items are ``bytes`` (data alone) or anything :func:`~.fast.as_payload`
takes; a batch of plain ``bytes`` goes to the core in one call
(``Connection.send_payloads``, docs/performance.md). An exception from the
source ends the stream with the ERROR it maps to
(:func:`~.errors.error_for_exception`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any

from ..drive.streams import IteratorSource, Outbound
from . import core
from .errors import RSocketError, error_for_exception
from .fast import all_bytes, as_payload

__all__ = ["stream_outbound"]

log = logging.getLogger("sansrs.adapters.rsocket")


def stream_outbound(
    conn: core.Connection,
    sid: int,
    source: IteratorSource[Any] | Any,
    credit: int,
    watch: Any = None,
) -> Outbound[Any]:
    """The outbound flow of stream ``sid`` on ``conn``, pulling from
    ``source``, with ``credit`` items allowed so far. ``watch``: told of
    what is sent and how the flow ends (interceptors, :mod:`.interceptors`)."""
    send_payload = conn.send_payload

    def emit(item: object, last: bool) -> None:
        if type(item) is bytes:
            send_payload(sid, item, None, last)
        else:
            p = as_payload(item)
            send_payload(sid, p.data, p.metadata, last)

    # The stream may already be over for the core (a request-response
    # answered by its first item, a cancel in flight): nothing to send then.
    def complete() -> None:
        with contextlib.suppress(core.LocalProtocolError):
            conn.send_complete(sid)

    def fail(exc: BaseException) -> None:
        code, message = error_for_exception(exc)
        if isinstance(exc, RSocketError):  # raised on purpose: the answer
            log.debug("stream %d answered with %s", sid, exc)
        else:
            log.error("stream %d: its source raised; the peer gets APPLICATION_ERROR", sid,
                      exc_info=exc)
        with contextlib.suppress(core.LocalProtocolError):
            conn.send_error(sid, code, message)

    def ready() -> bool:
        return not conn.output_blocked

    send_payloads = conn.send_payloads

    def emit_many(items: list[Any]) -> int:
        # Plain bytes go as one batch (Connection.send_payloads); what it
        # leaves (a Payload, a large item, the output full) one by one.
        sent = send_payloads(sid, items) if all_bytes(items) else 0
        for item in itertools.islice(items, sent, None):
            if conn.output_blocked:
                break
            emit(item, False)
            sent += 1
        return sent

    if watch is not None:
        return _watched(watch, source, credit, ready, emit, complete, fail, emit_many)
    return Outbound(source, emit, complete, fail, credit, ready, emit_many)


def _watched(
    watch: Any,
    source: Any,
    credit: int,
    ready: Callable[[], bool],
    emit: Callable[[object, bool], None],
    complete: Callable[[], None],
    fail: Callable[[BaseException], None],
    emit_many: Callable[[list[Any]], int],
) -> Outbound[Any]:
    """The same flow, each step told to ``watch`` (``sent(items, bytes)``,
    ``done(error)``): only for a connection with interceptors."""

    def watched_emit(item: object, last: bool) -> None:
        emit(item, last)
        watch.sent(1, _size(item))
        if last:
            watch.done(None)

    def watched_emit_many(items: list[Any]) -> int:
        sent = emit_many(items)
        done = items[:sent]
        # Plain bytes (what the batch path sends): summed in C.
        size = sum(map(len, done)) if all_bytes(done) else sum(map(_size, done))
        watch.sent(sent, size)
        return sent

    def watched_complete() -> None:
        complete()
        watch.done(None)

    def watched_fail(exc: BaseException) -> None:
        fail(exc)
        watch.done(exc)

    return Outbound(
        source, watched_emit, watched_complete, watched_fail, credit, ready, watched_emit_many
    )


def _size(item: object) -> int:
    if type(item) is bytes:
        return len(item)
    p = as_payload(item)
    return len(p.data) + len(p.metadata or b"")
