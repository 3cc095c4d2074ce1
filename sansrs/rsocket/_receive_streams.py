"""Frames received on a stream: requests, REQUEST_N, CANCEL, PAYLOAD (with
reassembly of fragments) and stream ERRORs (spec: Stream Sequences and
Lifetimes, Flow Control, Fragmentation and Reassembly; Handling the
Unexpected for what is ignored).

``StreamFrames`` is the part of ``Connection`` that handles them; the
``Receiver`` parses the bytes and dispatches each frame to it.
"""

from __future__ import annotations

from typing import NoReturn

from . import _frames as fr
from ._context import Context
from ._fast import payload_event
from ._fragmentation import Fragmenter, Reassembly
from ._frames import CONNECTION_ONLY_ERROR_CODES, ErrorCode
from ._lease import Leases
from ._state import ConnectionState
from ._streams import (
    Stream,
    StreamInput,
    StreamKind,
    StreamTable,
    add_credit,
    pending_request,
)
from .events import (
    CancelReceived,
    ErrorReceived,
    FireAndForgetReceived,
    RequestChannelReceived,
    RequestNReceived,
    RequestResponseReceived,
    RequestStreamReceived,
)

__all__ = ["StreamFrames"]

_I = StreamInput
_RR = StreamKind.REQUEST_RESPONSE


