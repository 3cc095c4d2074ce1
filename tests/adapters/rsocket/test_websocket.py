"""RSocket over WebSocket end to end (``connect("ws://...")`` / ``serve("ws://...")``):
one frame per binary message, no length prefix (spec: Framing Protocol Usage),
on both driver loops, over ws:// and wss://, and what happens when a peer
breaks the mapping (text messages, bad frames, messages over the limit)."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConfig
from sansrs.adapters.rsocket.client import connect
from sansrs.adapters.rsocket.core import ConnectionState
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.engine import RSocketEngine
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.rsocket.server import Server, serve
from sansrs.adapters.rsocket.types import Payload
from sansrs.adapters.transport.urls import Endpoint, parse_url
from sansrs.adapters.transport.websocket import (
    HandshakeRequest,
    WebSocketHandshakeError,
    WebSocketOptions,
)
from sansrs.adapters.transport.websocket.handshake import open_websocket
from sansrs.adapters.transport.websocket.messages import (
    CloseCode,
    MessageKind,
    MessageReader,
    decode_close,
    encode_binary,
    encode_close,
    encode_text,
)
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    ErrorFrame,
    Framing,
    Role,
    SetupFrame,
    decode_frame,
)
from tests.adapters.transport.test_websocket import read_to_eof, send_all
from tests.adapters.transport.tls_certs import certs

#: Raw metadata bytes, declared as such (connect's default is composite).
RAW = "application/octet-stream"

WAIT = 10.0
URL = "ws://127.0.0.1:0/rsocket"


@pytest.fixture(params=["thread", "selector"])
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def demo_server(loop: str) -> Iterator[Server]:
    with serve(URL, handler_factory=DemoHandler, loop=loop) as server:
        yield server


def test_rsocket_every_interaction_model_over_ws(demo_server: Server, loop: str) -> None:
    assert demo_server.url.startswith("ws://127.0.0.1:") and demo_server.url.endswith("/rsocket")
    with connect(demo_server.url, loop=loop, metadata_mime_type=RAW) as c:
        assert c.request_response(b"hello", b"meta", timeout=WAIT) == Payload(b"hello", b"meta")
        for _ in range(3):
            c.fire_and_forget(b"fnf")
        c.metadata_push(b"pushed")
        assert c.request_response(b"fnf-count", timeout=WAIT) == Payload(b"3")
        assert c.request_response(b"mp-last", timeout=WAIT) == Payload(b"last=pushed")
        with pytest.raises(RSocketError) as info:
            c.request_response(b"error please", timeout=WAIT)
        assert info.value.error_code == ErrorCode.APPLICATION_ERROR
        request = json.dumps({"n": 1000, "size": 8})
        with c.request_stream(request, prefetch=32, timeout=WAIT) as items:
            got = [p.data for p in items]
        assert got == [str(i).zfill(8).encode() for i in range(1000)]
        outbound = [Payload(b"c%d" % i, b"m%d" % i) for i in range(100)]
        with c.request_channel(outbound, timeout=WAIT) as items:
            assert list(items) == outbound
        big = bytes(range(256)) * (5 * 1024 * 1024 // 256)
        assert c.request_response(big, b"big", timeout=WAIT) == Payload(big, b"big")


@pytest.mark.parametrize("size", [8, 1024])
def test_rsocket_stream_over_ws_goes_as_framed_runs_and_comes_as_spans(
    demo_server: Server, loop: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's items leave the server's core as WebSocket frames (FRAMED
    records, written as they are: a large output as the core's pieces, not
    joined) and reach the client's core as the frames that arrived
    (BINARY_SPAN records cut where they lie): every item once, in order,
    and the paths taken."""
    from sansrs.adapters.transport.websocket.transport import WebSocketTransport

    taken = {"framed": 0, "pieces": 0, "spans": 0}
    send_framed = WebSocketTransport._send_framed
    send_frames = WebSocketTransport._send_frames
    receive_span = Connection.receive_span

    def counting_send(self: WebSocketTransport, data: bytes, start: int) -> int:
        taken["framed"] += 1
        return send_framed(self, data, start)

    def counting_pieces(self: WebSocketTransport, frames: list[bytes], length: int) -> int:
        taken["pieces"] += 1
        return send_frames(self, frames, length)

    def counting_receive(self: Connection, *args: Any, **kwargs: Any) -> None:
        taken["spans"] += 1
        receive_span(self, *args, **kwargs)

    monkeypatch.setattr(WebSocketTransport, "_send_framed", counting_send)
    monkeypatch.setattr(WebSocketTransport, "_send_frames", counting_pieces)
    monkeypatch.setattr(Connection, "receive_span", counting_receive)
    with connect(demo_server.url, loop=loop) as c:
        request = json.dumps({"n": 20_000, "size": size})
        with c.request_stream(request, prefetch=2048, timeout=WAIT) as items:
            got = [p.data for p in items]
    assert got == [str(i).zfill(size).encode() for i in range(20_000)]
    assert taken["framed"] + taken["pieces"] > 0 and taken["spans"] > 0, taken
    if size == 1024:  # (a turn's output above GATHER_AT: the pieces path)
        assert taken["pieces"] > 0, taken


