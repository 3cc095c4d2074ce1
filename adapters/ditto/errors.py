"""The errors of the Ditto adapters, one hierarchy:

- :class:`~sansrs.ditto.DittoRemoteError`: Ditto answered a subscription
  with an error (``status``, ``code``, ``description``; e.g. 404 for an
  unknown thing): an application error reported by the server, not a
  protocol violation;
- :class:`~sansrs.adapters.transport.websocket.WebSocketHandshakeError`: the
  WebSocket upgrade was refused (``status``, e.g. 401);
- :class:`~sansrs.adapters.drive.ConnectionClosed`: the connection is gone
  (closed, lost, timed out, or the peer broke the protocol: the message says
  which);
- ``sansrs.ditto.LocalProtocolError`` / ``RemoteProtocolError`` (the core):
  this side misused the protocol / the peer broke it.
"""

from __future__ import annotations

from sansrs.ditto import DittoRemoteError

from ..drive.errors import ConnectionClosed
from ..transport.websocket import WebSocketHandshakeError

__all__ = ["ConnectionClosed", "DittoRemoteError", "WebSocketHandshakeError"]
