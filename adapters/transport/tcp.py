"""TCP transport: connected sockets with TCP_NODELAY, and a listener.

A transport only moves bytes; framing (RSocket's 24-bit length prefix) is the
core's business and the driver loop (``threads``, later ``selector``) decides
when to read and write. Sockets are handed to the loop non-blocking.
"""

from __future__ import annotations

import contextlib
import socket
import struct

from .urls import Endpoint

__all__ = [
    "SocketTransport",
    "TcpListener",
    "TcpTransport",
    "accept_ready",
    "listening_socket",
    "open_tcp",
]

#: The largest read, reached only while reads come back full (a stream):
#: what a turn costs beyond its items is shared by twice the items of a
#: 120 KiB read (bench_tcp.py stream1k, stream1kb: the client's bytecode per
#: 1 KiB item 15.8 -> 8.1). Reads start at ``SMALL_RECV``, below glibc's
#: initial mmap threshold (128 KiB), so short exchanges never allocate
#: above it; a stream's first full reads above it raise the threshold
#: (glibc's dynamic threshold: the first large block freed), no mmap per
#: read after them (``strace -c`` of a 300,000-item stream1kb client:
#: 321 mmap calls with 256 KiB reads, 316 with 120 KiB, all at start-up).
RECV_SIZE = 256 * 1024
SOCKET_BUFFER = 1024 * 1024
#: The receive buffer asked for: 4 MiB (Linux doubles it and caps it at
#: net.core.rmem_max). With 1 MiB, a stream of 1 KiB items moved through
#: a window a quarter of its prefetch (4 MiB): more reads, wake-ups and
#: window updates per item on both sides. ``bench_cpu_per_op.py --only
#: stream1k --only stream1kb`` (CPU per item, 8 of 8 pairs lower, both
#: sides and drivers): client 0.62-0.83 -> 0.50-0.60 µs, server 0.63-0.80
#: -> 0.50-0.63 µs. What it holds is what the peer sent and we have not
#: read: a stream's items within the credit we granted; reading paused
#: (``LoopConfig.pause_reading_at``) it fills, up to this.
RECV_BUFFER = 4 * SOCKET_BUFFER
#: Buffers per ``sendmsg`` at most (Linux's IOV_MAX).
MAX_PIECES = 1024
# recv(n) allocates n bytes up front and shrinks the result; at 128 KiB and
# more glibc serves that with mmap/mremap/munmap: three system calls per read.
# Reads start below that and grow only while they come back full.
SMALL_RECV = 64 * 1024


class SocketTransport:
    """One connected stream socket, non-blocking (the base of the TCP and
    Unix transports; TLS wraps it)."""

    scheme = "tcp"

    def __init__(self, sock: socket.socket) -> None:
        for opt, size in ((socket.SO_SNDBUF, SOCKET_BUFFER), (socket.SO_RCVBUF, RECV_BUFFER)):
            with contextlib.suppress(OSError):  # a smaller kernel limit is only slower
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
        sock.setblocking(False)
        self.sock = sock
        self._closed = False
        self._recv_size = SMALL_RECV
        try:
            self.peer = _format_address(sock.getpeername())
        except OSError:
            self.peer = "?"

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, max_bytes: int = RECV_SIZE) -> bytes:
        """Bytes available now; ``b""`` at end of stream. Raises ``BlockingIOError``
        when nothing is ready, ``OSError`` (e.g. ``ConnectionResetError``) on failure.

        Asks for at most ``max_bytes``: 64 KiB while reads come back short (a
        request/response exchange), doubling while they come back full (a
        stream), back to 64 KiB after a short one."""
        size = self._recv_size
        if size > max_bytes:
            size = max_bytes
        data = self.sock.recv(size)
        if len(data) == size:
            if size < max_bytes:
                self._recv_size = size * 2
        elif size > SMALL_RECV and len(data) < SMALL_RECV:
            self._recv_size = SMALL_RECV
        return data

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Write what the kernel accepts now; returns the count (maybe 0)."""
        try:
            return self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    def send_pieces(self, pieces: list[bytes]) -> int:
        """:meth:`send` of the pieces' concatenation, without joining them
        (one ``sendmsg`` of the first ``MAX_PIECES`` at most): the kernel
        copies from each piece (bench_tcp.py stream1k, stream1kb: a large
        output is not copied once more to be joined)."""
        if len(pieces) > MAX_PIECES:
            pieces = pieces[:MAX_PIECES]
        try:
            return self.sock.sendmsg(pieces)
        except (BlockingIOError, InterruptedError):
            return 0

    def shutdown_write(self) -> None:
        """Half-close: the peer reads end of stream, we can still read."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.sock.close()

    def abort(self) -> None:
        """Close with RST instead of FIN: unsent data is discarded."""
        if self._closed:
            return
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed


class TcpTransport(SocketTransport):
    """One connected TCP socket, TCP_NODELAY on (non-blocking once handed to a loop)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().__init__(sock)


def open_tcp(endpoint: Endpoint, timeout: float = 10.0) -> TcpTransport:
    """Connect to ``endpoint`` within ``timeout`` seconds."""
    sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    return TcpTransport(sock)


def listening_socket(endpoint: Endpoint, backlog: int) -> socket.socket:
    """A non-blocking TCP socket listening on ``endpoint`` (IPv6 for a host
    with a colon; port 0: a free one)."""
    family = socket.AF_INET6 if ":" in endpoint.host else socket.AF_INET
    sock = socket.create_server((endpoint.host, endpoint.port), family=family, backlog=backlog)
    sock.setblocking(False)
    return sock


def accept_ready(listening: socket.socket) -> socket.socket | None:
    """A pending connection of a non-blocking ``listening`` socket, or
    ``None`` if none is ready."""
    try:
        sock, _ = listening.accept()
    except (BlockingIOError, InterruptedError):
        return None
    return sock


class TcpListener:
    """A listening socket. ``endpoint`` carries the real port when bound to 0."""

    def __init__(self, endpoint: Endpoint, backlog: int = 128) -> None:
        self.sock = listening_socket(endpoint, backlog)
        self.endpoint = endpoint.with_port(self.sock.getsockname()[1])

    def fileno(self) -> int:
        return self.sock.fileno()

    def accept(self) -> TcpTransport | None:
        """A pending connection, or ``None`` if none is ready (non-blocking)."""
        sock = accept_ready(self.sock)
        return None if sock is None else TcpTransport(sock)

    def close(self) -> None:
        self.sock.close()


def _format_address(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(address)
