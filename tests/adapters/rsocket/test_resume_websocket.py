"""Resumption over WebSocket (``ws://``, ``wss://``; one frame per binary
message): sessions survive links cut inside a message, right after one and
half-open (the fault proxy follows the WebSocket framing), on every driver;
a WebSocket Close ends only the transport unless it says the protocol
broke; and a scripted peer shows the positions count frame bytes without a
length prefix, as the spec and rsocket-java do (docs/resumption.md)."""

from __future__ import annotations

import asyncio
import selectors
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sansrs.adapters.drive.selector import Loop
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.rsocket.resume import (
    ResumableServer,
    ResumeOptions,
    SessionRegistry,
    connect_resumable,
    serve_resumable,
)
from sansrs.adapters.rsocket.resume import aio as resume_aio
from sansrs.adapters.rsocket.resume.server import new_server_engine
from sansrs.adapters.rsocket.types import Request
from sansrs.adapters.tools.faults import FaultProxy
from sansrs.adapters.transport.urls import Endpoint
from sansrs.adapters.transport.websocket.handshake import open_websocket
from sansrs.adapters.transport.websocket.messages import (
    MessageKind,
    MessageReader,
    encode_binary,
    encode_close,
)
from sansrs.adapters.transport.websocket.transport import WebSocketTransport

from sansrs.rsocket import (
    ErrorCode,
    ErrorFrame,
    PayloadFrame,
    RequestFnfFrame,
    RequestStreamFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    decode_frame,
    encode_frame,
)
from tests.adapters.rsocket.chaos_workload import (
    ChaosHandler,
    Progress,
    Sizes,
    run_async,
    run_sync,
)
from tests.adapters.transport.test_websocket import send_all
from tests.adapters.transport.tls_certs import certs

WAIT = 30.0
PATH = "/rsocket"
SETUP = {"keepalive_interval": 0.1, "max_lifetime": 1.0}
SIZES = Sizes(stream=4_000, channel=800, requests=150, fnf=800)
CUTS = 6


def client_options() -> ResumeOptions:
    return ResumeOptions(
        reconnect_initial=0.01, reconnect_max=0.1, reconnect_timeout=WAIT, resume_timeout=1.0
    )


def _through(proxy: FaultProxy, scheme: str = "ws") -> str:
    return f"{scheme}://127.0.0.1:{proxy.port}{PATH}"


def _workload_sync(
    server: ResumableServer,
    handler: ChaosHandler,
    url: str,
    done: Callable[[], object] | None = None,
    **kw: object,
) -> int:
    """The chaos workload on a client of ``url``; checks exactly once, in
    order; returns the client's resumes. ``done`` is called once the last
    answer is in, before the client closes."""
    progress = handler.progress
    client = connect_resumable(url, resume=client_options(), **SETUP, **kw)  # type: ignore[arg-type]
    try:
        results = run_sync(client, handler, SIZES, progress, WAIT)
        assert client.request_response(b"last", timeout=WAIT) is not None
        if done is not None:
            done()
    finally:
        client.close()
    results.check(SIZES)
    handler.check()
    assert client.loss is None
    assert server.registry.wait_empty(WAIT)
    return client.resumes


def _serve(url: str, **kw: object) -> tuple[ResumableServer, ChaosHandler]:
    handler = ChaosHandler(SIZES, Progress())
    server = serve_resumable(
        url, handler, resume=ResumeOptions(keep_detached=WAIT), **kw  # type: ignore[arg-type]
    )
    return server, handler


