"""The WebSocket transport (adapters/websocket.py) and its message records
(adapters/ws_messages.py), on 127.0.0.1: handshake, messages both ways, text
and binary, fragmentation, ping/pong, size limits, close codes, failures.

Servers run the real driver (``ServerThread``) with a record-echoing engine;
clients are our transport driven by hand, or wsproto / raw sockets where a
test needs to misbehave.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sansrs.adapters.drive import ConnectionThread, ServerThread
from sansrs.adapters.transport import Transport, listen, open_transport
from sansrs.adapters.transport.tcp import TcpTransport
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
    RecordError,
    decode_close,
    encode_binaries,
    encode_binary,
    encode_close,
    encode_ping,
    encode_record,
    encode_run,
    encode_text,
)
from sansrs.adapters.transport.websocket.transport import (
    MAX_CONTROL_BACKLOG,
    MAX_REQUEST_HEAD,
    SEND_BATCH,
    WebSocketListener,
    WebSocketTransport,
)
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    Request,
    TextMessage,
)

WAIT = 10.0
Record = tuple[int, bytes]


# -- a record-echoing engine and a server around it -------------------------------


class EchoEngine:
    """Echoes TEXT and BINARY records; records everything it saw. Ends on CLOSE
    or end of stream; ``close_with`` makes it send that CLOSE record first."""

    def __init__(self) -> None:
        self.reader = MessageReader()
        self.seen: list[Record] = []
        self.out: list[bytes] = []
        self.done = False
        self.lost = threading.Event()
        self.eof = False

    def receive_data(self, data: bytes, now: float) -> None:
        if not data:
            self.eof = True
            self.done = True
            return
        for kind, payload in self.reader.feed(data):
            self.seen.append((kind, payload))
            if kind in (MessageKind.TEXT, MessageKind.BINARY):
                if payload == b"close-4001":
                    self.out.append(encode_close(4001, "asked to"))
                else:
                    self.out.append(encode_record(kind, payload))
            elif kind == MessageKind.CLOSE:
                self.done = True

    def pump(self) -> bool:
        return False

    def data_to_send(self) -> bytes:
        out = b"".join(self.out)
        self.out.clear()
        return out

    def next_deadline(self) -> float | None:
        return None

    def handle_timeout(self, now: float) -> None:
        pass

    def wants_close(self) -> bool:
        return self.done

    def close_reason(self) -> BaseException | None:
        return None

    def begin_close(self) -> None:
        pass

    def connection_lost(self, error: BaseException) -> None:
        self.lost.set()


class EchoServer:
    def __init__(self, url: str, options: WebSocketOptions | None = None) -> None:
        self.engines: list[EchoEngine] = []
        self.transports: list[Transport] = []
        self.accepted = threading.Condition()

        def make(transport: Transport) -> ConnectionThread:
            engine = EchoEngine()
            with self.accepted:
                self.engines.append(engine)
                self.transports.append(transport)
                self.accepted.notify_all()
            return ConnectionThread(transport, engine)

        self.server = ServerThread(listen(url, websocket=options), make)
        self.server.start()
        endpoint = self.server.listener.endpoint
        assert isinstance(endpoint, Endpoint)
        self.endpoint = endpoint

    def engine(self) -> EchoEngine:
        with self.accepted:
            assert self.accepted.wait_for(lambda: self.engines, WAIT)
            return self.engines[0]


@contextmanager
def echo_server(
    path: str = "/echo", options: WebSocketOptions | None = None
) -> Iterator[EchoServer]:
    server = EchoServer(f"ws://127.0.0.1:0{path}", options)
    try:
        yield server
    finally:
        server.server.close(timeout=WAIT)


# -- driving a client transport by hand --------------------------------------------


def _wait(fd: int, events: int, deadline: float) -> None:
    with selectors.DefaultSelector() as sel:
        sel.register(fd, events)
        remaining = deadline - time.monotonic()
        assert remaining > 0 and sel.select(remaining), "timed out waiting for the socket"


def send_all(t: WebSocketTransport, data: bytes) -> None:
    """Offer ``data`` the way a driver loop does until every byte is written."""
    deadline = time.monotonic() + WAIT
    out = bytearray(data)
    while out:
        sent = t.send(out)
        del out[:sent]
        if out:
            _wait(t.fileno(), selectors.EVENT_WRITE, deadline)


def read_records(t: WebSocketTransport, count: int) -> list[Record]:
    """Read until ``count`` records (or end of stream)."""
    deadline = time.monotonic() + WAIT
    reader = MessageReader()
    got: list[Record] = []
    while len(got) < count:
        _wait(t.fileno(), selectors.EVENT_READ, deadline)
        try:
            data = t.recv()
        except BlockingIOError:
            continue
        if not data:
            break
        got += reader.feed(data)
    return got


def read_to_eof(t: WebSocketTransport) -> list[Record]:
    deadline = time.monotonic() + WAIT
    reader = MessageReader()
    got: list[Record] = []
    while True:
        _wait(t.fileno(), selectors.EVENT_READ, deadline)
        try:
            data = t.recv()
        except BlockingIOError:
            continue
        except ConnectionResetError:
            return got
        if not data:
            return got
        got += reader.feed(data)


def client(server: EchoServer, path: str = "/echo", **options: object) -> WebSocketTransport:
    endpoint = Endpoint("ws", "127.0.0.1", server.endpoint.port, path)
    t = open_transport(endpoint, WAIT, websocket=WebSocketOptions(**options))  # type: ignore[arg-type]
    assert isinstance(t, WebSocketTransport)
    return t


# -- raw peers ----------------------------------------------------------------------


def raw_connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.settimeout(WAIT)
    return sock


def read_http_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


class RawClient:
    """A wsproto client on a blocking socket, for tests that need to send
    what our transport never would (fragments, pings, bad frames)."""

    def __init__(self, port: int, path: str = "/echo") -> None:
        self.sock = raw_connect(port)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.sock.sendall(self.ws.send(Request(host="127.0.0.1", target=path)))
        self.events: list[object] = []
        while not any(isinstance(e, AcceptConnection) for e in self.events):
            self._read()

    def _read(self) -> bool:
        data = self.sock.recv(65536)
        self.ws.receive_data(data or None)
        self.events += list(self.ws.events())
        return bool(data)

    def send(self, event: object) -> None:
        self.sock.sendall(self.ws.send(event))  # type: ignore[arg-type]

    def wait_for(self, kind: type, count: int = 1) -> list[object]:
        while sum(isinstance(e, kind) for e in self.events) < count:
            if not self._read():
                break
        return [e for e in self.events if isinstance(e, kind)]


# -- URLs -----------------------------------------------------------------------


def test_ws_urls_carry_path_query_and_default_ports() -> None:
    assert parse_url("ws://127.0.0.1:9000/rsocket") == Endpoint("ws", "127.0.0.1", 9000, "/rsocket")
    assert parse_url("ws://example.com/a?token=x").path == "/a?token=x"
    assert parse_url("ws://example.com").port == 80
    assert parse_url("wss://example.com").port == 443
    assert parse_url("WSS://[::1]:1").url == "wss://[::1]:1/"
    with pytest.raises(ValueError, match="fragment"):
        parse_url("ws://127.0.0.1:1/x#frag")


def test_websocket_options_only_for_websocket_urls() -> None:
    with pytest.raises(ValueError, match="websocket options"):
        open_transport("tcp://127.0.0.1:1", 1.0, websocket=WebSocketOptions())
    with pytest.raises(ValueError, match="websocket options"):
        listen("tcp://127.0.0.1:0", websocket=WebSocketOptions())
    with pytest.raises(ValueError, match="ssl_context"):
        WebSocketListener(parse_url("wss://127.0.0.1:0/"))
    with pytest.raises(ValueError, match="max_message_size"):
        WebSocketOptions(max_message_size=0)


# -- records ----------------------------------------------------------------------


def test_records_round_trip_in_any_chunking() -> None:
    data = (
        encode_binary(b"\x00\x01")
        + encode_text("h\u00e9llo")
        + encode_binaries([b"a", b"", b"c" * 70000])
        + encode_close(1009, "too big")
        + encode_ping(b"p")
    )
    expected = [
        (2, b"\x00\x01"),
        (1, "h\u00e9llo".encode()),
        (2, b"a"),
        (2, b""),
        (2, b"c" * 70000),
        (8, b"\x03\xf1too big"),
        (9, b"p"),
    ]
    assert MessageReader().feed(data) == expected
    for step in (1, 3, 4096):
        reader = MessageReader()
        got: list[Record] = []
        for i in range(0, len(data), step):
            got += reader.feed(data[i : i + step])
        assert got == expected
        assert reader.pending == 0


def test_runs_are_kept_whole_in_any_chunking_when_asked() -> None:
    run = _run_of([b"a" * 5, b"bc"])
    data = encode_run(run) + encode_binary(b"x") + encode_run(run)
    assert MessageReader().feed(data)[:3] == [(2, b"a" * 5), (2, b"bc"), (2, b"x")]
    assert MessageReader(keep_runs=True).feed(encode_run(run)) == [(0x12, run)]  # one read, one run
    for step in (1, 3, 7, len(data)):
        reader = MessageReader(keep_runs=True)
        got: list[Record] = []
        for i in range(0, len(data), step):
            got += reader.feed(data[i : i + step])
        assert got == [(0x12, run), (2, b"x"), (0x12, run)]
        assert reader.pending == 0


def test_close_records_decode_and_truncate_reasons() -> None:
    assert decode_close(MessageReader().feed(encode_close(4000, "x"))[0][1]) == (4000, "x")
    assert decode_close(b"") == (CloseCode.NO_STATUS, "")
    long_reason = "\u00e9" * 100  # 200 bytes of UTF-8
    payload = MessageReader().feed(encode_close(1000, long_reason))[0][1]
    assert len(payload) <= 125
    assert decode_close(payload)[1] == "\u00e9" * 61  # cut at a character boundary
    with pytest.raises(ValueError):
        encode_close(999)
    with pytest.raises(ValueError):
        encode_ping(b"x" * 126)


def test_unknown_record_kind_is_an_error() -> None:
    with pytest.raises(RecordError):
        MessageReader().feed(b"\x07\x00\x00\x00\x00")


# -- messages -------------------------------------------------------------------


def test_binary_and_text_messages_echo_through_the_driver() -> None:
    with echo_server() as server:
        t = client(server)
        assert t.message_framed and t.subprotocol is None
        big = bytes(range(256)) * 4096  # 1 MiB
        send_all(t, encode_binary(b"one") + encode_text("two \u2713") + encode_binary(big))
        got = read_records(t, 3)
        assert got == [(2, b"one"), (1, "two \u2713".encode()), (2, big)]
        t.shutdown_write()
        records = read_to_eof(t)
        assert records == [(8, b"\x03\xe8")]  # the server answered our Close 1000
        engine = server.engine()
        assert engine.lost.wait(WAIT)
        assert engine.seen[-1] == (8, b"\x03\xe8")
        t.close()


def _socket_options(sock: socket.socket) -> tuple[int, ...]:
    return (
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        int(sock.getblocking()),
    )


def test_websocket_sockets_have_the_options_of_tcp_ones_after_the_upgrade() -> None:
    # Both ends of ws:// run on the TCP transport's sockets (TCP_NODELAY,
    # its buffers, non-blocking), the upgrade changing none of it: a ws://
    # round trip waits on nothing a tcp:// one does not.
    tcp_listener = listen("tcp://127.0.0.1:0")
    plain = open_transport(tcp_listener.endpoint, WAIT)
    try:
        assert isinstance(plain, TcpTransport)
        expected = _socket_options(plain.sock)
        assert expected[0] and not expected[3]
        with echo_server() as server:
            t = client(server)
            send_all(t, encode_binary(b"upgraded"))
            assert read_records(t, 1) == [(2, b"upgraded")]
            server.engine()
            (accepted,) = server.transports
            for transport in (t, accepted):
                assert isinstance(transport, WebSocketTransport)
                stream = transport._stream
                assert isinstance(stream, TcpTransport)
                assert _socket_options(stream.sock) == expected
            t.close()
    finally:
        plain.close()
        tcp_listener.close()


def test_many_small_messages_in_order() -> None:
    with echo_server() as server:
        t = client(server)
        messages = [b"%d" % i for i in range(5000)]
        send_all(t, encode_binaries(messages))
        assert [p for _, p in read_records(t, 5000)] == messages
        t.close()


def _reader_held_back(lsock: socket.socket, result: list[bytes], release: threading.Event) -> None:
    """A wsproto server that accepts the upgrade, then reads nothing until
    ``release``; the binary messages it gets go to ``result``."""
    conn, _ = lsock.accept()
    ws = WSConnection(ConnectionType.SERVER)
    part = bytearray()
    with conn:
        accepted = False
        while True:
            if accepted:
                release.wait(WAIT)
            data = conn.recv(1 << 20)
            ws.receive_data(data or None)
            for ev in ws.events():
                if isinstance(ev, Request):
                    conn.sendall(ws.send(AcceptConnection()))
                    accepted = True
                elif isinstance(ev, BytesMessage):
                    part += ev.data
                    if ev.message_finished:
                        result.append(bytes(part))
                        part.clear()
                elif isinstance(ev, CloseConnection):
                    conn.sendall(ws.send(ev.response()))
                    return
            if not data:
                return


@contextmanager
def _held_back_peer() -> Iterator[tuple[WebSocketTransport, list[bytes], threading.Event]]:
    """A client transport to :func:`_reader_held_back`: (transport, the
    messages the peer got, the event that lets it read). On exit the
    client ends the connection and the peer has read everything."""
    with socket.create_server(("127.0.0.1", 0)) as lsock:
        port = lsock.getsockname()[1]
        result: list[bytes] = []
        release = threading.Event()
        thread = threading.Thread(target=_reader_held_back, args=(lsock, result, release))
        thread.start()
        t = open_websocket(Endpoint("ws", "127.0.0.1", port, "/"), WAIT)
        try:
            yield t, result, release
        finally:
            release.set()
            t.shutdown_write()
            thread.join(WAIT)
            t.close()


def test_send_acknowledges_only_what_reached_the_socket() -> None:
    """A peer that does not read: ``send`` takes what the socket takes, the
    driver offers the rest again, and every message arrives once, in order."""
    with _held_back_peer() as (t, result, release):
        messages = [bytes([i % 251]) * 65536 for i in range(400)]  # 25 MiB, beyond any buffer
        out = bytearray(encode_binaries(messages))
        total = len(out)
        while sent := t.send(out):
            del out[:sent]
            assert t.buffered <= SEND_BATCH + 65536 + 14  # bounded, whatever is offered
        assert 0 < len(out) < total  # the socket filled up: part acknowledged, part not
        assert t.send(out) == 0  # the unacknowledged part is offered again: still no room
        assert 0 < t.buffered <= SEND_BATCH + 65536 + 14
        release.set()
        send_all(t, bytes(out))
    assert result == messages


def test_a_run_record_alone_is_acknowledged_once_all_its_frames_left() -> None:
    """The common case, one BINARY_RUN record offered at a time (framed and
    written without the record loop): against a peer that does not read,
    a record the socket took in part is acknowledged only once the rest
    left, and the messages arrive once, in order, each its own frame."""
    with _held_back_peer() as (t, result, release):
        batches = [[b"%05d" % i + bytes([i % 251]) * 40_000 for i in range(b, b + 6)]
                   for b in range(0, 600, 6)]  # 24 MiB in records of 240 KB
        messages = [m for batch in batches for m in batch]
        records = [encode_run(_run_of(batch)) for batch in batches]
        out = bytearray()
        while not out:  # offered one by one until the socket fills up
            out += records.pop(0)
            sent = t.send(out)
            assert sent in (0, len(out))  # a whole record, or nothing yet
            del out[:sent]
            assert t.buffered <= SEND_BATCH
        assert records  # it filled up before the end
        assert t.send(out) == 0  # its frames still wait: not acknowledged
        release.set()
        for record in [bytes(out), *records]:
            send_all(t, record)
    assert result == messages


def test_fragmented_messages_with_interleaved_ping_are_reassembled() -> None:
    with echo_server() as server:
        raw = RawClient(server.endpoint.port)
        raw.send(BytesMessage(data=b"ab", message_finished=False))
        raw.send(Ping(payload=b"hi"))  # control frames may interleave (RFC 6455, 5.4)
        raw.send(BytesMessage(data=b"cd", message_finished=False))
        raw.send(BytesMessage(data=b"ef", message_finished=True))
        raw.send(TextMessage(data="\u00e9", message_finished=False))
        raw.send(TextMessage(data="t", message_finished=True))
        pongs = raw.wait_for(Pong)
        assert [p.payload for p in pongs] == [b"hi"]  # type: ignore[attr-defined]
        echoes = raw.wait_for(BytesMessage) + raw.wait_for(TextMessage)
        assert [(e.data, e.message_finished) for e in echoes] == [  # type: ignore[attr-defined]
            (b"abcdef", True),
            ("\u00e9t", True),
        ]
        engine = server.engine()
        assert engine.seen == [(2, b"abcdef"), (1, "\u00e9t".encode())]  # no ping, no pong
        raw.sock.close()


def test_engine_ping_record_gets_its_pong_and_unsolicited_pongs_are_dropped() -> None:
    with echo_server() as server:
        t = client(server)
        send_all(t, encode_ping(b"k1") + encode_binary(b"after"))
        got = read_records(t, 2)
        assert got == [(MessageKind.PONG, b"k1"), (2, b"after")]
        raw = RawClient(server.endpoint.port)
        raw.send(Pong(payload=b"unasked"))
        raw.send(BytesMessage(data=b"x"))
        raw.wait_for(BytesMessage)
        assert server.engines[1].seen == [(2, b"x")]
        raw.sock.close()
        t.close()


# -- limits ---------------------------------------------------------------------


def test_message_bigger_than_max_closes_with_1009() -> None:
    with echo_server(options=WebSocketOptions(max_message_size=1000)) as server:
        t = client(server)
        send_all(t, encode_binary(b"x" * 1000))
        assert read_records(t, 1) == [(2, b"x" * 1000)]  # exactly the limit is fine
        send_all(t, encode_binary(b"y" * 1001))
        records = read_to_eof(t)
        assert [(k, decode_close(p)[0]) for k, p in records] == [(8, 1009)]
        engine = server.engine()
        assert engine.lost.wait(WAIT)
        assert engine.seen[-1][0] == MessageKind.CLOSE
        assert decode_close(engine.seen[-1][1])[0] == CloseCode.MESSAGE_TOO_BIG
        t.close()


def test_fragmented_message_over_max_is_cut_off_at_the_limit() -> None:
    with echo_server(options=WebSocketOptions(max_message_size=100)) as server:
        raw = RawClient(server.endpoint.port)
        for _ in range(3):
            raw.send(BytesMessage(data=b"z" * 40, message_finished=False))
        closes = raw.wait_for(CloseConnection)
        assert [c.code for c in closes] == [1009]  # type: ignore[attr-defined]
        assert server.engine().lost.wait(WAIT)
        assert server.engine().seen[0][0] == MessageKind.CLOSE
        raw.sock.close()


def test_frame_declaring_more_than_max_fails_at_its_header_with_1009() -> None:
    """A frame that says it carries 2**62 bytes is refused when its header
    arrives, not after the peer has sent (and we have read) max bytes."""
    with echo_server(options=WebSocketOptions(max_message_size=1000)) as server:
        raw = RawClient(server.endpoint.port)
        key = b"\x01\x02\x03\x04"
        raw.sock.sendall(bytes([0x82, 0x80 | 127]) + (1 << 62).to_bytes(8, "big") + key + b"x")
        closes = raw.wait_for(CloseConnection)
        assert [c.code for c in closes] == [1009]  # type: ignore[attr-defined]
        assert server.engine().lost.wait(WAIT)
        assert server.engine().seen[0][0] == MessageKind.CLOSE
        assert decode_close(server.engine().seen[0][1])[0] == CloseCode.MESSAGE_TOO_BIG
        raw.sock.close()


def test_client_enforces_its_own_max_message_size() -> None:
    with echo_server() as server:
        t = client(server, max_message_size=10)
        send_all(t, encode_binary(b"0123456789A"))  # the server echoes 11 bytes
        records = read_to_eof(t)
        assert [(k, decode_close(p)[0]) for k, p in records] == [(8, 1009)]
        assert t.close_sent is not None and t.close_sent[0] == 1009
        t.close()


# -- close codes ------------------------------------------------------------------


def test_engine_close_record_sends_that_code_and_the_peer_echoes_it() -> None:
    with echo_server() as server:
        t = client(server)
        send_all(t, encode_binary(b"close-4001"))  # the echo engine closes with 4001
        records = read_to_eof(t)
        assert [(k, decode_close(p)) for k, p in records] == [(8, (4001, "asked to"))]
        assert t.close_received == (4001, "asked to")
        assert t.close_sent == (4001, "asked to")  # RFC 6455, 5.5.1: echo the code
        t.close()


def test_client_close_record_reaches_the_server_engine() -> None:
    with echo_server() as server:
        t = client(server)
        send_all(t, encode_close(CloseCode.GOING_AWAY, "bye") + encode_binary(b"dropped"))
        records = read_to_eof(t)
        assert [(k, decode_close(p)) for k, p in records] == [(8, (1001, "bye"))]
        engine = server.engine()
        assert engine.lost.wait(WAIT)
        assert engine.seen == [(8, b"\x03\xe9bye")]  # the record after CLOSE was dropped
        t.close()


def test_abort_fails_the_connection_with_1011() -> None:
    with echo_server() as server:
        t = client(server)
        send_all(t, encode_binary(b"x"))
        read_records(t, 1)
        t.abort()
        engine = server.engine()
        assert engine.lost.wait(WAIT)
        assert [(k, decode_close(p)[0]) for k, p in engine.seen[1:]] == [(8, 1011)]


def test_invalid_utf8_text_closes_with_1007_and_bad_framing_with_1002() -> None:
    with echo_server() as server:
        raw = RawClient(server.endpoint.port)
        masked = bytes(b ^ k for b, k in zip(b"\xff\xfe", b"ab", strict=True))  # key "abcd"
        raw.sock.sendall(b"\x81\x82abcd" + masked)  # a text frame that is not UTF-8
        closes = raw.wait_for(CloseConnection)
        assert [c.code for c in closes] == [1007]  # type: ignore[attr-defined]
        raw.sock.close()
        raw = RawClient(server.endpoint.port)
        raw.sock.sendall(b"\x82\x01x")  # a client frame without a mask (RFC 6455, 5.1)
        closes = raw.wait_for(CloseConnection)
        assert [c.code for c in closes] == [1002]  # type: ignore[attr-defined]
        assert all(e.lost.wait(WAIT) for e in server.engines)
        codes = [decode_close(e.seen[-1][1])[0] for e in server.engines]
        assert codes == [1007, 1002]
        raw.sock.close()


def test_peer_vanishing_without_close_is_end_of_stream() -> None:
    with echo_server() as server:
        raw = RawClient(server.endpoint.port)
        raw.sock.close()
        engine = server.engine()
        assert engine.lost.wait(WAIT)
        assert engine.eof and engine.seen == []


# -- handshake --------------------------------------------------------------------


def test_subprotocol_is_negotiated_in_the_clients_order() -> None:
    options = WebSocketOptions(subprotocols=("rsocket", "other"))
    with echo_server(options=options) as server:
        t = client(server, subprotocols=("nope", "other", "rsocket"))
        assert t.subprotocol == "other"
        send_all(t, encode_binary(b"x"))
        read_records(t, 1)
        server_side = server.transports[0]
        assert isinstance(server_side, WebSocketTransport)
        assert server_side.subprotocol == "other"
        t.close()
        t2 = client(server, subprotocols=("nope",))
        assert t2.subprotocol is None  # none in common: no subprotocol
        t2.close()


def test_wrong_path_is_refused_with_404() -> None:
    with echo_server() as server:
        with pytest.raises(WebSocketHandshakeError) as info:
            client(server, path="/elsewhere")
        assert info.value.status == 404
        assert b"no WebSocket endpoint at /elsewhere" in info.value.body
        assert isinstance(info.value, ConnectionError)
        t = client(server, path="/echo?x=1")  # a query does not change the path
        t.close()


def test_plain_http_request_without_upgrade_gets_400() -> None:
    with echo_server() as server:
        sock = raw_connect(server.endpoint.port)
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        head = read_http_head(sock)
        assert head.startswith(b"HTTP/1.1 400 ")
        sock.close()
        sock = raw_connect(server.endpoint.port)
        sock.sendall(b"this is not HTTP\r\n\r\n")
        assert read_http_head(sock).startswith(b"HTTP/1.1 400 ")
        sock.close()
        assert all(e.lost.wait(WAIT) and e.seen == [] for e in server.engines)


def test_authorize_sees_the_request_and_refuses_with_its_status() -> None:
    seen: list[HandshakeRequest] = []

    def authorize(request: HandshakeRequest) -> int | None:
        seen.append(request)
        return None if request.header("authorization") == "Bearer good" else 401

    with echo_server(options=WebSocketOptions(authorize=authorize)) as server:
        with pytest.raises(WebSocketHandshakeError) as info:
            client(server)
        assert info.value.status == 401
        with pytest.raises(WebSocketHandshakeError) as info:
            client(server, extra_headers=(("Authorization", "Bearer bad"),))
        assert info.value.status == 401
        t = client(server, path="/echo?q=1", extra_headers=(("Authorization", "Bearer good"),))
        send_all(t, encode_binary(b"in"))
        assert read_records(t, 1) == [(2, b"in")]
        assert seen[-1].path == "/echo" and seen[-1].query == "q=1"
        assert seen[-1].peer.startswith("127.0.0.1:")
        t.close()


def test_authorize_that_raises_refuses_with_500() -> None:
    def authorize(request: HandshakeRequest) -> int | None:
        raise RuntimeError("database down")

    with echo_server(options=WebSocketOptions(authorize=authorize)) as server:
        with pytest.raises(WebSocketHandshakeError) as info:
            client(server)
        assert info.value.status == 500


def test_server_that_does_not_speak_http_is_a_handshake_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as lsock:
        port = lsock.getsockname()[1]

        def answer_garbage() -> None:
            conn, _ = lsock.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")

        thread = threading.Thread(target=answer_garbage)
        thread.start()
        with pytest.raises(WebSocketHandshakeError) as info:
            open_websocket(Endpoint("ws", "127.0.0.1", port, "/"), WAIT)
        assert info.value.status is None
        thread.join(WAIT)


def test_server_closing_before_answering_is_a_handshake_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as lsock:
        port = lsock.getsockname()[1]

        def hang_up() -> None:
            conn, _ = lsock.accept()
            conn.recv(65536)
            conn.close()

        thread = threading.Thread(target=hang_up)
        thread.start()
        with pytest.raises(WebSocketHandshakeError, match="closed the connection"):
            open_websocket(Endpoint("ws", "127.0.0.1", port, "/"), WAIT)
        thread.join(WAIT)


def test_silent_server_times_out_the_handshake() -> None:
    with socket.create_server(("127.0.0.1", 0)) as lsock:  # never accepts, never answers
        port = lsock.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            open_websocket(Endpoint("ws", "127.0.0.1", port, "/"), 0.3)
        assert time.monotonic() - start < WAIT


def test_message_right_behind_the_101_stays_for_the_loop() -> None:
    """A server may speak first, in the same segment as its 101: the client
    reads the response head exactly, so the message waits in the socket and
    the loop's next read (on readability) gets it."""
    with socket.create_server(("127.0.0.1", 0)) as lsock:
        port = lsock.getsockname()[1]

        def greet() -> None:
            conn, _ = lsock.accept()
            ws = WSConnection(ConnectionType.SERVER)
            with conn:
                while True:
                    ws.receive_data(conn.recv(65536))
                    if any(isinstance(e, Request) for e in ws.events()):
                        break
                conn.sendall(ws.send(AcceptConnection()) + ws.send(TextMessage(data="hello")))
                conn.recv(65536)  # until the client goes

        thread = threading.Thread(target=greet)
        thread.start()
        t = open_websocket(Endpoint("ws", "127.0.0.1", port, "/"), WAIT)
        assert read_records(t, 1) == [(1, b"hello")]
        t.close()
        thread.join(WAIT)


