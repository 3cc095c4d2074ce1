"""Interceptors (docs/interceptors.md): every interaction model, on the
requester and the responder side, under every driver (thread, selector,
asyncio), with each outcome (complete, error, cancel, reject); connections
opening and closing, cleanly or not; an interceptor that raises leaves the
connection alone (logged once); an engine without interceptors is the
engine it was (no entry point decorated)."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import itertools
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.rsocket import (
    COMPOSITE_METADATA,
    ConnectionClosed,
    EngineOptions,
    Payload,
    RoutedRequest,
    Router,
    RSocketError,
    aio,
    connect,
    serve,
)
from sansrs.adapters.rsocket.engine import RSocketEngine
from sansrs.adapters.rsocket.interceptors import (
    ConnectionInfo,
    Interceptors,
    Outcome,
    RequestInfo,
)
from sansrs.adapters.rsocket.types import Request

from sansrs.rsocket import ErrorCode

WAIT = 10.0
LOGGER = "sansrs.adapters.rsocket"
End = tuple[str, str, str | None]  # model, outcome, error type


class Recorder:
    """A request and connection interceptor that keeps what it saw."""

    def __init__(self) -> None:
        self.started: list[RequestInfo] = []
        self.ended: list[tuple[RequestInfo, Outcome]] = []
        self.opened: list[ConnectionInfo] = []
        self.closed: list[tuple[ConnectionInfo, BaseException | None]] = []
        self._cond = threading.Condition()

    def on_start(self, info: RequestInfo) -> None:
        with self._cond:
            self.started.append(info)

    def on_end(self, info: RequestInfo, outcome: Outcome) -> None:
        with self._cond:
            self.ended.append((info, outcome))
            self._cond.notify_all()

    def on_open(self, info: ConnectionInfo) -> None:
        with self._cond:
            self.opened.append(info)

    def on_close(self, info: ConnectionInfo, error: BaseException | None) -> None:
        with self._cond:
            self.closed.append((info, error))
            self._cond.notify_all()

    def interceptors(self) -> Interceptors:
        return Interceptors(connection=[self], requests=[self], clock=itertools.count().__next__)

    def wait_ended(self, n: int) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.ended) >= n, WAIT), self.ended

    def wait_closed(self) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.closed, WAIT)

    def ends(self) -> collections.Counter[End]:
        return collections.Counter((i.model, o.kind, o.error) for i, o in self.ended)

    def end_of(self, model: str, kind: str) -> RequestInfo:
        (info,) = [i for i, o in self.ended if i.model == model and o.kind == kind]
        return info


class Handler:
    def request_response(self, request: Request) -> Payload:
        if request.data == b"boom":
            raise ValueError("boom")
        if request.data == b"no":
            raise RSocketError(ErrorCode.REJECTED, "not now")
        return Payload(request.data.upper())

    def request_stream(self, request: Request) -> Iterator[bytes]:
        return (b"%04d" % i for i in range(int(request.data)))

    def request_channel(self, request: Request, inbound: Iterator[Payload]) -> Iterator[bytes]:
        yield request.data
        for item in inbound:
            yield item.data

    def fire_and_forget(self, request: Request) -> None:
        pass

    def metadata_push(self, metadata: bytes) -> None:
        pass


def _sync_workload(client: Any) -> None:
    assert client.request_response(b"ok", timeout=WAIT) == Payload(b"OK")
    with pytest.raises(RSocketError, match="boom"):
        client.request_response(b"boom", timeout=WAIT)
    with pytest.raises(RSocketError, match="not now"):
        client.request_response(b"no", timeout=WAIT)
    assert len(list(client.request_stream(b"3", timeout=WAIT))) == 3
    with client.request_stream(b"1000000", prefetch=2, timeout=WAIT) as items:
        next(items)
    assert len(list(client.request_channel([b"a", b"b"], timeout=WAIT))) == 2
    client.fire_and_forget(b"f")
    client.metadata_push(b"m")
    answers = client.request_response_many([b"x", b"y"], timeout=WAIT)
    assert [p.data for p in answers] == [b"X", b"Y"]


async def _async_workload(client: Any) -> None:
    assert await client.request_response(b"ok", timeout=WAIT) == Payload(b"OK")
    with pytest.raises(RSocketError, match="boom"):
        await client.request_response(b"boom", timeout=WAIT)
    with pytest.raises(RSocketError, match="not now"):
        await client.request_response(b"no", timeout=WAIT)
    assert len([p async for p in client.request_stream(b"3", timeout=WAIT)]) == 3
    stream = client.request_stream(b"1000000", prefetch=2, timeout=WAIT)
    await anext(stream)
    await stream.aclose()
    assert len([p async for p in client.request_channel([b"a", b"b"], timeout=WAIT)]) == 2
    await client.fire_and_forget(b"f")
    await client.metadata_push(b"m")
    for data in (b"x", b"y"):
        await client.request_response(data, timeout=WAIT)


def _expected(responder: bool) -> collections.Counter[End]:
    return collections.Counter({
        ("request_response", "complete", None): 3,
        ("request_response", "error", "ValueError" if responder else "APPLICATION_ERROR"): 1,
        ("request_response", "reject", "REJECTED"): 1,
        ("request_stream", "complete", None): 1,
        ("request_stream", "cancel", None): 1,
        ("request_channel", "complete", None): 1,
        ("fire_and_forget", "complete", None): 1,
        ("metadata_push", "complete", None): 1,
    })


def _check(client: Recorder, server: Recorder) -> None:
    client.wait_ended(10)
    server.wait_ended(10)
    assert client.ends() == _expected(responder=False)
    assert server.ends() == _expected(responder=True)
    assert {i.side for i in client.started} == {"requester"}
    assert {i.side for i in server.started} == {"responder"}
    assert len(client.started) == len(server.started) == 10
    # The same request seen from both sides: its stream, its bytes each way.
    ok_c = client.end_of("request_stream", "complete")
    ok_s = server.end_of("request_stream", "complete")
    assert ok_c.stream_id == ok_s.stream_id != 0
    assert (ok_c.items_in, ok_c.bytes_in, ok_c.items_out, ok_c.bytes_out) == (3, 12, 1, 1)
    assert (ok_s.items_in, ok_s.bytes_in, ok_s.items_out, ok_s.bytes_out) == (1, 1, 3, 12)
    ch_c = client.end_of("request_channel", "complete")
    ch_s = server.end_of("request_channel", "complete")
    assert (ch_c.items_out, ch_c.bytes_out, ch_c.items_in, ch_c.bytes_in) == (2, 2, 2, 2)
    assert (ch_s.items_in, ch_s.bytes_in, ch_s.items_out, ch_s.bytes_out) == (2, 2, 2, 2)
    for info, _ in client.ended + server.ended:
        assert info.route is None  # no composite metadata here
        assert info.ended is not None and info.duration is not None and info.duration > 0


def _check_connections(client: Recorder, server: Recorder) -> None:
    client.wait_closed()
    server.wait_closed()
    assert [(i.side, e) for i, e in client.closed] == [("client", None)]
    assert [(i.side, e) for i, e in server.closed] == [("server", None)]
    assert [i.side for i in client.opened] == ["client"]
    assert [i.side for i in server.opened] == ["server"]
    assert client.opened[0].peer and server.opened[0].peer


#: The workloads push raw metadata bytes: declared as such (connect's
#: default is composite metadata, which refuses bytes that are not).
RAW = {"metadata_mime_type": "application/octet-stream"}


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_interceptors_see_every_model_and_outcome_on_both_sides(loop: str) -> None:
    c, s = Recorder(), Recorder()
    with serve("tcp://127.0.0.1:0", Handler(), loop=loop, interceptors=s.interceptors()) as server:
        with connect(server.url, loop=loop, interceptors=c.interceptors(), **RAW) as client:
            _sync_workload(client)
            _check(c, s)
        _check_connections(c, s)


def test_interceptors_see_every_model_and_outcome_on_both_sides_under_asyncio() -> None:
    c, s = Recorder(), Recorder()

    async def main() -> None:
        async with aio.serve(
            "tcp://127.0.0.1:0", Handler(), interceptors=s.interceptors()
        ) as server, aio.connect(server.url, interceptors=c.interceptors(), **RAW) as client:
            await _async_workload(client)
            await asyncio.to_thread(_check, c, s)
        await asyncio.to_thread(_check_connections, c, s)

    asyncio.run(main())


MANY = [b"m%d" % i for i in range(3000)]


def _check_many(client: Recorder, server: Recorder) -> None:
    """Each of ``MANY`` seen as a request of its own on both sides (plain
    bytes are framed from the bytes on the requester: still observed)."""
    client.wait_ended(len(MANY))
    server.wait_ended(len(MANY))
    for side in (client, server):
        assert side.ends() == {("fire_and_forget", "complete", None): len(MANY)}
        assert len(side.started) == len(MANY)


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_interceptors_see_each_fire_and_forget_of_a_many_call_of_plain_bytes(loop: str) -> None:
    c, s = Recorder(), Recorder()
    with (
        serve("tcp://127.0.0.1:0", Handler(), loop=loop, interceptors=s.interceptors()) as server,
        connect(server.url, loop=loop, interceptors=c.interceptors(), **RAW) as client,
    ):
        assert client.fire_and_forget_many(MANY, timeout=WAIT) == len(MANY)
        _check_many(c, s)


def test_interceptors_see_each_fire_and_forget_of_a_many_call_of_plain_bytes_asyncio() -> None:
    c, s = Recorder(), Recorder()

    async def main() -> None:
        async with aio.serve(
            "tcp://127.0.0.1:0", Handler(), interceptors=s.interceptors()
        ) as server, aio.connect(server.url, interceptors=c.interceptors(), **RAW) as client:
            assert await client.fire_and_forget_many(MANY) == len(MANY)
            await asyncio.to_thread(_check_many, c, s)

    asyncio.run(main())


class OnlyResponse:
    def request_response(self, request: Request) -> bytes:
        return b"fine"


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_interceptors_a_model_without_a_handler_ends_rejected_on_both_sides(loop: str) -> None:
    c, s = Recorder(), Recorder()
    with serve("tcp://127.0.0.1:0", OnlyResponse(), loop=loop,
               interceptors=s.interceptors()) as server, connect(
        server.url, loop=loop, interceptors=c.interceptors()
    ) as client:
        with pytest.raises(RSocketError, match="no handler for request_stream"):
            list(client.request_stream(b"", timeout=WAIT))
        client.fire_and_forget(b"dropped")
        c.wait_ended(2)
        s.wait_ended(2)
    assert c.ends() == collections.Counter({
        ("request_stream", "reject", "REJECTED"): 1, ("fire_and_forget", "complete", None): 1
    })
    # The responder dropped the fire-and-forget: no handler, so REJECTED (never sent).
    assert s.ends() == collections.Counter({
        ("request_stream", "reject", "REJECTED"): 1, ("fire_and_forget", "reject", "REJECTED"): 1
    })


def test_interceptors_see_the_route_of_composite_metadata() -> None:
    router = Router()

    @router.response("users.{id}.get")
    def get(request: RoutedRequest) -> bytes:
        return b"user"

    c, s = Recorder(), Recorder()
    with serve("tcp://127.0.0.1:0", router, interceptors=s.interceptors()) as server, connect(
        server.url, metadata_mime_type=COMPOSITE_METADATA, interceptors=c.interceptors()
    ) as client:
        client.route("users.{id}.get", 7).request_response(b"", timeout=WAIT)
        c.wait_ended(1)
        s.wait_ended(1)
    assert [i.route for i, _ in c.ended] == [i.route for i, _ in s.ended] == ["users.7.get"]


class Raising:
    """Fails in every callback: the connection must not notice."""

    calls = 0

    def _fail(self, *args: object) -> None:
        Raising.calls += 1
        raise RuntimeError("interceptor bug")

    on_start = on_end = on_open = on_close = _fail


def test_interceptors_one_that_raises_breaks_nothing_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    bad, good = Raising(), Recorder()
    both = Interceptors(connection=[bad, good], requests=[bad, good])
    with serve("tcp://127.0.0.1:0", Handler(), interceptors=both) as server, connect(
        server.url, interceptors=both
    ) as client:
        for _ in range(3):
            assert client.request_response(b"ok", timeout=WAIT) == Payload(b"OK")
        assert len(list(client.request_stream(b"5", timeout=WAIT))) == 5
        good.wait_ended(8)  # 4 requests, each seen by both sides
    good.wait_closed()
    assert Raising.calls >= 2 * 8 + 2  # every start and end, each connection's open
    errors = [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "interceptor" in errors[0].getMessage() and errors[0].exc_info is not None
    # The good interceptor behind it saw everything.
    assert collections.Counter(o.kind for _, o in good.ended) == {"complete": 8}


@pytest.mark.timeout(20)
def test_interceptors_a_lost_connection_is_an_error_close_and_fails_its_requests() -> None:
    """A scripted peer reads the SETUP and the request, then drops the
    socket without CONNECTION_CLOSE."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    got_request = threading.Event()

    def peer() -> None:
        sock, _ = listener.accept()
        with sock:
            seen = b""
            while b"zq-request" not in seen:  # the REQUEST_STREAM's data
                chunk = sock.recv(4096)
                if not chunk:
                    break
                seen += chunk
            got_request.set()

    thread = threading.Thread(target=peer)
    thread.start()
    c = Recorder()
    try:
        with connect(f"tcp://127.0.0.1:{port}", interceptors=c.interceptors()) as client:
            items = client.request_stream(b"zq-request", timeout=WAIT)
            assert got_request.wait(WAIT)
            with pytest.raises(ConnectionClosed):
                list(items)
            c.wait_closed()
    finally:
        thread.join(WAIT)
        listener.close()
    ((info, outcome),) = c.ended
    assert (info.model, outcome.kind, outcome.error) == ("request_stream", "error",
                                                         "ConnectionClosed")
    ((conn, error),) = c.closed
    assert conn.side == "client" and isinstance(error, ConnectionClosed)