def test_rsocket_fragmented_payloads_over_ws(demo_server: Server, loop: str) -> None:
    with connect(demo_server.url, loop=loop, fragment_size=1024, metadata_mime_type=RAW) as c:
        data = bytes(range(256)) * 64  # 16 KiB: 17 fragments, one message each
        assert c.request_response(data, b"m" * 3000, timeout=WAIT) == Payload(data, b"m" * 3000)


def test_rsocket_requests_pipelined_behind_setup_over_ws(demo_server: Server, loop: str) -> None:
    """Frames right behind SETUP: the server accepts SETUP before the rest
    (the core holds only ``max_early_frames`` while SETUP awaits acceptance)."""
    with connect(demo_server.url, loop=loop) as c:
        for _ in range(5000):
            c.fire_and_forget(b"f")
        assert c.request_response(b"fnf-count", timeout=WAIT) == Payload(b"5000")


def test_many_ws_connections_on_one_selector_loop() -> None:
    """20 clients streaming at once from a server whose one selector thread
    drives every WebSocket connection (upgrades included)."""
    with serve(URL, handler_factory=DemoHandler, loop="selector") as server:
        counts: list[int] = []
        errors: list[BaseException] = []

        def one() -> None:
            try:
                with connect(server.url) as c, c.request_stream(
                    json.dumps({"n": 500, "size": 16}), prefetch=64, timeout=WAIT
                ) as items:
                    counts.append(sum(1 for _ in items))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 3)
        assert not errors and counts == [500] * 20


def test_rsocket_server_initiated_request_over_ws() -> None:
    class Answers:
        def request_response(self, request: object) -> bytes:
            return b"from the client"

    with serve(URL, handler_factory=DemoHandler) as server, connect(
        server.url, handler=Answers()
    ) as c:
        assert c.request_response(b"hi", timeout=WAIT) == Payload(b"hi")
        peer = server.peers[0]
        assert peer.request_response(b"?", timeout=WAIT) == Payload(b"from the client")


def test_rsocket_over_wss_with_checked_certificates(loop: str) -> None:
    cert = certs()
    url = "wss://127.0.0.1:0/rsocket"
    with serve(
        url, handler_factory=DemoHandler, ssl_context=cert.server_context(), loop=loop
    ) as server:
        assert server.url.startswith("wss://")
        with connect(server.url, ssl_context=cert.client_context(), loop=loop) as c:
            assert c.request_response(b"secure", timeout=WAIT) == Payload(b"secure")
            with c.request_stream(json.dumps({"n": 300, "size": 4}), prefetch=16) as items:
                assert sum(1 for _ in items) == 300
        with pytest.raises(ssl.SSLCertVerificationError):
            connect(server.url, ssl_context=cert.untrusting_client_context())


def test_rsocket_authorization_header_and_refusal() -> None:
    def authorize(request: HandshakeRequest) -> int | None:
        return None if request.header("Authorization") == "Bearer t0ken" else 401

    options = WebSocketOptions(authorize=authorize)
    with serve(URL, handler_factory=DemoHandler, websocket=options) as server:
        with pytest.raises(WebSocketHandshakeError) as info:
            connect(server.url)
        assert info.value.status == 401
        good = WebSocketOptions(extra_headers=(("Authorization", "Bearer t0ken"),))
        with connect(server.url, websocket=good) as c:
            assert c.request_response(b"in", timeout=WAIT) == Payload(b"in")