def test_server_accept_never_blocks_on_a_silent_client() -> None:
    """The upgrade is read inside the loop: a client that connects and says
    nothing does not hold up the next one."""
    with echo_server() as server:
        silent = raw_connect(server.endpoint.port)
        t = client(server)
        send_all(t, encode_binary(b"ok"))
        assert read_records(t, 1) == [(2, b"ok")]
        t.close()
        silent.close()


def test_request_head_without_end_is_refused_at_the_limit() -> None:
    with echo_server() as server:
        sock = raw_connect(server.endpoint.port)
        sock.sendall(b"GET /echo HTTP/1.1\r\nX: " + b"a" * (70 * 1024))
        assert read_http_head(sock).startswith(b"HTTP/1.1 431 ")  # header fields too large
        sock.close()
        assert server.engine().lost.wait(WAIT)


def upgrade_head(key: bytes = b"dGhlIHNhbXBsZSBub25jZQ==", extra: bytes = b"") -> bytes:
    return (
        b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: " + key + b"\r\n" + extra + b"\r\n"
    )


def test_request_head_over_the_limit_in_one_read_is_refused() -> None:
    """A whole head larger than MAX_REQUEST_HEAD, its end included in the
    same read, is refused as one that never ends (not 101)."""
    with echo_server() as server:
        sock = raw_connect(server.endpoint.port)
        filler = b"".join(b"X-Fill-%d: %s\r\n" % (i, b"a" * 1000) for i in range(98))
        head = upgrade_head(extra=filler)
        assert MAX_REQUEST_HEAD < len(head) < 120 * 1024  # one recv_size
        sock.sendall(head)
        assert read_http_head(sock).startswith(b"HTTP/1.1 431 ")
        sock.close()
        assert server.engine().lost.wait(WAIT)