@pytest.mark.timeout(60)
@pytest.mark.parametrize("driver", ["thread", "selector", "asyncio"])
def test_rsocket_resume_ws_links_cut_inside_and_after_messages_exactly_once_in_order(
    driver: str, loops: tuple[Loop, Loop]
) -> None:
    """Every link is reset inside a WebSocket message (the peer holds half
    of it) or right after one (a clean boundary), by a proxy that follows
    the WebSocket framing: the stream, the channel both ways, the
    request-responses and the fire-and-forgets arrive exactly once, in
    order, and every cut is survived by resuming."""
    if driver == "asyncio":
        resumes, cuts = asyncio.run(_cut_messages_asyncio())
    else:
        server_loop, client_loop = loops if driver == "selector" else ("thread", "thread")
        server, handler = _serve(f"ws://127.0.0.1:0{PATH}", loop=server_loop)
        try:
            with FaultProxy(("127.0.0.1", server.endpoint.port), websocket=True) as proxy:
                proxy.cut_messages_at_random(20, 300, cuts=CUTS)
                resumes = _workload_sync(server, handler, _through(proxy), loop=client_loop)
                cuts = proxy.stats.cuts
        finally:
            server.close()
    assert cuts == CUTS, f"only {cuts} of {CUTS} cuts happened"
    assert resumes >= cuts


async def _cut_messages_asyncio() -> tuple[int, int]:
    handler = ChaosHandler(SIZES, Progress())
    server = await resume_aio.serve_resumable(
        f"ws://127.0.0.1:0{PATH}", handler, resume=ResumeOptions(keep_detached=WAIT)
    )
    try:
        with FaultProxy(("127.0.0.1", server.endpoint.port), websocket=True) as proxy:
            proxy.cut_messages_at_random(20, 300, cuts=CUTS)
            client = await resume_aio.connect_resumable(
                _through(proxy), resume=client_options(), **SETUP
            )
            try:
                results = await run_async(client, handler, SIZES, handler.progress, WAIT)
                assert await client.request_response(b"last", timeout=WAIT) is not None
            finally:
                await client.close()
            results.check(SIZES)
            handler.check()
            assert await asyncio.to_thread(server.registry.wait_empty, WAIT)
            return client.resumes, proxy.stats.cuts
    finally:
        await server.close()


@pytest.mark.timeout(60)
def test_rsocket_resume_ws_half_open_link_after_a_message_is_taken_over_by_the_resume() -> None:
    """The client's side is reset right after a message while the server's
    stays open and silent (a half-open link): the client resumes on a new
    WebSocket, the server lets the silent one go (the RESUME supersedes it)
    and nothing is lost or repeated."""
    server, handler = _serve(f"ws://127.0.0.1:0{PATH}")
    try:
        with FaultProxy(("127.0.0.1", server.endpoint.port), websocket=True) as proxy:
            proxy.cut_message("after", skip=200, half_open=True)
            resumes = _workload_sync(server, handler, _through(proxy))
            assert proxy.stats.cuts == 1
        assert resumes >= 1
        assert server.registry.stats.resumed >= 1
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_rsocket_resume_wss_survives_cuts_inside_tls_records() -> None:
    """wss://: the links are cut at random bytes (inside TLS records, so
    inside WebSocket messages); each reconnection is a new TLS handshake and
    upgrade, and the session goes on exactly once, in order."""
    c = certs()
    server, handler = _serve(f"wss://127.0.0.1:0{PATH}", ssl_context=c.server_context())
    try:
        with FaultProxy(("127.0.0.1", server.endpoint.port)) as proxy:
            proxy.cut_at_random(8_000, 60_000, cuts=4)
            # The cuts the workload met: a link cut while the client closes
            # (after its last answer) is not resumed, and need not be. A cut
            # can also end a reconnection before its RESUME_OK got through (a
            # new link carries a TLS handshake, the upgrade and the frames
            # sent again): the next one resumes for both, so resumes may be
            # fewer than cuts; the workload's exactly-once checks are the proof.
            met: list[int] = []
            resumes = _workload_sync(
                server,
                handler,
                _through(proxy, "wss"),
                lambda: met.append(proxy.stats.cuts),
                ssl_context=c.client_context(),
                server_hostname="localhost",
            )
        assert met[0] >= 1 and resumes >= 1
    finally:
        server.close()


