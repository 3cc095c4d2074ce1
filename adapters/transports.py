"""Transport selection by URL scheme: the one place a new transport plugs in.

Drivers speak to transports through :class:`Transport`; they never look at
which kind they hold.
"""

from __future__ import annotations

from typing import Protocol

from .tcp import TcpListener, open_tcp
from .urls import Endpoint, parse_url

__all__ = ["Listener", "Transport", "listen", "open_transport"]


class Transport(Protocol):
    """A bidirectional byte stream driven by a non-blocking loop."""

    peer: str

    def fileno(self) -> int: ...
    def recv(self, max_bytes: int = ...) -> bytes: ...
    def send(self, data: bytes | bytearray | memoryview) -> int: ...
    def shutdown_write(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


class Listener(Protocol):
    endpoint: Endpoint

    def fileno(self) -> int: ...
    def accept(self) -> Transport | None: ...
    def close(self) -> None: ...


def _endpoint(url: str | Endpoint) -> Endpoint:
    return url if isinstance(url, Endpoint) else parse_url(url)


def open_transport(url: str | Endpoint, timeout: float = 10.0) -> Transport:
    """Connect to ``url``. ``parse_url`` has already refused unsupported schemes."""
    endpoint = _endpoint(url)
    return open_tcp(endpoint, timeout)


def listen(url: str | Endpoint) -> Listener:
    """Listen on ``url``; port 0 picks a free port (see ``listener.endpoint``)."""
    endpoint = _endpoint(url)
    return TcpListener(endpoint)