@pytest.mark.parametrize(
    "key",
    [b"not base64!", b"c2hvcnQ=", b"dGhlIHNhbXBsZSBub25jZQ", b"dGhlIHNhbXBsZSBub25jZQ==AA"],
    ids=["not-base64", "8-bytes", "unpadded", "trailing"],
)
def test_upgrade_with_an_invalid_key_is_refused_400(key: bytes) -> None:
    """RFC 6455, 4.2.1: Sec-WebSocket-Key is 16 bytes in base64; anything
    else is a bad request (400), not an upgrade."""
    with echo_server() as server:
        sock = raw_connect(server.endpoint.port)
        sock.sendall(upgrade_head(key))
        assert read_http_head(sock).startswith(b"HTTP/1.1 400 ")
        sock.close()


def test_upgrade_with_two_keys_is_refused_400() -> None:
    with echo_server() as server:
        sock = raw_connect(server.endpoint.port)
        sock.sendall(upgrade_head(extra=b"Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n"))
        assert read_http_head(sock).startswith(b"HTTP/1.1 400 ")
        sock.close()


def test_upgrade_with_a_valid_key_is_accepted() -> None:
    with echo_server() as server:
        sock = raw_connect(server.endpoint.port)
        sock.sendall(upgrade_head())
        head = read_http_head(sock)
        assert head.startswith(b"HTTP/1.1 101 ")
        assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head  # RFC 6455, 1.3's example
        sock.close()