# -- a scripted peer: the positions, and what a WebSocket Close means --------------


class ScriptedClient:
    """A bare WebSocket to the server; RSocket frames written by hand."""

    def __init__(self, port: int) -> None:
        self.t: WebSocketTransport = open_websocket(  # type: ignore[assignment]
            Endpoint("ws", "127.0.0.1", port, PATH), WAIT
        )
        self.reader = MessageReader()
        self.pending: list[tuple[int, bytes]] = []

    def send(self, *frames: object) -> None:
        send_all(self.t, b"".join(encode_binary(encode_frame(f)) for f in frames))  # type: ignore[arg-type]

    def frames(self, count: int) -> list[bytes]:
        """The next ``count`` binary messages (frames), in order."""
        deadline = time.monotonic() + WAIT
        with selectors.DefaultSelector() as sel:
            sel.register(self.t.fileno(), selectors.EVENT_READ)
            while sum(k == MessageKind.BINARY for k, _ in self.pending) < count:
                assert sel.select(max(0.0, deadline - time.monotonic())), "no frame in time"
                try:
                    data = self.t.recv()
                except BlockingIOError:
                    continue
                assert data, f"connection ended: {self.pending}"
                self.pending += self.reader.feed(data)
        out: list[bytes] = []
        while len(out) < count:
            kind, payload = self.pending.pop(0)
            if kind == MessageKind.BINARY:
                out.append(payload)
        return out


def _setup(token: bytes) -> SetupFrame:
    return SetupFrame(
        keepalive_interval=30_000,
        max_lifetime=60_000,
        metadata_mime_type="application/octet-stream",
        data_mime_type="application/octet-stream",
        resume_token=token,
    )


class Items:
    def __init__(self) -> None:
        self.fnf: list[bytes] = []

    def request_stream(self, request: Request) -> Iterator[bytes]:
        return (b"item-%d" % i for i in range(int(request.data)))

    def fire_and_forget(self, request: Request) -> None:
        self.fnf.append(request.data)


def test_rsocket_resume_ws_positions_count_frame_bytes_without_a_length_prefix() -> None:
    """Spec (Resuming Operation, Implied Position): positions count the
    bytes of the encoded frames without the frame length field; rsocket-java
    counts ``frame.readableBytes()`` of unprefixed frames on every
    transport. A hand-written client confirms two of five stream items in
    its RESUME: the server answers RESUME_OK with exactly the bytes of the
    frames it received from us, and sends again exactly items 3 to 5."""
    handler = Items()
    server = serve_resumable(f"ws://127.0.0.1:0{PATH}", handler)
    try:
        token = b"positions-token"
        first = ScriptedClient(server.endpoint.port)
        stream = RequestStreamFrame(stream_id=1, initial_request_n=5, data=b"5")
        fnf = RequestFnfFrame(stream_id=3, data=b"counted")
        first.send(_setup(token), stream, fnf)
        items = first.frames(5)
        decoded = [decode_frame(f) for f in items]
        assert all(isinstance(f, PayloadFrame) and f.stream_id == 1 for f in decoded)
        assert [f.data for f in decoded] == [b"item-%d" % i for i in range(5)]  # type: ignore[union-attr]
        first.t.abort()

        second = ScriptedClient(server.endpoint.port)
        confirmed = len(items[0]) + len(items[1])
        resume = ResumeFrame(
            resume_token=token,
            last_received_server_position=confirmed,
            first_available_client_position=0,
        )
        # Frames right behind the RESUME, in the same read: they are the
        # resumed session's input (handed over with the transport).
        pipelined = RequestFnfFrame(stream_id=5, data=b"pipelined")
        ask = RequestStreamFrame(stream_id=7, initial_request_n=1, data=b"1")
        second.send(resume, pipelined, ask)
        ok, *again, answered = second.frames(5)
        answer = decode_frame(ok)
        assert isinstance(answer, ResumeOkFrame)
        sent = len(encode_frame(stream)) + len(encode_frame(fnf))
        assert answer.last_received_client_position == sent  # no 3-byte prefixes counted
        assert again == items[2:]  # from the confirmed position on, byte for byte
        reply = decode_frame(answered)
        assert isinstance(reply, PayloadFrame) and reply.stream_id == 7
        assert handler.fnf == [b"counted", b"pipelined"]
        second.t.abort()
    finally:
        server.close()


