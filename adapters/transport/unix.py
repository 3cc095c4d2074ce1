"""Unix domain socket transport (``unix:///absolute/path``).

The same non-blocking stream transport as TCP (:class:`~.tcp.SocketTransport`)
over ``AF_UNIX``. The listener owns its socket file: a stale file left by a
dead server is replaced, a live server's is refused (``EADDRINUSE``), and the
file is removed on close if it is still the one this listener created.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat

from .tcp import SocketTransport, accept_ready
from .urls import Endpoint

__all__ = ["UnixListener", "UnixTransport", "open_unix"]


class UnixTransport(SocketTransport):
    """One connected Unix stream socket."""

    scheme = "unix"

    def __init__(self, sock: socket.socket, path: str) -> None:
        super().__init__(sock)
        self.peer = f"unix:{path}"


def open_unix(endpoint: Endpoint, timeout: float = 10.0) -> UnixTransport:
    """Connect to the socket file ``endpoint.path`` within ``timeout`` seconds."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(endpoint.path)
    except BaseException:
        sock.close()
        raise
    return UnixTransport(sock, endpoint.path)


def _remove_stale(path: str) -> None:
    """Remove ``path`` if it is a socket nobody listens on; refuse a live one."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(errno.EEXIST, "not a socket; refusing to replace it", path)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead server's leftover
        return
    except OSError:
        return  # let bind report what is wrong
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, "a server is listening on this socket", path)


class UnixListener:
    """A listening Unix socket at ``endpoint.path``."""

    def __init__(self, endpoint: Endpoint, backlog: int = 1024) -> None:
        path = endpoint.path
        _remove_stale(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            sock.listen(backlog)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self.endpoint = endpoint
        self._inode = os.stat(path).st_ino
        self._closed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def accept(self) -> UnixTransport | None:
        """A pending connection, or ``None`` if none is ready (non-blocking)."""
        sock = accept_ready(self.sock)
        return None if sock is None else UnixTransport(sock, self.endpoint.path)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.sock.close()
        # Only our own file: another server may have taken the path since.
        with contextlib.suppress(OSError):
            if os.stat(self.endpoint.path).st_ino == self._inode:
                os.unlink(self.endpoint.path)