def test_rsocket_wrong_path_is_a_404_handshake_error(demo_server: Server) -> None:
    wrong = demo_server.url.replace("/rsocket", "/other")
    with pytest.raises(WebSocketHandshakeError) as info:
        connect(wrong)
    assert info.value.status == 404


def test_rsocket_frame_bigger_than_max_message_size_closes_with_1009() -> None:
    options = WebSocketOptions(max_message_size=64 * 1024)
    with serve(URL, handler_factory=DemoHandler, websocket=options) as server:
        with connect(server.url) as c, pytest.raises(ConnectionClosed, match="1009"):
            c.request_response(b"x" * 100_000, timeout=WAIT)
        # Fragmenting keeps every frame (message) under the limit.
        with connect(server.url, fragment_size=32 * 1024) as c:
            assert c.request_response(b"x" * 100_000, timeout=WAIT) == Payload(b"x" * 100_000)


# -- the engine's message mode, without sockets ---------------------------------------


def _records(data: bytes) -> list[tuple[int, bytes]]:
    return MessageReader().feed(data)


def test_rsocket_engine_sends_one_unprefixed_frame_per_binary_record() -> None:
    """Spec: Framing Protocol Usage: no frame length on a message transport."""
    ws = RSocketEngine.client(EngineOptions(), None, message_framed=True)
    records = _records(ws.data_to_send())
    assert [k for k, _ in records] == [MessageKind.BINARY]
    assert isinstance(decode_frame(records[0][1]), SetupFrame)
    prefixed = RSocketEngine.client(EngineOptions(), None).data_to_send()  # tcp
    assert prefixed == len(records[0][1]).to_bytes(3, "big") + records[0][1]


def test_rsocket_engine_message_mode_output_is_one_run_of_the_tcp_bytes() -> None:
    """The frames queued at once (here SETUP and a batch of 1 KiB
    fire-and-forgets: many pieces in the core) go out as one BINARY_RUN
    record whose run is exactly what the engine writes over TCP."""
    ws = RSocketEngine.client(EngineOptions(), None, message_framed=True)
    tcp = RSocketEngine.client(EngineOptions(), None)
    items = [bytes([i]) * 1024 for i in range(40)]
    for engine in (ws, tcp):
        engine.conn.request_fnf_many(items)
    out = ws.data_to_send()
    expected = tcp.data_to_send()
    assert out[:1] == bytes((MessageKind.BINARY_RUN,))
    assert MessageReader(keep_runs=True).feed(out) == [(MessageKind.BINARY_RUN, expected)]
    assert ws.data_to_send() == b""


def _streaming_server() -> tuple[RSocketEngine, int]:
    """A WebSocket server engine past SETUP with a stream open, all credit given."""
    client = Connection(Role.CLIENT)
    server = RSocketEngine.server(EngineOptions(), message_framed=True)
    client.setup()
    server.conn.receive_data(client.data_to_send())
    server.conn.accept_setup()
    client.request_stream(b"q", initial_n=0x7FFFFFFF)
    server.conn.receive_data(client.data_to_send())
    return server, server.conn.events()[-1].stream_id  # type: ignore[attr-defined]


def test_rsocket_engine_message_mode_gives_a_servers_runs_as_pieces_of_one_framed_record() -> None:
    """A WebSocket server's output made of its streams' runs alone leaves
    as the core's pieces behind one FRAMED record head (the transport
    writes them as they are: not joined); with anything else in it, as one
    piece, its records joined. Either way the bytes ``data_to_send`` gives."""
    items = [bytes([i % 251]) * 1024 for i in range(200)]
    for extra in (False, True):
        pieces_engine, sid = _streaming_server()
        plain_engine, _ = _streaming_server()
        for engine in (pieces_engine, plain_engine):
            engine.conn.send_payloads(sid, items[:100])
            if extra:
                engine.conn.send_error(sid, ErrorCode.APPLICATION_ERROR, "stop")
            else:
                engine.conn.send_payloads(sid, items[100:])
        assert pieces_engine.pieces_to_send(1 << 30) is None  # below ``at_least``
        pieces = pieces_engine.pieces_to_send(1024)
        expected = plain_engine.data_to_send()
        assert pieces is not None and b"".join(pieces) == expected
        if extra:
            assert len(pieces) == 1
        else:
            head = bytes((MessageKind.FRAMED,)) + (len(expected) - 5).to_bytes(4, "big")
            assert pieces[0] == head
            assert len(pieces) > 2
        assert pieces_engine.data_to_send() == b""
    client = RSocketEngine.client(EngineOptions(), None, message_framed=True)
    client.conn.request_fnf_many(items)
    assert client.pieces_to_send(1024) is None  # (a client's frames are masked by the transport)


