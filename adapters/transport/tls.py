"""TLS transport (``tls://host:port``) with the standard :mod:`ssl` module.

Clients verify the server's certificate and host name by default
(``ssl.create_default_context()``); pass an :class:`ssl.SSLContext` for
private CAs or client certificates. Servers need a context with their
certificate (:func:`server_context` builds one, optionally requiring client
certificates).

Non-blocking TLS, as the driver loops need it:

* The client handshakes while connecting (blocking, bounded by the connect
  timeout); an accepted server connection handshakes inside the loop: the
  first :meth:`TlsTransport.recv` / :meth:`TlsTransport.send` calls drive
  ``do_handshake`` and report "not ready" (``BlockingIOError`` / 0 bytes)
  until it completes, so one slow client never blocks the others (the loops
  abort it after ``LoopConfig.handshake_timeout``: see ``handshaken``).
* ``recv`` keeps reading until the socket has nothing more *and*
  ``SSLSocket.pending()`` is 0: decrypted bytes buffered inside the SSL
  object do not make the socket readable, so leaving any behind would stall
  a selector until the peer happened to send more.
* ``send``: OpenSSL's non-blocking write must be retried with the same bytes
  after ``SSLWantWriteError``; the transport remembers the length it tried
  and retries exactly that prefix of the loop's (unchanged) output buffer.
* ``shutdown_write`` sends close_notify, then half-closes the socket.

Not driven: an OpenSSL write that needs a read first (renegotiation, which
TLS 1.3 does not have) and a handshake flight the kernel cannot take at once
(its socket buffer is 1 MiB; a flight is a few KiB).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from typing import Any

from .tcp import MAX_PIECES, SOCKET_BUFFER, TcpTransport, accept_ready, listening_socket
from .urls import Endpoint

__all__ = [
    "TlsListener",
    "TlsTransport",
    "client_context",
    "open_tls",
    "server_context",
]

RECV_SIZE = 120 * 1024  # a direct call's default; the loops pass LoopConfig.recv_size
#: Largest single SSL write; a retry after WantWrite repeats exactly this much.
WRITE_CHUNK = 256 * 1024

_WANT = (ssl.SSLWantReadError, ssl.SSLWantWriteError)


def client_context(
    *,
    cafile: str | None = None,
    cadata: str | bytes | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client context: system CAs (or ``cafile`` / ``cadata``), host name
    checks on (``check_hostname=False`` only for tests against an IP without
    a matching certificate), an optional client certificate, TLS >= 1.2."""
    ctx = ssl.create_default_context(cafile=cafile, cadata=cadata)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not check_hostname:
        ctx.check_hostname = False
    if certfile is not None:
        ctx.load_cert_chain(certfile, keyfile)
    return ctx


