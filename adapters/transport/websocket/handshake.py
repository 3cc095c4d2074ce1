"""The client side of the WebSocket upgrade: connect, send the upgrade
request, read the response head exactly (so a message right behind it stays
for the loop), and hand the connection over as a :class:`~.transport.WebSocketTransport`.
Blocking, bounded by the connect timeout."""


from __future__ import annotations

import selectors
import socket
import ssl
import time

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    RejectConnection,
    RejectData,
    Request,
)
from wsproto.utilities import RemoteProtocolError as WsRemoteProtocolError

from ..tcp import TcpTransport, open_tcp
from ..tls import open_tls
from ..urls import Endpoint
from .options import (
    WebSocketHandshakeError,
    WebSocketOptions,
    raw_headers,
    str_headers,
)
from .transport import WebSocketTransport
from .upgrade import HEADER_END as _HEADER_END

__all__ = ["open_websocket"]

#: Largest error body kept from a refused upgrade.
MAX_REJECT_BODY = 64 * 1024


# -- client ------------------------------------------------------------------
def _wait(fd: int, events: int, deadline: float) -> None:
    with selectors.DefaultSelector() as sel:
        sel.register(fd, events)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not sel.select(remaining):
            raise TimeoutError("WebSocket handshake timed out")


def _read_head(sock: socket.socket, deadline: float) -> bytes:
    """Read the server's response head exactly (up to the blank line), so
    that a message right behind it stays in the socket for the loop: peek
    on TCP; on TLS (no peek) one byte at a time, so only bytes sharing the
    head's TLS record can be read ahead."""
    head = bytearray()
    tls = isinstance(sock, ssl.SSLSocket)
    while True:
        try:
            if tls:
                byte = sock.recv(1)
                head += byte
                if not byte or head.endswith(_HEADER_END):
                    return bytes(head)
                continue
            chunk = sock.recv(64 * 1024, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
            _wait(sock.fileno(), selectors.EVENT_READ, deadline)
            continue
        if not chunk:
            return bytes(head)  # closed before a complete head: h11 says why
        tail = bytes(head[-3:])
        found = (tail + chunk).find(_HEADER_END)
        take = len(chunk) if found < 0 else found + 4 - len(tail)
        head += sock.recv(take)
        if found >= 0:
            return bytes(head)
        if len(head) > 64 * 1024:
            raise WebSocketHandshakeError("WebSocket handshake: response head too large")


def open_websocket(
    endpoint: Endpoint,
    timeout: float = 10.0,
    options: WebSocketOptions | None = None,
    *,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
) -> WebSocketTransport:
    """Connect to ``endpoint`` (``ws://`` or ``wss://``) and complete the upgrade
    within ``timeout`` seconds. Raises :class:`WebSocketHandshakeError` when
    the server refuses (``status``) or does not speak WebSocket, ``OSError`` /
    ``ssl.SSLError`` when the connection or TLS fails. ``wss://``:
    ``ssl_context`` and ``server_hostname`` as for ``tls://`` (``tls.open_tls``)."""
    options = options if options is not None else WebSocketOptions()
    deadline = time.monotonic() + timeout
    stream: TcpTransport
    if endpoint.scheme == "wss":
        stream = open_tls(
            endpoint, timeout, ssl_context=ssl_context, server_hostname=server_hostname
        )
    else:
        if ssl_context is not None or server_hostname is not None:
            raise ValueError(f"ssl_context/server_hostname apply to wss:// URLs, not {endpoint}")
        stream = open_tcp(endpoint, timeout)
    try:
        return _client_handshake(stream, endpoint, options, deadline)
    except BaseException:
        stream.abort()
        raise


def _client_handshake(
    stream: TcpTransport, endpoint: Endpoint, options: WebSocketOptions, deadline: float
) -> WebSocketTransport:
    ws = WSConnection(ConnectionType.CLIENT)
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    default_port = 443 if endpoint.scheme == "wss" else 80
    if endpoint.port != default_port:
        host = f"{host}:{endpoint.port}"
    path = endpoint.path or "/"
    headers = raw_headers(options.extra_headers)
    request = Request(
        host=host, target=path, subprotocols=list(options.subprotocols), extra_headers=headers
    )
    out = bytearray(ws.send(request))
    fd = stream.fileno()
    while out:
        sent = stream.send(out)
        del out[:sent]
        if out:
            _wait(fd, selectors.EVENT_WRITE, deadline)
    transport = WebSocketTransport(
        stream, ws, scheme=endpoint.scheme, path=path, options=options, is_open=False
    )
    sock = stream.sock
    status: int | None = None
    reject_headers: tuple[tuple[str, str], ...] = ()
    body = bytearray()
    while True:
        if status is None:
            data = _read_head(sock, deadline)
        else:
            try:
                data = stream.recv(64 * 1024)
            except (BlockingIOError, InterruptedError):
                _wait(fd, selectors.EVENT_READ, deadline)
                continue
        if not data and status is None:
            raise WebSocketHandshakeError(
                "WebSocket handshake: the server closed the connection before answering"
            )
        try:
            ws.receive_data(data or None)
            events = list(ws.events())
        except WsRemoteProtocolError as exc:
            raise WebSocketHandshakeError(f"WebSocket handshake: bad response: {exc}") from None
        for i, event in enumerate(events):
            if isinstance(event, AcceptConnection):
                offered = options.subprotocols
                if event.subprotocol is not None and event.subprotocol not in offered:
                    raise WebSocketHandshakeError(
                        f"server chose subprotocol {event.subprotocol!r}, not offered",
                        status=101,
                    )
                transport.subprotocol = event.subprotocol
                transport._set_open()
                for later in events[i + 1 :]:
                    transport._on_event(later)
                transport._flush()
                return transport
            if isinstance(event, RejectConnection):
                status = event.status_code
                reject_headers = str_headers(event.headers)
                if not event.has_body:
                    raise _refused(status, reject_headers, b"")
            elif isinstance(event, RejectData):
                if len(body) < MAX_REJECT_BODY:
                    body += event.data[: MAX_REJECT_BODY - len(body)]
                if event.body_finished:
                    raise _refused(status, reject_headers, bytes(body))
        if not data:  # the refusal's body ended with the connection
            raise _refused(status, reject_headers, bytes(body))


def _refused(
    status: int | None, headers: tuple[tuple[str, str], ...], body: bytes
) -> WebSocketHandshakeError:
    text = body[:200].decode("utf-8", "replace").strip()
    detail = f": {text}" if text else ""
    return WebSocketHandshakeError(
        f"WebSocket upgrade refused with HTTP {status}{detail}",
        status=status,
        headers=headers,
        body=body,
    )


# -- server ------------------------------------------------------------------