def test_rsocket_engine_message_mode_accepts_setup_and_ends_on_close_record() -> None:
    client = RSocketEngine.client(EngineOptions(), None, message_framed=True)
    server = RSocketEngine.server(EngineOptions(), message_framed=True)
    server.receive_data(client.data_to_send(), 0.0)
    assert server.conn.state is ConnectionState.ESTABLISHED
    assert not server.wants_close()
    server.receive_data(encode_close(1001, "bye"), 0.0)
    assert server.wants_close()
    assert "WebSocket 1001 (bye)" in str(server.close_reason())


def test_rsocket_engine_message_mode_refuses_text_with_error_and_1003() -> None:
    client = RSocketEngine.client(EngineOptions(), None, message_framed=True)
    server = RSocketEngine.server(EngineOptions(), message_framed=True)
    server.receive_data(client.data_to_send() + encode_text("hi") + encode_binary(b"x"), 0.0)
    assert server.wants_close()
    records = _records(server.data_to_send())
    assert [k for k, _ in records] == [MessageKind.BINARY, MessageKind.CLOSE]
    error = decode_frame(records[0][1])
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.CONNECTION_ERROR
    assert decode_close(records[1][1])[0] == CloseCode.UNSUPPORTED_DATA
    assert server.data_to_send() == b""  # the CLOSE record goes out once


def test_rsocket_engine_message_mode_end_of_stream_is_connection_lost() -> None:
    server = RSocketEngine.server(EngineOptions(), message_framed=True)
    server.receive_data(b"", 0.0)
    assert server.wants_close()
    assert "connection lost" in str(server.close_reason())


# -- a peer that breaks the WebSocket mapping ---------------------------------------


def _setup_frame() -> bytes:
    conn = Connection(Role.CLIENT, ConnectionConfig(framing=Framing.MESSAGES))
    conn.setup()
    (frame,) = conn.frames_to_send()
    return frame


def _ending(server: Server, records: list[bytes]) -> list[tuple[int, bytes]]:
    """Send ``records`` on a bare WebSocket; what comes back until the end."""
    endpoint = Endpoint("ws", "127.0.0.1", server.endpoint.port, "/rsocket")
    t = open_websocket(endpoint, WAIT)
    send_all(t, b"".join(records))
    got = read_to_eof(t)
    t.close()
    return got


def test_rsocket_text_message_is_a_connection_error_and_close_1003(demo_server: Server) -> None:
    got = _ending(demo_server, [encode_binary(_setup_frame()), encode_text("{}")])
    kinds = [k for k, _ in got]
    assert kinds == [MessageKind.BINARY, MessageKind.CLOSE]
    error = decode_frame(got[0][1])
    assert isinstance(error, ErrorFrame) and error.stream_id == 0
    assert error.error_code == ErrorCode.CONNECTION_ERROR
    assert b"text message" in error.data
    assert decode_close(got[1][1])[0] == CloseCode.UNSUPPORTED_DATA


def test_rsocket_text_message_before_setup_is_refused_too(demo_server: Server) -> None:
    got = _ending(demo_server, [encode_text("SETUP?")])
    assert [k for k, _ in got][-1] == MessageKind.CLOSE
    assert decode_close(got[-1][1])[0] == CloseCode.UNSUPPORTED_DATA


def test_rsocket_malformed_frame_is_an_error_frame_and_close_1002(demo_server: Server) -> None:
    got = _ending(demo_server, [encode_binary(_setup_frame()), encode_binary(b"\x00\x00")])
    assert [k for k, _ in got] == [MessageKind.BINARY, MessageKind.CLOSE]
    error = decode_frame(got[0][1])
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.CONNECTION_ERROR
    assert decode_close(got[1][1])[0] == CloseCode.PROTOCOL_ERROR