def server_context(
    certfile: str,
    keyfile: str | None = None,
    *,
    cafile: str | None = None,
    cadata: str | bytes | None = None,
    require_client_cert: bool = False,
) -> ssl.SSLContext:
    """A server context with the certificate chain ``certfile`` (and key).
    ``require_client_cert``: clients must present a certificate signed by
    ``cafile`` / ``cadata``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    if cafile is not None or cadata is not None:
        ctx.load_verify_locations(cafile=cafile, cadata=cadata)
    if require_client_cert:
        if cafile is None and cadata is None:
            raise ValueError("require_client_cert needs cafile or cadata to verify clients")
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class TlsTransport(TcpTransport):
    """One TLS connection over TCP, non-blocking (see the module notes)."""

    scheme = "tls"
    sock: ssl.SSLSocket

    def __init__(self, sock: ssl.SSLSocket, *, handshaken: bool) -> None:
        super().__init__(sock)
        self._handshaken = handshaken
        self._retry = 0  # length of a write to repeat after SSLWantWriteError
        self._eof = False

    @property
    def handshaken(self) -> bool:
        return self._handshaken

    @property
    def peer_certificate(self) -> dict[str, Any] | None:
        """The peer's verified certificate (``SSLSocket.getpeercert()``), if any."""
        if not self._handshaken:
            return None
        return self.sock.getpeercert() or None

    @property
    def tls_version(self) -> str | None:
        return self.sock.version()

    def _handshake(self) -> bool:
        """Advance the handshake; True once done. SSL errors propagate (the
        loop treats them as a lost connection)."""
        try:
            self.sock.do_handshake()
        except _WANT:
            return False
        self._handshaken = True
        return True

    def recv(self, max_bytes: int = RECV_SIZE) -> bytes:
        if self._eof:
            return b""
        if not self._handshaken and not self._handshake():
            raise BlockingIOError("TLS handshake in progress")
        sock = self.sock
        chunks: list[bytes] = []
        total = 0
        while total < max_bytes or sock.pending():
            try:
                chunk = sock.recv(max(max_bytes - total, sock.pending()))
            except _WANT:
                break
            except ssl.SSLZeroReturnError:
                chunk = b""
            if not chunk:
                self._eof = True
                break
            chunks.append(chunk)
            total += len(chunk)
        if chunks:
            return b"".join(chunks)  # an end of stream seen after them comes next call
        if self._eof:
            return b""
        raise BlockingIOError("no complete TLS record yet")

    def send(self, data: bytes | bytearray | memoryview) -> int:
        if not self._handshaken and not self._handshake():
            return 0
        n = self._retry or min(len(data), WRITE_CHUNK)
        if not n:
            return 0
        try:
            sent = self.sock.send(memoryview(data)[:n])
        except _WANT:
            self._retry = n
            return 0
        except (BlockingIOError, InterruptedError):
            self._retry = n
            return 0
        self._retry = 0
        return sent

    def send_pieces(self, pieces: list[bytes]) -> int:
        """:meth:`send` of the first ``MAX_PIECES`` pieces joined (an SSL
        socket has no ``sendmsg``): what the caller counts on, as over TCP
        (all of them joined, a caller that counts the first ``MAX_PIECES``
        wrote the bytes past them twice)."""
        if len(pieces) > MAX_PIECES:
            pieces = pieces[:MAX_PIECES]
        return self.send(b"".join(pieces))

    def shutdown_write(self) -> None:
        """Send close_notify (best effort, without waiting for the peer's),
        then half-close the TCP connection."""
        if self._handshaken:
            with contextlib.suppress(OSError, ValueError):
                self.sock.unwrap()  # non-blocking: sends ours, raises WantRead for theirs
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_WR)


def open_tls(
    endpoint: Endpoint,
    timeout: float = 10.0,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
) -> TlsTransport:
    """Connect and handshake within ``timeout`` s. The certificate is checked
    against ``server_hostname`` (default: the URL's host) unless the context
    disables host name checks."""
    ctx = ssl_context or client_context()
    raw = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock = ctx.wrap_socket(raw, server_hostname=server_hostname or endpoint.host)
    except BaseException:
        raw.close()
        raise
    return TlsTransport(sock, handshaken=True)


class TlsListener:
    """A listening TCP socket whose connections speak TLS (handshake in the loop)."""

    def __init__(
        self, endpoint: Endpoint, ssl_context: ssl.SSLContext, backlog: int = 1024
    ) -> None:
        if not isinstance(ssl_context, ssl.SSLContext):
            raise TypeError("a tls:// server needs ssl_context=ssl.SSLContext (see server_context)")
        self.sock = listening_socket(endpoint, backlog)
        self.ssl_context = ssl_context
        self.endpoint = endpoint.with_port(self.sock.getsockname()[1])

    def fileno(self) -> int:
        return self.sock.fileno()

    def accept(self) -> TlsTransport | None:
        """A pending connection (its handshake still to come), or ``None``."""
        raw = accept_ready(self.sock)
        if raw is None:
            return None
        try:
            raw.setblocking(False)
            with contextlib.suppress(OSError):
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
            sock = self.ssl_context.wrap_socket(
                raw, server_side=True, do_handshake_on_connect=False
            )
        except BaseException:
            raw.close()
            raise
        return TlsTransport(sock, handshaken=False)

    def close(self) -> None:
        self.sock.close()
