"""The server's side of the WebSocket upgrade (RFC 6455, 4.2): the
request head checked, then accepted or refused: what
:class:`.transport.WebSocketTransport` answers, apart from its data path."""

from __future__ import annotations

import base64
import binascii

import h11
from wsproto import WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import LocalProtocolError as WsLocalProtocolError

from .options import HandshakeRequest, WebSocketOptions, raw_headers, str_headers

__all__ = ["HEADER_END", "MAX_REQUEST_HEAD", "acceptance", "answer", "rejection", "valid_key"]

#: Largest upgrade request head a server reads (h11's own limit is 16 KiB).
MAX_REQUEST_HEAD = 64 * 1024
#: What ends an HTTP head.
HEADER_END = b"\r\n\r\n"
_RAW_BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
)


def valid_key(head: bytes | bytearray) -> bool:
    """True if the request head has one ``Sec-WebSocket-Key`` whose value is
    16 bytes in base64 (RFC 6455, 4.2.1; wsproto checks only that there is
    one). A head without any is left to wsproto, which refuses it."""
    keys = [
        line.partition(b":")[2].strip()
        for line in bytes(head).split(b"\r\n")
        if line[:18].lower() == b"sec-websocket-key:"
    ]
    if not keys:
        return True
    if len(keys) != 1 or len(keys[0]) != 24:
        return False
    try:
        return len(base64.b64decode(keys[0], validate=True)) == 16
    except binascii.Error:
        return False


def answer(
    event: Request, *, key_ok: bool, path: str, options: WebSocketOptions, peer: str
) -> tuple[HandshakeRequest, int | None, str, str | None]:
    """Server: what to do with the upgrade request ``event`` (``key_ok``:
    its ``Sec-WebSocket-Key`` passed :func:`valid_key`; ``path``: the
    endpoint's): the request as the application sees it, then the status
    to refuse it with (``None``: accept) and why, and the subprotocol
    chosen (the first offered that ``options`` accepts)."""
    target = event.target
    asked, _, query = target.partition("?")
    request = HandshakeRequest(
        path=asked,
        query=query,
        headers=(("Host", event.host), *str_headers(event.extra_headers)),
        subprotocols=tuple(event.subprotocols),
        peer=peer,
    )
    if not key_ok:
        # RFC 6455, 4.2.1: a key that is not 16 bytes in base64 is a bad request.
        return request, 400, "invalid Sec-WebSocket-Key", None
    if asked != path:
        return request, 404, f"no WebSocket endpoint at {asked}", None
    authorize = options.authorize
    if authorize is not None:
        try:
            status = authorize(request)
        except Exception as exc:
            return request, 500, f"authorization failed: {exc!r}", None
        if status is not None:
            return request, int(status), "refused", None
    accepted = options.subprotocols
    for offered in request.subprotocols:
        if offered in accepted:
            return request, None, "", offered
    return request, None, "", None


def acceptance(ws: WSConnection, subprotocol: str | None, options: WebSocketOptions) -> bytes:
    """The server's answer accepting the upgrade (101)."""
    headers = raw_headers(options.extra_headers)
    return ws.send(AcceptConnection(subprotocol=subprotocol, extra_headers=headers))


def rejection(ws: WSConnection, status: int, message: str) -> bytes:
    """The server's answer refusing the upgrade with ``status``, a
    plain-text body saying why."""
    body = f"{status} {message}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    try:
        response = ws.send(RejectConnection(status_code=status, headers=headers, has_body=True))
        return response + ws.send(RejectData(data=body))
    except (WsLocalProtocolError, h11.LocalProtocolError):
        # h11 refuses to answer a request it could not parse: say 400 by hand.
        return _RAW_BAD_REQUEST
