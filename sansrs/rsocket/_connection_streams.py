"""What a :class:`~._connection.Connection` sends on an open stream (its
methods, bound in its class): items (``send_payload``, the hot path, and
``send_payloads``, a run of them), the completion, a stream ERROR,
REQUEST_N and CANCEL, each checked against the stream's state and credit
(``_streams.py``)."""

from __future__ import annotations

from typing import NoReturn

from .._errors import LocalProtocolError
from . import _frames as fr
from ._connection_state import ConnectionParts
from ._connection_state import check_n as _check_n
from ._fast import PAYLOAD_ITEM, PAYLOAD_LAST_ITEM, pack_prefix_header, queue_payload_run
from ._frames import (
    MAX_REQUEST_N,
    STREAM_ERROR_CODES,
    ErrorCode,
    is_application_error_code,
)
from ._streams import UNBOUNDED, Stream, StreamInput, StreamKind, add_credit

__all__ = [
    "cancel",
    "payload_refused",
    "request_n",
    "send_complete",
    "send_error",
    "send_payload",
    "send_payloads",
]

_I = StreamInput
_RR = StreamKind.REQUEST_RESPONSE


def send_payload(
    self: ConnectionParts,
    stream_id: int,
    data: bytes,
    metadata: bytes | None = None,
    complete: bool = False,
) -> None:
    """Send one item (PAYLOAD with N; with C too when ``complete``).

    Needs credit from the peer (Reactive Streams rule 1.1): otherwise
    ``LocalProtocolError``. On a request-response stream the response
    always completes it.
    """
    s = self._by_id.get(stream_id)
    out = self._out
    if (
        s is not None
        and metadata is None
        and s.out_credit > 0  # credit > 0 also means the flow is open
        and len(data) <= out.fast_payload_max
        and out.size < out.limit
    ):
        if s.kind is not _RR:
            if not complete:
                # Hot path: header packed directly, no frame object. The
                # stream table is not looked up: credit stands for it
                # (see _streams.py).
                s.out_credit -= 1
                n = len(data) + 6
                out.pieces += (
                    pack_prefix_header(n >> 16, n & 0xFFFF, stream_id, PAYLOAD_ITEM),
                    data,
                )
                out.size += n + 3
                out.sent_position += n
                return
        elif self._latency.answer(s, data):
            return
    if s is None or s.out_credit <= 0 or out.size >= out.limit:
        self._payload_refused(stream_id, s)
    # (credit > 0: the table allows SEND_PAYLOAD here; see _streams.py)
    if s.kind is _RR:
        complete = True
    n = 6 + len(data)
    s.out_credit -= 1
    if metadata is None and n + 3 <= out.fragment_size and out.prefixed:
        # Header packed directly, no frame object; retained if resumable.
        tf = PAYLOAD_LAST_ITEM if complete else PAYLOAD_ITEM
        out.queue_pieces((pack_prefix_header(n >> 16, n & 0xFFFF, stream_id, tf), data), n)
    else:
        self._fragments.queue_payload(stream_id, data, metadata, complete, True)
    if complete:
        self._streams.step(s, _I.SEND_COMPLETE)


def send_payloads(self: ConnectionParts, stream_id: int, items: list[bytes]) -> int:
    """Send a leading run of ``items`` (``bytes``, no metadata, none
    completing) as PAYLOAD frames, exactly as ``send_payload`` would one
    by one on its first path; stop where that path would not take the
    next one (credit, output room, size, a resumable session) and return
    how many went: the caller sends the rest with ``send_payload``. The
    batch form of the first path: ``_fast.queue_payload_run``."""
    s = self._by_id.get(stream_id)
    if s is None or s.kind is _RR or s.out_credit <= 0:
        return 0
    sent = queue_payload_run(self._out, stream_id, items, s.out_credit)
    s.out_credit -= sent
    return sent


def payload_refused(self: ConnectionParts, stream_id: int, s: Stream | None) -> NoReturn:
    if s is None:
        self._streams.for_intent("send_payload", stream_id)
        raise AssertionError  # pragma: no cover - for_intent raised
    if not s.out_open:
        raise LocalProtocolError(f"send_payload: stream {stream_id} is closed for sending")
    if s.out_credit <= 0:
        raise LocalProtocolError(
            f"send_payload: no credit on stream {stream_id} "
            "(the peer has not requested more; Reactive Streams rule 1.1)"
        )
    raise LocalProtocolError(
        "send_payload: output is blocked (max_queued_output); send data_to_send() first"
    )


def send_complete(self: ConnectionParts, stream_id: int) -> None:
    """Complete our side of the stream (PAYLOAD with C, no item)."""
    s = self._streams.for_intent("send_complete", stream_id)
    if not self._streams.allows(s, _I.SEND_COMPLETE):
        raise LocalProtocolError(f"send_complete: stream {stream_id} is closed for sending")
    self._out.queue(fr.PayloadFrame(stream_id, b"", None, False, True, False))
    self._streams.step(s, _I.SEND_COMPLETE)


def send_error(self: ConnectionParts, stream_id: int, error_code: int, message: str = "") -> None:
    """Terminate the stream with ERROR (both sides).

    A responder may use APPLICATION_ERROR, REJECTED, CANCELED, INVALID or
    an application code (0x301..0xFFFFFFFE); a requester only ends its
    own channel flow with APPLICATION_ERROR (or an application code) and
    otherwise cancels.
    """
    s = self._streams.for_intent("send_error", stream_id)
    if s.requester:
        if s.kind is not StreamKind.REQUEST_CHANNEL or not s.out_open:
            raise LocalProtocolError(
                "send_error: a requester cancels; it sends ERROR only on its open channel flow"
            )
        if error_code != ErrorCode.APPLICATION_ERROR and not is_application_error_code(error_code):
            raise LocalProtocolError(f"send_error: a requester may not send code {error_code:#x}")
    elif error_code not in STREAM_ERROR_CODES and not is_application_error_code(error_code):
        raise LocalProtocolError(f"send_error: {error_code:#x} is not a stream error code")
    self._out.queue_error(stream_id, error_code, message)
    self._streams.step(s, _I.SEND_ERROR)


def request_n(self: ConnectionParts, stream_id: int, n: int) -> None:
    """Grant ``n`` more items (cumulative; 2**31-1 or more is unbounded)."""
    _check_n("request_n: n", n)
    s = self._streams.for_intent("request_n", stream_id)
    if s.kind is _RR or not self._streams.allows(s, _I.SEND_REQUEST_N):
        raise LocalProtocolError(f"request_n: stream {stream_id} is not receiving items")
    if s.in_credit >= UNBOUNDED // 2:
        return  # already unbounded: nothing to say
    s.in_credit = add_credit(s.in_credit, n)
    self._out.queue(fr.RequestNFrame(stream_id, min(n, MAX_REQUEST_N)))


def cancel(self: ConnectionParts, stream_id: int) -> None:
    """Requester: cancel the stream. Channel responder: stop the
    requester's flow (its own flow continues)."""
    s = self._streams.for_intent("cancel", stream_id)
    inp = _I.SEND_CANCEL if s.requester else _I.SEND_CANCEL_INBOUND
    if not self._streams.allows(s, inp):
        raise LocalProtocolError(f"cancel: stream {stream_id} has nothing to cancel")
    self._out.queue(fr.CancelFrame(stream_id))
    self._streams.step(s, inp)
