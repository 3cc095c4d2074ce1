"""One RSocket connection as a synchronous application sees it: the
requester side of a client, or a server's view of a connected client (for
server-initiated requests). Thread-safe.

Every call may come from any application thread; it is handed to the
connection's owning thread, which alone drives the sans-IO core through
:class:`~.engine.RSocketEngine` (a request-response may also be started from
a handler on that thread, as a Publisher).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import islice
from operator import attrgetter
from typing import Any, NamedTuple

from typing_extensions import Unpack

from sansrs.rsocket import Role

from ..drive.connection import LoopConnection
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed, seconds
from ..drive.peer import DrivenPeer, carrying_context
from ..drive.publishers import BatchSubscriberSink, RemoteStreamPublisher, SubscriberSink
from ..drive.queues import CreditQueue, EndOfStream
from ..drive.streams import StreamBatches
from ..drive.streams import check_prefetch as _check_prefetch
from ..transport import Transport
from .batch import PayloadBatch
from .engine import RequestHandle, RSocketEngine
from .fast import (
    PAYLOAD_ENTRIES,
    DataRuns,
    FireAndForgets,
    all_bytes,
    as_payload,
    delegate,
    new_tuple,
    payload_batches,
)
from .payload_streams import PayloadStream
from .pipeline import Answer, ResponsePipeline
from .routed import (
    RoutedRequester,
    RouteOptions,
    check_composite,
    checked_payload,
    composite_check,
    route_metadata,
    send_checked,
)
from .types import Payload

__all__ = [
    "DEFAULT_PREFETCH",
    "RSocketPeer",
    "RemoteBatchPublisher",
    "RemotePublisher",
    "check_prefetch",
]

#: One remote request as a Reactive Streams Publisher (subscribe once): the
#: protocol-neutral :class:`~..drive.publishers.RemoteStreamPublisher` bound to RSocket.
RemotePublisher = RemoteStreamPublisher[Payload, RequestHandle]
#: One remote stream as a Publisher of batches of payloads (:class:`~.batch.PayloadBatch`,
#: see :meth:`RSocketPeer.batch_publisher`).
RemoteBatchPublisher = RemoteStreamPublisher[list[Payload], RequestHandle]

DEFAULT_PREFETCH = 256
#: Largest REQUEST_N (31 bits): the largest prefetch window and in-flight count.
MAX_REQUEST_N = 0x7FFFFFFF


#: ``peer._thread.is_owner``, the driver of the moment's (a resumed session moves).
_THREAD_IS_OWNER = attrgetter("_thread.is_owner")


def check_prefetch(prefetch: int) -> int:
    return _check_prefetch(prefetch, MAX_REQUEST_N)


class Waiting(NamedTuple):
    """A request-response the express path sent whose answer is to come."""

    handle: RequestHandle
    queue: CreditQueue[Payload]


def _raises(answer: BaseException, return_exceptions: bool) -> bool:
    """A pipelined answer that ends the iteration: any error unless
    ``return_exceptions``; a lost connection always."""
    return not return_exceptions or isinstance(answer, ConnectionClosed)


class RSocketPeer(DrivenPeer):
    """The requester side of one connection (a client, or the server's view of
    a connected client for server-initiated requests). Thread-safe."""

    def __init__(self, thread: Driver, engine: RSocketEngine) -> None:
        interceptors = engine.options.interceptors
        #: Request interceptors see the caller's contextvars (docs/interceptors.md).
        self._carry_context = interceptors is not None and bool(interceptors.requests)
        super().__init__(carrying_context(thread) if self._carry_context else thread)
        self._engine = engine
        #: Raw metadata on a client that declared composite metadata fails at the call.
        self._composite = composite_check(engine)
        # Fire-and-forgets cross to the connection thread many per hand-off,
        # plain ``bytes`` data as is, framed from the bytes (fast.payload_batches).
        # (``is_owner`` through C calls, no lambda frame: asked per fire_and_forget.)
        self._fnf = FireAndForgets(
            self._submit,
            payload_batches(engine.fire_and_forget_many, engine.fire_and_forget_data),
            partial(_THREAD_IS_OWNER, self),
            partial(checked_payload, self._composite),
            room=self._room_for_fire_and_forgets,
        )

    def _room_for_fire_and_forgets(self, timeout: float | None) -> None:
        """Before a batch of fire-and-forgets (``Batcher``'s ``room``): while
        the connection holds ``high_water`` bytes or more it has not
        written (its buffer and the core's output: a peer reading slowly,
        or not at all), the caller waits for turns to drain it below that:
        the caller is held, not memory (as the asyncio client's
        ``_room_for_more``). Its connection thread never waits here (it
        drains at once). Raises ``ConnectionClosed`` once the connection
        has ended, ``TimeoutError`` after ``timeout``."""
        driver: Any = self._thread  # (the driver of the moment: a resumed session moves)
        wait_until = getattr(driver, "wait_until", None)
        engine = self._engine
        # (The first test without a closure: asked once per batch, fnf16.)
        if wait_until is None or driver.buffered + engine.conn.queued_output < (
            high := driver.config.high_water
        ):
            return  # room, or a driver without a buffer of its own

        def room() -> bool:
            return driver.buffered + engine.conn.queued_output < high  # type: ignore[no-any-return]

        try:
            wait_until(room, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no room on the connection within {seconds(timeout or 0.0)}:"
                f" {high} bytes or more unwritten (the peer reads too slowly, or not at all)"
            ) from None

    def move_to(self, driver: Driver) -> None:
        super().move_to(carrying_context(driver) if self._carry_context else driver)

    @property
    def peer_address(self) -> str:
        return self._thread.transport.peer

    @property
    def transport(self) -> Transport:
        """The connection's transport (e.g. ``TlsTransport.peer_certificate``)."""
        return self._thread.transport

    # -- blocking requests -----------------------------------------------
    # (AsyncRSocketPeer, the balancer and route views repeat these signatures by choice.)
    def request_response(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> Payload | None:
        """Send REQUEST_RESPONSE and wait up to ``timeout`` s for the reply.

        Returns the payload (``None`` if the responder completed empty). Raises
        :class:`~.errors.RSocketError` for an ERROR reply,
        :class:`~..drive.errors.ConnectionClosed` if the connection goes away,
        :class:`TimeoutError` (after cancelling the request) on timeout.
        """
        engine = self._engine
        if metadata is not None and self._composite is not None:
            checked_payload(self._composite, b"", metadata)
        direct: LoopConnection | None = getattr(self._thread, "direct", None)
        if direct is not None and engine.takes_whole_reads:
            # (Never on the connection's own thread: direct_begin declines.)
            deadline = None if timeout is None else time.monotonic() + timeout
            taken = self._exchange(direct, data, metadata, deadline)
            if type(taken) is Payload:
                return taken
            if isinstance(taken, Waiting):  # sent, its answer still to come
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                return self._answer(taken.handle, taken.queue, remaining, timeout)
        if self._thread.is_owner:
            raise RuntimeError(
                "blocking request_response on the connection thread would deadlock;"
                " use response_publisher()"
            )
        if type(data) is bytes and metadata is None:  # the common case, first
            payload = new_tuple(Payload, (data, None))
        else:
            payload = as_payload(data, metadata)
        queue: CreditQueue[Payload] = CreditQueue(granted=1)
        handle = RequestHandle("rr", queue)

        def start() -> None:
            engine.start_response(handle, payload)

        # The latency path: while the connection's thread is idle, this
        # thread sends the request and reads the answer itself (no hand-over
        # either way); otherwise the request goes through the connection's
        # thread (docs/architecture.md, Threads).
        thread = self._thread
        direct = getattr(thread, "call_direct", None)
        remaining = timeout
        if timeout is None:
            if direct is None or not direct(start, queue.answered, None):
                thread.call_soon(start, None)
        else:
            started = time.monotonic()
            if direct is None or not direct(start, queue.answered, timeout):
                thread.call_soon(start, timeout)
            else:
                remaining = max(0.0, timeout - (time.monotonic() - started))
        return self._answer(handle, queue, remaining, timeout)

    def _answer(
        self,
        handle: RequestHandle,
        queue: CreditQueue[Payload],
        remaining: float | None,
        timeout: float | None,
    ) -> Payload | None:
        """A request-response's answer from its queue (``None``: completed
        empty), waiting ``remaining`` of the call's ``timeout``."""
        try:
            return queue.get(remaining)
        except EndOfStream:
            return None
        except TimeoutError:
            self._cancel(handle)
            raise TimeoutError(self._engine.no_answer(timeout or 0.0)) from None

    def _exchange(
        self,
        direct: LoopConnection,
        data: bytes | str,
        metadata: bytes | str | None,
        deadline: float | None,
    ) -> Payload | Waiting | None:
        """The express latency path: while the connection is idle
        (:meth:`~..drive.connection.LoopConnection.direct_begin`) this thread
        writes the request's frame (``Connection.request_response_frame``)
        and reads the socket itself; a read that is exactly the answer is
        taken whole (``Connection.take_answer``) and returned: no queue, no
        event, no hand-over (docs/architecture.md, Threads). Anything else
        goes on as any request: the read fed, its handle and queue returned,
        the answer coming to the queue (read here until then, or by the
        reactor). None: nothing sent, the general path applies (the
        connection busy, or the request not one frame alone, e.g. a str)."""
        now = direct.direct_begin()
        if now is None:
            return None
        try:
            core = self._engine.conn
            frame = core.request_response_frame(data, metadata)  # type: ignore[arg-type]
            if frame is None:
                return None
            sid, wire = frame
            read = None
            got = direct.direct_exchange(wire, now, deadline)
            if got is not None:
                read, now = got
                answer = core.take_answer(read, sid, now)
                if answer is not None:
                    return new_tuple(Payload, (answer, None))
            queue: CreditQueue[Payload] = CreditQueue(granted=1)
            handle = RequestHandle("rr", queue)
            self._engine.adopt_response(handle, sid)
            now = direct.direct_wait(read, queue.answered, deadline, now)
            return Waiting(handle, queue)
        finally:
            direct.direct_end(now)

    def request_response_many(
        self,
        requests: Iterable[object],
        *,
        in_flight: int = 64,
        timeout: float | None = None,
        return_exceptions: bool = False,
    ) -> Iterator[Payload | None]:
        """Pipelined REQUEST_RESPONSEs: an iterator of the answers, in the order
        of ``requests`` (payloads, bytes, str or (data, metadata) pairs).

        Keeps up to ``in_flight`` requests outstanding; ``requests`` is pulled
        lazily, at most ``2 * in_flight`` ahead of what was consumed, so an
        endless iterable is fine and memory stays bounded. Each answer is a
        payload (``None``: completed empty). An ERROR answer raises its
        :class:`~.errors.RSocketError` at its position (after the
        answers before it), or is yielded as the exception object with
        ``return_exceptions=True``. A lost connection always raises
        :class:`~..drive.errors.ConnectionClosed` (no later request can be answered).
        ``timeout`` bounds each wait for the next answer (:class:`TimeoutError`).
        Closing the iterator early (``break``, ``close()``, an exception)
        cancels what is still outstanding.
        """
        if self._thread.is_owner:
            raise RuntimeError(
                "request_response_many blocks; on the connection thread use response_publisher()"
            )
        if not isinstance(in_flight, int) or not 0 < in_flight <= MAX_REQUEST_N:
            raise ValueError(f"in_flight must be in 1..{MAX_REQUEST_N}, not {in_flight!r}")
        answers: CreditQueue[Answer] = CreditQueue()
        pipeline = ResponsePipeline(self._engine, in_flight, answers)
        return self._pipelined(iter(requests), pipeline, answers, timeout, return_exceptions)

    def _pipelined(
        self,
        requests: Iterator[object],
        pipeline: ResponsePipeline,
        answers: CreditQueue[Answer],
        timeout: float | None,
        return_exceptions: bool,
    ) -> Iterator[Payload | None]:
        window = pipeline.window
        check, checked = self._composite, checked_payload
        ahead = 2 * window  # handed over but not yet consumed, at most
        refill_at = max(1, window // 2)  # hand over in batches, not one by one
        submitted = consumed = 0
        exhausted = False
        early: dict[int, Payload | BaseException | None] = {}  # answered out of order
        try:
            while True:
                room = ahead - (submitted - consumed)
                if not exhausted and room >= refill_at:
                    batch = [
                        new_tuple(Payload, (x, None)) if type(x) is bytes else checked(check, x)
                        for x in islice(requests, room)
                    ]
                    exhausted = len(batch) < room
                    if batch:
                        answers.grant(len(batch))
                        self._submit(lambda batch=batch: pipeline.feed(batch), timeout)  # type: ignore[misc]
                        submitted += len(batch)
                if consumed == submitted:
                    return
                for index, answer in answers.get_batch(timeout):
                    if index != consumed:
                        early[index] = answer
                        continue
                    consumed += 1
                    if isinstance(answer, BaseException) and _raises(answer, return_exceptions):
                        raise answer
                    yield answer  # type: ignore[misc]
                    while consumed in early:
                        answer = early.pop(consumed)
                        consumed += 1
                        if isinstance(answer, BaseException) and _raises(answer, return_exceptions):
                            raise answer
                        yield answer  # type: ignore[misc]
        finally:
            if consumed < submitted:
                with contextlib.suppress(ConnectionClosed):
                    self._submit(pipeline.cancel)

    def fire_and_forget(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> None:
        """Queue REQUEST_FNF. Waits while the connection has a full batch of
        fire-and-forgets pending (the loop is behind) and, before one that
        starts a batch, while it holds ``high_water`` bytes or more it has
        not written (the peer reads slowly, or not at all); ``timeout``
        bounds each wait (:class:`TimeoutError`, nothing queued); raises
        :class:`~..drive.errors.ConnectionClosed` once the connection ended."""
        self._fnf.send(data, metadata, timeout)

    # The call is FireAndForgets.send's frame alone (bench_tcp.py row fnf16).
    fire_and_forget = delegate(fire_and_forget, "_fnf.send")

    def fire_and_forget_many(self, items: Iterable[object], timeout: float | None = None) -> int:
        """REQUEST_FNF for each of ``items`` (payloads, bytes, str or (data,
        metadata) pairs), in order, handed to the connection many at a time;
        returns how many were queued. ``items`` is pulled lazily, at most
        half the connection's pending budget ahead of what was handed over
        (an endless iterable is fine), each part waiting for room as
        :meth:`fire_and_forget` does; ``timeout`` bounds each wait. An item that is
        not a payload raises after the ones before it were queued."""
        source = iter(items)
        fnf = self._fnf
        part = max(1, fnf.capacity // 2)
        sent = 0
        while True:
            chunk = list(islice(source, part))
            if all_bytes(chunk):
                # Plain data crosses as is: no Payload (a tracked tuple) per
                # item (bench_tcp.py row fnf16m: the client's collections).
                fnf.put_many(chunk, timeout)  # type: ignore[arg-type]
                sent += len(chunk)
            else:
                sent += send_checked(self._composite, chunk, partial(fnf.put_many, timeout=timeout))
            if len(chunk) < part:
                return sent

    def metadata_push(self, metadata: bytes | str, timeout: float | None = None) -> None:
        """METADATA_PUSH. Waits, as :meth:`fire_and_forget` does, while the
        connection holds ``high_water`` bytes or more it has not written
        (a peer reading slowly, or not at all: the caller is held, not
        memory); ``timeout`` bounds the wait (:class:`TimeoutError`, nothing
        queued). Its connection's own thread (a handler) never waits."""
        md = checked_payload(self._composite, b"", metadata).metadata or b""
        if not self._thread.is_owner:
            self._room_for_fire_and_forgets(timeout)
        self._submit(lambda: self._engine.metadata_push(md), timeout)

    def request_stream(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> PayloadStream:
        """REQUEST_STREAM as an iterator of payloads that keeps ``prefetch``
        requested ahead and replenishes as items are consumed. ``timeout``
        bounds each wait for the next item. Closing it cancels the stream."""
        payload = checked_payload(self._composite, data, metadata)
        return self._inbound("stream", payload, check_prefetch(prefetch), timeout, None)

    def request_stream_batches(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> StreamBatches[PayloadBatch]:
        """REQUEST_STREAM as an iterator of :class:`~.batch.PayloadBatch`
        (read-only sequences of payloads): each is what arrived since the
        previous one (never empty). The same window, replenishing, items,
        order and errors as :meth:`request_stream`; one hand-over per batch
        instead of one per item. Closing it (or leaving its ``with`` block)
        cancels the stream."""
        return self.request_stream(data, metadata, prefetch, timeout).batches()

    def request_channel(
        self,
        data: Iterable[object],
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        timeout: float | None = None,
    ) -> PayloadStream:
        """REQUEST_CHANNEL: ``data`` (payloads, bytes, str or (data, metadata)
        pairs; the first one travels in the request frame, ``metadata`` joins
        it if given) is pulled on a worker thread only as the peer grants
        credit. Returns the inbound iterator, as :meth:`request_stream`."""
        items = iter(data)
        try:
            first = checked_payload(self._composite, next(items), metadata)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None
        return self._inbound("channel", first, check_prefetch(prefetch), timeout, items)

    def _inbound(
        self,
        kind: str,
        payload: Payload,
        prefetch: int,
        timeout: float | None,
        outbound: Iterable[object] | None,
    ) -> PayloadStream:
        """Start the request; its inbound iterator. Items without metadata
        wait as their bytes, made Payloads as they are handed out, a batch
        too (fast.DataRuns: bench_tcp.py stream16, stream16b)."""
        queue: CreditQueue[Payload | bytes] = CreditQueue(granted=prefetch)
        sink = DataRuns(queue)
        handle = RequestHandle(kind, sink)
        self._submit(lambda: self._engine.start_request(handle, payload, prefetch, outbound))
        return PayloadStream(
            queue,
            sink,
            prefetch=prefetch,
            request_more=lambda n: self._more(handle, n),
            cancel=lambda: self._cancel(handle),
            timeout=timeout,
            explain=self._engine.unexpected_input,
        )

    def _more(self, handle: RequestHandle, n: int) -> None:
        # Written at once by this thread while the connection is idle: handed
        # over, the REQUEST_N waited for the GIL until the consumer ran dry
        # (milliseconds), and the producer for it (bench_tcp.py stream16b).
        # Once closed, the iterator sees the connection error next.
        with contextlib.suppress(ConnectionClosed):
            self._submit_direct(lambda: self._engine.request_more(handle, n))

    def _cancel(self, handle: RequestHandle) -> None:
        with contextlib.suppress(ConnectionClosed):
            self._submit_direct(lambda: self._engine.cancel(handle))

    # -- the same requests as Publishers -------------------------------------
    def response_publisher(
        self, data: bytes | str, metadata: bytes | str | None = None
    ) -> RemotePublisher:
        """REQUEST_RESPONSE as a Publisher of at most one payload; the request is
        sent on the first ``request(n)``. Signals arrive on the connection thread."""
        return self._publisher("rr", checked_payload(self._composite, data, metadata), None)

    def stream_publisher(
        self, data: bytes | str, metadata: bytes | str | None = None
    ) -> RemotePublisher:
        """REQUEST_STREAM as a Publisher: the first ``request(n)`` sends the request
        with initial n, later ones REQUEST_N; ``cancel()`` sends CANCEL."""
        return self._publisher("stream", checked_payload(self._composite, data, metadata), None)

    def batch_publisher(
        self,
        data: bytes | str,
        metadata: bytes | str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
    ) -> RemoteBatchPublisher:
        """REQUEST_STREAM as a Publisher of :class:`~.batch.PayloadBatch` es:
        ``request(n)`` asks for ``n`` batches, each carrying every item that
        arrived and was not delivered yet (items without metadata wait as
        their bytes, made Payloads as the batch is read). The stream's own
        demand is a window of ``prefetch`` items, replenished as batches are
        delivered, so at most ``prefetch`` items wait for the Subscriber. The first ``request(n)``
        sends the request; ``cancel()`` sends CANCEL; signals arrive on the
        connection thread."""
        engine = self._engine
        payload = as_payload(data, metadata)
        window = check_prefetch(prefetch)

        def start(sink: SubscriberSink[list[Payload]], n: int) -> RequestHandle:
            assert isinstance(sink, BatchSubscriberSink)
            runs = DataRuns(sink)
            sink.make_batch = lambda entries: PAYLOAD_ENTRIES.batch(entries, runs.plain)
            handle = RequestHandle("stream", runs)
            sink.request_more = lambda k: engine.request_more(handle, k)
            sink.add_demand(n)
            engine.start_request(handle, payload, window)
            return handle

        def more(handle: RequestHandle, n: int) -> None:
            runs = handle.sink
            assert isinstance(runs, DataRuns)
            sink = runs.queue
            assert isinstance(sink, BatchSubscriberSink)
            sink.add_demand(n)

        return RemoteStreamPublisher(
            self._submit,
            start,
            more,
            engine.cancel,
            lambda subscriber: BatchSubscriberSink(subscriber, window),
        )

    def channel_publisher(
        self, data: Iterable[object], metadata: bytes | str | None = None
    ) -> RemotePublisher:
        items = iter(data)
        try:
            first = checked_payload(self._composite, next(items), metadata)
        except StopIteration:
            raise ValueError("a channel needs at least one payload") from None
        return self._publisher("channel", first, items)

    def _publisher(
        self, kind: str, payload: Payload, outbound: Iterable[object] | None
    ) -> RemotePublisher:
        engine = self._engine

        # Run on the connection thread: every Subscriber signal, on_subscribe
        # included, comes from there (rule 1.3).
        def start(sink: SubscriberSink[Payload], n: int) -> RequestHandle:
            handle = RequestHandle(kind, sink)
            engine.start_request(handle, payload, n, outbound)
            return handle

        return RemoteStreamPublisher(self._submit, start, engine.request_more, engine.cancel)

    # -- routed requests (docs/extensions.md) ----------------------------------
    def route(
        self, route: str, *variables: object, **options: Unpack[RouteOptions]
    ) -> RoutedRequester:
        """This connection's requests on ``route`` (a template's ``{vars}``
        filled from ``variables`` in order), each carrying composite metadata:
        the route and the :class:`~.routed.RouteOptions` (``auth``,
        ``data_mime``, ``accept``, ``tracing``, ``metadata``). A client must
        have connected with composite metadata (``auth=``, ``setup_route=``
        or ``metadata_mime_type=COMPOSITE_METADATA``)."""
        if self._engine.conn.role is Role.CLIENT:
            check_composite(self._engine.options.metadata_mime_type)
        return RoutedRequester(self, route_metadata(route, variables, **options))

    # -- lifecycle (close, abort, wait_closed: DrivenPeer) ----------------
    def grant_lease(self, ttl: float, requests: int) -> None:
        """Send LEASE: the peer may start ``requests`` requests within ``ttl`` s
        (only on a connection set up with lease)."""
        self._submit(lambda: self._engine.send_lease(ttl, requests))