def test_ping_flood_never_read_keeps_one_pong_pending() -> None:
    """A peer sends Pings and reads nothing: Pongs are not queued without
    bound; only the latest Ping is answered once the backlog drains (RFC
    6455, 5.5.3 allows answering only the most recent Ping)."""
    with echo_server() as server:
        raw = RawClient(server.endpoint.port)
        raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        (transport,) = server.transports
        assert isinstance(transport, WebSocketTransport)
        # A small kernel buffer on the server's side, so that the backlog is ours.
        transport._stream.sock.setsockopt(  # type: ignore[attr-defined]
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
        )
        pings, payload = 5000, b"p" * 119
        raw.sock.sendall(
            b"".join(raw.ws.send(Ping(payload=payload + b"%06d" % i)) for i in range(pings))
        )
        raw.send(BytesMessage(data=b"mark"))
        assert transport.buffered <= MAX_CONTROL_BACKLOG + SEND_BATCH
        pongs: list[bytes] = []
        echoed: list[bytes] = []
        last = payload + b"%06d" % (pings - 1)
        while not echoed or not pongs or pongs[-1] != last:  # reading now: all drains
            data = raw.sock.recv(65536)
            assert data
            raw.ws.receive_data(data)
            for event in raw.ws.events():
                if isinstance(event, Pong):
                    pongs.append(bytes(event.payload))
                elif isinstance(event, BytesMessage):
                    echoed.append(bytes(event.data))
        assert echoed == [b"mark"] and server.engine().seen == [(2, b"mark")]
        assert len(pongs) < pings  # the rest were coalesced; the latest is answered
        raw.sock.close()


