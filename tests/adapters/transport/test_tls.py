"""TLS transport (``tls://``): certificates, host name checks, client
certificates, and the non-blocking details (handshake inside the loop,
decrypted bytes buffered in the SSL object, retried writes)."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
from collections.abc import Iterator

import pytest
from sansrs.adapters.drive import Loop, LoopConfig
from sansrs.adapters.rsocket.client import connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.server import serve
from sansrs.adapters.rsocket.types import Payload, Request
from sansrs.adapters.transport import listen, open_transport
from sansrs.adapters.transport.tls import TlsTransport, client_context, server_context
from sansrs.adapters.transport.urls import Endpoint, parse_url

from tests.adapters.transport.tls_certs import certs

WAIT = 10.0


def test_tls_url_parses_like_tcp() -> None:
    assert parse_url("tls://localhost:8443") == Endpoint("tls", "localhost", 8443)
    with pytest.raises(ValueError, match="no path"):
        parse_url("tls://localhost:1/x")


def test_a_tls_server_needs_a_context() -> None:
    with pytest.raises(ValueError, match="ssl_context"):
        listen("tls://127.0.0.1:0")
    with pytest.raises(ValueError, match="tls://"):
        listen("tcp://127.0.0.1:0", ssl_context=certs().server_context())


@pytest.fixture(params=["thread", "selector"])
def tls_server(request: pytest.FixtureRequest) -> Iterator[str]:
    with serve(
        "tls://127.0.0.1:0",
        handler_factory=DemoHandler,
        loop=request.param,
        ssl_context=certs().server_context(),
    ) as server:
        yield server.url


def test_certificate_and_host_name_are_checked_by_default(tls_server: str) -> None:
    port = tls_server.rsplit(":", 1)[1]
    # No context: the system CAs do not know our throwaway CA.
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(tls_server)
    # A CA nobody trusts.
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(tls_server, ssl_context=certs().untrusting_client_context())
    # Trusted CA, wrong name: the certificate is for localhost / 127.0.0.1 / ::1.
    with pytest.raises(ssl.SSLCertVerificationError, match=r"match|mismatch"):
        connect(tls_server, ssl_context=certs().client_context(), server_hostname="example.com")
    # Trusted CA, the name in the certificate.
    with connect(f"tls://localhost:{port}", ssl_context=certs().client_context()) as c:
        assert c.request_response(b"ok", timeout=WAIT) == Payload(b"ok")


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_client_certificates_required_by_the_server(loop: str, tmp_path: object) -> None:
    c = certs()
    ctx = c.server_context(require_client_cert=True)
    seen: list[object] = []

    class Handler(DemoHandler):
        def request_response(self, request):  # type: ignore[no-untyped-def]
            transport = request.peer.transport
            assert isinstance(transport, TlsTransport)
            seen.append(transport.peer_certificate)
            return super().request_response(request)

    with serve("tls://127.0.0.1:0", handler_factory=Handler, loop=loop, ssl_context=ctx) as server:
        # Without a client certificate the handshake fails; depending on the
        # TLS version the client learns it at connect or at its first read.
        try:
            anonymous = connect(server.url, loop=loop, ssl_context=c.client_context())
        except (ssl.SSLError, ConnectionError):
            pass
        else:
            with pytest.raises(ConnectionError):
                anonymous.request_response(b"x", timeout=WAIT)
            anonymous.close()
        with connect(server.url, loop=loop, ssl_context=c.client_context(with_cert=True)) as ok:
            assert ok.request_response(b"me", timeout=WAIT) == Payload(b"me")
    assert len(seen) == 1 and seen[0] is not None
    assert ("DNS", "client.example") in seen[0]["subjectAltName"]  # type: ignore[index]


def test_context_helpers_build_working_contexts(tmp_path: object) -> None:
    from pathlib import Path

    c = certs()
    d = Path(str(tmp_path))
    c.ca.cert_pem.write_to_path(str(d / "ca.pem"))
    c.server.private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    c.client.private_key_and_cert_chain_pem.write_to_path(str(d / "client.pem"))
    sctx = server_context(str(d / "server.pem"), cafile=str(d / "ca.pem"), require_client_cert=True)
    cctx = client_context(cafile=str(d / "ca.pem"), certfile=str(d / "client.pem"))
    assert cctx.check_hostname and cctx.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ValueError, match="cafile"):
        server_context(str(d / "server.pem"), require_client_cert=True)
    with (
        serve("tls://127.0.0.1:0", DemoHandler(), loop="selector", ssl_context=sctx) as server,
        connect(server.url, loop="selector", ssl_context=cctx) as client,
    ):
        assert client.request_response(b"h", timeout=WAIT) == Payload(b"h")


def test_decrypted_bytes_buffered_in_the_ssl_object_are_not_lost() -> None:
    """Read 7 bytes per readable event: most of every TLS record stays
    decrypted inside the SSL object, where select cannot see it. The
    transport drains ``pending()``, so the stream still completes."""
    loop = Loop(LoopConfig(recv_size=7), name="tiny-reads").start()
    try:
        with (
            serve(
                "tls://127.0.0.1:0",
                handler_factory=DemoHandler,
                loop=loop,
                ssl_context=certs().server_context(),
            ) as server,
            connect(server.url, loop=loop, ssl_context=certs().client_context()) as client,
        ):
            request = json.dumps({"n": 3000, "size": 100})
            with client.request_stream(request, prefetch=64, timeout=WAIT) as items:
                got = [p.data for p in items]
            assert got == [str(i).zfill(100).encode() for i in range(3000)]
    finally:
        loop.stop(WAIT)


def test_transport_recv_returns_every_pending_byte() -> None:
    """One 10,240-byte TLS record read with ``recv(10)``: the transport hands
    back the whole record (the rest was decrypted into the SSL object) and
    leaves nothing pending. The server side handshakes non-blocking, driven
    by ``recv`` as a loop would."""
    listener = listen("tls://127.0.0.1:0", ssl_context=certs().server_context())
    opened: list[object] = []
    payload = bytes(range(256)) * 40

    def client() -> None:
        t = open_transport(listener.endpoint.url, WAIT, ssl_context=certs().client_context())
        opened.append(t)
        assert t.send(payload) == len(payload)

    thread = threading.Thread(target=client)
    thread.start()
    try:
        select.select([listener], [], [], WAIT)
        server_side = listener.accept()
        assert isinstance(server_side, TlsTransport) and not server_side.handshaken
        chunks: list[bytes] = []
        while sum(map(len, chunks)) < len(payload):
            assert select.select([server_side], [], [], WAIT)[0]
            try:
                chunks.append(server_side.recv(10))
            except BlockingIOError:
                continue  # handshake in progress, or half a record
        assert server_side.handshaken and b"".join(chunks) == payload
        assert max(map(len, chunks)) > 10 and server_side.sock.pending() == 0
        server_side.close()
    finally:
        thread.join(WAIT)
        for t in opened:
            t.close()  # type: ignore[attr-defined]
        listener.close()


def test_a_client_stuck_in_its_handshake_does_not_block_the_selector_server() -> None:
    with serve(
        "tls://127.0.0.1:0",
        handler_factory=DemoHandler,
        loop="selector",
        ssl_context=certs().server_context(),
    ) as server:
        port = int(server.url.rsplit(":", 1)[1])
        stuck = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        half = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        try:
            half.sendall(b"\x16\x03\x01\x00")  # the start of a ClientHello, then silence
            with connect(server.url, loop="selector", ssl_context=certs().client_context()) as c:
                for i in range(20):
                    assert c.request_response(b"%d" % i, timeout=WAIT) == Payload(b"%d" % i)
        finally:
            stuck.close()
            half.close()


def test_garbage_instead_of_a_handshake_fails_that_connection_only() -> None:
    with serve(
        "tls://127.0.0.1:0",
        handler_factory=DemoHandler,
        loop="selector",
        ssl_context=certs().server_context(),
    ) as server:
        port = int(server.url.rsplit(":", 1)[1])
        bad = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        with bad:
            bad.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            closed = threading.Event()

            def drain() -> None:
                try:
                    while bad.recv(4096):
                        pass
                except OSError:
                    pass
                closed.set()

            threading.Thread(target=drain, daemon=True).start()
            assert closed.wait(WAIT)  # the server dropped it
        with connect(server.url, loop="selector", ssl_context=certs().client_context()) as c:
            assert c.request_response(b"fine", timeout=WAIT) == Payload(b"fine")


@pytest.mark.parametrize("silent", [True, False], ids=["silent", "half-hello"])
def test_a_handshake_that_never_completes_is_dropped(silent: bool) -> None:
    """A client that connects and never finishes its TLS handshake is
    aborted after ``handshake_timeout``; the others are not affected."""
    loop = Loop(LoopConfig(handshake_timeout=0.2), name="hs-timeout").start()
    try:
        with serve(
            "tls://127.0.0.1:0",
            handler_factory=DemoHandler,
            loop=loop,
            ssl_context=certs().server_context(),
        ) as server:
            port = int(server.url.rsplit(":", 1)[1])
            stuck = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
            with stuck:
                if not silent:
                    stuck.sendall(b"\x16\x03\x01\x00")  # the start of a ClientHello
                with connect(server.url, loop=loop, ssl_context=certs().client_context()) as c:
                    assert c.request_response(b"ok", timeout=WAIT) == Payload(b"ok")
                    # The stuck client is dropped; the good one is unaffected.
                    with contextlib.suppress(ConnectionResetError):  # RST: also dropped
                        assert stuck.recv(10) == b""
                    assert c.request_response(b"still", timeout=WAIT) == Payload(b"still")
    finally:
        loop.stop(WAIT)


def test_handshake_timeout_is_validated() -> None:
    with pytest.raises(ValueError, match="handshake_timeout"):
        LoopConfig(handshake_timeout=0)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_tls_stream_of_small_items_sent_one_at_a_time_arrives_whole(loop: str) -> None:
    """A Publisher's items go one frame at a time (two pieces each): a
    large credit makes one turn's output thousands of pieces, written by
    ``send_pieces``. Over TLS it joined them all while the connection
    counted the first ``MAX_PIECES``: the bytes past them went out twice
    and the client saw a broken frame stream."""
    from sansrs.streams import from_iterable

    n = 20_000
    expected = [b"%08d" % i for i in range(n)]

    class Handler:
        def request_stream(self, request: Request) -> object:
            return from_iterable(expected)

    with (
        serve("tls://127.0.0.1:0", Handler(), loop=loop, ssl_context=certs().server_context())
        as server,
        connect(server.url, loop=loop, ssl_context=certs().client_context()) as client,
        client.request_stream(b"", prefetch=n, timeout=WAIT) as items,
    ):
        assert [p.data for p in items] == expected
