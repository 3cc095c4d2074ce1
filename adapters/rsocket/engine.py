"""The RSocket :class:`~..drive.engine.Engine`: binds the sans-IO core to any
driver. Everything here runs on the connection's owning thread.

It turns core events into request completions and, through its
:class:`~.responder.Responder` part, into handler calls; and application
intents (handed over by the peer objects, :mod:`.peer`) into core calls.
Its other parts: :class:`~.leases.Leases` (requests waiting for the peer's
lease, the renewal of ours) and :func:`~.outbound.stream_outbound` (our
side of a stream as core calls). The protocol-neutral pieces (credit-bound
outbound streams, prefetching inbound, sources) come from
:mod:`..drive.streams`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import itemgetter
from typing import Any, ClassVar

from sansrs.rsocket import MAX_FRAME_LENGTH, ErrorCode

from ..drive import streams
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed, seconds
from ..drive.queues import CreditQueue
from ..drive.streams import (
    IteratorSource,
    Outbound,
    Outbounds,
    PublisherSource,
    ThreadedSource,
    is_publisher,
)
from ..transport.sniff import describe_bytes, looks_like_http
from ..transport.websocket import messages as ws
from . import core
from .errors import RSocketError, setup_rejection
from .fast import new_tuple
from .interceptors import install as install_interceptors
from .leases import Leases
from .options import EngineOptions
from .outbound import stream_outbound
from .responder import Responder
from .types import Payload

__all__ = ["ASYNC_HOOK_REFUSED", "RSocketEngine", "RequestHandle", "refuse_async_hooks"]

log = logging.getLogger("sansrs.adapters.rsocket")

_RUN = ws.MessageKind.BINARY_RUN.value
_TEXT_RUN = ws.MessageKind.TEXT_RUN.value
_BINARY = ws.MessageKind.BINARY.value
_TEXT = ws.MessageKind.TEXT.value
_CLOSE = ws.MessageKind.CLOSE.value

#: The REJECTED_SETUP message when an ``async def accept_setup`` reaches a
#: synchronous driver (the servers refuse such handlers up front when they can).
ASYNC_HOOK_REFUSED = (
    "an async accept_setup (or a Router's async authenticate) can only be awaited"
    " by the asyncio server: use sansrs.adapters.rsocket.aio.serve"
)


def refuse_async_hooks(handler: object) -> None:
    """A synchronous server or client: ``TypeError`` up front for a handler
    whose hooks must be awaited (an ``async def accept_setup``, or one that
    says ``asyncio_only``: a Router with an async ``authenticate``), rather
    than rejecting every SETUP later."""
    hook = getattr(handler, "accept_setup", None)
    if inspect.iscoroutinefunction(hook) or getattr(handler, "asyncio_only", False) is True:
        raise TypeError(f"{handler!r}: {ASYNC_HOOK_REFUSED}")


#: Items one outbound stream may send per loop turn, so streams share the loop.
PUMP_BUDGET = 4096
#: Request-response requests served (or answers received) in one input batch
#: between early writes: the peer starts on the first answers (or the next
#: requests) while the rest are handled, instead of both sides taking turns.
#: 64 (fewer writes, each with its fixed cost) won only on a loaded machine
#: and lost a third of rr64 on a quiet one (bench_write_early.py --every 16
#: --every 64; docs/performance.md, "Early writes").
WRITE_EVERY = 16


Sink = streams.Sink[Payload]


class RequestHandle:
    """One request this side started; ``sid`` is set once the core assigned it."""

    __slots__ = ("cancelled", "inbound_done", "kind", "outbound", "sid", "sink")

    def __init__(self, kind: str, sink: Sink) -> None:
        self.kind = kind
        self.sink = sink
        self.sid: int | None = None
        self.cancelled = False
        self.inbound_done = False
        self.outbound: Outbound[Any] | None = None


class RSocketEngine:
    """The :class:`~..drive.engine.Engine` for one RSocket connection."""

    #: Core event type -> handler (see the table at the end of the module).
    EVENTS: ClassVar[dict[type, Callable[[Any, Any], None]]]

    def __init__(self, options: EngineOptions, conn: core.Connection) -> None:
        self.options = options
        self.conn = conn
        self._now = 0.0
        #: Requests waiting for the peer's lease; the renewal of ours.
        self.leases: Leases[RequestHandle] = Leases(conn, options)
        self._close_started = False
        #: A deferred ``accept_setup``'s future, until it is decided.
        self._setup_pending: Any = None
        #: See ``Engine`` (drive/engine.py): a lone request answered at once.
        self.settled = False
        #: Server: the first frame's length bytes seen so far (None once past
        #: the frame), the frame's bytes fed to the core before its length
        #: was known, and those still to come once it is.
        self._before_setup: bytes | None = None
        #: No byte received yet: the first read is looked at (a server's
        #: SETUP; a client's check that the peer speaks RSocket at all).
        self._opening = True
        self._setup_fed = 0
        self._setup_left = 0
        self.peer: object = None
        self.thread: Driver | None = None
        self._write_now: Callable[[], None] | None = None
        self._write_bytes: Callable[[bytes], None] | None = None
        self._requests: dict[int, RequestHandle] = {}
        #: Our outbound streams (responses, a requester channel's items).
        self._outbounds: Outbounds[int] = Outbounds(PUMP_BUDGET, self._wake)
        self._inbound: dict[int, CreditQueue[Payload]] = {}
        #: ``after_events`` calls, run once this turn's events are dispatched.
        self._after_events: list[Callable[[], None]] = []
        self._closing: BaseException | None = None
        #: The peer's CONNECTION_CLOSE with our streams open: when they must
        #: have finished, and (its message, the grace given).
        self._drain_by: float | None = None
        self._peer_close: tuple[str, float] | None = None
        #: Message transport (WebSocket): the record reader, and the Close
        #: (code, reason) to end the WebSocket with when not a normal close.
        self._records: ws.MessageReader | None = None
        self._ws_close: tuple[int, str] | None = None
        #: Requests from the peer: the handler's side of the connection.
        self.responder = Responder(
            conn,
            new_outbound=self._new_outbound,
            poke=self._poke,
            call_soon=self._call_soon,
            inbound=self._inbound,
        )
        r = self.responder
        # The responder's entry points, bound once (the dispatch hot path).
        self.on_request_response = r.on_request_response
        self.on_fire_and_forget = r.on_fire_and_forget
        self.on_fire_and_forget_run = r.on_fire_and_forget_run
        self.on_metadata_push = r.on_metadata_push
        self.on_request_stream = r.on_request_stream
        self.on_request_channel = r.on_request_channel
        #: A byte-stream transport: the core can take a read that is exactly
        #: an answer (``Connection.take_answer``; not over WebSocket records,
        #: nor with interceptors, which see every request pass the engine).
        self.takes_whole_reads = True
        if options.interceptors is not None:  # (decorates this instance's entry points)
            install_interceptors(self, options.interceptors)

    @property
    def handler(self) -> object:
        """What answers the peer's requests (``None``: every request is REJECTED)."""
        return self.responder.handler

    @handler.setter
    def handler(self, handler: object) -> None:
        self.responder.bind(handler, self.peer)

    @classmethod
    def client(
        cls, options: EngineOptions, handler: object, *, message_framed: bool = False
    ) -> RSocketEngine:
        """``message_framed``: the transport carries message records (WebSocket,
        see :mod:`..transport.websocket.messages`): one frame per binary
        message, no length prefix on the wire."""
        engine = cls(options, core.client(options))
        engine.handler = handler
        if message_framed:
            engine._records = ws.MessageReader(keep_runs=True)
            engine.takes_whole_reads = False
        return engine

    @classmethod
    def server(cls, options: EngineOptions, *, message_framed: bool = False) -> RSocketEngine:
        engine = cls(options, core.server(options))
        engine._before_setup = b""
        if message_framed:
            engine._records = ws.MessageReader(keep_runs=True)
            engine.takes_whole_reads = False
        return engine

    def attach(self, thread: Driver, peer: object, handler: object = None) -> None:
        """Driven by ``thread``; ``peer`` is the application's object for this
        connection (``Request.peer``); ``handler`` answers the peer's requests."""
        self.thread = thread
        self._outbounds.attach(thread, wake=False)  # its source_budget; _wake follows thread
        self._write_now = getattr(thread, "write_now", None)  # the loops' drivers have it
        # (Byte streams only: a message transport's engine frames its output.)
        self._write_bytes = (
            getattr(thread, "write_bytes", None) if self._records is None else None
        )
        self.peer = peer
        self.responder.bind(self.responder.handler if handler is None else handler, peer)

    # -- Engine protocol (driver loop) ---------------------------------------
    def receive_data(self, data: bytes, now: float) -> None:
        self._now = now
        self.settled = False
        if self._records is not None:
            self._receive_records(data, now)
            return
        self._receive_stream(data, now)

    def _receive_stream(self, data: bytes, now: float) -> None:
        """Length-prefixed frames (TCP, or a WebSocket run of messages)."""
        if self._opening and data:
            data = self._open(data, now)
            if not data:
                return
        requests = self._requests
        if len(requests) == 1:
            # One request outstanding (a sequential request-response, under
            # any driver): its whole answer alone is taken without an event.
            handle = next(iter(requests.values()))
            if handle.kind == "rr":
                answer = self._take_answer(handle, data, now)
                if answer is not None:
                    handle.sink.put(answer)
                    handle.sink.finish()
                    self.settled = True  # (only the keepalive's deadline moved, later)
                    return
        elif not requests and data:
            # A request-response read alone (the server of a sequential
            # exchange): served without an event, its answer written at once.
            request = self.conn.take_request(data, now)
            if request is not None:
                self.on_request_response(*request)
                self._dispatch_events()  # what the handler caused, if anything
                if self._write_bytes is not None and not self._after_events:
                    self._write_bytes(self.data_to_send())  # the answer, now
                elif self._write_now is not None:
                    self._write_early()
                # Only the keepalive's deadline moved (later): no timer is
                # owed a turn (a lease would have left the read to the core).
                self.settled = True
                return
        try:
            self.conn.receive_data(data, now)
        except core.RemoteProtocolError as exc:
            # The core queued the ERROR frame and a ConnectionTerminated event;
            # the events of the frames before the bad one still count.
            self._protocol_error(exc, data)
        self._dispatch_events()

    def _protocol_error(self, exc: core.RemoteProtocolError, data: bytes = b"") -> None:
        message = f"protocol error from peer: {exc.message}"
        conn = self.conn
        if data and conn.role is core.Role.CLIENT and not conn.setup_confirmed:
            # The peer's very first frame was wrong: maybe no RSocket at all.
            first = data[3:] if self._records is not None else data  # (no length on the wire)
            message = f"{message}; its first bytes: {describe_bytes(first, _guess)}"
        self._closing = ConnectionClosed(message)
        if self._records is not None:
            self._ws_close = (ws.CloseCode.PROTOCOL_ERROR, exc.message)

    def _open(self, data: bytes, now: float) -> bytes:
        """The first bytes: a server's SETUP goes in alone; a client whose
        peer answers in HTTP (a WebSocket or HTTP server on a tcp:// URL)
        stops at once, naming it, rather than waiting for a frame that
        never completes. Returns what is left to feed."""
        if self._before_setup is not None:
            data = self._feed_setup_first(data, now)
            self._opening = self._before_setup is not None
            return data
        self._opening = False
        if self.conn.role is core.Role.CLIENT and looks_like_http(data):
            self.conn.connection_lost()
            self._dispatch_events()
            self._closing = ConnectionClosed(
                f"the peer does not speak RSocket: it sent {describe_bytes(data, _guess)}"
            )
            return b""
        return data

    def unexpected_input(self) -> str:
        """Client: why nothing came, for a timeout's message: the peer sent
        nothing at all, or bytes that are no whole RSocket frame (what
        they look like); empty when frames did come."""
        conn = self.conn
        if (
            conn.role is not core.Role.CLIENT
            or conn.setup_confirmed
            or self._peer_close
            or self._closing is not None  # (it says why)
        ):
            return ""
        pending = conn.pending_input
        if not pending:
            return (
                "the peer has sent nothing since the connection opened"
                " (an RSocket server? a WebSocket one needs a ws:// URL)"
            )
        return f"the peer sent no whole RSocket frame, only {describe_bytes(pending, _guess)}"

    def no_answer(self, timeout: float) -> str:
        """A request's timeout message: the whole ``timeout`` (not what
        was left of it at the last wait), and :meth:`unexpected_input`."""
        why = self.unexpected_input()
        return f"no answer within {seconds(timeout)}" + (f": {why}" if why else "")

    def _feed_setup_first(self, data: bytes, now: float) -> bytes:
        """Server: hand the core the first frame (SETUP) alone and accept it
        before the frames behind it. A client may pipeline thousands of
        requests right after SETUP, and the core holds at most
        ``max_early_frames`` of them while a SETUP awaits acceptance. The
        frame's bytes go to the core as they arrive (it buffers a partial
        frame, in linear time): a SETUP trickled in small pieces costs what
        it weighs. Returns what follows the first frame."""
        head = self._before_setup
        assert head is not None
        if len(head) < 3:  # the 24-bit length of the first frame
            head = self._before_setup = head + data[: 3 - len(head)]
            if len(head) == 3:
                self._setup_left = 3 + int.from_bytes(head, "big") - self._setup_fed
        if len(head) < 3 or len(data) < self._setup_left:
            self._setup_fed += len(data)
            if len(head) == 3:
                self._setup_left -= len(data)
            self._receive_partial(data, now)
            return b""
        first, rest = data[: self._setup_left], data[self._setup_left :]
        self._before_setup = None
        self._receive_partial(first, now)
        self._dispatch_events()
        return rest if self._closing is None else b""

    def _receive_partial(self, data: bytes, now: float) -> None:
        try:
            self.conn.receive_data(data, now)
        except core.RemoteProtocolError as exc:
            self._protocol_error(exc)
            self._dispatch_events()

    def _receive_records(self, data: bytes, now: float) -> None:
        """Message transport: each binary message is one frame. The core reads
        length-prefixed frames, as over TCP: a run of binary messages
        (``BINARY_RUN``) is exactly that, so it goes in as it is (the fast
        paths of the core apply; docs/performance.md, "WebSocket near TCP").
        A text message breaks the transport mapping (spec: Framing Protocol
        Usage): ERROR [CONNECTION_ERROR], then Close 1003 (unsupported data)."""
        assert self._records is not None
        conn = self.conn
        if not data:
            conn.connection_lost()
            self._dispatch_events()
            return
        # A bad message ends the connection: what follows it is ignored.
        for kind, payload in self._records.feed(data):
            if kind == _RUN:
                self._receive_stream(payload, now)
            elif kind == _BINARY:  # a message that came alone (e.g. fragmented)
                if len(payload) > MAX_FRAME_LENGTH:
                    self._refuse(
                        f"frame of {len(payload)} bytes exceeds the maximum frame size",
                        ws.CloseCode.PROTOCOL_ERROR,
                    )
                    break
                self._receive_stream(len(payload).to_bytes(3, "big") + payload, now)
            elif kind in (_TEXT, _TEXT_RUN):
                message = "RSocket over WebSocket takes binary messages, got a text message"
                self._refuse(message, ws.CloseCode.UNSUPPORTED_DATA)
                break
            elif kind == _CLOSE:
                self._ws_closed(*ws.decode_close(payload))
                break
            if self._closing is not None:
                break
        self._dispatch_events()

    def _ws_closed(self, code: int, reason: str) -> None:
        """The WebSocket is closing (the peer's Close, or ours for its broken
        framing): the transport is lost, and with it the connection."""
        # The first reason stays: a Close that follows an ERROR (a rejected
        # SETUP) must not hide the ERROR's text.
        first = self._closing
        self.conn.connection_lost()
        self._dispatch_events()
        detail = f" ({reason})" if reason else ""
        self._closing = first or ConnectionClosed(f"connection closed: WebSocket {code}{detail}")

    def _refuse(self, message: str, close_code: int) -> None:
        """The peer broke the WebSocket mapping: ERROR [CONNECTION_ERROR],
        then the WebSocket closes with ``close_code``."""
        with contextlib.suppress(core.LocalProtocolError):
            self.conn.close(message, error_code=ErrorCode.CONNECTION_ERROR)
        self._dispatch_events()
        self._closing = ConnectionClosed(f"protocol error from peer: {message}")
        self._ws_close = (close_code, message)

    def _dispatch_events(self) -> None:
        events = self.conn.events()
        if not events:  # most calls (every pump): nothing to set up
            return
        payload_event = core.PayloadReceived
        run_event = core.PayloadRunReceived
        rr_event = core.RequestResponseReceived
        fnf_event = core.FireAndForgetReceived
        fnf_run_event = core.FireAndForgetRunReceived
        requests = self._requests
        dispatch = self.EVENTS
        new = new_tuple  # see fast.new_tuple
        exchanges = served = 0
        while events:
            # Hot path: consecutive items of a stream we requested go to its
            # sink as one batch; everything else through ``core.dispatch``.
            batch: list[Payload] = []
            append = batch.append
            batch_sid = -1
            batch_handle: RequestHandle | None = None
            for event in events:
                if type(event) is payload_event and event.next and not event.complete:
                    sid = event.stream_id
                    if sid == batch_sid:
                        append(new(Payload, (event.data, event.metadata)))
                        continue
                    handle = requests.get(sid)
                    if handle is not None:
                        if batch_handle is not None:
                            batch_handle.sink.put_many(batch)
                        batch = [new(Payload, (event.data, event.metadata))]
                        append = batch.append
                        batch_sid, batch_handle = sid, handle
                        continue
                if batch_handle is not None:
                    batch_handle.sink.put_many(batch)
                    batch_sid, batch_handle = -1, None
                if type(event) is payload_event:  # e.g. a request-response answer
                    self.on_payload(
                        event.stream_id, event.data, event.metadata, event.next, event.complete
                    )
                    if not event.complete:
                        continue  # a channel's inbound item, not an exchange
                elif type(event) is rr_event:  # served one by one: skip the table
                    self.on_request_response(event.stream_id, event.data, event.metadata)
                    served += 1
                elif type(event) is fnf_run_event:  # a run of them, in one call
                    self.on_fire_and_forget_run(event.data, event.metadata)
                    continue
                elif type(event) is fnf_event:  # likewise, but not an exchange
                    self.on_fire_and_forget(event.data, event.metadata)
                    continue
                elif type(event) is run_event:  # a stream's run of items, in one list
                    self._on_payloads(event.stream_id, event.data)
                    continue
                else:
                    dispatch[type(event)](self, event)
                    continue
                exchanges += 1
                if exchanges == WRITE_EVERY:
                    exchanges = served = 0
                    self._write_early()
            if batch_handle is not None:
                batch_handle.sink.put_many(batch)
            if served and self._write_now is not None:
                # Our answers leave before the driver's turn unwinds: the
                # peer of a sequential request-response waits for exactly
                # this write (bench_tcp.py --latency-costs).
                exchanges = served = 0
                self._write_early()
            events = self.conn.events()  # handlers may have caused more

    def _write_early(self) -> None:
        """Mid-batch: hand over what is ready (``after_events``) and write it."""
        self._run_after_events()
        if self._write_now is not None:
            self._write_now()

    def _run_after_events(self, *, quietly: bool = False) -> None:
        """The ``after_events`` calls, including any they add; ``quietly``
        (the connection is gone): one that raises does not stop the rest."""
        while self._after_events:
            calls, self._after_events = self._after_events, []
            for fn in calls:
                if quietly:
                    with contextlib.suppress(Exception):
                        fn()
                else:
                    fn()

    def data_to_send(self) -> bytes:
        data = self.conn.data_to_send()
        if self._records is None:
            return data
        # One record for all the frames: the transport makes each a message.
        out = ws.encode_run(data) if data else b""
        close = self._ws_close
        if close is not None and self._closing is not None:
            # Once: the transport sends this Close instead of a normal one.
            self._ws_close = None
            out += ws.encode_close(*close)
        return out

    def next_deadline(self) -> float | None:
        deadline = self.conn.next_deadline()
        renew = self.leases.renew_at
        if renew is not None and (deadline is None or renew < deadline):
            deadline = renew
        drain = self._drain_by
        if drain is not None and (deadline is None or drain < deadline):
            return drain
        return deadline

    def handle_timeout(self, now: float) -> None:
        self._now = now
        if self._drain_by is not None and now >= self._drain_by:
            self._drain_expired()
            return
        self.conn.handle_timeout(now)
        self.leases.renew(now)
        self._dispatch_events()

    def begin_close(self) -> None:
        """Graceful close asked locally: ERROR[CONNECTION_CLOSE], then the loop flushes."""
        if self._close_started:
            return
        self._close_started = True
        if self.conn.state in (core.ConnectionState.ESTABLISHED, core.ConnectionState.CLOSING):
            with contextlib.suppress(core.LocalProtocolError):
                self.conn.close("closed by the application")
        self._dispatch_events()
        if self._closing is None:
            self._closing = ConnectionClosed("connection closed locally")

    @property
    def handshaken(self) -> bool:
        """False while a server waits for the first SETUP/RESUME: the driver
        loops drop a client that never sends one after
        ``LoopConfig.handshake_timeout``."""
        conn = self.conn
        awaiting = core.ConnectionState.AWAITING_SETUP
        if conn.role is core.Role.CLIENT:
            return True
        # A deferred accept_setup counts as the handshake: it is bounded too.
        return conn.state is not awaiting and self._setup_pending is None

    def wants_close(self) -> bool:
        return self._closing is not None

    def close_reason(self) -> BaseException | None:
        return self._closing

    def after_events(self, fn: Callable[[], None]) -> None:
        """Owning thread: run ``fn`` in this turn, once every event of the
        input received is dispatched (before the output is written), e.g. to
        hand a whole turn's answers to the application at once."""
        self._after_events.append(fn)

    def pump(self) -> bool:
        self._dispatch_events()  # intents (close, errors) can produce events too
        if self._after_events:
            self._run_after_events()
            self._dispatch_events()
        return self._outbounds.pump(self._output_blocked, self._outbound_done)

    def quiet(self) -> bool:
        """Nothing to pump and nothing to send now, so a driver may skip its
        pump-and-write (``LoopConnection``'s direct calls, after reading an
        answer): no output queued in the core, no outbound stream runnable,
        no ``after_events`` call waiting, not closing."""
        return not (
            self.conn.queued_output
            or self._after_events
            or self._outbounds.busy
            or self._closing is not None
        )

    def _output_blocked(self) -> bool:
        return self.conn.output_blocked

    def connection_lost(self, error: BaseException) -> None:
        if self._closing is not None:
            error = self._closing
        else:
            # From here on a request started meanwhile (a pipeline refilling
            # as its requests fail below) fails at once, with this reason.
            self._closing = error
        pending, self._setup_pending = self._setup_pending, None
        if pending is not None and not isinstance(pending, concurrent.futures.Future):
            # An async hook's task: nobody waits for its verdict any more. (A
            # thread's Future is left to the thread that will complete it.)
            getattr(pending, "cancel", lambda: None)()
        self._run_after_events(quietly=True)  # now: they learn of the end themselves
        for waiting in self.leases.abandon():
            waiting.sink.finish(error)
        for handle in list(self._requests.values()):  # sinks may start requests
            handle.sink.finish(error)
            if handle.outbound is not None:
                handle.outbound.cancel()
        self._requests.clear()
        self._outbounds.cancel_all()
        for queue in self._inbound.values():
            queue.finish(error)
        self._inbound.clear()

    # -- application intents (handed over by the peers, on this thread) --------------
    def start_request(
        self,
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

    def start_response(self, handle: RequestHandle, payload: Payload) -> None:
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

    def adopt_response(self, handle: RequestHandle, sid: int) -> None:
        """A request-response (``handle``) the core started with
        ``request_response_frame`` (the express latency path, the frame
        written by the caller): from here on it is a request like any other,
        its answer (or error) for ``handle.sink``."""
        handle.sid = sid
        self._requests[sid] = handle

    def _take_answer(self, handle: RequestHandle, data: bytes, now: float) -> Payload | None:
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

    def _refused(self, handle: RequestHandle, exc: core.LocalProtocolError) -> None:
        # (A known reason to close was checked before the core was asked.)
        if self.conn.state is core.ConnectionState.CLOSED:
            handle.sink.finish(ConnectionClosed(f"connection closed: {exc.message}"))
        else:  # e.g. no stream ID left, or the peer is closing
            handle.sink.finish(RSocketError(ErrorCode.REJECTED, exc.message))

    def fire_and_forget(self, payload: Payload) -> None:
        if self.leases.must_wait():
            self.leases.wait(lambda: self.fire_and_forget(payload), None)
            return
        self.conn.request_fnf(payload.data, payload.metadata)

    def fire_and_forget_many(self, payloads: list[Payload]) -> None:
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

    def metadata_push(self, metadata: bytes) -> None:
        self.conn.metadata_push(metadata)

    def send_lease(self, ttl: float, requests: int) -> None:
        self.conn.send_lease(core.milliseconds(ttl), requests)

    def request_more(self, handle: RequestHandle, n: int) -> None:
        sid = handle.sid
        if sid is not None and self._requests.get(sid) is handle and handle.kind != "rr":
            # The core may already have seen the stream end in a batch whose
            # events are still being dispatched: then there is nothing to ask.
            with contextlib.suppress(core.LocalProtocolError):
                self.conn.request_n(sid, n)

    def cancel(self, handle: RequestHandle) -> None:
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

    # -- outbound plumbing --------------------------------------------------
    def _call_soon(self, fn: Callable[[], None]) -> None:
        """Any thread: run ``fn`` on the thread driving the connection now
        (a resumed session may have moved to another one); dropped once the
        connection is gone."""
        thread = self.thread
        if thread is not None:
            with contextlib.suppress(ConnectionClosed):
                thread.call_soon(fn)

    def _poke(self, sid: int) -> None:
        """Any thread: a threaded or publisher source has something for ``sid``."""
        self._outbounds.poke(sid)

    def _wake(self) -> None:
        """Any thread: make the driver of the moment run a turn."""
        thread = self.thread
        if thread is not None:
            thread.wake()

    def _new_outbound(
        self, sid: int, source: IteratorSource[Any] | Any, credit: int, watch: Any = None
    ) -> Outbound[Any]:
        """``watch``: an interceptor's view of the stream (.interceptors)."""
        out = stream_outbound(self.conn, sid, source, credit, watch)
        self._outbounds.add(sid, out, runnable=credit > 0)
        return out

    def _outbound_done(self, sid: int) -> None:
        """Our flow on ``sid`` ended; forget a requester channel whose inbound ended too."""
        self._outbounds.remove(sid)
        handle = self._requests.get(sid)
        if handle is not None and handle.inbound_done:
            del self._requests[sid]

    # -- inbound signals on existing streams ---------------------------------
    def on_payload(
        self, sid: int, data: bytes, metadata: bytes | None, next_: bool, complete: bool
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

    def _on_payloads(self, sid: int, data: list[bytes]) -> None:
        """:meth:`on_payload` for a run of items (none completing; the
        core's ``PayloadRunReceived``): their Payloads made by C calls,
        put in one call (docs/performance.md, "Items at the application's end")."""
        payloads = list(map(new_tuple, repeat(Payload), zip(data, repeat(None))))
        handle = self._requests.get(sid)
        if handle is not None:
            handle.sink.put_many(payloads)
            return
        queue = self._inbound.get(sid)
        if queue is not None:
            queue.put_many(payloads)

    def on_request_n(self, sid: int, n: int) -> None:
        self._outbounds.credit(sid, n)

    def on_cancel(self, sid: int) -> None:
        """Requester's CANCEL (ends a responder stream both ways) or a channel
        responder stopping our outbound flow."""
        out = self._outbounds.get(sid)
        if out is not None:
            out.cancel()
            self._outbound_done(sid)
        queue = self._inbound.pop(sid, None)
        if queue is not None:
            queue.close()  # wakes a channel handler iterating its inbound

    def on_error(self, sid: int, code: int, message: str) -> None:
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

    # -- connection-level signals ---------------------------------------
    def on_setup(self, ev: Any) -> None:
        """Server: accept the SETUP. If the client asked for leases, grant
        them (the first LEASE is mandatory) and renew at half the TTL; a
        server started with ``lease=True`` refuses clients that did not ask."""
        if self.options.lease and not ev.lease:
            self.conn.reject_setup(
                ErrorCode.UNSUPPORTED_SETUP, "this server requires leases (SETUP L flag)"
            )
            return
        if self._accept_setup_hook(ev):
            self.leases.accept_setup(ev.lease, self._now)

    def _accept_setup_hook(self, ev: Any) -> bool:
        """The handler's optional ``accept_setup(setup, peer)`` (e.g. a
        :class:`~.routing.Router` checking credentials): it may return the
        handler for this connection, or raise to reject the SETUP. It may
        also return a future (``add_done_callback``; the asyncio adapter
        makes an ``async def`` hook's coroutine a task): the SETUP waits
        for its outcome (:meth:`_setup_decided`), its early frames held by
        the core. A bare awaitable nothing here can run is never taken for
        a yes: the SETUP is rejected."""
        hook = getattr(self.responder.handler, "accept_setup", None)
        if not callable(hook):
            return True
        try:
            handler = hook(ev, self.peer)
        except Exception as exc:
            code, message = setup_rejection(exc)
            self.conn.reject_setup(code, message)
            return False
        if callable(getattr(handler, "add_done_callback", None)):
            self._setup_pending = handler
            handler.add_done_callback(  # any thread: decided on ours
                lambda done: self._call_soon(lambda: self._setup_decided(ev, done))
            )
            return False
        if inspect.isawaitable(handler):
            getattr(handler, "close", lambda: None)()  # never run: no "never awaited" noise
            log.error("accept_setup returned an awaitable: async hooks need the asyncio server")
            self.conn.reject_setup(ErrorCode.REJECTED_SETUP, ASYNC_HOOK_REFUSED)
            return False
        if handler is not None:
            self.responder.bind(handler, self.peer)
        return True

    def _setup_decided(self, ev: Any, done: Any) -> None:
        """Owning thread: a deferred ``accept_setup`` ended; its result is the
        handler (accept), its exception the rejection."""
        self._setup_pending = None
        if self.conn.state is not core.ConnectionState.SETUP_RECEIVED:
            return  # the connection ended meanwhile
        try:
            handler = done.result()
        except BaseException as exc:  # a cancelled task too: never a yes
            code, message = setup_rejection(exc)
            self.conn.reject_setup(code, message)
        else:
            if handler is not None:
                self.responder.bind(handler, self.peer)
            self.leases.accept_setup(ev.lease, self._now)
        self._dispatch_events()  # the early frames the core held, now requests

    def on_lease(self, ttl_ms: int, requests: int) -> None:
        self.leases.release()

    def on_closing(self, message: str) -> None:
        """The peer sent CONNECTION_CLOSE while streams are open: they may
        finish (spec: Error Codes, CONNECTION_CLOSE), within the driver's
        ``close_timeout``: a peer that closes and then answers nothing must
        not hold a request for ever (docs/adapters.md, "When the peer
        misbehaves")."""
        log.debug("peer is closing: %s", message)
        config = getattr(self.thread, "config", None)
        grace = config.close_timeout if config is not None else 2.0
        self._drain_by = self._now + grace
        self._peer_close = (message, grace)

    def _drain_expired(self) -> None:
        """The streams a peer's CONNECTION_CLOSE left open did not finish in
        time: our requests are cancelled (CANCEL: they terminate, so the
        close completes as the spec's "MUST wait for outstanding streams to
        terminate" has it), each failing with the peer's reason; streams of
        the peer's still open then end with the connection
        (ERROR[CONNECTION_ERROR])."""
        self._drain_by = None
        message, grace = self._peer_close or ("", 0.0)
        said = RSocketError(ErrorCode.CONNECTION_CLOSE, message)
        reason = ConnectionClosed(
            f"connection closed by peer: {said}; its open streams unfinished"
            f" {seconds(grace)} later (close_timeout)"
        )
        conn = self.conn
        for sid, handle in list(self._requests.items()):
            del self._requests[sid]
            handle.cancelled = True
            if handle.outbound is not None:
                self._outbounds.cancel(sid)
            with contextlib.suppress(core.LocalProtocolError):  # (ended in the core)
                conn.cancel(sid)
            handle.sink.finish(reason)
        if conn.state is not core.ConnectionState.CLOSED:
            with contextlib.suppress(core.LocalProtocolError):
                conn.close(
                    f"streams unfinished {seconds(grace)} after CONNECTION_CLOSE",
                    error_code=ErrorCode.CONNECTION_ERROR,
                )
        self._dispatch_events()
        self._closing = reason

    def on_closed(self, code: int, message: str, by_peer: bool) -> None:
        who = "peer" if by_peer else "this end"
        # The first reason stays (a protocol error of the peer's, said as such).
        self._closing = self._closing or ConnectionClosed(
            f"connection closed by {who}: {RSocketError(code, message)}"
        )

    def on_lost(self, reason: str, timed_out: bool) -> None:
        if timed_out:
            reason = f"peer silent beyond max lifetime (keepalive timeout): {reason}"
            self._ws_close = (ws.CloseCode.GOING_AWAY, "keepalive timeout")
        unexpected = self.unexpected_input()
        if unexpected:  # e.g. another protocol's server that answered and left
            reason = f"{reason}; {unexpected}"
        elif self._peer_close is not None:  # what the peer said first
            said = RSocketError(ErrorCode.CONNECTION_CLOSE, self._peer_close[0])
            reason = f"{reason}, after {said}"
        self._closing = self._closing or ConnectionClosed(f"connection lost: {reason}")



def _guess(data: bytes) -> str | None:
    """Another wire protocol's opening where RSocket frames were expected."""
    if data[:3] == b"\x02\x00\x00":  # (docs/protocols/rsio.md: serverHello, version 0)
        return "an rsio server hello: an rsio server? (sansrs.adapters.rsio)"
    return None


# -- core events -> engine ------------------------------------------------------
_E = core.events
#: Core event type -> what the engine does with it (events the hot path
#: does not take itself; see ``RSocketEngine._dispatch_events``).
EVENTS: dict[type, Callable[[Any, Any], None]] = {
    _E.PayloadReceived: lambda en, ev: en.on_payload(
        ev.stream_id, ev.data, ev.metadata, ev.next, ev.complete
    ),
    _E.RequestResponseReceived: lambda en, ev: en.on_request_response(
        ev.stream_id, ev.data, ev.metadata
    ),
    _E.FireAndForgetReceived: lambda en, ev: en.on_fire_and_forget(ev.data, ev.metadata),
    _E.FireAndForgetRunReceived: lambda en, ev: en.on_fire_and_forget_run(ev.data, ev.metadata),
    _E.RequestStreamReceived: lambda en, ev: en.on_request_stream(
        ev.stream_id, ev.data, ev.metadata, ev.initial_n
    ),
    _E.RequestChannelReceived: lambda en, ev: en.on_request_channel(
        ev.stream_id, ev.data, ev.metadata, ev.initial_n, ev.complete
    ),
    _E.RequestNReceived: lambda en, ev: en.on_request_n(ev.stream_id, ev.n),
    _E.CancelReceived: lambda en, ev: en.on_cancel(ev.stream_id),
    _E.ErrorReceived: lambda en, ev: en.on_error(ev.stream_id, ev.error_code, ev.message),
    _E.MetadataPushReceived: lambda en, ev: en.on_metadata_push(ev.metadata),
    _E.SetupReceived: lambda en, ev: en.on_setup(ev),
    _E.LeaseReceived: lambda en, ev: en.on_lease(ev.ttl, ev.number_of_requests),
    _E.KeepaliveReceived: lambda en, ev: None,
    _E.ExtensionReceived: lambda en, ev: None,
    _E.ConnectionClosing: lambda en, ev: en.on_closing(ev.message),
    _E.ConnectionTerminated: lambda en, ev: en.on_closed(ev.error_code, ev.message, ev.by_peer),
    _E.ConnectionLost: lambda en, ev: en.on_lost(ev.reason, ev.timed_out),
}

RSocketEngine.EVENTS = EVENTS