@pytest.mark.parametrize(
    ("code", "resumable"),
    [(1000, True), (1001, True), (1011, True), (1002, False), (1009, False)],
)
def test_rsocket_resume_ws_close_ends_the_transport_unless_it_says_the_protocol_broke(
    code: int, resumable: bool
) -> None:
    """A WebSocket Close on a resumable session is a transport loss (a
    proxy's 1001, the 1011 of an aborted peer, a plain 1000 without
    ERROR[CONNECTION_CLOSE]): the session waits detached and resumes. A
    Close saying the protocol broke (1002, 1009, ...) ends the session:
    resuming would send the same bytes again."""
    detached = threading.Event()
    finished = threading.Event()

    def step(name: str) -> None:
        if name == "detached":
            detached.set()
        elif name == "finish":
            finished.set()

    server = serve_resumable(
        f"ws://127.0.0.1:0{PATH}", Items(), resume=ResumeOptions(on_step=step)
    )
    try:
        token = b"close-token-%d" % code
        first = ScriptedClient(server.endpoint.port)
        first.send(_setup(token), RequestFnfFrame(stream_id=1, data=b"x"))
        send_all(first.t, encode_close(code, "bye"))
        if not resumable:
            assert finished.wait(WAIT)
            assert server.registry.snapshot() == []
            first.t.abort()
            return
        assert detached.wait(WAIT)
        assert not finished.is_set()
        (state,) = server.registry.snapshot()
        assert state.phase == "detached"
        first.t.abort()
        second = ScriptedClient(server.endpoint.port)
        second.send(
            ResumeFrame(
                resume_token=token,
                last_received_server_position=0,
                first_available_client_position=0,
            )
        )
        (ok,) = second.frames(1)
        assert isinstance(decode_frame(ok), ResumeOkFrame)
        second.t.abort()
    finally:
        server.close()


def test_rsocket_resume_ws_session_the_server_no_longer_has_is_rejected_resume() -> None:
    """A RESUME over WebSocket for a session the server does not hold (it
    expired, or the server restarted) is answered ERROR[REJECTED_RESUME] as
    a binary message, then the WebSocket closes: the client's session ends
    with that reason instead of retrying."""
    server = serve_resumable(f"ws://127.0.0.1:0{PATH}", Items())
    try:
        peer = ScriptedClient(server.endpoint.port)
        peer.send(
            ResumeFrame(
                resume_token=b"forgotten",
                last_received_server_position=0,
                first_available_client_position=0,
            )
        )
        (frame,) = peer.frames(1)
        error = decode_frame(frame)
        assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_RESUME
        peer.t.abort()
    finally:
        server.close()


def test_rsocket_resume_ws_refusal_of_a_resume_is_framed_as_a_binary_message() -> None:
    """A RESUME refused by the session layer (superseded, hand-over timed
    out) is answered without the core: over WebSocket the ERROR frame goes
    out as a message of its own, never as length-prefixed bytes."""
    registry = SessionRegistry(ResumeOptions())
    engine = new_server_engine(EngineOptions(), ResumeOptions(), registry)
    engine._records = MessageReader(keep_runs=True)  # as drive_with sets it for a WebSocket
    engine.refuse_resume("superseded by a newer RESUME for this session")
    records = MessageReader().feed(engine.data_to_send())
    kinds = [kind for kind, _ in records]
    assert kinds[0] == MessageKind.BINARY
    error = decode_frame(records[0][1])
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_RESUME