class StreamFrames:
    """Handlers of the frames that belong to a stream (one method a frame
    type: ``on_request``, ``on_request_n``, ``on_cancel``, ``on_payload``,
    ``on_error``). Each changes streams through the ``StreamTable``."""

    __slots__ = ("_ctx", "_fragments", "_leases", "_streams")

    def __init__(
        self, ctx: Context, streams: StreamTable, leases: Leases, fragments: Fragmenter
    ) -> None:
        self._ctx = ctx
        self._streams = streams
        self._leases = leases
        self._fragments = fragments

    def on_request(self, f: fr.RequestFrame) -> None:
        ctx = self._ctx
        table = self._streams
        sid = f.stream_id
        # Requests always have a stream ID > 0, so they are positioned: the
        # frame's length, without encoding it again (header 6, initial n 4).
        md = f.metadata
        t = type(f)
        ctx.received_position += (
            (10 if t is fr.RequestStreamFrame or t is fr.RequestChannelFrame else 6)
            + len(f.data)
            + (0 if md is None else 3 + len(md))
        )
        ctx.setup_confirmed = True
        if f.follows:
            self._charge_fragment(
                (10 if t is fr.RequestStreamFrame or t is fr.RequestChannelFrame else 6)
                + len(f.data)
                + (0 if md is None else 3 + len(md))
            )
        if sid in table.by_id:
            return  # spec 9.1: a request on a stream ID in use is ignored
        fnf = t is fr.RequestFnfFrame
        queue_error = ctx.output.queue_error
        if sid & 1 != table.peer_parity:
            # An ID of our own parity: we consider it in use (spec: Stream
            # Identifiers, Lifetime: the responder MAY reject it).
            if not fnf:
                queue_error(sid, ErrorCode.REJECTED, "stream ID has the wrong parity")
            return
        if ctx.state is ConnectionState.CLOSING:
            if not fnf:
                queue_error(sid, ErrorCode.REJECTED, "the connection is closing")
            return
        leases = self._leases
        if leases.enabled and not leases.ours.use(ctx.now):
            # Spec: Lease Semantics. Also for FNF (the peer ignores it).
            queue_error(sid, ErrorCode.REJECTED, "request beyond the lease")
            return
        if not fnf and table.peer_count >= ctx.config.max_concurrent_streams:
            queue_error(sid, ErrorCode.REJECTED, "too many concurrent streams")
            return
        if f.follows:
            self._start_reassembly()
            s = table.open_responder(f)
            r = s.reassembly = Reassembly(f)
            r.add(f.metadata, f.data)  # the first fragment: metadata cannot follow data
            self._check_reassembly_size(s, r)
            return
        if fnf:
            ctx.events.append(
                FireAndForgetReceived(stream_id=sid, data=f.data, metadata=f.metadata)
            )
            return
        table.open_responder(f)
        self._announce(f, f.data, f.metadata, getattr(f, "complete", False))

    def _announce(
        self, f: fr.RequestFrame, data: bytes, metadata: bytes | None, complete: bool
    ) -> None:
        sid = f.stream_id
        t = type(f)
        events = self._ctx.events
        if t is fr.RequestResponseFrame:
            events.append(RequestResponseReceived(stream_id=sid, data=data, metadata=metadata))
        elif isinstance(f, fr.RequestStreamFrame):
            n = f.initial_request_n
            events.append(
                RequestStreamReceived(stream_id=sid, data=data, metadata=metadata, initial_n=n)
            )
        elif isinstance(f, fr.RequestChannelFrame):
            if complete:  # the requester's flow ended with the request
                self._streams.step(self._streams.by_id[sid], _I.RECV_COMPLETE)
            n = f.initial_request_n
            event = RequestChannelReceived(
                stream_id=sid, data=data, metadata=metadata, initial_n=n, complete=complete
            )
            events.append(event)
        else:
            fnf = self._streams.by_id.get(sid)
            if fnf is not None:  # reassembled: a fire-and-forget ends on reception
                self._streams.step(fnf, _I.RECV_COMPLETE)
            events.append(FireAndForgetReceived(stream_id=sid, data=data, metadata=metadata))

    def on_request_n(self, f: fr.RequestNFrame) -> None:
        if f.stream_id:
            self._ctx.received_position += 10
        s = self._streams.by_id.get(f.stream_id)
        if s is None or s.kind is _RR or pending_request(s):
            return  # spec 9
        if self._streams.allows(s, _I.RECV_REQUEST_N):
            s.out_credit = add_credit(s.out_credit, f.request_n)
            self._ctx.events.append(RequestNReceived(stream_id=f.stream_id, n=f.request_n))

    def on_cancel(self, f: fr.CancelFrame) -> None:
        sid = f.stream_id
        if sid:
            self._ctx.received_position += 6
        table = self._streams
        s = table.by_id.get(sid)
        if s is None:
            return  # spec 9.2
        if pending_request(s):
            table.step(s, _I.RECV_CANCEL)  # the requester abandoned a fragmented request
            return
        inp = _I.RECV_CANCEL_OUTBOUND if s.requester else _I.RECV_CANCEL
        if s.requester and s.kind is not StreamKind.REQUEST_CHANNEL:
            return  # only a channel responder may cancel; ignore otherwise (9)
        if table.allows(s, inp):
            self._ctx.events.append(CancelReceived(stream_id=sid))
            table.step(s, inp)

    def on_error(self, f: fr.ErrorFrame) -> None:
        """ERROR on a stream (stream ID > 0)."""
        ctx = self._ctx
        sid = f.stream_id
        ctx.received_position += 10 + len(f.data)
        table = self._streams
        s = table.by_id.get(sid)
        if s is None or f.error_code in CONNECTION_ONLY_ERROR_CODES:
            return  # spec 9.3; a stream-0-only code on a stream: spec 9 (not accounted for)
        if pending_request(s):
            table.step(s, _I.RECV_ERROR)  # a request still being reassembled: never announced
            return
        ctx.setup_confirmed = True
        ctx.events.append(ErrorReceived(stream_id=sid, error_code=f.error_code, message=f.message))
        table.step(s, _I.RECV_ERROR)

    def on_payload(self, f: fr.PayloadFrame) -> None:
        ctx = self._ctx
        sid = f.stream_id
        s = self._streams.by_id.get(sid)
        md = f.metadata
        data = f.data
        if sid:
            ctx.received_position += 6 + len(data) if md is None else 9 + len(md) + len(data)
        if f.follows and not f.complete:  # charged even where it is ignored
            self._charge_fragment(6 + len(data) if md is None else 9 + len(md) + len(data))
        if s is None:
            return  # spec 9.4 (unknown ID, including 0)
        if s.reassembly is not None or (f.follows and not f.complete):
            self._on_fragment(s, f)
            return
        if not self._streams.allows(s, _I.RECV_PAYLOAD):
            return  # not receiving on this stream: ignored (9)
        complete = f.complete
        nxt = f.next
        if s.kind is _RR:
            if s.requester:
                ctx.setup_confirmed = True
            complete = True  # spec 5: a response PAYLOAD completes
        elif not complete and not nxt:
            return  # neither C nor N: meaningless, ignored (9)
        if nxt:
            if s.in_credit <= 0:
                self._over_delivery(sid)
            s.in_credit -= 1
        ctx.events.append(payload_event(sid, data, md, complete, nxt))
        if complete:
            self._streams.step(s, _I.RECV_COMPLETE)

    def _over_delivery(self, sid: int) -> NoReturn:
        # Choice (docs/rsocket.md): like HTTP/2's flow-control error, a PAYLOAD
        # beyond the credit we granted is a connection error.
        self._ctx.fail(
            ErrorCode.CONNECTION_ERROR, f"PAYLOAD beyond the granted credit on stream {sid}"
        )

    def _on_fragment(self, s: Stream, f: fr.PayloadFrame) -> None:
        r = s.reassembly
        follows = f.follows and not f.complete  # spec 7: F with C ignores F
        if r is None:
            if not self._streams.allows(s, _I.RECV_PAYLOAD):
                return
            if f.next:
                # A fragmented PAYLOAD counts one credit, at its first fragment.
                if s.in_credit <= 0:
                    self._over_delivery(s.stream_id)
                s.in_credit -= 1
            self._start_reassembly()
            r = s.reassembly = Reassembly(f)
        if not r.add(f.metadata, f.data):
            self._ctx.fail(
                ErrorCode.CONNECTION_ERROR,
                f"fragment with metadata after data on stream {s.stream_id}",
            )
        if not self._check_reassembly_size(s, r):
            return
        if follows:
            return
        s.reassembly = None
        self._fragments.reassemblies.end(r)
        md, data = r.result()
        first = r.first
        if type(first) is fr.PayloadFrame:
            complete = f.complete or s.kind is _RR
            nxt = first.next
            if s.kind is _RR and s.requester:
                self._ctx.setup_confirmed = True
            self._ctx.events.append(payload_event(s.stream_id, data, md, complete, nxt))
            if complete:
                self._streams.step(s, _I.RECV_COMPLETE)
        else:
            complete = f.complete or getattr(first, "complete", False)
            self._announce(first, data, md, complete)  # type: ignore[arg-type]

    def _charge_fragment(self, size: int) -> None:
        """A FOLLOWS fragment of ``size`` bytes: the connection fails once
        the peer's fragments average less than ``min_mean_fragment_size``
        (each frame costs its parse, however small: a CPU bound)."""
        refused = self._fragments.reassemblies.fragment(size)
        if refused is not None:
            self._ctx.fail(ErrorCode.CONNECTION_ERROR, refused)

    def _start_reassembly(self) -> None:
        """A new fragmented payload or request: within ``max_reassemblies``,
        else the connection fails (a peer that opens them without end)."""
        refused = self._fragments.reassemblies.start()
        if refused is not None:
            self._ctx.fail(ErrorCode.CONNECTION_ERROR, refused)

    def _check_reassembly_size(self, s: Stream, r: Reassembly) -> bool:
        """Charge ``r``'s last fragment; beyond a limit of its own the
        request is rejected (a PAYLOAD fails the connection), beyond the
        connection's the connection fails."""
        refused = self._fragments.reassemblies.grew(r)
        if refused is None:
            return True
        message, connection_wide = refused
        if connection_wide or type(r.first) is fr.PayloadFrame:
            self._ctx.fail(ErrorCode.CONNECTION_ERROR, message)
        # A request not yet announced: reject it (REJECTED: not processed).
        if type(r.first) is not fr.RequestFnfFrame:
            self._ctx.output.queue_error(s.stream_id, ErrorCode.REJECTED, message)
        self._streams.step(s, _I.SEND_ERROR)
        return False
