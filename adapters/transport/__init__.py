"""Transport selection by URL scheme: the one place a new transport plugs in.

Drivers speak to transports through :class:`Transport`; they never look at
which kind they hold.
"""

from __future__ import annotations

import ssl

from .base import Listener, Transport
from .tcp import TcpListener, open_tcp
from .tls import TlsListener, open_tls
from .unix import UnixListener, open_unix
from .urls import Endpoint, parse_url
from .websocket.options import WebSocketOptions

__all__ = ["Listener", "MissingExtraError", "Transport", "listen", "open_transport"]


class MissingExtraError(ImportError):
    """A feature needs an optional dependency that is not installed; the
    message names the extra that brings it (``pip install 'sansrs[ws]'``)."""

    def __init__(self, feature: str, extra: str, missing: str) -> None:
        super().__init__(
            f"{feature} needs the {extra!r} extra ({missing} is not installed): "
            f"pip install 'sansrs[{extra}]'",
            name=missing,
        )
        self.extra = extra


def _require_websocket(endpoint: Endpoint) -> None:
    """``ws://`` and ``wss://`` run on h11 and wsproto (the ``ws`` extra)."""
    for module in ("h11", "wsproto"):
        try:
            __import__(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise  # broken inside the package itself: not a missing extra
            raise MissingExtraError(f"{endpoint.scheme}://", "ws", module) from None


def _endpoint(url: str | Endpoint) -> Endpoint:
    return url if isinstance(url, Endpoint) else parse_url(url)


def open_transport(
    url: str | Endpoint,
    timeout: float = 10.0,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
) -> Transport:
    """Connect to ``url``. ``parse_url`` has already refused unsupported schemes.
    ``tls://`` and ``wss://``: ``ssl_context`` (default: system CAs, host name
    checked) and ``server_hostname`` (the name to check instead of the URL's
    host). ``ws://`` / ``wss://``: ``websocket`` options (path, headers, ...)."""
    endpoint = _endpoint(url)
    if endpoint.scheme in ("ws", "wss"):
        _require_websocket(endpoint)
        from .websocket.handshake import open_websocket

        return open_websocket(
            endpoint, timeout, websocket, ssl_context=ssl_context, server_hostname=server_hostname
        )
    if websocket is not None:
        raise ValueError(f"websocket options apply to ws:// and wss:// URLs, not {endpoint.url}")
    if endpoint.scheme == "tls":
        return open_tls(
            endpoint, timeout, ssl_context=ssl_context, server_hostname=server_hostname
        )
    if ssl_context is not None or server_hostname is not None:
        raise ValueError(f"ssl_context/server_hostname apply to tls:// URLs, not {endpoint.url}")
    if endpoint.scheme == "unix":
        return open_unix(endpoint, timeout)
    return open_tcp(endpoint, timeout)


def listen(
    url: str | Endpoint,
    *,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
) -> Listener:
    """Listen on ``url``; port 0 picks a free port (see ``listener.endpoint``).
    ``tls://`` and ``wss://`` need ``ssl_context`` (see ``tls.server_context``);
    ``ws://`` / ``wss://`` take ``websocket`` options."""
    endpoint = _endpoint(url)
    if endpoint.scheme in ("ws", "wss"):
        _require_websocket(endpoint)
        from .websocket.transport import WebSocketListener

        return WebSocketListener(endpoint, websocket, ssl_context=ssl_context)
    if websocket is not None:
        raise ValueError(f"websocket options apply to ws:// and wss:// URLs, not {endpoint.url}")
    if endpoint.scheme == "tls":
        if ssl_context is None:
            raise ValueError("a tls:// server needs ssl_context (see transport.tls.server_context)")
        return TlsListener(endpoint, ssl_context)
    if ssl_context is not None:
        raise ValueError(f"ssl_context applies to tls:// URLs, not {endpoint.url}")
    if endpoint.scheme == "unix":
        return UnixListener(endpoint)
    return TcpListener(endpoint)