def test_rsocket_bad_first_frame_is_invalid_setup(demo_server: Server) -> None:
    """Spec: Connection Establishment: a server's first frame that is not a
    valid SETUP gets ERROR[INVALID_SETUP]; here a SETUP header without body."""
    got = _ending(demo_server, [encode_binary(b"\x00\x00\x00\x00\x04\x00")])
    assert [k for k, _ in got] == [MessageKind.BINARY, MessageKind.CLOSE]
    error = decode_frame(got[0][1])
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.INVALID_SETUP
    assert decode_close(got[1][1])[0] == CloseCode.PROTOCOL_ERROR


def test_rsocket_client_sees_the_close_code_of_a_vanishing_server() -> None:
    """The server's connection ends: the client's outstanding request fails
    with ConnectionClosed naming the WebSocket close."""
    release = threading.Event()

    class Slow:
        def request_response(self, request: object) -> bytes:
            release.wait(WAIT)
            return b"late"

    server = serve(URL, Slow())
    try:
        with connect(server.url) as c:
            done: list[BaseException] = []

            def ask() -> None:
                try:
                    c.request_response(b"x", timeout=WAIT)
                except BaseException as exc:  # recorded for the assertion below
                    done.append(exc)

            asker = threading.Thread(target=ask)
            asker.start()
            server.close(timeout=0.5, abort=True)
            release.set()
            asker.join(WAIT)
            assert done and isinstance(done[0], ConnectionClosed)
    finally:
        release.set()
        server.close()


def test_sansrs_command_speaks_ws() -> None:
    run = [sys.executable, "-m", "sansrs", "request"]
    with serve(URL, handler_factory=DemoHandler) as server:
        out = subprocess.run(
            [*run, server.url, "--rr", "hello"], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0 and out.stdout.strip() == "hello"
        wrong = server.url.replace("/rsocket", "/nope")
        out = subprocess.run(
            [*run, wrong, "--rr", "x"], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 3 and "HTTP 404" in out.stderr


def test_rsocket_keepalive_timeout_closes_the_websocket_with_1001() -> None:
    """A peer that upgrades and then never answers KEEPALIVE: past max
    lifetime the client ends the connection with Close 1001 (going away)."""
    closes: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as lsock:
        port = lsock.getsockname()[1]

        def silent_peer() -> None:
            conn, _ = lsock.accept()
            ws = WSConnection(ConnectionType.SERVER)
            with conn:
                conn.settimeout(WAIT)
                while True:
                    data = conn.recv(65536)
                    ws.receive_data(data or None)
                    for ev in ws.events():
                        if isinstance(ev, Request):
                            conn.sendall(ws.send(AcceptConnection()))
                        elif isinstance(ev, CloseConnection):
                            closes.append(ev.code)
                            return
                    if not data:
                        return

        peer = threading.Thread(target=silent_peer)
        peer.start()
        c = connect(f"ws://127.0.0.1:{port}/", keepalive_interval=0.05, max_lifetime=0.3)
        assert c.wait_closed(WAIT)
        with pytest.raises(ConnectionClosed, match="keepalive timeout"):
            c.request_response(b"x", timeout=WAIT)
        peer.join(WAIT)
    assert closes == [CloseCode.GOING_AWAY]


@pytest.mark.parametrize("partial", [False, True], ids=["silent", "half-request"])
def test_an_upgrade_that_never_completes_is_dropped(partial: bool) -> None:
    """A client that connects and never finishes its HTTP upgrade is aborted
    after ``LoopConfig.handshake_timeout`` (the transport is not ``handshaken``
    until the upgrade is done); other clients are unaffected."""
    loop = Loop(LoopConfig(handshake_timeout=0.2), name="ws-upgrade-timeout").start()
    try:
        with serve("ws://127.0.0.1:0/rs", handler_factory=DemoHandler, loop=loop) as server:
            port = parse_url(server.url).port
            stuck = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
            with stuck:
                if partial:
                    stuck.sendall(b"GET /rs HTTP/1.1\r\nHost: x\r\n")  # head never ends
                with connect(server.url, loop=loop) as client:
                    assert client.request_response(b"ok", timeout=WAIT) == Payload(b"ok")
                    with contextlib.suppress(ConnectionResetError):  # RST: also dropped
                        assert stuck.recv(10) == b""
                    assert client.request_response(b"still", timeout=WAIT) == Payload(b"still")
    finally:
        loop.stop(WAIT)
