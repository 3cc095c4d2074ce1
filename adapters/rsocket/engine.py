"""The RSocket :class:`~..drive.engine.Engine`: binds the sans-IO core to any
driver. Everything here runs on the connection's owning thread.

It turns core events into request completions and, through its
:class:`~.responder.Responder` part, into handler calls; and application
intents (handed over by the peer objects, :mod:`.peer`) into core calls.
Its other parts: :class:`~.leases.Leases` (requests waiting for the peer's
lease, the renewal of ours) and :func:`~.outbound.stream_outbound` (our
side of a stream as core calls). Four of its concerns are methods kept in
modules of their own: :mod:`.opening` (the first bytes, WebSocket message
records), :mod:`.engine_intents` (the application's intents: requests,
fire-and-forgets, REQUEST_N, CANCEL), :mod:`.engine_signals` (the peer's
items, REQUEST_N, CANCEL and ERROR on open streams) and :mod:`.lifecycle`
(SETUP acceptance, leases received, the close). The protocol-neutral pieces (credit-bound
outbound streams, prefetching inbound, sources) come from
:mod:`..drive.streams`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.queues import CreditQueue
from ..drive.streams import (
    IteratorSource,
    Outbound,
    Outbounds,
)
from ..transport.tcp import MAX_PIECES
from ..transport.urls import Endpoint, parse_url
from ..transport.websocket import messages as ws
from ..transport.websocket.frames import binary_head
from ..transport.websocket.options import WebSocketOptions
from . import core, lifecycle, opening
from . import engine_intents as intents
from . import engine_signals as signals
from .engine_state import RequestHandle
from .fast import new_tuple
from .interceptors import install as install_interceptors
from .leases import Leases
from .lifecycle import ASYNC_HOOK_REFUSED, refuse_async_hooks
from .options import EngineOptions
from .outbound import stream_outbound
from .responder import Responder
from .types import Payload

__all__ = ["ASYNC_HOOK_REFUSED", "RSocketEngine", "RequestHandle", "refuse_async_hooks"]

_BINARY_RUN = ws.MessageKind.BINARY_RUN.value
_FRAMED = ws.MessageKind.FRAMED.value


def client_websocket(
    url: str | Endpoint, websocket: WebSocketOptions | None
) -> WebSocketOptions | None:
    """A client's WebSocket options for RSocket on a ``ws://`` or ``wss://``
    ``url``: the caller's, with ``binary_spans`` on (the engine hands a
    span's equal messages to the core as they arrived:
    ``Connection.receive_span``); ``websocket`` as it is for other URLs."""
    try:
        scheme = (url if isinstance(url, Endpoint) else parse_url(url)).scheme
    except (TypeError, ValueError):
        return websocket  # (the connect says what is wrong with the URL)
    if scheme not in ("ws", "wss"):
        return websocket
    return replace(websocket or WebSocketOptions(), binary_spans=True)


def framed_records(pieces: list[bytes], framed: list[int]) -> bytes:
    """The core's output with runs it framed itself (``frame_runs``: two
    pieces at each index of ``framed``) as records, in order, joined once:
    framed runs one after another one FRAMED record (the transport writes
    a record with one call: a turn's runs of 1024 items each went out 24
    KiB a ``send``, a quarter of TCP's ``sendmsg``; bench_tcp.py stream16
    over ws://), the pieces between them BINARY_RUNs."""
    parts: list[bytes] = []
    at = 0
    ends = [*framed, len(pieces)]
    i = 0
    while i < len(ends):
        start = ends[i]
        if start > at:
            between = pieces[at:start]
            parts.append(ws.record_head(_BINARY_RUN, sum(map(len, between))))
            parts += between
        if start == len(pieces):
            break
        stop = start + 2
        while i + 1 < len(framed) and framed[i + 1] == stop:  # runs back to back
            i += 1
            stop += 2
        run = pieces[start:stop]
        parts.append(ws.record_head(_FRAMED, sum(map(len, run))))
        parts += run
        at = stop
        i += 1
    return b"".join(parts)


#: Items one outbound stream may send per loop turn, so streams share the loop.
PUMP_BUDGET = 4096
#: Request-response requests served (or answers received) in one input batch
#: between early writes: the peer starts on the first answers (or the next
#: requests) while the rest are handled, instead of both sides taking turns.
#: 64 (fewer writes, each with its fixed cost) won only on a loaded machine
#: and lost a third of rr64 on a quiet one (bench_write_early.py --every 16
#: --every 64; docs/performance.md, "Early writes").
WRITE_EVERY = 16


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
        #: The core frames our streams' runs for WebSocket (a server's).
        self._frames_runs = False
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
            # A stream's runs leave the core as WebSocket frames (unmasked:
            # a server's), which the transport writes as they are (FRAMED).
            engine.conn.frame_runs(binary_head)
            engine._frames_runs = True
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

    # -- the first bytes, message records (.opening) ---------------------------
    _protocol_error = opening.protocol_error
    _open = opening.first_read
    unexpected_input = opening.unexpected_input
    no_answer = opening.no_answer
    _feed_setup_first = opening.feed_setup_first
    _receive_partial = opening.receive_partial
    _receive_records = opening.receive_records
    _receive_span = opening.receive_span
    _ws_closed = opening.ws_closed
    _refuse = opening.refuse

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

    @property
    def queued_output(self) -> int:
        """Bytes queued in the core, not yet taken (``pieces_to_send``
        leaves them here while the socket is full)."""
        return self.conn.queued_output

    def pieces_to_send(self, at_least: int) -> list[bytes] | None:
        """``data_to_send()`` as pieces, not joined, when ``at_least`` bytes
        are queued (the driver writes them with one ``sendmsg``: a large
        output is not copied once more to be joined; bench_tcp.py stream1k,
        stream1kb: the server's end); None otherwise. Wrapped in WebSocket
        records, a server's output made of its streams' runs alone (their
        frames made by the core: ``frame_runs``) is one FRAMED record, its
        head a piece and the runs the pieces after it (the transport's
        ``send_pieces`` writes them as they are: stream1k, stream1kb over
        ws://); other output is one piece, its records joined."""
        if self.conn.queued_output < at_least:
            return None
        if self._records is None:
            return self.conn.pieces_to_send()
        if not self._frames_runs or (self._ws_close is not None and self._closing is not None):
            return None  # (a client's output, or a Close to add: ``data_to_send``)
        pieces, framed = self.conn.framed_pieces_to_send()
        if 2 * len(framed) == len(pieces) < MAX_PIECES:  # (each run two pieces)
            return [ws.record_head(_FRAMED, sum(map(len, pieces))), *pieces]
        return [self._records_of(pieces, framed)]

    def data_to_send(self) -> bytes:
        if self._records is None:
            return self.conn.data_to_send()
        out = self._records_of(*self.conn.framed_pieces_to_send())
        close = self._ws_close
        if close is not None and self._closing is not None:
            # Once: the transport sends this Close instead of a normal one.
            self._ws_close = None
            out += ws.encode_close(*close)
        return out

    @staticmethod
    def _records_of(pieces: list[bytes], framed: list[int]) -> bytes:
        """The core's output as WebSocket message records: one record for
        all the frames (the transport makes each a message), joined once
        from the core's pieces behind its head: not joined by the core,
        then copied whole to put the head in front. A server's stream runs
        are frames already (``frame_runs``): FRAMED records between the
        others, written as they are (the server's output of stream1k,
        stream1kb of bench_tcp.py)."""
        if framed:
            return framed_records(pieces, framed)
        if pieces:
            pieces.insert(0, ws.record_head(_BINARY_RUN, sum(map(len, pieces))))
            return b"".join(pieces)
        return b""

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

    # -- application intents (handed over by the peers, on this thread; .engine_intents)
    start_request = intents.start_request
    start_response = intents.start_response
    adopt_response = intents.adopt_response
    _take_answer = intents.take_answer
    _refused = intents.refused
    fire_and_forget = intents.fire_and_forget
    fire_and_forget_many = intents.fire_and_forget_many
    fire_and_forget_data = intents.fire_and_forget_data
    metadata_push = intents.metadata_push
    send_lease = intents.send_lease
    request_more = intents.request_more
    cancel = intents.cancel

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

    # -- inbound signals on existing streams (.engine_signals) -----------------
    on_payload = signals.on_payload
    _on_payloads = signals.on_payloads
    on_request_n = signals.on_request_n
    on_cancel = signals.on_cancel
    on_error = signals.on_error

    # -- connection-level signals (.lifecycle) ---------------------------------
    on_setup = lifecycle.on_setup
    _accept_setup_hook = lifecycle.accept_setup_hook
    _setup_decided = lifecycle.setup_decided
    on_lease = lifecycle.on_lease
    on_closing = lifecycle.on_closing
    _drain_expired = lifecycle.drain_expired
    on_closed = lifecycle.on_closed
    on_lost = lifecycle.on_lost


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