def test_upgrade_request_trickled_byte_by_byte_is_accepted() -> None:
    """The request head may arrive in any pieces (only the new bytes are
    searched for its end: a trickled head costs what it weighs)."""
    with echo_server() as server:
        sock = raw_connect(server.endpoint.port)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = (
            b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\nX-Pad: " + b"p" * 2000 + b"\r\n\r\n"
        )
        for i in range(len(head)):
            sock.sendall(head[i : i + 1])
        assert read_http_head(sock).startswith(b"HTTP/1.1 101")
        sock.close()


def _run_of(messages: list[bytes]) -> bytes:
    return b"".join(len(m).to_bytes(3, "big") + m for m in messages)


def test_a_run_record_goes_out_in_batches_each_message_one_frame() -> None:
    """A BINARY_RUN record larger than one send batch: framed a batch at a
    time (never more than a batch of frames waiting; written in one call
    while the socket takes them all, acknowledged part by part once it
    does not), every message one WebSocket message, in order; runs come
    back as runs."""
    with echo_server() as server:
        t = client(server)
        messages = [b"%08d" % i for i in range(60_000)] + [b"x" * 70_000, b"tail"]
        record = encode_run(_run_of(messages))
        assert len(record) > 2 * SEND_BATCH
        out = bytearray(record)
        acks = []
        deadline = time.monotonic() + WAIT
        while out:
            sent = t.send(out)
            acks.append(sent)
            del out[:sent]
            assert t.buffered <= SEND_BATCH + 70_000 + 14
            if out:
                _wait(t.fileno(), selectors.EVENT_WRITE, deadline)
        assert sum(acks) == len(record)
        assert [p for _, p in read_records(t, len(messages))] == messages
        t.close()


def test_text_runs_are_checked_before_they_go() -> None:
    with echo_server() as server:
        t = client(server)
        texts = ["h\u00e9llo", "", "\u2713" * 50]
        send_all(t, encode_run(_run_of([x.encode() for x in texts]), text=True))
        assert read_records(t, 3) == [(MessageKind.TEXT, x.encode()) for x in texts]
        with pytest.raises(UnicodeDecodeError):  # a bad engine cannot send invalid UTF-8
            t.send(encode_run(_run_of([b"\xff\xfe"]), text=True))
        t.close()


def test_a_run_whose_message_overruns_its_record_is_an_error() -> None:
    """A broken engine (records never cross the network): a run that ends
    inside a message or its length is refused, alone or behind another
    record, before anything of it is sent."""
    good = _run_of([b"a" * 10] * 5)
    broken = [
        encode_record(MessageKind.BINARY_RUN, good + b"\x00\x00\x09abc"),  # message cut short
        encode_record(MessageKind.BINARY_RUN, good + b"\x00\x00"),  # length cut short
    ]
    with echo_server() as server:
        for record in broken:
            for data in (record, encode_binary(b"first") + record):
                t = client(server)
                with pytest.raises(RecordError):
                    send_all(t, data)
                t.close()