def test_interceptors_none_installed_leaves_the_engine_undecorated() -> None:
    """No interceptors: not one entry point of the engine is replaced, so it
    runs exactly the code it ran before (the cost is nil, not small)."""
    plain = RSocketEngine.client(EngineOptions(), None)
    observed = RSocketEngine.client(EngineOptions(interceptors=Interceptors()), None)
    methods = {n for n in vars(RSocketEngine) if callable(getattr(RSocketEngine, n))}
    assert not methods & set(vars(plain))
    assert plain.takes_whole_reads and not observed.takes_whole_reads
    assert {"attach", "connection_lost", "begin_close"} <= set(vars(observed))
    assert plain.responder.conn is plain.conn


def test_interceptors_takes_lists_only() -> None:
    with pytest.raises(TypeError, match="takes a list"):
        Interceptors(requests=Recorder())  # type: ignore[arg-type]


def test_interceptors_refuses_one_without_its_methods_up_front() -> None:
    class StartOnly:
        def on_start(self, info: RequestInfo) -> None:
            pass

    with pytest.raises(TypeError, match="has no on_end"):
        Interceptors(requests=[StartOnly()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="has no on_open, on_close"):
        Interceptors(connection=[Recorder(), StartOnly()])  # type: ignore[list-item]


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_interceptors_count_a_channels_inbound_items_that_arrive_as_a_run(loop: str) -> None:
    """Many small channel items arrive several to a read: the core hands the
    responder a run of them at once (``PayloadRunReceived``); each counts."""
    c, s = Recorder(), Recorder()
    items = [b"%04d" % i for i in range(2000)]
    with (
        serve("tcp://127.0.0.1:0", Handler(), loop=loop, interceptors=s.interceptors()) as server,
        connect(server.url, loop=loop, interceptors=c.interceptors()) as client,
    ):
        got = list(client.request_channel(items, prefetch=512, timeout=WAIT))
        assert [p.data for p in got] == items  # echoed
        c.wait_ended(1)
        s.wait_ended(1)
        ch_c = c.end_of("request_channel", "complete")
        ch_s = s.end_of("request_channel", "complete")
    assert (ch_c.items_out, ch_c.bytes_out) == (len(items), 4 * len(items))
    assert (ch_s.items_in, ch_s.bytes_in) == (len(items), 4 * len(items))
    assert (ch_s.items_out, ch_c.items_in) == (len(got), len(got))


@pytest.mark.timeout(30)
def test_interceptors_a_request_cancelled_while_waiting_for_a_lease_ends_at_once() -> None:
    """The server leases one request: the second waits for a lease, times
    out and is cancelled before it ever reached the wire. It ends then, as a
    cancel (it ended only when the connection closed, as an error, and a
    span or an in-flight gauge stayed open until then)."""
    c = Recorder()
    with (
        serve("tcp://127.0.0.1:0", Handler(), lease=True, lease_requests=1,
              lease_ttl=600) as server,
        connect(server.url, lease=True, interceptors=c.interceptors()) as client,
    ):
        assert client.request_response(b"ok", timeout=WAIT) == Payload(b"OK")
        with pytest.raises(TimeoutError):
            client.request_response(b"waits", timeout=0.2)
        c.wait_ended(2)
        assert [o.kind for _, o in c.ended] == ["complete", "cancel"]
    c.wait_closed()
    assert len(c.ended) == 2  # the connection's end ends nothing twice


def test_interceptors_carry_the_callers_context_only_with_request_interceptors() -> None:
    """A request made on an application thread reaches ``on_start`` in that
    thread's contextvars (copied at the hand-over); without request
    interceptors the hand-over is the driver's own, untouched."""
    seen: list[str | None] = []

    class Reads(Recorder):
        def on_start(self, info: RequestInfo) -> None:
            seen.append(CALLER.get())
            super().on_start(info)

    with serve("tcp://127.0.0.1:0", Handler()) as server:
        with connect(server.url) as plain, connect(
            server.url, interceptors=Interceptors(connection=[Recorder()])
        ) as connection_only:
            for client in (plain, connection_only):
                assert type(client._thread).__name__ != "_CarryingContext"
        with connect(server.url, interceptors=Reads().interceptors()) as client:
            assert type(client._thread).__name__ == "_CarryingContext"
            token = CALLER.set("the caller's")
            try:
                client.request_response(b"ok", timeout=WAIT)
                assert len(list(client.request_stream(b"2", timeout=WAIT))) == 2
            finally:
                CALLER.reset(token)
    assert seen == ["the caller's", "the caller's"]


CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("CALLER", default=None)
