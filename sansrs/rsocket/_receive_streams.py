"""The receiving side of an RSocket connection, stream frames: requests,
REQUEST_N, CANCEL and PAYLOAD (with reassembly of fragments). ``_receive``
adds the byte parser and the connection frames on top."""

from __future__ import annotations

from typing import NoReturn

from ._core import (
    _BOTH_OPEN,
    _I,
    _IN_ONLY,
    _OUT_ONLY,
    _RR,
    ConnectionCore,
    ConnectionState,
    _pending_request,
)
from ._fragmentation import (
    Reassembly,
)
from ._frames import (
    CancelFrame,
    ErrorCode,
    PayloadFrame,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
)
from ._streams import (
    TRANSITIONS,
    Stream,
    StreamKind,
    add_credit,
)
from .events import (
    CancelReceived,
    FireAndForgetReceived,
    RequestChannelReceived,
    RequestNReceived,
    RequestResponseReceived,
    RequestStreamReceived,
    _fast_payload,
)

__all__ = ["StreamFrames"]


class StreamFrames(ConnectionCore):
    """Handlers of the frames that belong to a stream (spec: Stream Sequences
    and Lifetimes, Flow Control, Fragmentation and Reassembly)."""

    def _on_request(
        self, f: RequestResponseFrame | RequestFnfFrame | RequestStreamFrame | RequestChannelFrame
    ) -> None:
        sid = f.stream_id
        # Requests always have a stream ID > 0, so they are positioned: the
        # frame's length, without encoding it again (header 6, initial n 4).
        md = f.metadata
        t = type(f)
        self.received_position += (
            (10 if t is RequestStreamFrame or t is RequestChannelFrame else 6)
            + len(f.data)
            + (0 if md is None else 3 + len(md))
        )
        self._setup_confirmed = True
        if sid in self._streams:
            return  # spec 9.1: a request on a stream ID in use is ignored
        fnf = type(f) is RequestFnfFrame
        if sid & 1 != self._peer_parity:
            # An ID of our own parity: we consider it in use (spec: Stream
            # Identifiers, Lifetime: the responder MAY reject it).
            if not fnf:
                self._queue_error(sid, ErrorCode.REJECTED, "stream ID has the wrong parity")
            return
        if self._state is ConnectionState.CLOSING:
            if not fnf:
                self._queue_error(sid, ErrorCode.REJECTED, "the connection is closing")
            return
        if self._lease_enabled and not self._our_lease.use(self._now):
            # Spec: Lease Semantics. Also for FNF (the peer ignores it).
            self._queue_error(sid, ErrorCode.REJECTED, "request beyond the lease")
            return
        if not fnf and self._peer_stream_count >= self.config.max_concurrent_streams:
            self._queue_error(sid, ErrorCode.REJECTED, "too many concurrent streams")
            return
        if f.follows:
            self._start_reassembly()
            s = self._new_responder_stream(f)
            r = s.reassembly = Reassembly(f)
            r.add(f.metadata, f.data)  # the first fragment: metadata cannot follow data
            self._check_reassembly_size(s, r)
            return
        if fnf:
            self._events.append(
                FireAndForgetReceived(stream_id=sid, data=f.data, metadata=f.metadata)
            )
            return
        self._new_responder_stream(f)
        self._announce(f, f.data, f.metadata, getattr(f, "complete", False))

    def _new_responder_stream(
        self, f: RequestResponseFrame | RequestFnfFrame | RequestStreamFrame | RequestChannelFrame
    ) -> Stream:
        sid = f.stream_id
        t = type(f)
        if t is RequestResponseFrame:
            s = Stream(sid, _RR, False, _OUT_ONLY, 1, 0)
        elif t is RequestStreamFrame:
            n = f.initial_request_n  # type: ignore[union-attr]
            s = Stream(sid, StreamKind.REQUEST_STREAM, False, _OUT_ONLY, add_credit(0, n), 0)
        elif t is RequestChannelFrame:
            n = f.initial_request_n  # type: ignore[union-attr]
            state = _OUT_ONLY if f.complete else _BOTH_OPEN  # type: ignore[union-attr]
            s = Stream(sid, StreamKind.REQUEST_CHANNEL, False, state, add_credit(0, n), 0)
        else:
            s = Stream(sid, StreamKind.FIRE_AND_FORGET, False, _IN_ONLY, 0, 0)
        self._streams[sid] = s
        self._peer_stream_count += 1
        return s

    def _announce(
        self,
        f: RequestResponseFrame | RequestFnfFrame | RequestStreamFrame | RequestChannelFrame,
        data: bytes,
        metadata: bytes | None,
        complete: bool,
    ) -> None:
        sid = f.stream_id
        t = type(f)
        if t is RequestResponseFrame:
            self._events.append(
                RequestResponseReceived(stream_id=sid, data=data, metadata=metadata)
            )
        elif t is RequestStreamFrame:
            self._events.append(
                RequestStreamReceived(
                    stream_id=sid,
                    data=data,
                    metadata=metadata,
                    initial_n=f.initial_request_n,  # type: ignore[union-attr]
                )
            )
        elif t is RequestChannelFrame:
            s = self._streams[sid]
            if complete and s.state is _BOTH_OPEN:
                s.state = _OUT_ONLY
            self._events.append(
                RequestChannelReceived(
                    stream_id=sid,
                    data=data,
                    metadata=metadata,
                    initial_n=f.initial_request_n,  # type: ignore[union-attr]
                    complete=complete,
                )
            )
        else:
            fnf = self._streams.get(sid)
            if fnf is not None:
                self._remove(fnf)
            self._events.append(FireAndForgetReceived(stream_id=sid, data=data, metadata=metadata))

    def _on_request_n(self, f: RequestNFrame) -> None:
        if f.stream_id:
            self.received_position += 10
        s = self._streams.get(f.stream_id)
        if s is None or s.kind is _RR or _pending_request(s):
            return  # spec 9
        st = s.state
        if st is _BOTH_OPEN or st is _OUT_ONLY:
            s.out_credit = add_credit(s.out_credit, f.request_n)
            self._events.append(RequestNReceived(stream_id=f.stream_id, n=f.request_n))

    def _on_cancel(self, f: CancelFrame) -> None:
        sid = f.stream_id
        if sid:
            self.received_position += 6
        s = self._streams.get(sid)
        if s is None:
            return  # spec 9.2
        if _pending_request(s):
            self._remove(s)  # the requester abandoned a fragmented request
            return
        inp = _I.RECV_CANCEL_OUTBOUND if s.requester else _I.RECV_CANCEL
        if s.requester and s.kind is not StreamKind.REQUEST_CHANNEL:
            return  # only a channel responder may cancel; ignore otherwise (9)
        if TRANSITIONS.get((s.state, inp)) is not None:
            self._events.append(CancelReceived(stream_id=sid))
            self._stream_step(s, inp)

    def _on_payload(self, f: PayloadFrame) -> None:
        sid = f.stream_id
        s = self._streams.get(sid)
        md = f.metadata
        data = f.data
        if sid:
            self.received_position += 6 + len(data) if md is None else 9 + len(md) + len(data)
        if s is None:
            return  # spec 9.4 (unknown ID, including 0)
        if s.reassembly is not None or (f.follows and not f.complete):
            self._on_fragment(s, f)
            return
        st = s.state
        if st is not _BOTH_OPEN and st is not _IN_ONLY:
            return  # not receiving on this stream: ignored (9)
        complete = f.complete
        nxt = f.next
        if s.kind is _RR:
            if s.requester:
                self._setup_confirmed = True
            complete = True  # spec 5: a response PAYLOAD completes
        elif not complete and not nxt:
            return  # neither C nor N: meaningless, ignored (9)
        if nxt:
            if s.in_credit <= 0:
                self._over_delivery(sid)
            s.in_credit -= 1
        self._events.append(_fast_payload(sid, data, md, complete, nxt))
        if complete:
            self._stream_step(s, _I.RECV_COMPLETE)

    def _over_delivery(self, sid: int) -> NoReturn:
        # Choice (docs/rsocket.md): like HTTP/2's flow-control error, a PAYLOAD
        # beyond the credit we granted is a connection error.
        self._fail(ErrorCode.CONNECTION_ERROR, f"PAYLOAD beyond the granted credit on stream {sid}")

    def _on_fragment(self, s: Stream, f: PayloadFrame) -> None:
        r = s.reassembly
        follows = f.follows and not f.complete  # spec 7: F with C ignores F
        if r is None:
            st = s.state
            if st is not _BOTH_OPEN and st is not _IN_ONLY:
                return
            if f.next:
                # A fragmented PAYLOAD counts one credit, at its first fragment.
                if s.in_credit <= 0:
                    self._over_delivery(s.stream_id)
                s.in_credit -= 1
            self._start_reassembly()
            r = s.reassembly = Reassembly(f)
        if not isinstance(r, Reassembly):  # pragma: no cover - type narrowing
            return
        if not r.add(f.metadata, f.data):
            self._fail(
                ErrorCode.CONNECTION_ERROR,
                f"fragment with metadata after data on stream {s.stream_id}",
            )
        if not self._check_reassembly_size(s, r):
            return
        if follows:
            return
        s.reassembly = None
        self._reassemblies.end(r)
        md, data = r.result()
        first = r.first
        if type(first) is PayloadFrame:
            complete = f.complete or s.kind is _RR
            nxt = first.next
            if s.kind is _RR and s.requester:
                self._setup_confirmed = True
            self._events.append(_fast_payload(s.stream_id, data, md, complete, nxt))
            if complete:
                self._stream_step(s, _I.RECV_COMPLETE)
        else:
            complete = f.complete or getattr(first, "complete", False)
            self._announce(first, data, md, complete)  # type: ignore[arg-type]

    def _start_reassembly(self) -> None:
        """A new fragmented payload or request: within ``max_reassemblies``,
        else the connection fails (a peer that opens them without end)."""
        refused = self._reassemblies.start()
        if refused is not None:
            self._fail(ErrorCode.CONNECTION_ERROR, refused)

    def _check_reassembly_size(self, s: Stream, r: Reassembly) -> bool:
        """Charge ``r``'s last fragment; beyond a limit of its own the
        request is rejected (a PAYLOAD fails the connection), beyond the
        connection's the connection fails."""
        refused = self._reassemblies.grew(r)
        if refused is None:
            return True
        message, connection_wide = refused
        if connection_wide or type(r.first) is PayloadFrame:
            self._fail(ErrorCode.CONNECTION_ERROR, message)
        # A request not yet announced: reject it (REJECTED: not processed).
        self._remove(s)
        if type(r.first) is not RequestFnfFrame:
            self._queue_error(s.stream_id, ErrorCode.REJECTED, message)
        return False
